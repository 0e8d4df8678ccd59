//===- CudaBackend.cpp - runs a program on one CUDA device ----------------===//
//
// Streams and events
//  - Every kernel and GEMM runs on one compute stream, in program order.
//  - A collective runs on its group's communicator stream (one per NCCL
//    communicator): when it is reached, an event recorded on the compute
//    stream orders it after everything before it; a completion event is
//    recorded after it. A later kernel whose buffers overlap the
//    collective's in the ARENA (byte ranges, not buffer ids: the memory
//    planner reuses ranges) makes the compute stream wait for that event
//    first; kernels that touch other ranges run while the collective is in
//    flight. Which kernel waits for which collective is decided once, at
//    construction, by walking each function in order.
//  - A pipeline transfer runs on the stream of its pair of stages' own NCCL
//    communicator (MeshCommunicators::transferGroup: one per direction, so
//    each is used from one stream on each rank). A send first copies its
//    buffer into a staging buffer of its own on the compute stream, then
//    ncclSend reads the copy: the compute stream never waits for a send,
//    which may only complete once the receiver gets there, so a send can
//    never block the receives behind it (1F1B sends activations forward
//    while it waits for gradients coming back). A receive is a collective
//    for the stream plan: it starts when the compute stream reaches it, and
//    kernels that touch its buffer wait for it.
//  - run() ends joined: the compute stream waits for every collective still
//    in flight, each communicator is synchronised (polled against its
//    timeout, so a lost peer becomes the one-line error, not a hang), then
//    the compute stream.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/CudaBackend.h"

#include "runtime/program/KernelArgs.h"
#include "runtime/backend/Profile.h"
#include "runtime/backend/Trace.h"
#include "runtime/comm/MeshCommunicators.h"
#include "runtime/backend/cuda/attention/Attention.h"
#include "runtime/backend/cuda/StreamPlan.h"
#include "runtime/backend/cuda/kernels/Kernels.h"
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
#include <set>
#include <stdexcept>
#include <tuple>

namespace partition::runtime {

namespace {

namespace cuda = partition::runtime::cuda;
using bf16 = __nv_bfloat16;

/// cuBLASLt's workspace (what cuBLAS itself uses on Hopper).
constexpr size_t kGemmWorkspaceBytes = size_t(32) << 20;

void checkCuda(cudaError_t error, const char *call, const std::string &where) {
  if (error == cudaSuccess)
    return;
  throw ProgramError(where + ": " + call + " failed: " +
                     cudaGetErrorName(error) + " (" +
                     cudaGetErrorString(error) + ")");
}

void checkCublas(cublasStatus_t status, const char *call,
                 const std::string &where) {
  if (status == CUBLAS_STATUS_SUCCESS)
    return;
  throw ProgramError(where + ": " + call + " failed: " +
                     cublasLtGetStatusString(status));
}

using cuda::ByteRange;

ByteRange rangeOf(const BufferInfo &buffer) {
  return {buffer.offset, buffer.offset + buffer.bytes};
}

#ifdef PARTITION_HAVE_NCCL
comm::DataType commType(DType dtype) {
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

template <typename T> struct Tag {
  using type = T;
};

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

uint32_t alignmentOf(const void *pointer) {
  uintptr_t address = reinterpret_cast<uintptr_t>(pointer);
  uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0)
    alignment /= 2;
  return alignment;
}

class CudaBackend final : public Backend {
public:
  CudaBackend(const Program &program,
              const comm::MeshCommunicators *communicators, int device);
  ~CudaBackend() override;

