//===- CudaBackendImpl.h - the CUDA backend's class, private ----*- C++ -*-===//
//
// What the files of the CUDA backend share: the CudaBackend class (declared
// once, its members defined by job in CudaBackend.cpp (construction, run,
// profile), CudaWorkspace.cpp (checking and workspace sizing),
// CudaGemm.cpp (cuBLASLt), CudaDispatch.cpp (the per-kernel launches) and
// CudaCollectives.cpp (NCCL collectives and transfers)), and the small
// helpers they all use. Not part of the backend's interface
// (CudaBackend.h); included by those files only.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_CUDA_CUDABACKENDIMPL_H
#define PARTITION_RUNTIME_CUDA_CUDABACKENDIMPL_H

#include "runtime/backend/cuda/CudaBackend.h"

#include "runtime/backend/Profile.h"
#include "runtime/backend/Trace.h"
#include "runtime/backend/cuda/CudaTiers.h"
#include "runtime/backend/cuda/StreamPlan.h"
#include "runtime/backend/cuda/attention/Attention.h"
#include "runtime/backend/cuda/kernels/Kernels.h"
#include "runtime/backend/cuda/kernels/Moe.h"
#include "runtime/comm/MeshCommunicators.h"
#include "runtime/program/KernelArgs.h"
#ifdef PARTITION_HAVE_NCCL
#include "runtime/comm/NcclCommunicator.h"
#endif

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <tuple>

namespace partition::runtime::cudabackend {

namespace cuda = partition::runtime::cuda;
using bf16 = __nv_bfloat16;

/// cuBLASLt's workspace (what cuBLAS itself uses on Hopper).
inline constexpr size_t kGemmWorkspaceBytes = size_t(32) << 20;

inline void checkCuda(cudaError_t error, const char *call,
                      const std::string &where) {
  if (error == cudaSuccess)
    return;
  throw ProgramError(where + ": " + call +
                     " failed: " + cudaGetErrorName(error) + " (" +
                     cudaGetErrorString(error) + ")");
}

inline void checkCublas(cublasStatus_t status, const char *call,
                        const std::string &where) {
  if (status == CUBLAS_STATUS_SUCCESS)
    return;
  throw ProgramError(where + ": " + call +
                     " failed: " + cublasLtGetStatusString(status));
}

using cuda::ByteRange;

inline ByteRange rangeOf(const BufferInfo &buffer) {
  return {buffer.offset, buffer.offset + buffer.bytes};
}

#ifdef PARTITION_HAVE_NCCL
inline comm::DataType commType(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return comm::DataType::F32;
  case DType::BF16:
    return comm::DataType::BF16;
  case DType::I32:
    return comm::DataType::I32;
  }
  return comm::DataType::F32;
}
#endif

/// One GEMM shape's cuBLASLt descriptors and the algorithm chosen for it
/// (the heuristic's first answer), shared by the instructions of that
/// shape, type, epilogue and alignment.
struct GemmPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool haveAlgo = false;
  /// The bias epilogue is on (else the caller adds the bias).
  bool biasEpilogue = false;
  ~GemmPlan() {
    if (a)
      cublasLtMatrixLayoutDestroy(a);
    if (b)
      cublasLtMatrixLayoutDestroy(b);
    if (c)
      cublasLtMatrixLayoutDestroy(c);
    if (desc)
      cublasLtMatmulDescDestroy(desc);
  }
};

/// Column-major view of a row-major product: see compileLinear.
struct GemmShape {
  bool transA = false, transB = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
  DType dtype = DType::F32;
  bool bias = false;
  /// The largest power of two (at most 256) dividing every pointer.
  uint32_t alignment = 256;
  auto key() const {
    return std::make_tuple(transA, transB, m, n, k, lda, ldb, ldc,
                           static_cast<int>(dtype), bias, alignment);
  }
};

inline uint32_t alignmentOf(const void *pointer) {
  uintptr_t address = reinterpret_cast<uintptr_t>(pointer);
  uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0)
    alignment /= 2;
  return alignment;
}

