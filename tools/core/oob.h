#pragma once
// The out-of-band channel: a TCP connection on which the two sides of a bench exchange what a QP
// needs to reach its peer (QPN, first PSN, GID, rkey, buffer address) and keep each message size
// in step, as perftest does on port 18515. Every wait has a deadline and every message a length
// bound, so a dead or misbehaving peer ends the run with an error, never a hang.
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/types.h"

namespace uroce::tools {

inline constexpr uint16_t kDefaultOobPort = 18515;
inline constexpr uint32_t kOobMagic = 0x55524f43;  // "UROC"
inline constexpr uint16_t kOobVersion = 1;
inline constexpr uint32_t kOobMaxPayload = 64 * 1024;
inline constexpr size_t kOobHeaderBytes = 12;

enum class OobType : uint16_t {
  kParams = 1,    // client -> server: what to run
  kConnInfo = 2,  // both ways: how to reach my QP and buffer
  kReady = 3,     // both ways: my QP is in RTS
  kStep = 4,      // client -> server: a message size starts (or ends, see Step::phase)
  kStepAck = 5,   // server -> client: the server's verdict on a step
  kCounters = 6,  // server -> client: the server's counters, as text lines "name value"
  kBye = 7,
  kError = 8,  // either way: text, then the sender closes
};

struct OobMessage {
  OobType type{};
  std::vector<uint8_t> payload;
};

class OobChannel {
 public:
  OobChannel() = default;
  explicit OobChannel(int fd) : fd_(fd) {}
  ~OobChannel();
  OobChannel(OobChannel&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  OobChannel& operator=(OobChannel&& o) noexcept;
  OobChannel(const OobChannel&) = delete;
  OobChannel& operator=(const OobChannel&) = delete;

  // Connects to peer:port, retrying refused connections until `timeout_ms` passes (the server
  // may start after the client). `bind_addr` (optional) picks the local address.
  static Result<OobChannel> connect(const std::string& peer, uint16_t port, int timeout_ms,
                                    const std::string& bind_addr = {});

  // 0 or an errno (ETIMEDOUT when the peer stops reading for `timeout_ms`).
  int send(OobType type, std::span<const uint8_t> payload, int timeout_ms = 10000);
  // The next message, or an errno: ETIMEDOUT, ECONNRESET when the peer closed, EPROTO for a bad
  // magic/version or a payload over kOobMaxPayload.
  Result<OobMessage> recv(int timeout_ms);
  // Receives and insists on `type`; an kError message from the peer becomes ECONNABORTED and its
  // text is kept in last_peer_error().
  Result<OobMessage> expect(OobType type, int timeout_ms);
  const std::string& last_peer_error() const { return peer_error_; }
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
  std::string peer_error_;
};

class OobListener {
 public:
  OobListener() = default;
  ~OobListener();
  OobListener(OobListener&& o) noexcept : fd_(o.fd_), port_(o.port_) { o.fd_ = -1; }
  OobListener(const OobListener&) = delete;
  OobListener& operator=(const OobListener&) = delete;
  OobListener& operator=(OobListener&&) = delete;

  // Listens on addr:port (port 0 picks a free one; port() tells which).
  static Result<OobListener> listen(const std::string& addr, uint16_t port);
  Result<OobChannel> accept(int timeout_ms);
  uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

// ---- Payloads, at explicit big-endian offsets ------------------------------------------------

struct ConnInfo {
  uint32_t qpn = 0;
  uint32_t psn = 0;
  uint32_t rkey = 0;
  uint64_t addr = 0;
  uint64_t length = 0;
  Gid gid{};
};
inline constexpr size_t kConnInfoBytes = 48;
std::vector<uint8_t> encode(const ConnInfo& c);
Result<ConnInfo> decode_conn_info(std::span<const uint8_t> p);

enum class BenchTest : uint8_t { kWrite = 0, kRead = 1, kSend = 2, kAtomic = 3 };
enum class BenchMode : uint8_t { kBandwidth = 0, kLatency = 1 };
inline constexpr uint32_t kMaxSizesPerRun = 64;

struct BenchParams {
  BenchTest test = BenchTest::kWrite;
  BenchMode mode = BenchMode::kBandwidth;
  bool verify = true;
  uint32_t mtu = 1024;
  uint32_t depth = 128;
  uint32_t seed = 1;
  uint64_t iterations = 1000;
  uint32_t duration_ms = 0;   // 0: run `iterations`; otherwise run for this long per size
  uint64_t buffer_bytes = 0;  // each side's registered buffer
  std::vector<uint64_t> sizes;
};
inline constexpr uint64_t kMaxBenchIterations = uint64_t{16} << 20;
inline constexpr uint64_t kMaxBenchMessageBytes = uint64_t{1} << 30;
inline constexpr uint32_t kMaxBenchDepth = 4096;
std::vector<uint8_t> encode(const BenchParams& p);
// Also rejects (EINVAL) what no run can do: no sizes, a size over kMaxBenchMessageBytes, a depth
// of 0 or over kMaxBenchDepth, an MTU other than 256..4096 in powers of two, 0 or more than
// kMaxBenchIterations iterations. The peer is not trusted: these bound the server's memory.
Result<BenchParams> decode_bench_params(std::span<const uint8_t> p);
int validate(const BenchParams& p);

// One message size: the client announces it (phase 0) and reports when it finished (phase 1,
// with the iterations completed); the server answers each with a StepAck.
struct Step {
  uint32_t index = 0;
  uint32_t phase = 0;
  uint64_t bytes = 0;
  uint64_t iterations = 0;
};
inline constexpr size_t kStepBytes = 24;
std::vector<uint8_t> encode(const Step& s);
Result<Step> decode_step(std::span<const uint8_t> p);

// status: 0 = fine; otherwise an errno-like code. mismatch_at: first bad byte, or -1.
struct StepAck {
  uint32_t index = 0;
  uint32_t status = 0;
  int64_t mismatch_at = -1;
};
inline constexpr size_t kStepAckBytes = 16;
std::vector<uint8_t> encode(const StepAck& a);
Result<StepAck> decode_step_ack(std::span<const uint8_t> p);

}  // namespace uroce::tools
