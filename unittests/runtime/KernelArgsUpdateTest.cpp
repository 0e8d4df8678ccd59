//===- KernelArgsUpdateTest.cpp - the checks of adamw_block ---------------===//
//
// checkInstruction on adamw_block (AdamW on one block of a flat parameter,
// --rt-fold-sliced-updates): the parameter is `blocks` blocks of the
// gradient's size, the block index and the step are i32 scalars, and every
// rejection names the instruction, the kernel and what disagrees.
//
//===----------------------------------------------------------------------===//

#include "unittests/runtime/KernelArgsTesting.h"

#include <gtest/gtest.h>

using namespace partition::runtime;
using namespace partition::runtime::testing;

namespace {

const std::vector<float> kAdamW = {0.9f, 0.95f, 1e-8f, 0.1f};

/// adamw_block over a [param] parameter in `blocks` blocks of [n].
std::string adamwBlock(std::vector<int64_t> param, int64_t n, int64_t blocks,
                       BufferInfo index = buffer(DType::I32, {}),
                       KernelArgs *args = nullptr) {
  return check(KernelId::AdamWBlock,
               {buffer(DType::F32, param), index, buffer(DType::F32, {n}),
                buffer(DType::F32, {n}), buffer(DType::F32, {n}),
                buffer(DType::I32, {}), buffer(DType::F32, {}),
                buffer(DType::F32, {n}), buffer(DType::F32, {n}),
                buffer(DType::F32, {n})},
               {blocks}, kAdamW, args);
}

TEST(KernelArgsUpdate, AdamWBlockOfAFlatParameter) {
  KernelArgs args;
  EXPECT_EQ(adamwBlock({4, 6}, 12, 2, buffer(DType::I32, {}), &args), "");
  EXPECT_EQ(args.size, 12);
  EXPECT_EQ(args.blocks, 2);
  EXPECT_EQ(adamwBlock({24}, 6, 4), "");
}

TEST(KernelArgsUpdate, RejectsABadBlock) {
  EXPECT_EQ(adamwBlock({4, 6}, 10, 2),
            "#0 (adamw_block): parameter [4,6] must be 2 blocks of the "
            "gradient's 10 elements");
  EXPECT_EQ(adamwBlock({24}, 12, 0),
            "#0 (adamw_block): parameter [24] must be 0 blocks of the "
            "gradient's 12 elements");
  // A block count whose product with the size wraps around to the
  // parameter's 24 elements (12 x (2^62 + 2) = 3 x 2^64 + 24).
  EXPECT_EQ(adamwBlock({24}, 12, (int64_t(1) << 62) + 2),
            "#0 (adamw_block): parameter [24] must be 4611686018427387906 "
            "blocks of the gradient's 12 elements");
  EXPECT_EQ(adamwBlock({24}, 12, 2, buffer(DType::F32, {})),
            "#0 (adamw_block): block must hold i32, not f32");
  EXPECT_EQ(adamwBlock({24}, 12, 2, buffer(DType::I32, {2})),
            "#0 (adamw_block): block [2] must be a scalar");
}

} // namespace
