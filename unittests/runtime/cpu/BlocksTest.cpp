//===- BlocksTest.cpp - slice_block, packBlocks, unpackBlocks -------------===//
//
// Against index arithmetic on [outer, blocks * blockDim, inner]: every block
// of every dimension of a [3, 4, 6] tensor, including sizes large enough for
// the OpenMP path, and the out-of-range index slice_block must refuse.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cpu/Kernels.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <vector>

namespace partition::runtime::cpu {
namespace {

struct Layout {
  Index outer, blockDim, inner, blocks;
  Index at(Index o, Index block, Index j, Index i) const {
    return (o * blocks * blockDim + block * blockDim + j) * inner + i;
  }
  Index size() const { return outer * blocks * blockDim * inner; }
};

std::vector<float> iota(Index n) {
  std::vector<float> values(n);
  for (Index i = 0; i < n; ++i)
    values[i] = float(i);
  return values;
}

void checkLayout(const Layout &l) {
  std::vector<float> input = iota(l.size());
  std::vector<float> packed(l.size(), -1.0f), back(l.size(), -1.0f);
  packBlocks(input.data(), packed.data(), l.outer, l.blockDim, l.inner,
             l.blocks);
  Index run = l.outer * l.blockDim * l.inner;
  for (Index block = 0; block < l.blocks; ++block) {
    std::vector<float> slice(run, -1.0f);
    std::int32_t index = std::int32_t(block);
    sliceBlock(input.data(), &index, slice.data(), l.outer, l.blockDim,
               l.inner, l.blocks);
    for (Index o = 0; o < l.outer; ++o)
      for (Index j = 0; j < l.blockDim; ++j)
        for (Index i = 0; i < l.inner; ++i) {
          Index local = (o * l.blockDim + j) * l.inner + i;
          float expected = input[l.at(o, block, j, i)];
          ASSERT_EQ(slice[local], expected) << "slice block " << block;
          ASSERT_EQ(packed[block * run + local], expected)
              << "packed block " << block;
        }
  }
  unpackBlocks(packed.data(), back.data(), l.outer, l.blockDim, l.inner,
               l.blocks);
  EXPECT_EQ(back, input);
}

TEST(Blocks, EveryDimensionOfA3x4x6Tensor) {
  // dim 0 in 3 blocks (outer 1), dim 1 in 2 (outer and inner > 1), dim 2
  // in 2, 3 and 6 (inner 1).
  for (Layout l : {Layout{1, 1, 24, 3}, Layout{3, 2, 6, 2}, Layout{12, 3, 1, 2},
                   Layout{12, 2, 1, 3}, Layout{12, 1, 1, 6}})
    checkLayout(l);
}

TEST(Blocks, LargeEnoughForThreads) { checkLayout(Layout{64, 32, 16, 4}); }

TEST(Blocks, SliceRefusesAnIndexOutOfRange) {
  std::vector<float> input = iota(8), out(4);
  for (std::int32_t index : {-1, 2}) {
    EXPECT_THROW(sliceBlock(input.data(), &index, out.data(), 1, 4, 1, 2),
                 std::invalid_argument)
        << index;
  }
}

// ZeRO's flat buckets: a [3, 5] tensor (15 elements) and a [5] one in a
// bucket of 2 rows take 8 and 3 columns; row r holds elements
// [8r, 8r + 8) and [3r, 3r + 3), zeros past the end; unpacking gives the
// tensors back. Two-byte elements move as well (bf16).
TEST(Blocks, FlatBucketRoundTrip) {
  std::vector<float> w = iota(15), b = iota(5);
  for (float &x : b)
    x += 100;
  std::vector<float> bucket(2 * 11, -1.0f);
  flatPack(w.data(), bucket.data(), 15, 2, 11, 0, 4);
  flatPack(b.data(), bucket.data(), 5, 2, 11, 8, 4);
  std::vector<float> expected = {0,  1,  2,  3,  4,  5,  6, 7, 100, 101, 102,
                                 8,  9,  10, 11, 12, 13, 14, 0, 103, 104, 0};
  EXPECT_EQ(bucket, expected);
  std::vector<float> w2(15), b2(5);
  flatUnpack(bucket.data(), w2.data(), 15, 2, 11, 0, 4);
  flatUnpack(bucket.data(), b2.data(), 5, 2, 11, 8, 4);
  EXPECT_EQ(w2, w);
  EXPECT_EQ(b2, b);
  // One row: the tensors one after the other.
  std::vector<float> row(20);
  flatPack(w.data(), row.data(), 15, 1, 20, 0, 4);
  flatPack(b.data(), row.data(), 5, 1, 20, 15, 4);
  EXPECT_EQ(std::vector<float>(row.begin(), row.begin() + 15), w);
  std::vector<std::uint16_t> h = {1, 2, 3}, hb(4, 7), h2(3);
  flatPack(h.data(), hb.data(), 3, 2, 2, 0, 2);
  EXPECT_EQ(hb, (std::vector<std::uint16_t>{1, 2, 3, 0}));
  flatUnpack(hb.data(), h2.data(), 3, 2, 2, 0, 2);
  EXPECT_EQ(h2, h);
}

} // namespace
} // namespace partition::runtime::cpu