class CudaBackend final : public Backend {
public:
  CudaBackend(const Program &program,
              const comm::MeshCommunicators *communicators, int device,
              const OffloadOptions &offload);
  ~CudaBackend() override;

  const char *name() const override { return "cuda"; }
  void write(const BufferInfo &buffer, const void *source) override {
    checkCuda(cudaSetDevice(device), "cudaSetDevice", "write");
    if (buffer.tier != Tier::Arena) {
      tiers->write(buffer, source);
      return;
    }
    // On the compute stream, joined: a cudaMemcpy from pageable memory on
    // the legacy default stream may return before its DMA has landed, and
    // the (non-blocking) compute and communication streams would not wait
    // for it.
    completeCarried(nullptr, rangeOf(buffer));
    std::string where = "writing '" + buffer.name + "'";
    checkCuda(cudaMemcpyAsync(arena + buffer.offset, source, buffer.bytes,
                              cudaMemcpyHostToDevice, compute),
              "cudaMemcpyAsync", where);
    checkCuda(cudaStreamSynchronize(compute), "cudaStreamSynchronize", where);
  }
  void read(const BufferInfo &buffer, void *destination) override {
    checkCuda(cudaSetDevice(device), "cudaSetDevice", "read");
    if (buffer.tier != Tier::Arena) {
      tiers->read(buffer, destination);
      return;
    }
    // The legacy default stream does not wait for the compute stream
    // (non-blocking): join it first, though run() already has.
    completeCarried(nullptr, rangeOf(buffer));
    checkCuda(cudaStreamSynchronize(compute), "cudaStreamSynchronize",
              "reading '" + buffer.name + "'");
    checkCuda(cudaMemcpy(destination, arena + buffer.offset, buffer.bytes,
                         cudaMemcpyDeviceToHost),
              "cudaMemcpy", "reading '" + buffer.name + "'");
  }
  using Backend::run;
  void run(size_t index, int64_t step) override;
  bool takeRoutingCounts(RoutingCounts &counts) override;
  uint64_t workspaceBytes() const override {
    return workspaceSize + gemmWorkspaceSize + stagingSize + sizeof(int) +
           size_t(routingExperts) * sizeof(unsigned long long) +
           (routingAux ? sizeof(double) : 0);
  }
  uint64_t deviceBytes() const override {
    return arenaSize + workspaceBytes() + sendStagingSize;
  }
  std::string describeTiers() const override {
    return tiers ? tiers->describe() : "";
  }

private:
  /// One instruction: what the compute stream waits for first (indices
  /// into the function's completion events), then the call.
  struct Step {
    std::function<void()> call;
    std::vector<size_t> computeWaits;
    /// The stream the call's work runs on (profiling).
    cudaStream_t stream = nullptr;
    bool collective = false;
  };
  struct CompiledFunction {
    std::string name;
    std::vector<Step> steps;
    /// The program's function: its micro-batch loop, walked by run().
    Function source;
    /// The loop's slices: where each run's rows go, and their bytes.
    std::vector<std::pair<uint8_t *, size_t>> slices;
    /// The events of the collectives in the loop: a run waits for those of
    /// the run before it, whose buffers it reuses.
    std::vector<size_t> loopEvents;
    /// A walk's rows copies, per region: micro-batch 0's rows of the
    /// input, where they go, their bytes.
    struct RowsCopy {
      const uint8_t *input;
      uint8_t *rows;
      size_t bytes;
    };
    std::vector<std::vector<RowsCopy>> actionRows;
    /// The events of a walk's collectives and receives (not its sends,
    /// which complete only once their receiver gets there: waiting for
    /// them could deadlock the pipeline): each action starts after them.
    std::vector<size_t> walkEvents;
    std::vector<std::string> names;
    /// One per collective instruction, recorded on its communication
    /// stream after it.
    std::vector<cudaEvent_t> done;
    /// Collectives nobody waited for by the end of the function.
    std::vector<size_t> finalWaits;
    /// The carried waits' collectives (carriedWaits in Backend.h), in
    /// flight past the end of a run, and whether a run has left them so:
    /// the function's next run waits for them where it first touches their
    /// bytes (StreamPlan.h); anything else completes them first
    /// (completeCarried).
    std::vector<size_t> carriedEvents;
    /// The bytes those collectives touch (read and write complete only
    /// the carried collectives they overlap: not those of the tokens).
    std::vector<ByteRange> carriedRanges;
    bool carriedPending = false;
#ifdef PARTITION_HAVE_NCCL
    std::vector<comm::NcclCommunicator *> communicators;
    /// The communicators the carried collectives run on.
    std::vector<comm::NcclCommunicator *> carriedCommunicators;
#endif
    // PARTITION_PROFILE only.
    std::vector<InstructionCost> costs;
    /// --trace: per instruction, its span (times unset).
    std::vector<TraceSpan> spans;
    std::vector<cudaEvent_t> starts, ends;
    std::vector<double> milliseconds;
    int64_t runs = 0, profiledRuns = 0;
  };

