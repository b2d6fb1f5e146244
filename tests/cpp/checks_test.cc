// The argument value rules every front end shares (ops/checks): boundaries,
// and messages that print offsets and sizes exactly even where their sum
// overflows int64.
#include "ops/checks/checks.h"

#include <gtest/gtest.h>

#include "ops/checks/request.h"

#include <cstdint>
#include <string>

namespace hpshmem::ops {
namespace {

void ExpectInvalid(const Status& s, const std::string& message) {
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.message();
  EXPECT_EQ(s.message(), message);
}

TEST(ArgumentChecks, CopyRangeAcceptsWindowsFlushWithTheEndAndNothingPast) {
  EXPECT_TRUE(CheckCopyRange(10, 3, 7, 0, 7).ok());
  EXPECT_TRUE(CheckCopyRange(0, 0, 0, 0, 0).ok());
  EXPECT_TRUE(CheckCopyRange(5, 5, 5, 5, 0).ok());  // an empty window at the very end
  ExpectInvalid(CheckCopyRange(10, 4, 7, 0, 7), "target_offset + size = 4 + 7 = 11 exceeds target's 10 elements");
  ExpectInvalid(CheckCopyRange(10, 0, 7, 1, 7), "src_offset + size = 1 + 7 = 8 exceeds src's 7 elements");
  ExpectInvalid(CheckCopyRange(10, -1, 7, 0, 1), "target_offset must be >= 0, got -1");
  ExpectInvalid(CheckCopyRange(10, 0, 7, -2, 1), "src_offset must be >= 0, got -2");
  ExpectInvalid(CheckCopyRange(10, 0, 7, 0, -3), "size must be >= 0, got -3");
}

TEST(ArgumentChecks, SpanDoesNotOverflowAndPrintsTheExactSum) {
  const int64_t max = INT64_MAX;
  ExpectInvalid(CheckSpan(10, max, max, "target", "target_offset"),
                "target_offset + size = 9223372036854775807 + 9223372036854775807 = 18446744073709551614 exceeds "
                "target's 10 elements");
  ExpectInvalid(CheckSpan(max, 1, max, "src", "src_offset"),
                "src_offset + size = 1 + 9223372036854775807 = 9223372036854775808 exceeds src's "
                "9223372036854775807 elements");
  EXPECT_TRUE(CheckSpan(max, 1, max - 1, "src", "src_offset").ok());
}

TEST(ArgumentChecks, RanksBlockDimsSignalWordsValuesAndOpCodes) {
  EXPECT_TRUE(CheckRank(0, 1, "target_rank").ok());
  EXPECT_TRUE(CheckRank(3, 4, "target_rank").ok());
  ExpectInvalid(CheckRank(4, 4, "target_rank"), "target_rank 4 is out of range [0, 4)");
  ExpectInvalid(CheckRank(-1, 4, "peer"), "peer -1 is out of range [0, 4)");
  EXPECT_TRUE(CheckBlockDim(1).ok() && CheckBlockDim(64).ok());
  ExpectInvalid(CheckBlockDim(0), "block_dim must be in [1, 64], got 0");
  ExpectInvalid(CheckBlockDim(65), "block_dim must be in [1, 64], got 65");
  EXPECT_TRUE(CheckSignalOffset(2, 3, "signal").ok());
  ExpectInvalid(CheckSignalOffset(3, 3, "signal"), "signal_offset 3 is out of range for signal's 3 elements");
  ExpectInvalid(CheckSignalOffset(-1, 3, "signal"), "signal_offset must be >= 0, got -1");
  EXPECT_TRUE(CheckSignalValue(INT32_MIN, 4, "v").ok() && CheckSignalValue(INT32_MAX, 4, "v").ok());
  EXPECT_TRUE(CheckSignalValue(INT64_MIN, 8, "v").ok() && CheckSignalValue(INT64_MAX, 8, "v").ok());
  ExpectInvalid(CheckSignalValue(int64_t{INT32_MAX} + 1, 4, "signal_value"),
                "signal_value 2147483648 does not fit the signal's int32");
  ExpectInvalid(CheckSignalValue(int64_t{INT32_MIN} - 1, 4, "compare_value"),
                "compare_value -2147483649 does not fit the signal's int32");
  EXPECT_TRUE(CheckSignalOpCode(0).ok() && CheckSignalOpCode(1).ok());
  ExpectInvalid(CheckSignalOpCode(2), "signal_op 2 is not SET (0) or ADD (1)");
  for (int c = 0; c <= 5; ++c) EXPECT_TRUE(CheckCompareOpCode(c).ok());
  ExpectInvalid(CheckCompareOpCode(6), "compare_op 6 is not one of 0=eq 1=gt 2=lt 3=ne 4=ge 5=le");
  ExpectInvalid(CheckCompareOpCode(-1), "compare_op -1 is not one of 0=eq 1=gt 2=lt 3=ne 4=ge 5=le");
}

// The signal and wait request builders: the word's address and type from the
// tensor's int width, the rules in their documented order (the first broken
// one is named), nothing filled on an error. Without a job NPes() is 0, so
// every rank is out of range: the last rule checked.
TEST(ArgumentChecks, SignalAndWaitRequestsAddressTheWordAndCheckInOrder) {
  TensorArg i32{4096, 5, 4, 7, "int32", 4}, i64{8192, 3, 8, 8, "int64", 8}, f32{4096, 5, 4, 9, "float32", 0};
  WaitRequest w;
  ASSERT_TRUE(BuildWaitRequest(i32, 4, INT32_MIN, 5, &w).ok());
  EXPECT_EQ(w.word.addr, 4096u + 16);
  EXPECT_EQ(w.word.type, SignalType::kInt32);
  EXPECT_EQ(w.word.offset, 4);
  EXPECT_EQ(w.value, INT32_MIN);
  EXPECT_EQ(w.cmp, Cmp::kLe);
  ASSERT_TRUE(BuildWaitRequest(i64, 2, INT64_MAX, 0, &w).ok());
  EXPECT_EQ(w.word.addr, 8192u + 16);
  EXPECT_EQ(w.word.type, SignalType::kInt64);
  WaitRequest untouched = w;
  Status s = BuildWaitRequest(f32, 9, int64_t{1} << 40, 9, &w);  // every argument bad: the dtype is named
  EXPECT_EQ(s.code(), Code::kTypeError);
  EXPECT_EQ(s.message(), "signal must be an int32 or int64 tensor, got float32");
  ExpectInvalid(BuildWaitRequest(i32, 5, int64_t{1} << 40, 9, &w),
                "signal_offset 5 is out of range for signal's 5 elements");
  ExpectInvalid(BuildWaitRequest(i32, 0, int64_t{1} << 40, 9, &w),
                "compare_value 1099511627776 does not fit the signal's int32");
  ExpectInvalid(BuildWaitRequest(i32, 0, 1, 9, &w), "compare_op 9 is not one of 0=eq 1=gt 2=lt 3=ne 4=ge 5=le");
  EXPECT_EQ(w.word.addr, untouched.word.addr);
  EXPECT_EQ(w.value, untouched.value);

  SignalRequest q;
  ExpectInvalid(BuildSignalRequest(i64, 3, 1, 0, 0, &q), "signal_offset 3 is out of range for signal's 3 elements");
  ExpectInvalid(BuildSignalRequest(i32, 0, int64_t{INT32_MAX} + 1, 0, 0, &q),
                "signal_value 2147483648 does not fit the signal's int32");
  ExpectInvalid(BuildSignalRequest(i32, 0, 1, 2, -1, &q), "signal_op 2 is not SET (0) or ADD (1)");
  ExpectInvalid(BuildSignalRequest(i32, 0, 1, 1, 0, &q), "target_rank 0 is out of range [0, 0)");
}

// An allgather's and a reduce-scatter's tensors: one dtype (the output named
// first), the whole world_size times the part, overflow of that product named
// rather than wrapped.
TEST(ArgumentChecks, PartsRequestsNameTheOutputFirstAndTheExactProduct) {
  TensorArg whole{4096, 21, 4, 7, "float32"}, part{8192, 7, 4, 7, "float32"}, other{8192, 7, 8, 9, "float64"};
  PartsRequest q;
  ASSERT_TRUE(BuildPartsRequest(whole, "output_tensor", part, "input_tensor", true, 3, &q).ok());
  EXPECT_EQ(q.whole, 4096u);
  EXPECT_EQ(q.part, 8192u);
  EXPECT_EQ(q.part_numel, 7);
  EXPECT_EQ(q.part_bytes, 28u);
  Status s = BuildPartsRequest(whole, "output_tensor", other, "input_tensor", true, 3, &q);
  EXPECT_EQ(s.code(), Code::kTypeError);
  EXPECT_EQ(s.message(), "output_tensor (float32) and input_tensor (float64) must have the same dtype");
  s = BuildPartsRequest(whole, "input", other, "output", false, 3, &q);
  EXPECT_EQ(s.message(), "output (float64) and input (float32) must have the same dtype");
  ExpectInvalid(BuildPartsRequest(whole, "input", part, "output", false, 4, &q),
                "input must have world_size x numel(output) = 4 x 7 = 28 elements, has 21");
  TensorArg huge{8192, INT64_MAX / 2, 4, 7, "float32"};
  ExpectInvalid(BuildPartsRequest(whole, "output_tensor", huge, "input_tensor", true, 3, &q),
                "output_tensor must have world_size x numel(input_tensor) = 3 x 4611686018427387903 = more than "
                "9223372036854775807 elements, has 21");
  EXPECT_EQ(q.part, 8192u);  // untouched by the failures
}

TEST(ArgumentChecks, AlltoallRequestsCheckDtypesThenCountsThenTheirSum) {
  TensorArg receive{4096, 10, 4, 7, "float32"};
  TensorArg sends[3] = {{100, 3, 4, 7, "float32"}, {200, 0, 4, 7, "float32"}, {300, 5, 4, 7, "float32"}};
  int64_t counts[3] = {4, 0, 6};
  const void* addrs[3] = {};
  int64_t elems[3] = {-1, -1, -1};
  ASSERT_TRUE(BuildAlltoallRequest(receive, sends, counts, 3, addrs, elems).ok());
  EXPECT_EQ(addrs[0], reinterpret_cast<const void*>(100));
  EXPECT_EQ(addrs[2], reinterpret_cast<const void*>(300));
  EXPECT_EQ(elems[0], 3);
  EXPECT_EQ(elems[1], 0);
  EXPECT_EQ(elems[2], 5);
  ASSERT_TRUE(BuildAlltoallRequest(receive, sends, counts, 0, addrs, elems).ok());  // no ranks: nothing to check

  const void* untouched[3] = {};
  int64_t untouched_elems[3] = {-1, -1, -1};
  TensorArg mixed[3] = {sends[0], {200, 0, 8, 9, "float64"}, sends[2]};
  Status s = BuildAlltoallRequest(receive, mixed, counts, 3, untouched, untouched_elems);
  EXPECT_EQ(s.code(), Code::kTypeError);
  EXPECT_EQ(s.message(), "send_tensor_list[1] (float64) and receive_tensor (float32) must have the same dtype");
  int64_t negative[3] = {4, -2, INT64_MAX};  // the negative one is named before the overflowing sum
  ExpectInvalid(BuildAlltoallRequest(receive, sends, negative, 3, untouched, untouched_elems),
                "receive_list[1] must be >= 0, got -2");
  int64_t too_many[3] = {4, 1, 6};
  ExpectInvalid(BuildAlltoallRequest(receive, sends, too_many, 3, untouched, untouched_elems),
                "receive_list adds up to 11 elements; receive_tensor has 10");
  int64_t overflowing[3] = {INT64_MAX, 1, 0};
  ExpectInvalid(BuildAlltoallRequest(receive, sends, overflowing, 3, untouched, untouched_elems),
                "receive_list adds up to more than 9223372036854775807 elements; receive_tensor has 10");
  EXPECT_EQ(untouched[0], nullptr);  // nothing written by a refusal
  EXPECT_EQ(untouched_elems[2], -1);
}

}  // namespace
}  // namespace hpshmem::ops