  const char *name() const override { return "cuda"; }
  void write(const BufferInfo &buffer, const void *source) override {
    checkCuda(cudaSetDevice(device), "cudaSetDevice", "write");
    // On the compute stream, joined: a cudaMemcpy from pageable memory on
    // the legacy default stream may return before its DMA has landed, and
    // the (non-blocking) compute and communication streams would not wait
    // for it.
    std::string where = "writing '" + buffer.name + "'";
    checkCuda(cudaMemcpyAsync(arena + buffer.offset, source, buffer.bytes,
                              cudaMemcpyHostToDevice, compute),
              "cudaMemcpyAsync", where);
    checkCuda(cudaStreamSynchronize(compute), "cudaStreamSynchronize", where);
  }
  void read(const BufferInfo &buffer, void *destination) override {
    checkCuda(cudaSetDevice(device), "cudaSetDevice", "read");
    // The legacy default stream does not wait for the compute stream
    // (non-blocking): join it first, though run() already has.
    checkCuda(cudaStreamSynchronize(compute), "cudaStreamSynchronize",
              "reading '" + buffer.name + "'");
    checkCuda(cudaMemcpy(destination, arena + buffer.offset, buffer.bytes,
                         cudaMemcpyDeviceToHost),
              "cudaMemcpy", "reading '" + buffer.name + "'");
  }
  using Backend::run;
  void run(size_t index, int64_t step) override;
  uint64_t workspaceBytes() const override {
    return workspaceSize + gemmWorkspaceSize + stagingSize + sizeof(int);
  }
  uint64_t deviceBytes() const override {
    return arenaSize + workspaceBytes() + sendStagingSize;
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
    std::vector<std::string> names;
    /// One per collective instruction, recorded on its communication
    /// stream after it.
    std::vector<cudaEvent_t> done;
    /// Collectives nobody waited for by the end of the function.
    std::vector<size_t> finalWaits;
#ifdef PARTITION_HAVE_NCCL
    std::vector<comm::NcclCommunicator *> communicators;
#endif
    // PARTITION_PROFILE only.
    std::vector<InstructionCost> costs;
    /// --trace: per instruction, its span (times unset).
    std::vector<TraceSpan> spans;
    std::vector<cudaEvent_t> starts, ends;
    std::vector<double> milliseconds;
    int64_t runs = 0, profiledRuns = 0;
  };

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
  /// A send (through a staging copy of its own) or a receive.
  CollectivePlan compileTransfer(const Program &program,
                                 const Instruction &instruction,
                                 const std::string &where);
  /// Device memory of the sends' staging copies (freed with the backend).
  std::vector<void *> sendStaging;
  size_t sendStagingSize = 0;
  void writeAxisIndices(const Program &program);
  void runProfiled(CompiledFunction &function, int64_t step);
  void join(CompiledFunction &function, int64_t step);
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
  cudaStream_t compute = nullptr;
  cudaEvent_t computeReady = nullptr;
  cublasLtHandle_t lt = nullptr;
  /// TF32 tensor cores for fp32 GEMMs (PARTITION_CUDA_TF32=1): faster, but
  /// fp32 programs then no longer match the CPU backend to 1e-4.
  bool tf32 = false;
  std::map<decltype(GemmShape().key()), std::unique_ptr<GemmPlan>> gemmPlans;
  std::vector<std::unique_ptr<CompiledFunction>> functions;
  /// PARTITION_PROFILE (runtime/backend/Profile.h): CUDA events around every
  /// instruction, on the stream it runs on, read once each profiled run has
  /// been joined.
  ProfileSettings profile = ProfileSettings::fromEnvironment();
  const comm::MeshCommunicators *communicators;
  int64_t currentStep = -1;
};

CudaBackend::CudaBackend(const Program &program,
                         const comm::MeshCommunicators *communicators,
                         int device)
    : device(device), arenaSize(program.arenaBytes),
      communicators(communicators) {
  const char *tf32Setting = std::getenv("PARTITION_CUDA_TF32");
  tf32 = tf32Setting && *tf32Setting && std::strcmp(tf32Setting, "0") != 0;
  const std::string setup = "CUDA backend on device " + std::to_string(device);
  checkCuda(cudaSetDevice(device), "cudaSetDevice", setup);

  // Check every instruction before allocating anything large.
  std::vector<std::vector<KernelArgs>> checked;
  for (const Function &function : program.functions) {
    checked.emplace_back();
    for (size_t i = 0; i < function.instructions.size(); ++i) {
      if (function.instructions[i].collective ||
          function.instructions[i].transfer) {
        checked.back().emplace_back();
        continue;
      }
      checked.back().push_back(checkInstruction(
          program, function.instructions[i],
          function.name + " instruction #" + std::to_string(i)));
      const KernelArgs &a = checked.back().back();
      bool bf = a.floatType == DType::BF16;
      size_t need = 0;
      // The size functions check the shapes (invalid_argument) and may
      // query CUB (runtime_error): name the instruction.
      try {
        switch (a.kernel) {
        case KernelId::EmbeddingGrad:
        case KernelId::EmbeddingGradAdd:
          need = cuda::embeddingGradWorkspaceSize(a.rows, a.vocab, a.channels);
          break;
        case KernelId::VocabParallelEmbeddingGrad:
          need = cuda::vocabParallelEmbeddingGradWorkspaceSize(a.rows, a.vocab,
                                                               a.channels);
          break;
        case KernelId::LayerNormGrad:
          need = cuda::layerNormGradWorkspaceSize(a.rows, a.channels);
          break;
        case KernelId::RMSNormGrad:
          need = cuda::rmsNormGradWorkspaceSize(a.rows, a.channels);
          break;
        case KernelId::LinearGradWeightBias:
          need = cuda::biasGradWorkspaceSize(a.rows, a.outFeatures);
          break;
        case KernelId::SoftmaxCrossEntropy:
          need = cuda::softmaxCrossEntropyWorkspaceSize(a.rows);
          break;
        case KernelId::VocabParallelLoss:
          need = cuda::vocabParallelLossWorkspaceSize(a.rows);
          break;
        case KernelId::Attention:
        case KernelId::AttentionGrad: {
          cuda::AttentionShape shape{a.batch,   a.seq,     a.heads,
                                     a.kvHeads, a.headDim, a.causal,
                                     a.ropeTheta};
          need = std::max(cuda::attentionWorkspaceSize(shape, bf),
                          cuda::attentionGradWorkspaceSize(shape, bf));
          break;
        }
        // No workspace. Every kernel is listed (no default): a kernel added
        // to Kernels.def fails to build here until it says what it needs.
        case KernelId::Embedding:
        case KernelId::PositionEmbedding:
        case KernelId::PositionEmbeddingGrad:
        case KernelId::LayerNorm:
        case KernelId::RMSNorm:
        case KernelId::Linear:
        case KernelId::LinearBias:
        case KernelId::LinearGradInput:
        case KernelId::LinearGradWeight:
        case KernelId::Gelu:
        case KernelId::GeluGrad:
        case KernelId::Swiglu:
        case KernelId::SwigluGrad:
        case KernelId::Add:
        case KernelId::Scale:
        case KernelId::SoftmaxCrossEntropyGrad:
        case KernelId::AdamW:
        case KernelId::Fill:
        case KernelId::AddI32:
        case KernelId::Copy:
        case KernelId::SliceBlock:
        case KernelId::FlatPack:
        case KernelId::FlatUnpack:
        case KernelId::VocabParallelEmbedding:
        case KernelId::VocabParallelMax:
        case KernelId::VocabParallelTargetLogit:
        case KernelId::VocabParallelSumExp:
        case KernelId::VocabParallelCrossEntropyGrad:
        case KernelId::VocabParallelMaskedMax:
        case KernelId::VocabParallelMaskedSumExp:
        case KernelId::VocabParallelMaskedCrossEntropyGrad:
        case KernelId::Cast:
        case KernelId::NumKernels:
          break;
        }
      } catch (const ProgramError &) {
        throw;
      } catch (const std::exception &error) {
        throw ProgramError(function.name + " instruction #" +
                           std::to_string(i) + ": " + error.what());
      }
      workspaceSize = std::max(workspaceSize, need);
    }
  }
  // Staging for blocks along an inner dimension.
  for (const Function &function : program.functions)
    for (const Instruction &instruction : function.instructions) {
      if (!instruction.collective ||
          instruction.collective->kind == CollectiveKind::AllReduce)
        continue;
      const BufferInfo &input = program.buffers[instruction.args[0]];
      const BufferInfo &output = program.buffers[instruction.args[1]];
      stagingSize = std::max<size_t>(
          stagingSize, std::max(input.bytes, output.bytes));
    }

  auto allocate = [&](size_t bytes, const char *what) {
    void *memory = nullptr;
    cudaError_t error = cudaMalloc(&memory, std::max<size_t>(bytes, 256));
    if (error != cudaSuccess) {
      size_t free = 0, total = 0;
      cudaGetLastError();
      cudaMemGetInfo(&free, &total);
      throw ProgramError(setup + ": cannot allocate " + std::to_string(bytes) +
                         " bytes of device memory for the " + what + " (" +
                         std::to_string(free) + " of " +
                         std::to_string(total) + " bytes free): " +
                         cudaGetErrorString(error));
    }
    return memory;
  };
  arena = static_cast<uint8_t *>(allocate(program.arenaBytes, "arena"));
  // Zero so that uninitialised state (moments, the step) starts at zero.
  checkCuda(cudaMemset(arena, 0, std::max<uint64_t>(program.arenaBytes, 1)),
            "cudaMemset", setup);
  if (workspaceSize)
    workspace = allocate(workspaceSize, "kernel workspace");
  gemmWorkspace = allocate(gemmWorkspaceSize, "cuBLASLt workspace");
  if (stagingSize)
    staging = static_cast<uint8_t *>(allocate(stagingSize, "staging buffer"));
  badId = static_cast<int *>(allocate(sizeof(int), "token check flag"));
  checkCuda(cudaMemset(badId, 0, sizeof(int)), "cudaMemset", setup);
  checkCuda(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking),
            "cudaStreamCreateWithFlags", setup);
  checkCuda(cudaEventCreateWithFlags(&computeReady, cudaEventDisableTiming),
            "cudaEventCreateWithFlags", setup);
  checkCublas(cublasLtCreate(&lt), "cublasLtCreate", setup);
  writeAxisIndices(program);