  /// Checks every instruction (checkInstruction) before anything large is
  /// allocated and sizes the kernel workspace and the staging buffer for
  /// them (CudaWorkspace.cpp); per function, per instruction, the checked
  /// arguments (empty for collectives and transfers).
  std::vector<std::vector<KernelArgs>> checkAndSize(const Program &program);
  /// Allocates the arena (zeroed), the workspaces and the staging buffer,
  /// and creates the compute stream and the cuBLASLt handle.
  void allocate(const Program &program, const std::string &setup);
  /// Compiles every instruction of `function`, then decides from the byte
  /// ranges they touch which launch waits for which collective
  /// (StreamPlan.h).
  std::unique_ptr<CompiledFunction>
  compileFunction(const Program &program, const Function &function,
                  const std::vector<KernelArgs> &checked,
                  const std::string &setup);
  /// A kernel instruction, bound to its pointers and sizes.
  std::function<void()> compileKernel(const KernelArgs &args,
                                      const Instruction &instruction,
                                      const std::string &where);
  std::function<void()> compileLinear(const KernelArgs &args,
                                      const std::string &where);
  /// Plans (once per distinct shape) a GEMM C = op(A) op(B) on cuBLASLt.
  GemmPlan *planGemm(const GemmShape &shape, const std::string &where);
  void gemm(const GemmPlan &plan, const void *a, const void *b, void *c,
            const void *bias, const std::string &where);
  /// A collective instruction: its call, and its byte ranges (arena and
  /// staging). `done` is its completion event, `commWaits` the events of
  /// earlier collectives (on other streams) whose ranges it overlaps.
  struct CollectivePlan {
    std::function<void(const std::vector<cudaEvent_t> &)> call;
    std::vector<ByteRange> ranges;
    /// Ranges the compute stream touches before the collective starts (the
    /// packing of a reduce-scatter's blocks into staging).
    std::vector<ByteRange> computeRanges;
    cudaStream_t stream = nullptr;
#ifdef PARTITION_HAVE_NCCL
    comm::NcclCommunicator *communicator = nullptr;
#endif
  };
  CollectivePlan compileCollective(const Program &program,
                                   const Instruction &instruction,
                                   const std::string &where);
#ifdef PARTITION_HAVE_NCCL
  /// An all_to_all with counts: only the filled rows move.
  CollectivePlan compileCountedAllToAll(
      const Program &program, const Instruction &instruction,
      CollectivePlan plan, comm::NcclCommunicator *nccl,
      const std::string &what,
      const std::function<void(const std::vector<cudaEvent_t> &)> &startAfter);
#endif
  /// Pinned host memory of the counted all-to-alls' counts, one block per
  /// exchange (freed with the backend).
  std::vector<void *> pinnedCounts;
  /// Bytes the all-to-alls sent to other ranks since takeRoutingCounts.
  double routingExchanged = 0;
  /// A send (through a staging copy of its own) or a receive.
  CollectivePlan compileTransfer(const Program &program,
                                 const Instruction &instruction,
                                 const std::string &where);
  /// Device memory of the sends' staging copies (freed with the backend).
  std::vector<void *> sendStaging;
  size_t sendStagingSize = 0;
  void writeAxisIndices(const Program &program);
  /// Launches instructions [begin, end) of `function`; `record`: between
  /// profiling events (PARTITION_PROFILE), then waits for them and adds
  /// their times.
  void launchRange(CompiledFunction &function, size_t begin, size_t end,
                   int64_t step, bool record);
  /// Before the micro-batch loop's run `run` > 0: the compute stream waits
  /// for the previous run's collectives, then copies run `run`'s rows into
  /// the slices.
  void nextLoopRun(CompiledFunction &function, int64_t run);
  /// Before a walk's action `index`: the compute stream waits for the
  /// walk's collectives and receives (the actions run their regions in
  /// another order than the stream plan's), then copies the action's rows.
  void nextAction(CompiledFunction &function, size_t index);
  void join(CompiledFunction &function, int64_t step);
  /// Completes the collectives other functions' runs carried (all when
  /// `except` is null; with `only`, those of functions whose carried
  /// collectives touch those bytes): before a run of another function, a
  /// read or a write of the arena.
  void completeCarried(const CompiledFunction *except,
                       std::optional<ByteRange> only = std::nullopt);
  void printProfile(const CompiledFunction &function) const;

