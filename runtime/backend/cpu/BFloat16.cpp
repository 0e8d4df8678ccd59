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
  for (Index i = 0; i < size; ++i)
    store(result[i], input[i]);
}

void widenBFloat16(const std::uint16_t *input, float *result, Index size) {
  checkNonNegative("cast", {size});
#pragma omp parallel for simd schedule(static) if (size > kParallelThreshold)
  for (Index i = 0; i < size; ++i)
    result[i] = asFloat(input[i]);
}

} // namespace partition::runtime::cpu
