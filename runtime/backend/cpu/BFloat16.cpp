//===- BFloat16.cpp - fp32 <-> bf16 conversion ----------------------------===//
//
// bf16 is the upper half of an fp32: widening is a shift, narrowing rounds
// the dropped half to nearest, ties to even (what CUDA's __float2bfloat16
// and PyTorch do), and keeps NaNs NaN (a NaN whose payload lies only in the
// dropped half would otherwise round to infinity).
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cpu/KernelSupport.h"

#include <cstring>

namespace partition::runtime::cpu {

using namespace detail;

void roundToBFloat16(const float *input, std::uint16_t *result, Index size) {
  checkNonNegative("cast", {size});
#pragma omp parallel for simd schedule(static) if (size > kParallelThreshold)
  for (Index i = 0; i < size; ++i) {
    std::uint32_t bits;
    std::memcpy(&bits, &input[i], sizeof(bits));
    const bool nan = (bits & 0x7fffffffu) > 0x7f800000u;
    const std::uint32_t rounded = bits + 0x7fffu + ((bits >> 16) & 1u);
    result[i] = static_cast<std::uint16_t>(
        nan ? ((bits >> 16) | 0x0040u) : (rounded >> 16));
  }
}

void widenBFloat16(const std::uint16_t *input, float *result, Index size) {
  checkNonNegative("cast", {size});
#pragma omp parallel for simd schedule(static) if (size > kParallelThreshold)
  for (Index i = 0; i < size; ++i) {
    const std::uint32_t bits = static_cast<std::uint32_t>(input[i]) << 16;
    std::memcpy(&result[i], &bits, sizeof(bits));
  }
}

} // namespace partition::runtime::cpu