  for (size_t f = 0; f < program.functions.size(); ++f) {
    const Function &function = program.functions[f];
    auto compiled = std::make_unique<CompiledFunction>();
    compiled->name = function.name;
    // Compile every instruction, then decide which launch waits for which
    // collective from the byte ranges they touch (StreamPlan.h).
    std::vector<cuda::PlannedInstruction> planned;
    std::vector<std::function<void(const std::vector<cudaEvent_t> &)>>
        collectiveCalls(function.instructions.size());
    std::map<cudaStream_t, int> streamIds;
    for (size_t i = 0; i < function.instructions.size(); ++i) {
      const Instruction &instruction = function.instructions[i];
      std::string where = function.name + " instruction #" + std::to_string(i);
      Step step;
      cuda::PlannedInstruction plannedInstruction;
      if (instruction.collective || instruction.transfer) {
        CollectivePlan plan =
            instruction.transfer
                ? compileTransfer(program, instruction, where)
                : compileCollective(program, instruction, where);
        step.collective = true;
        step.stream = plan.stream;
        plannedInstruction.collective = true;
        plannedInstruction.transfer = instruction.transfer.has_value();
        plannedInstruction.stream =
            streamIds.emplace(plan.stream, int(streamIds.size()))
                .first->second;
        plannedInstruction.ranges = plan.ranges;
        plannedInstruction.computeRanges = plan.computeRanges;
        collectiveCalls[i] = std::move(plan.call);
#ifdef PARTITION_HAVE_NCCL
        if (std::find(compiled->communicators.begin(),
                      compiled->communicators.end(),
                      plan.communicator) == compiled->communicators.end())
          compiled->communicators.push_back(plan.communicator);
#endif
        compiled->names.push_back(instruction.transfer
                                      ? transferName(instruction, where)
                                      : collectiveName(instruction, where));
        compiled->spans.push_back(traceSpanOf(program, instruction));
        if (profile.enabled)
          compiled->costs.push_back(describeCollective(program, instruction));
      } else {
        const KernelArgs &args = checked[f][i];
        for (const BufferInfo *buffer : args.buffers)
          plannedInstruction.ranges.push_back(rangeOf(*buffer));
        step.stream = compute;
        step.call = compileKernel(args, instruction, where);
        compiled->spans.push_back(traceSpanOf(program, instruction));
        compiled->names.push_back(
            where + " (" +
            std::string(lookupKernel(static_cast<uint32_t>(args.kernel))->name) +
            ")");
        if (profile.enabled)
          compiled->costs.push_back(describeKernel(args));
      }
      planned.push_back(std::move(plannedInstruction));
      compiled->steps.push_back(std::move(step));
    }
    cuda::StreamPlan streamPlan = cuda::planStreams(planned);
    for (size_t e = 0; e < streamPlan.events; ++e) {
      cudaEvent_t event = nullptr;
      checkCuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
                "cudaEventCreateWithFlags", setup);
      compiled->done.push_back(event);
    }
    for (size_t i = 0; i < compiled->steps.size(); ++i) {
      Step &step = compiled->steps[i];
      step.computeWaits = streamPlan.computeWaits[i];
      if (!step.collective)
        continue;
      std::vector<cudaEvent_t> others;
      for (size_t e : streamPlan.streamWaits[i])
        others.push_back(compiled->done[e]);
      cudaEvent_t completion = compiled->done[streamPlan.event[i]];
      step.call = [others, completion, where = compiled->names[i],
                   stream = step.stream,
                   call = std::move(collectiveCalls[i])] {
        call(others);
        checkCuda(cudaEventRecord(completion, stream), "cudaEventRecord",
                  where);
      };
    }
    compiled->finalWaits = streamPlan.finalWaits;
    if (profile.enabled) {
      for (size_t i = 0; i < compiled->steps.size(); ++i) {
        cudaEvent_t start = nullptr, end = nullptr;
        checkCuda(cudaEventCreate(&start), "cudaEventCreate", setup);
        checkCuda(cudaEventCreate(&end), "cudaEventCreate", setup);
        compiled->starts.push_back(start);
        compiled->ends.push_back(end);
      }
      compiled->milliseconds.assign(compiled->steps.size(), 0.0);
    }
    functions.push_back(std::move(compiled));
  }
  checkCuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize", setup);
}

CudaBackend::~CudaBackend() {
  // Destroyed during exit after the CUDA runtime has shut down: the driver
  // frees everything with the process.
  if (cudaSetDevice(device) == cudaErrorCudartUnloading)
    return;
  if (compute)
    cudaStreamSynchronize(compute);
  if (profile.enabled)
    for (const auto &function : functions)
      if (function->profiledRuns > 0)
        printProfile(*function);
  for (const auto &function : functions) {
    for (cudaEvent_t event : function->done)
      cudaEventDestroy(event);
    for (cudaEvent_t event : function->starts)
      cudaEventDestroy(event);
    for (cudaEvent_t event : function->ends)
      cudaEventDestroy(event);
  }
  gemmPlans.clear();
  if (lt)
    cublasLtDestroy(lt);
  if (computeReady)
    cudaEventDestroy(computeReady);
  if (compute)
    cudaStreamDestroy(compute);
  for (void *memory : sendStaging)
    cudaFree(memory);
  for (void *memory : {static_cast<void *>(arena), workspace, gemmWorkspace,
                       static_cast<void *>(staging),
                       static_cast<void *>(badId)})
    if (memory)
      cudaFree(memory);
}

void CudaBackend::writeAxisIndices(const Program &program) {
  for (size_t index : program.withRole(Role::AxisIndex)) {
    const BufferInfo &buffer = program.buffers[index];
    int32_t value = axisIndexValue(program, buffer, communicators);
    checkCuda(cudaMemcpy(arena + buffer.offset, &value, sizeof(value),
                         cudaMemcpyHostToDevice),
              "cudaMemcpy", "axis index '" + buffer.name + "'");
  }
}

//===----------------------------------------------------------------------===//
// Running
//===----------------------------------------------------------------------===//

