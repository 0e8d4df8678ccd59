//===- CudaHostUpdates.h - AdamW on the CPU for a GPU rank ------*- C++ -*-===//
//
// ZeRO-Offload's update (docs/offload.md): where the moments are in a
// tier, each update the compiler placed in the backward pass
// (HostUpdatePlan.h) runs on the CPU, with the CPU backend's AdamW kernel
// (runtime/backend/cpu/AdamW.cpp: vectorised, OpenMP; the GPU kernel's
// arithmetic, op for op), on the moments in host memory: the host tier's
// pinned memory, or the NVMe tier's pinned blocks, which the I/O engine
// filled before and writes back after (CudaTiers). On the tiers' copy
// stream of their own, in program order, when the compute stream reaches the
// update:
//
//   wait for the compute stream   (the kernel that completed the gradient)
//   gradient -> pinned            (and the parameter slice, the step, lr)
//   AdamW on the CPU              (cudaLaunchHostFunc: a host function in
//                                  stream order; it makes no CUDA call)
//   parameter slice -> arena      (not when the shard is in the host tier)
//   completion event
//
// The stream plan orders the rest by byte ranges, as for a collective: the
// next kernel that touches the parameter, the gradient's bytes, the step
// or the learning rate waits for the completion event, so the backward
// pass runs on while a bucket's update runs on the CPU. Updates follow one
// another on their stream, so one pinned scratch (the largest slice's
// gradient and parameter) serves them all. Their own stream, not the tier
// copies': ZeRO-3's shard reads for the backward's all-gathers must not
// queue behind the CPU's updates (a shard's reads in a step all come before
// its update: the compiler refuses a pack after it; the next step's start
// after this one's end, which waits for every update).
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_CUDA_CUDAHOSTUPDATES_H
#define PARTITION_RUNTIME_CUDA_CUDAHOSTUPDATES_H

#include "runtime/backend/cuda/HostUpdatePlan.h"

#include <cuda_runtime_api.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace partition::runtime::cudabackend {

class CudaTiers;

class CudaHostUpdates {
public:
  /// Updates run on a stream of their own after the work of `compute`;
  /// `tiers` holds the host tier and the NVMe copies' pinned blocks.
  CudaHostUpdates(CudaTiers &tiers, cudaStream_t compute,
                  const std::string &setup);
  ~CudaHostUpdates();
  CudaHostUpdates(const CudaHostUpdates &) = delete;
  CudaHostUpdates &operator=(const CudaHostUpdates &) = delete;

  /// Binds one planned update (its adamw instruction's hyperparameters in
  /// `floats`) to the arena at `arena` and, for its NVMe operands, to the
  /// tiers' copies (`tierCopies`: instruction -> copy, as
  /// CudaTiers::compileFunction returned); its index for enqueue().
  size_t compile(const Program &program, const cuda::HostUpdate &update,
                 const std::vector<float> &floats, uint8_t *arena,
                 const std::map<size_t, size_t> &tierCopies,
                 const std::string &name, const std::string &setup);
  /// Recorded on stream() after update `index` (an NVMe
  /// write-back's wait waits for it).
  cudaEvent_t finished(size_t index) const { return updates[index]->finished; }
  /// Allocates the pinned scratch; after every compile.
  void allocate(const std::string &setup);
  /// Enqueues update `index` on stream() (the caller records the
  /// completion event after it, on that stream).
  void enqueue(size_t index);
  cudaStream_t stream() const { return updateStream; }
  /// Throws ProgramError with the first CPU update's failure since the
  /// last call (after the copy stream was joined).
  void checkErrors();

private:
  struct Update {
    std::string name;
    /// Device memory.
    float *gradient = nullptr, *param = nullptr;
    int32_t *step = nullptr;
    float *lr = nullptr;
    /// The moments and a tiered parameter (else null) in host memory:
    /// set at compile time in the host tier, at enqueue() from the NVMe
    /// copies' pinned blocks (`*Copy`, else kNoCopy).
    float *moment1 = nullptr, *moment2 = nullptr, *hostParam = nullptr;
    static constexpr size_t kNoCopy = ~size_t(0);
    size_t moment1Copy = kNoCopy, moment2Copy = kNoCopy, paramCopy = kNoCopy;
    cudaEvent_t finished = nullptr;
    int64_t size = 0;
    float beta1 = 0, beta2 = 0, epsilon = 0, weightDecay = 0;
    CudaHostUpdates *owner = nullptr;
  };
  /// The host function: AdamW on the CPU over the pinned scratch and the
  /// tier.
  static void CUDART_CB run(void *update);
  void check(cudaError_t error, const char *call, const Update &update) const;

  CudaTiers &tiers;
  cudaStream_t compute;
  cudaStream_t updateStream = nullptr;
  cudaEvent_t ready = nullptr;
  std::vector<std::unique_ptr<Update>> updates;
  /// Pinned: the gradient, the parameter (a slice each), the step and the
  /// learning rate of the update in flight.
  uint8_t *scratch = nullptr;
  int64_t largest = 0;
  std::mutex errorMutex;
  std::string error;
};

} // namespace partition::runtime::cudabackend

#endif // PARTITION_RUNTIME_CUDA_CUDAHOSTUPDATES_H