  int device = 0;
  uint8_t *arena = nullptr;
  uint64_t arenaSize = 0;
  void *workspace = nullptr;
  size_t workspaceSize = 0;
  void *gemmWorkspace = nullptr;
  size_t gemmWorkspaceSize = kGemmWorkspaceBytes;
  /// Packed blocks of all-gathers / reduce-scatters along a dimension other
  /// than the first; sized for the largest.
  uint8_t *staging = nullptr;
  size_t stagingSize = 0;
  /// Set by the kernels when a token or target id is out of range.
  int *badId = nullptr;
  /// The metrics' expert load: per expert, the rows every moe_route since
  /// the last takeRoutingCounts kept (device, summed by the tally kernel
  /// after each route), and on the host the choices those routes made.
  /// Null when the program routes nothing.
  unsigned long long *routingKept = nullptr;
  int64_t routingExperts = 0;
  double routingChoices = 0;
  /// The moe_aux_loss values times their groups (device, one double) and
  /// the groups (host), as RoutingCounts holds them.
  double *routingAux = nullptr;
  double routingAuxGroups = 0;
  cudaStream_t compute = nullptr;
  cudaEvent_t computeReady = nullptr;
  cublasLtHandle_t lt = nullptr;
  /// cuBLAS for the experts' strided-batched GEMMs (cuBLASLt has no
  /// per-batch weight offsets without one plan per group), on the compute
  /// stream with cuBLASLt's workspace: both run in stream order on
  /// `compute`, never at once.
  cublasHandle_t blas = nullptr;
  /// TF32 tensor cores for fp32 GEMMs (PARTITION_CUDA_TF32=1): faster, but
  /// fp32 programs then no longer match the CPU backend to 1e-4.
  bool tf32 = false;
  std::map<decltype(GemmShape().key()), std::unique_ptr<GemmPlan>> gemmPlans;
  std::vector<std::unique_ptr<CompiledFunction>> functions;
  /// The offload's tiers, with the CPU's AdamW updates (null without any).
  std::unique_ptr<CudaTiers> tiers;
  /// PARTITION_PROFILE (runtime/backend/Profile.h): CUDA events around every
  /// instruction, on the stream it runs on, read once each profiled run has
  /// been joined.
  ProfileSettings profile = ProfileSettings::fromEnvironment();
  const comm::MeshCommunicators *communicators;
  int64_t currentStep = -1;
};

} // namespace partition::runtime::cudabackend

#endif // PARTITION_RUNTIME_CUDA_CUDABACKENDIMPL_H