void CudaBackend::run(size_t index, int64_t step) {
  currentStep = step;
  CompiledFunction &function = *functions.at(index);
  checkCuda(cudaSetDevice(device), "cudaSetDevice", function.name);
  if (profile.enabled) {
    runProfiled(function, step);
    return;
  }
  for (size_t i = 0; i < function.steps.size(); ++i) {
    Step &s = function.steps[i];
    TraceRecorder::Clock::time_point start = TraceRecorder::Clock::now();
    for (size_t w : s.computeWaits)
      checkCuda(cudaStreamWaitEvent(compute, function.done[w], 0),
                "cudaStreamWaitEvent", function.names[i]);
    try {
      s.call();
    } catch (const ProgramError &) {
      throw;
    } catch (const std::exception &error) {
      // The kernels' size checks (invalid_argument) and launch failures
      // (runtime_error), named after the instruction.
      throw ProgramError(function.names[i] + ": " + error.what());
    }
    // Launch errors (not sticky) are only visible now.
    checkCuda(cudaPeekAtLastError(), "launch", function.names[i]);
    if (trace) {
      // --trace: the instruction's span ends when its stream has finished
      // it (the run is serialised; PARTITION_PROFILE times with events).
      checkCuda(cudaStreamSynchronize(s.stream), "cudaStreamSynchronize",
                function.names[i]);
      TraceSpan span = function.spans[i];
      span.startUs = trace->microsecondsSince(start);
      span.durationUs =
          trace->microsecondsSince(TraceRecorder::Clock::now()) - span.startUs;
      span.step = step;
      trace->add(std::move(span));
    }
  }
  join(function, step);
}

void CudaBackend::join(CompiledFunction &function, int64_t step) {
  for (size_t w : function.finalWaits)
    checkCuda(cudaStreamWaitEvent(compute, function.done[w], 0),
              "cudaStreamWaitEvent", function.name);
#ifdef PARTITION_HAVE_NCCL
  // Polled against the communicators' timeout: a peer that never arrives
  // ends the job with the one-line message instead of hanging here.
  std::string what = "end of " + function.name;
  for (comm::NcclCommunicator *communicator : function.communicators)
    communicator->synchronize({what.c_str(), step});
#else
  (void)step;
#endif
  checkCuda(cudaStreamSynchronize(compute), "cudaStreamSynchronize",
            function.name);
  int bad = 0;
  checkCuda(cudaMemcpy(&bad, badId, sizeof(int), cudaMemcpyDeviceToHost),
            "cudaMemcpy", function.name);
  if (bad) {
    // On the compute stream: the next run's kernels must see the reset (a
    // cudaMemset on the legacy stream is not ordered with them).
    checkCuda(cudaMemsetAsync(badId, 0, sizeof(int), compute),
              "cudaMemsetAsync", function.name);
    checkCuda(cudaStreamSynchronize(compute), "cudaStreamSynchronize",
              function.name);
    throw ProgramError(function.name +
                       ": a token id out of range of the vocabulary (or an "
                       "axis index out of range) reached a kernel; the "
                       "step's results are invalid");
  }
}

void CudaBackend::runProfiled(CompiledFunction &function, int64_t step) {
  bool record = function.runs++ >= profile.skip;
  if (record)
    ++function.profiledRuns;
  for (size_t i = 0; i < function.steps.size(); ++i) {
    Step &s = function.steps[i];
    for (size_t w : s.computeWaits)
      checkCuda(cudaStreamWaitEvent(compute, function.done[w], 0),
                "cudaStreamWaitEvent", function.names[i]);
    // A collective's time includes its wait for the compute stream.
    if (record)
      cudaEventRecord(function.starts[i], s.stream);
    try {
      s.call();
    } catch (const ProgramError &) {
      throw;
    } catch (const std::exception &error) {
      // The kernels' size checks (invalid_argument) and launch failures
      // (runtime_error), named after the instruction.
      throw ProgramError(function.names[i] + ": " + error.what());
    }
    if (record)
      cudaEventRecord(function.ends[i], s.stream);
    checkCuda(cudaPeekAtLastError(), "launch", function.names[i]);
  }
  join(function, step);
  if (!record)
    return;
  checkCuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize", function.name);
  for (size_t i = 0; i < function.steps.size(); ++i) {
    float ms = 0;
    if (cudaEventElapsedTime(&ms, function.starts[i], function.ends[i]) ==
        cudaSuccess)
      function.milliseconds[i] += ms;
  }
  cudaGetLastError();
}

void CudaBackend::printProfile(const CompiledFunction &function) const {
  double runs = double(function.profiledRuns);
  double total = 0, computeTotal = 0, flops = 0;
  for (size_t i = 0; i < function.steps.size(); ++i) {
    total += function.milliseconds[i];
    if (!function.steps[i].collective)
      computeTotal += function.milliseconds[i];
    flops += function.costs[i].flops;
  }
  std::FILE *out = stderr;
  std::fprintf(out,
               "\nPARTITION_PROFILE %s (cuda): %lld runs profiled (%lld "
               "skipped), %.2f ms per run in kernels (collectives on their "
               "own streams: %.2f ms), matmuls %.1f GFLOP per run\n",
               function.name.c_str(),
               static_cast<long long>(function.profiledRuns),
               static_cast<long long>(function.runs - function.profiledRuns),
               computeTotal / runs, (total - computeTotal) / runs,
               flops / 1e9);
  std::vector<double> seconds;
  for (double ms : function.milliseconds)
    seconds.push_back(ms * 1e-3);
  printProfileTables(out, function.costs, seconds, runs, /*tera=*/true);
}

//===----------------------------------------------------------------------===//
// GEMMs
//===----------------------------------------------------------------------===//

