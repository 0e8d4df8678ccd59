//===- Elementwise.cu - gelu, swiglu, add, scale --------------------------===//
//
// Flat grid-stride loops (KernelSupport.cuh's mapKernel). The formulas are
// those of runtime/backend/cpu/Elementwise.cpp; exp is CUDA's expf (within 2 ulp,
// as the CPU's fastExp), not the less accurate __expf. Each element's inputs
// are read before its outputs are written, so exact aliasing is safe.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/kernels/KernelSupport.cuh"

namespace partition::runtime::cuda {

using namespace detail;

namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;

__device__ __forceinline__ float sigmoid(float x) {
  return 1.0f / (1.0f + expf(-x));
}

// 0.5 (1 + tanh(u)) = sigmoid(2u): one exp, no cancellation for large
// negative x.
struct Gelu {
  __device__ void operator()(Index, const float *in, float *out) const {
    const float x = in[0];
    const float u = kSqrt2OverPi * (x + kGeluCubic * x * x * x);
    out[0] = x * sigmoid(2.0f * u);
  }
};

// d/dx [x s(2u)] = s + 2 x s (1 - s) u'.
struct GeluGrad {
  __device__ void operator()(Index, const float *in, float *out) const {
    const float dy = in[0], x = in[1];
    const float u = kSqrt2OverPi * (x + kGeluCubic * x * x * x);
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x * x);
    const float s = sigmoid(2.0f * u);
    out[0] = dy * (s + 2.0f * x * s * (1.0f - s) * du);
  }
};

struct Swiglu {
  __device__ void operator()(Index, const float *in, float *out) const {
    const float g = in[0];
    out[0] = g * sigmoid(g) * in[1];
  }
};

// d silu(g) / dg = s + g s (1 - s).
struct SwigluGrad {
  __device__ void operator()(Index, const float *in, float *out) const {
    const float dy = in[0], g = in[1], u = in[2];
    const float s = sigmoid(g);
    out[0] = dy * u * (s + g * s * (1.0f - s));
    out[1] = dy * g * s;
  }
};

struct Add {
  __device__ void operator()(Index, const float *in, float *out) const {
    out[0] = in[0] + in[1];
  }
};

struct Scale {
  float factor;
  __device__ void operator()(Index, const float *in, float *out) const {
    out[0] = in[0] * factor;
  }
};

} // namespace

template <typename T>
void gelu(const T *input, T *result, Index size, cudaStream_t stream) {
  checkNonNegative("gelu", {size});
  launchMap<1, 1>("gelu", PtrList<const T *, 1>{{input}},
                  PtrList<T *, 1>{{result}}, size, Gelu{}, stream);
}

template <typename T>
void geluGrad(const T *grad, const T *input, T *result, Index size,
              cudaStream_t stream) {
  checkNonNegative("gelu_grad", {size});
  launchMap<2, 1>("gelu_grad", PtrList<const T *, 2>{{grad, input}},
                  PtrList<T *, 1>{{result}}, size, GeluGrad{}, stream);
}

template <typename T>
void swiglu(const T *gate, const T *up, T *result, Index size,
            cudaStream_t stream) {
  checkNonNegative("swiglu", {size});
  launchMap<2, 1>("swiglu", PtrList<const T *, 2>{{gate, up}},
                  PtrList<T *, 1>{{result}}, size, Swiglu{}, stream);
}

template <typename T>
void swigluGrad(const T *grad, const T *gate, const T *up, T *gateGrad,
                T *upGrad, Index size, cudaStream_t stream) {
  checkNonNegative("swiglu_grad", {size});
  launchMap<3, 2>("swiglu_grad", PtrList<const T *, 3>{{grad, gate, up}},
                  PtrList<T *, 2>{{gateGrad, upGrad}}, size, SwigluGrad{},
                  stream);
}

template <typename T>
void add(const T *lhs, const T *rhs, T *result, Index size,
         cudaStream_t stream) {
  checkNonNegative("add", {size});
  launchMap<2, 1>("add", PtrList<const T *, 2>{{lhs, rhs}},
                  PtrList<T *, 1>{{result}}, size, Add{}, stream);
}

template <typename T>
void scale(const T *input, float factor, T *result, Index size,
           cudaStream_t stream) {
  checkNonNegative("scale", {size});
  launchMap<1, 1>("scale", PtrList<const T *, 1>{{input}},
                  PtrList<T *, 1>{{result}}, size, Scale{factor}, stream);
}

#define PARTITION_INSTANTIATE(T)                                               \
  template void gelu<T>(const T *, T *, Index, cudaStream_t);                  \
  template void geluGrad<T>(const T *, const T *, T *, Index, cudaStream_t);   \
  template void swiglu<T>(const T *, const T *, T *, Index, cudaStream_t);     \
  template void swigluGrad<T>(const T *, const T *, const T *, T *, T *,       \
                              Index, cudaStream_t);                            \
  template void add<T>(const T *, const T *, T *, Index, cudaStream_t);        \
  template void scale<T>(const T *, float, T *, Index, cudaStream_t);
PARTITION_INSTANTIATE(float)
PARTITION_INSTANTIATE(bf16)
#undef PARTITION_INSTANTIATE

} // namespace partition::runtime::cuda
