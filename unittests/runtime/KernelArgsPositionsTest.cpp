//===- KernelArgsPositionsTest.cpp - the checks of the positioned kernels -===//
//
// checkInstruction on the explicit-positions rows: the query and key
// sequences may differ (keySeq), the positions are i32 vectors of their
// sequences, sequence_positions' chunks are 1 or even and divide T, and
// position_embedding_at's positions match the activation's sequence. Each
// rejection names the instruction, the kernel and what disagrees.
//
//===----------------------------------------------------------------------===//

#include "unittests/runtime/KernelArgsTesting.h"

#include <gtest/gtest.h>

using namespace partition::runtime;
using namespace partition::runtime::testing;

namespace {

const std::vector<int64_t> kAttentionInts = {2, 1, 1, 0};
const std::vector<float> kAttentionFloats = {1e4f, 0, 1, 0, 0, 0};

TEST(KernelArgsPositions, AttentionQueriesAgainstLongerKeys) {
  KernelArgs args;
  EXPECT_EQ(check(KernelId::AttentionPositions,
                  {buffer(DType::F32, {2, 4, 8}), buffer(DType::F32, {2, 16, 4}),
                   buffer(DType::F32, {2, 16, 4}), buffer(DType::I32, {4}),
                   buffer(DType::I32, {16}), buffer(DType::F32, {2, 4, 8})},
                  kAttentionInts, kAttentionFloats, &args),
            "");
  EXPECT_EQ(args.seq, 4);
  EXPECT_EQ(args.keySeq, 16);
  EXPECT_EQ(check(KernelId::AttentionPositionsGrad,
                  {buffer(DType::F32, {2, 4, 8}), buffer(DType::F32, {2, 4, 8}),
                   buffer(DType::F32, {2, 16, 4}), buffer(DType::F32, {2, 16, 4}),
                   buffer(DType::I32, {4}), buffer(DType::I32, {16}),
                   buffer(DType::F32, {2, 4, 8}), buffer(DType::F32, {2, 16, 4}),
                   buffer(DType::F32, {2, 16, 4})},
                  kAttentionInts, kAttentionFloats),
            "");
}

TEST(KernelArgsPositions, RejectsBadAttentionPositions) {
  auto attention = [](BufferInfo queryPositions, BufferInfo keyPositions) {
    return check(KernelId::AttentionPositions,
                 {buffer(DType::F32, {2, 4, 8}), buffer(DType::F32, {2, 16, 4}),
                  buffer(DType::F32, {2, 16, 4}), queryPositions, keyPositions,
                  buffer(DType::F32, {2, 4, 8})},
                 kAttentionInts, kAttentionFloats);
  };
  EXPECT_EQ(attention(buffer(DType::F32, {4}), buffer(DType::I32, {16})),
            "#0 (attention_positions): query positions must hold i32, not f32");
  EXPECT_EQ(attention(buffer(DType::I32, {4}), buffer(DType::I32, {8})),
            "#0 (attention_positions): key positions [8] must be [16]");
  EXPECT_EQ(attention(buffer(DType::I32, {2, 2}), buffer(DType::I32, {16})),
            "#0 (attention_positions): query positions [2,2] must be [4]");
}

TEST(KernelArgsPositions, SequencePositionsChunks) {
  KernelArgs args;
  EXPECT_EQ(check(KernelId::SequencePositions, {buffer(DType::I32, {16})}, {8},
                  {}, &args),
            "");
  EXPECT_EQ(args.chunks, 8);
  EXPECT_EQ(check(KernelId::SequencePositions, {buffer(DType::I32, {12})}, {3},
                  {}),
            "#0 (sequence_positions): chunks 3 must be 1, or even and divide "
            "the length 12");
  EXPECT_EQ(check(KernelId::SequencePositions, {buffer(DType::F32, {12})}, {1},
                  {}),
            "#0 (sequence_positions): positions must hold i32, not f32");
}

TEST(KernelArgsPositions, PositionEmbeddingAt) {
  EXPECT_EQ(check(KernelId::PositionEmbeddingAt,
                  {buffer(DType::F32, {2, 4, 8}), buffer(DType::F32, {6, 8}),
                   buffer(DType::I32, {4}), buffer(DType::F32, {2, 4, 8})},
                  {}, {}),
            "");
  EXPECT_EQ(check(KernelId::PositionEmbeddingAtGrad,
                  {buffer(DType::F32, {2, 4, 8}), buffer(DType::I32, {3}),
                   buffer(DType::F32, {6, 8})},
                  {}, {}),
            "#0 (position_embedding_at_grad): positions [3] must be [4]");
}

} // namespace