GemmPlan *CudaBackend::planGemm(const GemmShape &shape,
                                const std::string &where) {
  auto found = gemmPlans.find(shape.key());
  if (found != gemmPlans.end())
    return found->second.get();
  auto plan = std::make_unique<GemmPlan>();
  cudaDataType_t type =
      shape.dtype == DType::BF16 ? CUDA_R_16BF : CUDA_R_32F;
  cublasComputeType_t computeType =
      tf32 && shape.dtype == DType::F32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                        : CUBLAS_COMPUTE_32F;
  checkCublas(cublasLtMatmulDescCreate(&plan->desc, computeType, CUDA_R_32F),
              "cublasLtMatmulDescCreate", where);
  cublasOperation_t opA = shape.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opB = shape.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  checkCublas(cublasLtMatmulDescSetAttribute(plan->desc,
                                             CUBLASLT_MATMUL_DESC_TRANSA, &opA,
                                             sizeof(opA)),
              "cublasLtMatmulDescSetAttribute", where);
  checkCublas(cublasLtMatmulDescSetAttribute(plan->desc,
                                             CUBLASLT_MATMUL_DESC_TRANSB, &opB,
                                             sizeof(opB)),
              "cublasLtMatmulDescSetAttribute", where);
  // Stored shapes (column-major): A is m x k, or k x m when transposed.
  uint64_t aRows = shape.transA ? shape.k : shape.m;
  uint64_t aCols = shape.transA ? shape.m : shape.k;
  uint64_t bRows = shape.transB ? shape.n : shape.k;
  uint64_t bCols = shape.transB ? shape.k : shape.n;
  checkCublas(cublasLtMatrixLayoutCreate(&plan->a, type, aRows, aCols,
                                         shape.lda),
              "cublasLtMatrixLayoutCreate", where);
  checkCublas(cublasLtMatrixLayoutCreate(&plan->b, type, bRows, bCols,
                                         shape.ldb),
              "cublasLtMatrixLayoutCreate", where);
  checkCublas(cublasLtMatrixLayoutCreate(&plan->c, type, shape.m, shape.n,
                                         shape.ldc),
              "cublasLtMatrixLayoutCreate", where);

  cublasLtMatmulPreference_t preference = nullptr;
  checkCublas(cublasLtMatmulPreferenceCreate(&preference),
              "cublasLtMatmulPreferenceCreate", where);
  uint64_t workspaceLimit = gemmWorkspaceSize;
  cublasLtMatmulPreferenceSetAttribute(
      preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspaceLimit,
      sizeof(workspaceLimit));
  // The arena's buffers are 64-byte aligned, not the 256 bytes cuBLASLt
  // assumes by default: say what they are.
  uint32_t alignment = shape.alignment;
  for (auto attribute : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                         CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                         CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                         CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    cublasLtMatmulPreferenceSetAttribute(preference, attribute, &alignment,
                                         sizeof(alignment));

  auto heuristic = [&]() {
    cublasLtMatmulHeuristicResult_t result{};
    int count = 0;
    cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
        lt, plan->desc, plan->a, plan->b, plan->c, plan->c, preference, 1,
        &result, &count);
    if (status == CUBLAS_STATUS_SUCCESS && count > 0 &&
        result.state == CUBLAS_STATUS_SUCCESS) {
      plan->algo = result.algo;
      return true;
    }
    return false;
  };
  if (shape.bias) {
    // The bias has D's type (the default of BIAS_DATA_TYPE).
    cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                   &epilogue, sizeof(epilogue));
    plan->biasEpilogue = plan->haveAlgo = heuristic();
    if (!plan->biasEpilogue) {
      // No algorithm with the epilogue: plain GEMM, then addBias.
      epilogue = CUBLASLT_EPILOGUE_DEFAULT;
      cublasLtMatmulDescSetAttribute(plan->desc,
                                     CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                     sizeof(epilogue));
    }
  }
  if (!plan->haveAlgo)
    plan->haveAlgo = heuristic();
  cublasLtMatmulPreferenceDestroy(preference);
  if (!plan->haveAlgo)
    throw ProgramError(where + ": cuBLASLt has no algorithm for the GEMM m=" +
                       std::to_string(shape.m) + " n=" +
                       std::to_string(shape.n) + " k=" +
                       std::to_string(shape.k) + " (" +
                       dtypeName(shape.dtype) + ", alignment " +
                       std::to_string(shape.alignment) + " bytes)");
  GemmPlan *result = plan.get();
  gemmPlans.emplace(shape.key(), std::move(plan));
  return result;
}

void CudaBackend::gemm(const GemmPlan &plan, const void *a, const void *b,
                       void *c, const void *bias, const std::string &where) {
  if (plan.biasEpilogue)
    checkCublas(cublasLtMatmulDescSetAttribute(
                    plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                    sizeof(bias)),
                "cublasLtMatmulDescSetAttribute", where);
  const float alpha = 1.0f, beta = 0.0f;
  checkCublas(cublasLtMatmul(lt, plan.desc, &alpha, a, plan.a, b, plan.b,
                             &beta, c, plan.c, c, plan.c, &plan.algo,
                             gemmWorkspace, gemmWorkspaceSize, compute),
              "cublasLtMatmul", where);
}

std::function<void()> CudaBackend::compileLinear(const KernelArgs &a,
                                                 const std::string &where) {
  // Row-major X[M,K], W[N,K], Y[M,N] are column-major X^T (K x M, ld K),
  // W^T (K x N, ld K), Y^T (N x M, ld N); cuBLASLt computes C = op(A) op(B)
  // in column-major terms:
  //   y  = x w^T  :  Y^T  (N x M) = (W^T)^T X^T   A = W^T (T), B = X^T (N)
  //   dx = dy w   :  DX^T (K x M) = W^T DY^T      A = W^T (N), B = DY^T (N)
  //   dw = dy^T x :  DW^T (K x N) = X^T DY        A = X^T (N), B = DY^T (T)
  std::vector<uint8_t *> p;
  for (const BufferInfo *buffer : a.buffers)
    p.push_back(arena + buffer->offset);
  int64_t M = a.rows, K = a.inFeatures, N = a.outFeatures;
  GemmShape shape;
  shape.dtype = a.floatType;
  uint32_t alignment = 256;
  for (uint8_t *pointer : p)
    alignment = std::min(alignment, alignmentOf(pointer));
  shape.alignment = alignment;
  cudaStream_t s = compute;
  void *ws = workspace;
  bool bf = a.floatType == DType::BF16;
  // Only the linear kernels reach here (compileKernel's switch dispatches).
  if (a.kernel == KernelId::Linear || a.kernel == KernelId::LinearBias) {
    bool bias = a.kernel == KernelId::LinearBias;
    shape.transA = true;
    shape.m = N, shape.n = M, shape.k = K;
    shape.lda = K, shape.ldb = K, shape.ldc = N;
    shape.bias = bias;
    GemmPlan *plan = planGemm(shape, where);
    uint8_t *x = p[0], *w = p[1], *b = bias ? p[2] : nullptr,
            *y = p[bias ? 3 : 2];
    return [=] {
      gemm(*plan, w, x, y, b, where);
      if (bias && !plan->biasEpilogue) {
        if (bf)
          cuda::addBias<bf16>(reinterpret_cast<bf16 *>(y),
                              reinterpret_cast<const bf16 *>(b), M, N, s);
        else
          cuda::addBias<float>(reinterpret_cast<float *>(y),
                               reinterpret_cast<const float *>(b), M, N, s);
      }
    };
  }
  if (a.kernel == KernelId::LinearGradInput) {
    shape.m = K, shape.n = M, shape.k = N;
    shape.lda = K, shape.ldb = N, shape.ldc = K;
    GemmPlan *plan = planGemm(shape, where);
    uint8_t *dy = p[0], *w = p[1], *dx = p[2];
    return [=] { gemm(*plan, w, dy, dx, nullptr, where); };
  }
  if (a.kernel == KernelId::LinearGradWeight ||
      a.kernel == KernelId::LinearGradWeightBias) {
    bool bias = a.kernel == KernelId::LinearGradWeightBias;
    shape.transB = true;
    shape.m = K, shape.n = N, shape.k = M;
    shape.lda = K, shape.ldb = N, shape.ldc = K;
    GemmPlan *plan = planGemm(shape, where);
    uint8_t *dy = p[0], *x = p[1], *dw = p[2], *db = bias ? p[3] : nullptr;
    return [=] {
      gemm(*plan, x, dy, dw, nullptr, where);
      if (!bias)
        return;
      // Deterministic column sums (cuBLASLt's BGRADB epilogue is not).
      if (bf)
        cuda::biasGrad<bf16>(reinterpret_cast<const bf16 *>(dy),
                             reinterpret_cast<bf16 *>(db), M, N, ws, s);
      else
        cuda::biasGrad<float>(reinterpret_cast<const float *>(dy),
                              reinterpret_cast<float *>(db), M, N, ws, s);
    };
  }
  throw ProgramError(where + ": not a linear kernel");
}

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

