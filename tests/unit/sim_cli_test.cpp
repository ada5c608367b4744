// `uroce sim` / `uroce-sim` (tools/sim/sim_cli.h): a small incast runs to completion and writes
// its CSV and SVG; bad arguments are a usage error, never a run.
#include "sim/sim_cli.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace uroce::simlab {
namespace {

int run(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return run_sim_cli(static_cast<int>(args.size()), argv.data(), "uroce sim");
}

TEST(SimCli, IncastRunsAndWritesItsOutputs) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("uroce-sim-cli-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  ::testing::internal::CaptureStdout();
  int rc = run({"sim", "incast", "--mode", "pfc+dcqcn", "--senders", "2", "--bytes", "65536",
                "--out", dir.string()});
  std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("result flows_verified=2"), std::string::npos) << out;
  EXPECT_NE(out.find("mode=pfc+dcqcn"), std::string::npos) << out;
  EXPECT_TRUE(std::filesystem::exists(dir / "incast-pfc_dcqcn.csv"));
  for (const char* fig : {"rate", "throughput", "queue"})
    EXPECT_TRUE(std::filesystem::exists(dir / ("incast-pfc_dcqcn-" + std::string(fig) + ".svg")))
        << fig;
  std::filesystem::remove_all(dir);
}

TEST(SimCli, BadArgumentsAreUsageErrors) {
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(run({"sim"}), 2);
  EXPECT_EQ(run({"sim", "bogus"}), 2);
  EXPECT_EQ(run({"sim", "incast", "--mode"}), 2);
  EXPECT_EQ(run({"sim", "incast", "--mode", "tcp"}), 2);
  EXPECT_EQ(run({"sim", "incast", "--senders", "0"}), 2);
  EXPECT_EQ(run({"sim", "loss", "--loss", "1.5"}), 2);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("usage: uroce sim"), std::string::npos);
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(run({"sim", "--help"}), 0);
  EXPECT_NE(::testing::internal::GetCapturedStdout().find("incast|victim"), std::string::npos);
}

TEST(SimCli, TopologyDescribesTextJsonAndFiles) {
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(run({"sim", "topology", "fattree k=4 rate=40G"}), 0);
  std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("hosts=16\nswitches=20\nrate_bps=40000000000"), std::string::npos) << out;

  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("uroce-topo-" + std::to_string(::getpid()));
  std::ofstream(file) << R"({"shape": "dumbbell", "left": 3, "right": 1, "kmin": "50KB"})";
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(run({"sim", "topology", "@" + file.string()}), 0);
  out = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("shape=dumbbell\nhosts=4\nswitches=2"), std::string::npos) << out;
  EXPECT_NE(out.find("kmin_bytes=51200"), std::string::npos) << out;
  std::filesystem::remove(file);

  ::testing::internal::CaptureStderr();
  EXPECT_EQ(run({"sim", "topology", R"({"shape": "ring"})"}), 2);
  EXPECT_EQ(run({"sim", "topology", "fattree k=3"}), 1);  // parses, cannot be built
  EXPECT_EQ(run({"sim", "topology", "@/nonexistent/uroce-topology"}), 1);
  EXPECT_EQ(run({"sim", "topology"}), 2);
  EXPECT_NE(::testing::internal::GetCapturedStderr().find("bad topology"), std::string::npos);
}

}  // namespace
}  // namespace uroce::simlab
