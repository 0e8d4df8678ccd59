//===- AttentionForward.cu - flash attention forward ----------------------===//
//
// The forward entry points (attention, attention_positions,
// attention_block) and their workspace sizes; the kernels are in
// AttentionKernels.cuh.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/attention/AttentionKernels.cuh"

namespace partition::runtime::cuda {

std::size_t attentionWorkspaceSize(const AttentionShape &shape, bool) {
  return makePlan("attention", shape).forwardBytes;
}

std::size_t attentionPositionsWorkspaceSize(const AttentionShape &shape,
                                           std::int64_t keySeq, bool grad) {
  const char *kernel = grad ? "attention_positions_grad"
                            : "attention_positions";
  if (keySeq < 0)
    fail(kernel, "negative key sequence length");
  const Plan plan = makePlan(kernel, shape, keySeq);
  return grad ? plan.backwardBytes : plan.forwardBytes;
}

template <typename T>
void attention(const T *query, const T *key, const T *value, T *result,
               const AttentionShape &shape, void *workspace,
               std::size_t workspaceBytes, cudaStream_t stream) {
  const char *kernel = "attention";
  const Plan plan = makePlan(kernel, shape);
  checkWorkspace(kernel, workspace, workspaceBytes, plan.forwardBytes);
  if (plan.batch == 0 || plan.params.seq == 0)
    return;
  char *ws = static_cast<char *>(workspace);
  const float2 *rope = ropeTable(kernel, plan, ws, stream);
  withPaddedDim(plan.paddedDim, [&](auto dim) {
    launchForward<decltype(dim)::value, T>(kernel, plan, query, key, value,
                                           result, nullptr, nullptr, nullptr,
                                           rope, rope, stream);
  });
}

template <typename T>
void attentionPositions(const T *query, const T *key, const T *value,
                        const std::int32_t *queryPositions,
                        const std::int32_t *keyPositions, T *result,
                        const AttentionShape &shape, std::int64_t keySeq,
                        void *workspace, std::size_t workspaceBytes,
                        cudaStream_t stream) {
  const char *kernel = "attention_positions";
  if (keySeq < 0)
    fail(kernel, "negative key sequence length");
  Plan plan = makePlan(kernel, shape, keySeq);
  plan.params.qpos = queryPositions;
  plan.params.kpos = keyPositions;
  checkWorkspace(kernel, workspace, workspaceBytes, plan.forwardBytes);
  if (plan.batch == 0 || plan.params.seq == 0)
    return;
  char *ws = static_cast<char *>(workspace);
  const float2 *rope = ropeTable(kernel, plan, ws, stream);
  const float2 *krope = keyRopeTable(kernel, plan, ws, stream, rope);
  withPaddedDim(plan.paddedDim, [&](auto dim) {
    launchForward<decltype(dim)::value, T>(kernel, plan, query, key, value,
                                           result, nullptr, nullptr, nullptr,
                                           rope, krope, stream);
  });
}

template <typename T>
void attentionBlock(const T *query, const T *key, const T *value,
                    const std::int32_t *queryPositions,
                    const std::int32_t *keyPositions, T *result, float *lse,
                    const AttentionShape &shape, std::int64_t keySeq,
                    void *workspace, std::size_t workspaceBytes,
                    cudaStream_t stream) {
  const char *kernel = "attention_block";
  if (keySeq < 0)
    fail(kernel, "negative key sequence length");
  Plan plan = makePlan(kernel, shape, keySeq);
  plan.params.qpos = queryPositions;
  plan.params.kpos = keyPositions;
  checkWorkspace(kernel, workspace, workspaceBytes, plan.forwardBytes);
  if (plan.batch == 0 || plan.params.seq == 0)
    return;
  char *ws = static_cast<char *>(workspace);
  const float2 *rope = ropeTable(kernel, plan, ws, stream);
  const float2 *krope = keyRopeTable(kernel, plan, ws, stream, rope);
  withPaddedDim(plan.paddedDim, [&](auto dim) {
    launchForward<decltype(dim)::value, T>(kernel, plan, query, key, value,
                                           result, nullptr, lse, nullptr, rope,
                                           krope, stream);
  });
}

#define PARTITION_INSTANTIATE(T)                                               \
  template void attention<T>(const T *, const T *, const T *, T *,             \
                             const AttentionShape &, void *, std::size_t,      \
                             cudaStream_t);                                    \
  template void attentionPositions<T>(                                         \
      const T *, const T *, const T *, const std::int32_t *,                   \
      const std::int32_t *, T *, const AttentionShape &, std::int64_t, void *, \
      std::size_t, cudaStream_t);                                              \
  template void attentionBlock<T>(                                             \
      const T *, const T *, const T *, const std::int32_t *,                   \
      const std::int32_t *, T *, float *, const AttentionShape &,              \
      std::int64_t, void *, std::size_t, cudaStream_t);
PARTITION_INSTANTIATE(float)
PARTITION_INSTANTIATE(__nv_bfloat16)
#undef PARTITION_INSTANTIATE

} // namespace partition::runtime::cuda
