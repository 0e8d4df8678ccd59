//===- Elementwise.cpp - gelu, swiglu, add, scale -------------------------===//
//
// Flat loops over `size` elements, split statically across the team and
// vectorised (fastExp inlines into the loop body; glibc's tanhf/expf would be
// scalar calls). Every iteration reads its inputs before writing its output at
// the same index, so exact aliasing of a result with an input is safe. GELU,
// its gradient and add also read and write bf16 directly: one template per
// kernel, fp32 arithmetic on the widened elements and one rounding, so the
// bf16 versions give the fp32 kernel's results on widened copies bit for bit
// without the copies.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cpu/KernelSupport.h"

namespace partition::runtime::cpu {

using namespace detail;

namespace {
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;

// 0.5 (1 + tanh(u)) = sigmoid(2u): the sigmoid form needs one exp and does
// not cancel for large negative x.
template <typename Element>
void geluOf(const Element *input, Element *result, Index size) {
  checkNonNegative("gelu", {size});
#pragma omp parallel for simd schedule(static) if (size > kParallelThreshold)
  for (Index i = 0; i < size; ++i) {
    const float x = asFloat(input[i]);
    const float u = kSqrt2OverPi * (x + kGeluCubic * x * x * x);
    store(result[i], x * sigmoid(2.0f * u));
  }
}

// d/dx [x s(2u)] = s + 2 x s (1 - s) u'.
template <typename Element>
void geluGradOf(const Element *grad, const Element *input, Element *result,
                Index size) {
  checkNonNegative("gelu_grad", {size});
#pragma omp parallel for simd schedule(static) if (size > kParallelThreshold)
  for (Index i = 0; i < size; ++i) {
    const float x = asFloat(input[i]);
    const float u = kSqrt2OverPi * (x + kGeluCubic * x * x * x);
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x * x);
    const float s = sigmoid(2.0f * u);
    store(result[i], asFloat(grad[i]) * (s + 2.0f * x * s * (1.0f - s) * du));
  }
}

template <typename Element>
void addOf(const Element *lhs, const Element *rhs, Element *result,
           Index size) {
  checkNonNegative("add", {size});
#pragma omp parallel for simd schedule(static) if (size > kParallelThreshold)
  for (Index i = 0; i < size; ++i)
    store(result[i], asFloat(lhs[i]) + asFloat(rhs[i]));
}
} // namespace

void gelu(const float *input, float *result, Index size) {
  geluOf(input, result, size);
}
void geluBFloat16(const std::uint16_t *input, std::uint16_t *result,
                  Index size) {
  geluOf(input, result, size);
}
void geluGrad(const float *grad, const float *input, float *result,
              Index size) {
  geluGradOf(grad, input, result, size);
}
void geluGradBFloat16(const std::uint16_t *grad, const std::uint16_t *input,
                      std::uint16_t *result, Index size) {
  geluGradOf(grad, input, result, size);
}
void add(const float *lhs, const float *rhs, float *result, Index size) {
  addOf(lhs, rhs, result, size);
}
void addBFloat16(const std::uint16_t *lhs, const std::uint16_t *rhs,
                 std::uint16_t *result, Index size) {
  addOf(lhs, rhs, result, size);
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

void scale(const float *input, float factor, float *result, Index size) {
  checkNonNegative("scale", {size});
#pragma omp parallel for simd schedule(static) if (size > kParallelThreshold)
  for (Index i = 0; i < size; ++i)
    result[i] = input[i] * factor;
}

} // namespace partition::runtime::cpu
