//===- Elementwise.cpp - gelu, swiglu, add, scale -------------------------===//
//
// Flat loops over `size` elements, split statically across the team and
// vectorised (fastExp inlines into the loop body; glibc's tanhf/expf would be
// scalar calls). Every iteration reads its inputs before writing its output at
// the same index, so exact aliasing of a result with an input is safe.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cpu/KernelSupport.h"

namespace partition::runtime::cpu {

using namespace detail;

namespace {
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;
} // namespace

// 0.5 (1 + tanh(u)) = sigmoid(2u): the sigmoid form needs one exp and does
// not cancel for large negative x.
void gelu(const float *input, float *result, Index size) {
  checkNonNegative("gelu", {size});
#pragma omp parallel for simd schedule(static) if (size > kParallelThreshold)
  for (Index i = 0; i < size; ++i) {
    const float x = input[i];
    const float u = kSqrt2OverPi * (x + kGeluCubic * x * x * x);
    result[i] = x * sigmoid(2.0f * u);
  }
}

// d/dx [x s(2u)] = s + 2 x s (1 - s) u'.
void geluGrad(const float *grad, const float *input, float *result,
              Index size) {
  checkNonNegative("gelu_grad", {size});
#pragma omp parallel for simd schedule(static) if (size > kParallelThreshold)
  for (Index i = 0; i < size; ++i) {
    const float x = input[i];
    const float u = kSqrt2OverPi * (x + kGeluCubic * x * x * x);
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x * x);
    const float s = sigmoid(2.0f * u);
    result[i] = grad[i] * (s + 2.0f * x * s * (1.0f - s) * du);
  }
}

void swiglu(const float *gate, const float *up, float *result, Index size) {
  checkNonNegative("swiglu", {size});
#pragma omp parallel for simd schedule(static) if (size > kParallelThreshold)
  for (Index i = 0; i < size; ++i) {
    const float g = gate[i];
    result[i] = g * sigmoid(g) * up[i];
  }
}

// d silu(g) / dg = s + g s (1 - s).
void swigluGrad(const float *grad, const float *gate, const float *up,
                float *gateGrad, float *upGrad, Index size) {
  checkNonNegative("swiglu_grad", {size});
#pragma omp parallel for simd schedule(static) if (size > kParallelThreshold)
  for (Index i = 0; i < size; ++i) {
    const float g = gate[i];
    const float u = up[i];
    const float dy = grad[i];
    const float s = sigmoid(g);
    gateGrad[i] = dy * u * (s + g * s * (1.0f - s));
    upGrad[i] = dy * g * s;
  }
}

void add(const float *lhs, const float *rhs, float *result, Index size) {
  checkNonNegative("add", {size});
#pragma omp parallel for simd schedule(static) if (size > kParallelThreshold)
  for (Index i = 0; i < size; ++i)
    result[i] = lhs[i] + rhs[i];
}

void scale(const float *input, float factor, float *result, Index size) {
  checkNonNegative("scale", {size});
#pragma omp parallel for simd schedule(static) if (size > kParallelThreshold)
  for (Index i = 0; i < size; ++i)
    result[i] = input[i] * factor;
}

} // namespace partition::runtime::cpu
