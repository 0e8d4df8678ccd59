//===- AttentionBackward.cu - flash attention backward --------------------===//
//
// The backward entry points (attention_grad, attention_positions_grad,
// attention_block_grad); the kernels are in AttentionKernels.cuh.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/attention/AttentionKernels.cuh"

namespace partition::runtime::cuda {

std::size_t attentionGradWorkspaceSize(const AttentionShape &shape, bool) {
  return makePlan("attention_grad", shape).backwardBytes;
}

template <typename T>
void attentionGrad(const T *grad, const T *query, const T *key, const T *value,
                   T *queryGrad, T *keyGrad, T *valueGrad,
                   const AttentionShape &shape, void *workspace,
                   std::size_t workspaceBytes, cudaStream_t stream) {
  const char *kernel = "attention_grad";
  const Plan plan = makePlan(kernel, shape);
  checkWorkspace(kernel, workspace, workspaceBytes, plan.backwardBytes);
  if (plan.batch == 0 || plan.params.seq == 0)
    return;
  char *ws = static_cast<char *>(workspace);
  float *lse = reinterpret_cast<float *>(ws + plan.lse);
  float *delta = reinterpret_cast<float *>(ws + plan.delta);
  const float2 *rope = ropeTable(kernel, plan, ws, stream);
  withPaddedDim(plan.paddedDim, [&](auto dim) {
    launchBackward<decltype(dim)::value, T>(kernel, plan, query, key, value,
                                            grad, rope, rope, queryGrad,
                                            keyGrad, valueGrad, lse, delta,
                                            stream);
  });
}

template <typename T>
void attentionPositionsGrad(const T *grad, const T *query, const T *key,
                            const T *value, const std::int32_t *queryPositions,
                            const std::int32_t *keyPositions, T *queryGrad,
                            T *keyGrad, T *valueGrad,
                            const AttentionShape &shape, std::int64_t keySeq,
                            void *workspace, std::size_t workspaceBytes,
                            cudaStream_t stream) {
  const char *kernel = "attention_positions_grad";
  if (keySeq < 0)
    fail(kernel, "negative key sequence length");
  Plan plan = makePlan(kernel, shape, keySeq);
  plan.params.qpos = queryPositions;
  plan.params.kpos = keyPositions;
  checkWorkspace(kernel, workspace, workspaceBytes, plan.backwardBytes);
  if (plan.batch == 0)
    return;
  char *ws = static_cast<char *>(workspace);
  float *lse = reinterpret_cast<float *>(ws + plan.lse);
  float *delta = reinterpret_cast<float *>(ws + plan.delta);
  const float2 *rope = ropeTable(kernel, plan, ws, stream);
  const float2 *krope = keyRopeTable(kernel, plan, ws, stream, rope);
  withPaddedDim(plan.paddedDim, [&](auto dim) {
    launchBackward<decltype(dim)::value, T>(kernel, plan, query, key, value,
                                            grad, rope, krope, queryGrad,
                                            keyGrad, valueGrad, lse, delta,
                                            stream);
  });
}

template <typename T>
void attentionBlockGrad(const T *grad, const T *query, const T *key,
                        const T *value, const std::int32_t *queryPositions,
                        const std::int32_t *keyPositions, const T *out,
                        const float *lse, T *queryGrad, T *keyGrad,
                        T *valueGrad, const AttentionShape &shape,
                        std::int64_t keySeq, void *workspace,
                        std::size_t workspaceBytes, cudaStream_t stream) {
  const char *kernel = "attention_block_grad";
  if (keySeq < 0)
    fail(kernel, "negative key sequence length");
  Plan plan = makePlan(kernel, shape, keySeq);
  plan.params.qpos = queryPositions;
  plan.params.kpos = keyPositions;
  checkWorkspace(kernel, workspace, workspaceBytes, plan.backwardBytes);
  if (plan.batch == 0)
    return;
  const Params &p = plan.params;
  char *ws = static_cast<char *>(workspace);
  float *delta = reinterpret_cast<float *>(ws + plan.delta);
  const Index rows = plan.batch * p.heads * p.seq;
  if (rows > 0) {
    deltaKernel<T><<<blocksFor(rows), 256, 0, stream>>>(
        grad, out, delta, rows, p.seq, p.heads, p.dim, p.ldq);
    checkLaunch(kernel, "deltaKernel launch");
  }
  const float2 *rope = ropeTable(kernel, plan, ws, stream);
  const float2 *krope = keyRopeTable(kernel, plan, ws, stream, rope);
  withPaddedDim(plan.paddedDim, [&](auto dim) {
    launchBackward<decltype(dim)::value, T>(
        kernel, plan, query, key, value, grad, rope, krope, queryGrad, keyGrad,
        valueGrad, lse, delta, stream, /*statistics=*/false);
  });
}

#define PARTITION_INSTANTIATE(T)                                               \
  template void attentionGrad<T>(const T *, const T *, const T *, const T *,   \
                                 T *, T *, T *, const AttentionShape &,        \
                                 void *, std::size_t, cudaStream_t);           \
  template void attentionPositionsGrad<T>(                                     \
      const T *, const T *, const T *, const T *, const std::int32_t *,        \
      const std::int32_t *, T *, T *, T *, const AttentionShape &,             \
      std::int64_t, void *, std::size_t, cudaStream_t);                        \
  template void attentionBlockGrad<T>(                                         \
      const T *, const T *, const T *, const T *, const std::int32_t *,        \
      const std::int32_t *, const T *, const float *, T *, T *, T *,           \
      const AttentionShape &, std::int64_t, void *, std::size_t,               \
      cudaStream_t);
PARTITION_INSTANTIATE(float)
PARTITION_INSTANTIATE(__nv_bfloat16)
#undef PARTITION_INSTANTIATE

} // namespace partition::runtime::cuda