std::function<void()> CudaBackend::compileKernel(const KernelArgs &a,
                                                 const Instruction &instruction,
                                                 const std::string &where) {
  // Each call captures plain pointers and sizes by value: it outlives `a`.
  std::vector<uint8_t *> p;
  for (const BufferInfo *buffer : a.buffers)
    p.push_back(arena + buffer->offset);
  auto f = [p](int i) { return reinterpret_cast<float *>(p[i]); };
  auto i32 = [p](int i) { return reinterpret_cast<int32_t *>(p[i]); };
  cudaStream_t s = compute;
  int *bad = badId;
  void *ws = workspace;
  size_t wsBytes = workspaceSize;
  const std::vector<float> &floats = instruction.floats;
  int64_t rows = a.rows, channels = a.channels, vocab = a.vocab,
          size = a.size, batch = a.batch, seq = a.seq,
          positions = a.positions;

  auto typed = [&](auto tag) -> std::function<void()> {
    using T = typename decltype(tag)::type;
    auto t = [p](int i) { return reinterpret_cast<T *>(p[i]); };
    cuda::AttentionShape attention{a.batch,   a.seq,     a.heads,
                                   a.kvHeads, a.headDim, a.causal,
                                   a.ropeTheta};
    // Every kernel is listed (no default): a kernel added to Kernels.def
    // fails to build here until the CUDA backend runs it.
    switch (a.kernel) {
    case KernelId::Linear:
    case KernelId::LinearBias:
    case KernelId::LinearGradInput:
    case KernelId::LinearGradWeight:
    case KernelId::LinearGradWeightBias:
      return compileLinear(a, where);
    // Kernels without a storage type of their own.
    case KernelId::AdamW: {
      cuda::AdamWConfig config{floats[0], floats[1], floats[2], floats[3]};
      return [=] {
        cuda::adamw(f(0), f(1), f(2), f(3), i32(4), f(5), f(6), f(7), f(8),
                    size, config, s);
      };
    }
    case KernelId::Fill: {
      float value = floats[0];
      switch (a.buffers[0]->dtype) {
      case DType::I32:
        return [=] {
          cuda::fillI32(i32(0), static_cast<int32_t>(value), size, s);
        };
      case DType::BF16:
        return [=] {
          cuda::fill<bf16>(reinterpret_cast<bf16 *>(p[0]), value, size, s);
        };
      case DType::F32:
        break;
      }
      return [=] { cuda::fill<float>(f(0), value, size, s); };
    }
    case KernelId::AddI32:
      return [=] { cuda::addI32(i32(0), i32(1), i32(2), size, s); };
    case KernelId::Copy: {
      size_t bytes = a.buffers[1]->bytes;
      return [=] { cuda::copyBytes(p[0], p[1], bytes, s); };
    }
    case KernelId::Cast: {
      DType from = a.buffers[0]->dtype, to = a.buffers[1]->dtype;
      int64_t elements = a.buffers[1]->elements;
      if (from == DType::F32 && to == DType::BF16)
        return [=] {
          cuda::cast<float, bf16>(f(0), reinterpret_cast<bf16 *>(p[1]),
                                  elements, s);
        };
      if (from == DType::BF16 && to == DType::F32)
        return [=] {
          cuda::cast<bf16, float>(reinterpret_cast<const bf16 *>(p[0]), f(1),
                                  elements, s);
        };
      size_t bytes = a.buffers[1]->bytes;
      return [=] { cuda::copyBytes(p[0], p[1], bytes, s); };
    }
    case KernelId::FlatPack:
    case KernelId::FlatUnpack: {
      int elementBytes = int(dtypeBytes(a.buffers[0]->dtype));
      int64_t size = a.size, rows = a.rows, columns = a.channels,
              offset = a.inner;
      if (a.kernel == KernelId::FlatPack)
        return [=] {
          cuda::flatPack(p[0], p[1], size, rows, columns, offset,
                         elementBytes, s);
        };
      return [=] {
        cuda::flatUnpack(p[0], p[1], size, rows, columns, offset,
                         elementBytes, s);
      };
    }
    case KernelId::SliceBlock: {
      int elementBytes = int(dtypeBytes(a.buffers[0]->dtype));
      int64_t outer = a.outer, blockDim = a.blockDim, inner = a.inner,
              blocks = a.blocks;
      return [=] {
        cuda::sliceBlock(p[0], i32(1), p[2], outer, blockDim, inner, blocks,
                         elementBytes, bad, s);
      };
    }
    case KernelId::VocabParallelLoss:
      return [=] {
        cuda::vocabParallelLoss(f(0), f(1), f(2), f(3), rows, ws, s);
      };
    // Kernels of the storage type T.
    case KernelId::Embedding:
      return [=] {
        cuda::embedding<T>(i32(0), t(1), t(2), rows, vocab, channels, bad, s);
      };
    case KernelId::EmbeddingGradAdd: {
      size_t bytes = a.buffers[3]->bytes;
      return [=] {
        if (p[2] != p[3])
          cuda::copyBytes(p[2], p[3], bytes, s);
        cuda::embeddingGrad<T>(t(0), i32(1), t(3), rows, vocab, channels,
                               /*accumulate=*/true, ws, bad, s);
      };
    }
    case KernelId::EmbeddingGrad:
      return [=] {
        cuda::embeddingGrad<T>(t(0), i32(1), t(2), rows, vocab, channels,
                               /*accumulate=*/false, ws, bad, s);
      };
    case KernelId::PositionEmbedding:
      return [=] {
        cuda::positionEmbedding<T>(t(0), t(1), t(2), batch, seq, channels, s);
      };
    case KernelId::PositionEmbeddingGrad:
      return [=] {
        cuda::positionEmbeddingGrad<T>(t(0), t(1), batch, seq, positions,
                                       channels, s);
      };
    case KernelId::LayerNorm: {
      float eps = floats[0];
      return [=] {
        cuda::layerNorm<T>(t(0), t(1), t(2), t(3), rows, channels, eps, s);
      };
    }
    case KernelId::LayerNormGrad: {
      float eps = floats[0];
      return [=] {
        cuda::layerNormGrad<T>(t(0), t(1), t(2), t(3), t(4), t(5), rows,
                               channels, eps, ws, s);
      };
    }
    case KernelId::RMSNorm: {
      float eps = floats[0];
      return [=] {
        cuda::rmsNorm<T>(t(0), t(1), t(2), rows, channels, eps, s);
      };
    }
    case KernelId::RMSNormGrad: {
      float eps = floats[0];
      return [=] {
        cuda::rmsNormGrad<T>(t(0), t(1), t(2), t(3), t(4), rows, channels,
                             eps, ws, s);
      };
    }
    case KernelId::Gelu:
      return [=] { cuda::gelu<T>(t(0), t(1), size, s); };
    case KernelId::GeluGrad:
      return [=] { cuda::geluGrad<T>(t(0), t(1), t(2), size, s); };
    case KernelId::Swiglu:
      return [=] { cuda::swiglu<T>(t(0), t(1), t(2), size, s); };
    case KernelId::SwigluGrad:
      return [=] {
        cuda::swigluGrad<T>(t(0), t(1), t(2), t(3), t(4), size, s);
      };
    case KernelId::Add:
      return [=] { cuda::add<T>(t(0), t(1), t(2), size, s); };
    case KernelId::Scale: {
      float factor = floats[0];
      return [=] { cuda::scale<T>(t(0), factor, t(1), size, s); };
    }
    case KernelId::Attention:
      return [=] {
        cuda::attention<T>(t(0), t(1), t(2), t(3), attention, ws, wsBytes, s);
      };
    case KernelId::AttentionGrad:
      return [=] {
        cuda::attentionGrad<T>(t(0), t(1), t(2), t(3), t(4), t(5), t(6),
                               attention, ws, wsBytes, s);
      };
    case KernelId::SoftmaxCrossEntropy:
      return [=] {
        cuda::softmaxCrossEntropy<T>(t(0), i32(1), f(2), rows, vocab, ws, bad,
                                     s);
      };
    case KernelId::SoftmaxCrossEntropyGrad:
      return [=] {
        cuda::softmaxCrossEntropyGrad<T>(f(0), t(1), i32(2), t(3), rows, vocab,
                                         bad, s);
      };
    case KernelId::VocabParallelEmbedding:
      return [=] {
        cuda::vocabParallelEmbedding<T>(i32(0), t(1), i32(2), t(3), rows,
                                        vocab, channels, bad, s);
      };
    case KernelId::VocabParallelEmbeddingGrad:
      return [=] {
        cuda::vocabParallelEmbeddingGrad<T>(t(0), i32(1), i32(2), t(3), rows,
                                            vocab, channels, ws, bad, s);
      };
    case KernelId::VocabParallelMax:
      return [=] { cuda::vocabParallelMax<T>(t(0), f(1), rows, vocab, s); };
    case KernelId::VocabParallelTargetLogit:
      return [=] {
        cuda::vocabParallelTargetLogit<T>(t(0), i32(1), i32(2), f(3), rows,
                                          vocab, bad, s);
      };
    case KernelId::VocabParallelSumExp:
      return [=] {
        cuda::vocabParallelSumExp<T>(t(0), f(1), f(2), rows, vocab, s);
      };
    case KernelId::VocabParallelCrossEntropyGrad:
      return [=] {
        cuda::vocabParallelCrossEntropyGrad<T>(f(0), t(1), i32(2), i32(3),
                                               f(4), f(5), t(6), rows, vocab,
                                               bad, s);
      };
    case KernelId::VocabParallelMaskedMax: {
      int64_t logical = a.logicalVocab;
      return [=] {
        cuda::vocabParallelMax<T>(t(0), f(2), rows, vocab, s, i32(1),
                                  logical);
      };
    }
    case KernelId::VocabParallelMaskedSumExp: {
      int64_t logical = a.logicalVocab;
      return [=] {
        cuda::vocabParallelSumExp<T>(t(0), f(1), f(3), rows, vocab, s, i32(2),
                                     logical);
      };
    }
    case KernelId::VocabParallelMaskedCrossEntropyGrad: {
      int64_t logical = a.logicalVocab;
      return [=] {
        cuda::vocabParallelCrossEntropyGrad<T>(f(0), t(1), i32(2), i32(3),
                                               f(4), f(5), t(6), rows, vocab,
                                               bad, s, logical);
      };
    }
    case KernelId::NumKernels:
      break;
    }
    throw ProgramError(where + ": invalid kernel id");
  };
  if (a.floatType == DType::BF16)
    return typed(Tag<bf16>{});
  return typed(Tag<float>{});
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

CudaBackend::CollectivePlan
CudaBackend::compileCollective(const Program &program,
                               const Instruction &instruction,
                               const std::string &where) {
  const Collective &collective = *instruction.collective;
  std::string what = collectiveName(instruction, where);
  comm::Communicator *group =
      &collectiveGroup(program, instruction, communicators, where);
#ifndef PARTITION_HAVE_NCCL
  (void)group;
  throw ProgramError(what + " needs NCCL, but this CUDA backend was built "
                            "without it");
#else
  auto *nccl = dynamic_cast<comm::NcclCommunicator *>(group);
  if (!nccl)
    throw ProgramError(what + ": the CUDA backend needs NCCL communicators "
                              "for mesh axes '" +
                       communicators->groupName(collective.axes) + "'");
  if (nccl->device() != device)
    throw ProgramError(what + ": the communicator is on device " +
                       std::to_string(nccl->device()) + ", the backend on " +
                       std::to_string(device));
  CollectivePlan plan;
  plan.communicator = nccl;
  plan.stream = nccl->stream();
  cudaStream_t commStream = nccl->stream();
  cudaStream_t computeStream = compute;
  cudaEvent_t ready = computeReady;
  comm::ReduceOp op = reduceOpOf(collective.reduce);
  std::string label = collective.label;
  // The communication stream starts after everything enqueued so far on
  // the compute stream, and after overlapping collectives of other groups.
  auto startAfter = [=](const std::vector<cudaEvent_t> &others) {
    checkCuda(cudaEventRecord(ready, computeStream), "cudaEventRecord", what);
    checkCuda(cudaStreamWaitEvent(commStream, ready, 0),
              "cudaStreamWaitEvent", what);
    for (cudaEvent_t other : others)
      checkCuda(cudaStreamWaitEvent(commStream, other, 0),
                "cudaStreamWaitEvent", what);
  };

  DType dtype = program.buffers[instruction.args[0]].dtype;
  for (uint32_t arg : instruction.args)
    plan.ranges.push_back(rangeOf(program.buffers[arg]));

  if (collective.kind == CollectiveKind::AllReduce) {
    std::vector<comm::NcclCommunicator::Span> spans;
    for (uint32_t arg : instruction.args) {
      const BufferInfo &buffer = program.buffers[arg];
      if (buffer.dtype != dtype)
        throw ProgramError(what + ": a bucket of " + dtypeName(dtype) +
                           " and " + dtypeName(buffer.dtype) +
                           " buffers; a bucket holds one type");
      spans.push_back({arena + buffer.offset, size_t(buffer.elements)});
    }
    comm::DataType type = commType(dtype);
    // One NCCL group per bucket: no packing copy, one launch.
    plan.call = [=](const std::vector<cudaEvent_t> &others) {
      startAfter(others);
      nccl->enqueueAllReduceBucket(spans.data(), spans.size(), type, op,
                                   {label.c_str(), currentStep});
    };
    return plan;
  }

  const BufferInfo &input = program.buffers[instruction.args[0]];
  const BufferInfo &output = program.buffers[instruction.args[1]];
  if (output.dtype != dtype)
    throw ProgramError(what + ": input " + dtypeName(dtype) + ", output " +
                       dtypeName(output.dtype));
  uint8_t *in = arena + input.offset;
  uint8_t *out = arena + output.offset;
  bool gather = collective.kind == CollectiveKind::AllGather;
  const BufferInfo &block = gather ? input : output;
  int64_t outer = 1, inner = 1;
  for (uint32_t d = 0; d < collective.dim; ++d)
    outer *= block.shape[d];
  for (size_t d = collective.dim + 1; d < block.shape.size(); ++d)
    inner *= block.shape[d];
  int64_t blockDim = block.shape[collective.dim];
  int64_t blocks = nccl->size();
  size_t count = size_t(block.elements);
  comm::DataType type = commType(dtype);
  int elementBytes = int(dtypeBytes(dtype));
  if (outer == 1) {
    if (gather)
      plan.call = [=](const std::vector<cudaEvent_t> &others) {
        startAfter(others);
        nccl->enqueueAllGather(in, out, count, type,
                               {label.c_str(), currentStep});
      };
    else
      plan.call = [=](const std::vector<cudaEvent_t> &others) {
        startAfter(others);
        nccl->enqueueReduceScatter(in, out, count, type, op,
                                   {label.c_str(), currentStep});
      };
    return plan;
  }
  // Blocks along an inner dimension go through the staging buffer, which
  // takes part in the overlap checks as the range just past the arena.
  uint8_t *packed = staging;
  ByteRange stagingRange{arenaSize, arenaSize + count * size_t(blocks) *
                                                size_t(elementBytes)};
  plan.ranges.push_back(stagingRange);
  if (gather) {
    plan.call = [=](const std::vector<cudaEvent_t> &others) {
      startAfter(others);
      nccl->enqueueAllGather(in, packed, count, type,
                             {label.c_str(), currentStep});
      cuda::unpackBlocks(packed, out, outer, blockDim, inner, blocks,
                         elementBytes, commStream);
    };
    return plan;
  }
  // The packing runs on the compute stream, before the collective starts.
  plan.computeRanges = {rangeOf(input), stagingRange};
  plan.call = [=](const std::vector<cudaEvent_t> &others) {
    cuda::packBlocks(in, packed, outer, blockDim, inner, blocks, elementBytes,
                     computeStream);
    startAfter(others);
    nccl->enqueueReduceScatter(packed, out, count, type, op,
                               {label.c_str(), currentStep});
  };
  return plan;
#endif
}

CudaBackend::CollectivePlan
CudaBackend::compileTransfer(const Program &program,
                             const Instruction &instruction,
                             const std::string &where) {
  std::string what = transferName(instruction, where);
  TransferRoute route =
      transferRoute(program, instruction, communicators, where);
#ifndef PARTITION_HAVE_NCCL
  (void)route;
  throw ProgramError(what + " needs NCCL, but this CUDA backend was built "
                            "without it");
#else
  auto *nccl = dynamic_cast<comm::NcclCommunicator *>(route.group);
  if (!nccl)
    throw ProgramError(what + ": the CUDA backend needs an NCCL "
                              "communicator for its pair of stages");
  if (nccl->device() != device)
    throw ProgramError(what + ": the communicator is on device " +
                       std::to_string(nccl->device()) + ", the backend on " +
                       std::to_string(device));
  const BufferInfo &buffer = program.buffers[instruction.args[0]];
  CollectivePlan plan;
  plan.communicator = nccl;
  plan.stream = nccl->stream();
  cudaStream_t commStream = nccl->stream();
  cudaStream_t computeStream = compute;
  cudaEvent_t ready = computeReady;
  uint8_t *data = arena + buffer.offset;
  size_t bytes = buffer.bytes;
  int peer = route.peer;
  std::string label = instruction.transfer->label;
  std::string peerText = route.peerText;
  auto startAfter = [=](const std::vector<cudaEvent_t> &others) {
    checkCuda(cudaEventRecord(ready, computeStream), "cudaEventRecord", what);
    checkCuda(cudaStreamWaitEvent(commStream, ready, 0),
              "cudaStreamWaitEvent", what);
    for (cudaEvent_t other : others)
      checkCuda(cudaStreamWaitEvent(commStream, other, 0),
                "cudaStreamWaitEvent", what);
  };
  if (!instruction.transfer->send) {
    plan.ranges = {rangeOf(buffer)};
    plan.call = [=](const std::vector<cudaEvent_t> &others) {
      startAfter(others);
      nccl->enqueueRecvBytes(data, bytes, peer,
                             {label.c_str(), currentStep, peerText.c_str()});
    };
    return plan;
  }
  // The staging copy is this send's alone: only the next run of the same
  // instruction overwrites it, after run()'s join has waited for the send.
  void *copy = nullptr;
  checkCuda(cudaMalloc(&copy, std::max<size_t>(bytes, 1)), "cudaMalloc",
            what + " (staging copy)");
  sendStaging.push_back(copy);
  // A range of its own past the arena and the staging buffer, which no
  // kernel touches: nothing on the compute stream waits for the send.
  uint64_t base = arenaSize + stagingSize + sendStagingSize;
  sendStagingSize += bytes;
  plan.ranges = {ByteRange{base, base + bytes}};
  plan.computeRanges = {rangeOf(buffer)};
  plan.call = [=](const std::vector<cudaEvent_t> &others) {
    checkCuda(cudaMemcpyAsync(copy, data, bytes, cudaMemcpyDeviceToDevice,
                              computeStream),
              "cudaMemcpyAsync", what);
    startAfter(others);
    nccl->enqueueSendBytes(copy, bytes, peer,
                           {label.c_str(), currentStep, peerText.c_str()});
  };
  return plan;
#endif
}

} // namespace

std::unique_ptr<Backend>
createCudaBackend(const Program &program,
                  const comm::MeshCommunicators *communicators, int device) {
  return std::make_unique<CudaBackend>(program, communicators, device);
}

} // namespace partition::runtime
