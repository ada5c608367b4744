// The one MTU bytes <-> enum pair and the one table of completion status names (verbs/attrs.h),
// which the command line and the simulator print.
#include <gtest/gtest.h>

#include <cstring>

#include "verbs/attrs.h"

namespace uroce::verbs {
namespace {

TEST(VerbsAttrs, MtuBytesBothWays) {
  static_assert(mtu_from_bytes(4096) == Mtu::k4096);
  EXPECT_EQ(mtu_bytes(Mtu::k256), 256u);
  EXPECT_EQ(mtu_bytes(Mtu::k512), 512u);
  EXPECT_EQ(mtu_bytes(Mtu::k1024), 1024u);
  EXPECT_EQ(mtu_bytes(Mtu::k2048), 2048u);
  EXPECT_EQ(mtu_bytes(Mtu::k4096), 4096u);
  EXPECT_EQ(mtu_from_bytes(256), Mtu::k256);
  EXPECT_EQ(mtu_from_bytes(512), Mtu::k512);
  EXPECT_EQ(mtu_from_bytes(1024), Mtu::k1024);
  EXPECT_EQ(mtu_from_bytes(2048), Mtu::k2048);
  EXPECT_EQ(mtu_from_bytes(4096), Mtu::k4096);
  for (uint32_t bytes : {0u, 1u, 128u, 255u, 1000u, 1500u, 3000u, 8192u, 9000u})
    EXPECT_EQ(mtu_from_bytes(bytes), std::nullopt) << bytes;
}

TEST(VerbsAttrs, CompletionStatusNamesAreTheIbvWcNames) {
  using transport::WcStatus;
  const struct {
    WcStatus status;
    const char* name;
  } kRows[] = {
      {WcStatus::kSuccess, "SUCCESS"},
      {WcStatus::kLocLenErr, "LOC_LEN_ERR"},
      {WcStatus::kLocQpOpErr, "LOC_QP_OP_ERR"},
      {WcStatus::kLocEecOpErr, "LOC_EEC_OP_ERR"},
      {WcStatus::kLocProtErr, "LOC_PROT_ERR"},
      {WcStatus::kWrFlushErr, "WR_FLUSH_ERR"},
      {WcStatus::kMwBindErr, "MW_BIND_ERR"},
      {WcStatus::kBadRespErr, "BAD_RESP_ERR"},
      {WcStatus::kLocAccessErr, "LOC_ACCESS_ERR"},
      {WcStatus::kRemInvReqErr, "REM_INV_REQ_ERR"},
      {WcStatus::kRemAccessErr, "REM_ACCESS_ERR"},
      {WcStatus::kRemOpErr, "REM_OP_ERR"},
      {WcStatus::kRetryExcErr, "RETRY_EXC_ERR"},
      {WcStatus::kRnrRetryExcErr, "RNR_RETRY_EXC_ERR"},
      {WcStatus::kLocRddViolErr, "LOC_RDD_VIOL_ERR"},
      {WcStatus::kRemInvRdReqErr, "REM_INV_RD_REQ_ERR"},
      {WcStatus::kRemAbortErr, "REM_ABORT_ERR"},
      {WcStatus::kInvEecnErr, "INV_EECN_ERR"},
      {WcStatus::kInvEecStateErr, "INV_EEC_STATE_ERR"},
      {WcStatus::kFatalErr, "FATAL_ERR"},
      {WcStatus::kRespTimeoutErr, "RESP_TIMEOUT_ERR"},
      {WcStatus::kGeneralErr, "GENERAL_ERR"},
  };
  for (const auto& r : kRows) EXPECT_STREQ(wc_status_name(r.status), r.name) << r.name;
  EXPECT_STREQ(wc_status_name(static_cast<WcStatus>(22)), "UNKNOWN");
  EXPECT_STREQ(wc_status_name(static_cast<WcStatus>(255)), "UNKNOWN");
}

}  // namespace
}  // namespace uroce::verbs
