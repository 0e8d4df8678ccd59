//===- Blocks.cpp - blocks of a tensor along one dimension ----------------===//
//
// A row-major tensor split along `dim` into `blocks` equal blocks is, viewed
// as [outer, blocks * blockDim, inner], `outer` runs of blockDim * inner
// contiguous elements per block. Collectives exchange contiguous blocks, so
// for dim != 0 (outer > 1) a block must be packed into, or unpacked from, a
// contiguous buffer; for dim = 0 every copy is one memcpy.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cpu/KernelSupport.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

namespace partition::runtime::cpu {

using namespace detail;

namespace {

/// Copies block `block` of `strided` [outer, blocks * blockDim, inner] into
/// the contiguous [outer, blockDim, inner] at `packed` (pack), or back (not
/// pack).
void copyBlock(float *strided, float *packed, Index outer, Index blockDim,
               Index inner, Index blocks, Index block, bool pack) {
  const Index run = blockDim * inner;
  const Index stride = blocks * run;
#pragma omp parallel for schedule(static) if (outer * run > kParallelThreshold)
  for (Index o = 0; o < outer; ++o) {
    float *at = strided + o * stride + block * run;
    if (pack)
      std::memcpy(packed + o * run, at, run * sizeof(float));
    else
      std::memcpy(at, packed + o * run, run * sizeof(float));
  }
}

} // namespace

void sliceBlock(const float *input, const std::int32_t *index, float *result,
                Index outer, Index blockDim, Index inner, Index blocks) {
  checkNonNegative("slice_block", {outer, blockDim, inner, blocks});
  // The index comes from the arena (an axis-index buffer the runtime wrote),
  // so check it rather than trust it: a wrong one would read out of bounds.
  if (*index < 0 || *index >= blocks)
    throw std::invalid_argument("slice_block: index " + std::to_string(*index) +
                                " is out of range for " +
                                std::to_string(blocks) + " blocks");
  copyBlock(const_cast<float *>(input), result, outer, blockDim, inner,
            blocks, *index, /*pack=*/true);
}

void flatPack(const void *tensor, void *bucket, Index size, Index rows,
              Index columns, Index offset, Index elementBytes) {
  checkNonNegative("flat_pack", {size, rows, columns, offset, elementBytes});
  Index chunk = rows ? (size + rows - 1) / rows : 0;
  const char *in = static_cast<const char *>(tensor);
  char *out = static_cast<char *>(bucket);
  for (Index r = 0; r < rows; ++r) {
    Index begin = std::min(size, r * chunk);
    Index count = std::min(size, begin + chunk) - begin;
    char *row = out + (r * columns + offset) * elementBytes;
    std::memcpy(row, in + begin * elementBytes, count * elementBytes);
    // Padding is zero in both float types.
    std::memset(row + count * elementBytes, 0, (chunk - count) * elementBytes);
  }
}

void flatUnpack(const void *bucket, void *tensor, Index size, Index rows,
                Index columns, Index offset, Index elementBytes) {
  checkNonNegative("flat_unpack", {size, rows, columns, offset, elementBytes});
  Index chunk = rows ? (size + rows - 1) / rows : 0;
  const char *in = static_cast<const char *>(bucket);
  char *out = static_cast<char *>(tensor);
  for (Index r = 0; r < rows; ++r) {
    Index begin = std::min(size, r * chunk);
    Index count = std::min(size, begin + chunk) - begin;
    std::memcpy(out + begin * elementBytes,
                in + (r * columns + offset) * elementBytes,
                count * elementBytes);
  }
}

void packBlocks(const float *input, float *packed, Index outer, Index blockDim,
                Index inner, Index blocks) {
  checkNonNegative("pack_blocks", {outer, blockDim, inner, blocks});
  for (Index block = 0; block < blocks; ++block)
    copyBlock(const_cast<float *>(input),
              packed + block * outer * blockDim * inner, outer, blockDim,
              inner, blocks, block, /*pack=*/true);
}

void unpackBlocks(const float *packed, float *result, Index outer,
                  Index blockDim, Index inner, Index blocks) {
  checkNonNegative("unpack_blocks", {outer, blockDim, inner, blocks});
  for (Index block = 0; block < blocks; ++block)
    copyBlock(result,
              const_cast<float *>(packed) + block * outer * blockDim * inner,
              outer, blockDim, inner, blocks, block, /*pack=*/false);
}

} // namespace partition::runtime::cpu
