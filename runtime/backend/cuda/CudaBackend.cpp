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

#include "runtime/backend/cuda/CudaBackendImpl.h"
#include "runtime/backend/cuda/cublas/CublasLibrary.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace partition::runtime {
namespace cudabackend {

CudaBackend::CudaBackend(const Program &program,
                         const comm::MeshCommunicators *communicators,
                         int device, const OffloadOptions &offload)
    : device(device), arenaSize(program.arenaBytes),
      communicators(communicators) {
  const char *tf32Setting = std::getenv("PARTITION_CUDA_TF32");
  tf32 = tf32Setting && *tf32Setting && std::strcmp(tf32Setting, "0") != 0;
  const std::string setup = "CUDA backend on device " + std::to_string(device);
  checkCuda(cudaSetDevice(device), "cudaSetDevice", setup);

  // Check every instruction before allocating anything large.
  std::vector<std::vector<KernelArgs>> checked = checkAndSize(program);
  allocate(program, setup);
  // ZeRO-Offload: the updates on tiered moments run on the CPU, unless
  // PARTITION_OFFLOAD_UPDATE=gpu keeps them on the GPU (staged; for
  // comparing the two).
  const char *updateSetting = std::getenv("PARTITION_OFFLOAD_UPDATE");
  bool gpuUpdates = updateSetting && std::strcmp(updateSetting, "gpu") == 0;
  if (updateSetting && *updateSetting && !gpuUpdates &&
      std::strcmp(updateSetting, "cpu") != 0)
    throw ProgramError(setup + ": PARTITION_OFFLOAD_UPDATE is '" +
                       updateSetting + "'; give cpu (the default) or gpu");
  if (program.hasTiers())
    tiers = std::make_unique<CudaTiers>(program, offload, compute,
                                        !gpuUpdates, setup);
  writeAxisIndices(program);
  for (size_t f = 0; f < program.functions.size(); ++f)
    functions.push_back(
        compileFunction(program, program.functions[f], checked[f], setup));
  if (tiers)
    tiers->allocateStaging(setup);
  checkCuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize", setup);
}

namespace {

/// cudaMalloc (at least 256 bytes), or the one-line error with the device's
/// free memory.
void *allocateDevice(size_t bytes, const char *what,
                     const std::string &setup) {
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
}

} // namespace

void CudaBackend::allocate(const Program &program, const std::string &setup) {
  auto allocate = [&](size_t bytes, const char *what) {
    return allocateDevice(bytes, what, setup);
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
  if (routingExperts > 0) {
    size_t bytes = size_t(routingExperts) * sizeof(unsigned long long);
    routingKept = static_cast<unsigned long long *>(
        allocate(bytes, "expert load counters"));
    checkCuda(cudaMemset(routingKept, 0, bytes), "cudaMemset", setup);
    routingAux =
        static_cast<double *>(allocate(sizeof(double), "router loss sum"));
    checkCuda(cudaMemset(routingAux, 0, sizeof(double)), "cudaMemset", setup);
  }
  checkCuda(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking),
            "cudaStreamCreateWithFlags", setup);
  checkCuda(cudaEventCreateWithFlags(&computeReady, cudaEventDisableTiming),
            "cudaEventCreateWithFlags", setup);
  // cuBLAS is loaded here, not at start-up (cublas/CublasLibrary.h).
  if (const std::string &missing = cuda::loadCublas(); !missing.empty())
    throw ProgramError(setup + ": " + missing);
  checkCublas(cublasLtCreate(&lt), "cublasLtCreate", setup);
  checkCublas(cublasCreate(&blas), "cublasCreate", setup);
  checkCublas(cublasSetStream(blas, compute), "cublasSetStream", setup);
  checkCublas(cublasSetWorkspace(blas, gemmWorkspace, gemmWorkspaceSize),
              "cublasSetWorkspace", setup);
}

std::unique_ptr<CudaBackend::CompiledFunction>
CudaBackend::compileFunction(const Program &program, const Function &function,
                             const std::vector<KernelArgs> &checked,
                             const std::string &setup) {
  auto compiled = std::make_unique<CompiledFunction>();
  compiled->name = function.name;
  std::vector<cuda::PlannedInstruction> planned;
  std::vector<std::function<void(const std::vector<cudaEvent_t> &)>>
      collectiveCalls(function.instructions.size());
  std::map<cudaStream_t, int> streamIds;
#ifdef PARTITION_HAVE_NCCL
  std::vector<comm::NcclCommunicator *> communicatorOf(
      function.instructions.size(), nullptr);
#endif
  // What the offload's tiers run, per instruction (CudaTiers::Action).
  std::vector<CudaTiers::Action> tierActions;
  if (tiers)
    tierActions = tiers->compileFunction(program, function, arena, setup);
  for (size_t i = 0; i < function.instructions.size(); ++i) {
    const Instruction &instruction = function.instructions[i];
    std::string where = function.name + " instruction #" + std::to_string(i);
    Step step;
    cuda::PlannedInstruction plannedInstruction;
    if (tiers && tierActions[i].kind != CudaTiers::Action::Kind::None) {
      // Tier copies run on the tiers' copy stream (or the host's engine)
      // after an event the compute stream records where they start, so the
      // stream plan orders them after overlapping collectives as a kernel;
      // a CPU update is a transfer on the copy stream to it: the later
      // kernels that touch its bytes wait for it, nothing else does.
      const CudaTiers::Action &action = tierActions[i];
      for (uint32_t buffer : action.buffers)
        plannedInstruction.ranges.push_back(rangeOf(program.buffers[buffer]));
      step.stream = tiers->streamOf(action);
      switch (action.kind) {
      case CudaTiers::Action::Kind::Update:
        // It starts after the compute stream's work (CudaHostUpdates): its
        // own bytes are also compute ranges, so that this includes a
        // bucket's all-reduce of its gradient that nothing waited for yet.
        step.collective = true;
        plannedInstruction.collective = true;
        plannedInstruction.transfer = true;
        plannedInstruction.ordersCollectives = true;
        plannedInstruction.computeRanges = plannedInstruction.ranges;
        for (uint32_t buffer : action.shared)
          plannedInstruction.ranges.push_back(rangeOf(program.buffers[buffer]));
        plannedInstruction.stream =
            streamIds.emplace(step.stream, int(streamIds.size())).first->second;
        collectiveCalls[i] = [this, action](const std::vector<cudaEvent_t> &) {
          tiers->run(action);
        };
        compiled->names.push_back(where + " (adamw on the CPU)");
        break;
      case CudaTiers::Action::Kind::Start:
        step.call = [this, action] { tiers->run(action); };
        compiled->names.push_back(tierCopyName(instruction, where));
        break;
      case CudaTiers::Action::Kind::Wait:
        step.call = [this, action] { tiers->run(action); };
        compiled->names.push_back(where + " (wait)");
        break;
      case CudaTiers::Action::Kind::Skip:
      case CudaTiers::Action::Kind::None:
        step.call = [] {};
        compiled->names.push_back(where + " (done by the CPU's update)");
        break;
      }
      compiled->spans.push_back(traceSpanOf(program, function, instruction));
      if (profile.enabled)
        compiled->costs.push_back(
            action.kind == CudaTiers::Action::Kind::Update
                ? describeKernel(checked[i])
                : describeCollective(program, instruction));
    } else if (instruction.collective || instruction.transfer) {
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
      communicatorOf[i] = plan.communicator;
#endif
      compiled->names.push_back(instruction.transfer
                                    ? transferName(instruction, where)
                                    : collectiveName(instruction, where));
      compiled->spans.push_back(traceSpanOf(program, function, instruction));
      if (profile.enabled)
        compiled->costs.push_back(describeCollective(program, instruction));
    } else if (instruction.waitFor) {
      // Nothing to launch: the stream plan makes the compute stream wait
      // for the started collective's event here.
      plannedInstruction.waitFor = *instruction.waitFor;
      step.stream = compute;
      step.call = [] {};
      compiled->spans.push_back(traceSpanOf(program, function, instruction));
      compiled->names.push_back(where + " (wait)");
      if (profile.enabled)
        compiled->costs.push_back(describeCollective(program, instruction));
    } else {
      const KernelArgs &args = checked[i];
      for (const BufferInfo *buffer : args.buffers)
        plannedInstruction.ranges.push_back(rangeOf(*buffer));
      step.stream = compute;
      step.call = compileKernel(args, instruction, where);
      compiled->spans.push_back(traceSpanOf(program, function, instruction));
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
  // A ZeRO-1/2 step's last all-gathers run on into its next run (Backend.h,
  // carriedWaits; StreamPlan.h).
  for (size_t w : carriedWaits(function))
    if (planned[w].waitFor != cuda::PlannedInstruction::kNoWait) {
      planned[w].carried = true;
      const cuda::PlannedInstruction &gather = planned[planned[w].waitFor];
      compiled->carriedRanges.insert(compiled->carriedRanges.end(),
                                     gather.ranges.begin(),
                                     gather.ranges.end());
#ifdef PARTITION_HAVE_NCCL
      comm::NcclCommunicator *communicator = communicatorOf[planned[w].waitFor];
      if (communicator &&
          std::find(compiled->carriedCommunicators.begin(),
                    compiled->carriedCommunicators.end(),
                    communicator) == compiled->carriedCommunicators.end())
        compiled->carriedCommunicators.push_back(communicator);
#endif
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
  compiled->carriedEvents = streamPlan.carriedEvents;
  // A step runs the micro-batch loop's instructions `count` times: so many
  // times their work per step.
  std::vector<int64_t> runs = instructionRuns(function);
  for (size_t i = 0; i < compiled->costs.size(); ++i) {
    compiled->costs[i].flops *= double(runs[i]);
    compiled->costs[i].bytes *= double(runs[i]);
    compiled->costs[i].executions = runs[i];
  }
  compiled->source.name = function.name;
  compiled->source.instructions.resize(function.instructions.size());
  compiled->source.loop = function.loop;
  if (function.loop) {
    for (uint32_t slice : function.loop->slices)
      compiled->slices.push_back({arena + program.buffers[slice].offset,
                                  program.buffers[slice].bytes});
    for (size_t i = function.loop->begin; i < function.loop->end; ++i)
      if (compiled->steps[i].collective)
        compiled->loopEvents.push_back(streamPlan.event[i]);
  }
  compiled->source.walk = function.walk;
  if (function.walk) {
    for (const ActionRegion &region : function.walk->regions) {
      auto &copies = compiled->actionRows.emplace_back();
      for (size_t i = 0; i < region.rows.size(); ++i)
        copies.push_back(
            {arena + program.buffers[region.rowsSources[i]].offset,
             arena + program.buffers[region.rows[i]].offset,
             program.buffers[region.rows[i]].bytes});
    }
    for (size_t i = 0; i < function.instructions.size(); ++i) {
      const Instruction &instruction = function.instructions[i];
      if (compiled->steps[i].collective &&
          !(instruction.transfer && instruction.transfer->send))
        compiled->walkEvents.push_back(streamPlan.event[i]);
    }
  }
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
  return compiled;
}

CudaBackend::~CudaBackend() {
  // Destroyed during exit after the CUDA runtime has shut down: the driver
  // frees everything with the process.
  if (cudaSetDevice(device) == cudaErrorCudartUnloading)
    return;
  // Collectives carried past the last run: done before anything is freed.
  for (const auto &function : functions)
    if (function->carriedPending)
      for (size_t event : function->carriedEvents)
        cudaEventSynchronize(function->done[event]);
  if (compute)
    cudaStreamSynchronize(compute);
  // Its copies and pinned memory, before the compute stream they use.
  tiers.reset();
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
  if (blas)
    cublasDestroy(blas);
  if (lt)
    cublasLtDestroy(lt);
  if (computeReady)
    cudaEventDestroy(computeReady);
  if (compute)
    cudaStreamDestroy(compute);
  for (void *memory : sendStaging)
    cudaFree(memory);
  for (void *memory : pinnedCounts)
    cudaFreeHost(memory);
  for (void *memory : {static_cast<void *>(arena), workspace, gemmWorkspace,
                       static_cast<void *>(staging),
                       static_cast<void *>(badId),
                       static_cast<void *>(routingKept),
                       static_cast<void *>(routingAux)})
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
  // Its own carried collectives are waited for where this run first
  // touches their bytes (the stream plan); another function's, now.
  completeCarried(&function);
  function.carriedPending = false;
  bool record = false;
  if (profile.enabled) {
    record = function.runs++ >= profile.skip;
    if (record)
      ++function.profiledRuns;
  }
  // --trace waits for each instruction: the spans are the ranges' times.
  walkFunctionTraced(
      function.source, trace, step,
      [&](size_t begin, size_t end) {
        launchRange(function, begin, end, step, record);
      },
      [&](int64_t run) { nextLoopRun(function, run); },
      [&](size_t action) { nextAction(function, action); });
  join(function, step);
}

void CudaBackend::launchRange(CompiledFunction &function, size_t begin,
                              size_t end, int64_t step, bool record) {
  for (size_t i = begin; i < end; ++i) {
    Step &s = function.steps[i];
    TraceRecorder::Clock::time_point start = TraceRecorder::Clock::now();
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
    // Launch errors (not sticky) are only visible now.
    checkCuda(cudaPeekAtLastError(), "launch", function.names[i]);
    if (trace) {
      // --trace: the instruction's span ends when its stream has finished
      // it (the run is serialised; PARTITION_PROFILE times with events).
      checkCuda(cudaStreamSynchronize(s.stream), "cudaStreamSynchronize",
                function.names[i]);
      trace->add(function.spans[i], start, TraceRecorder::Clock::now(), step);
    }
  }
  if (!record)
    return;
  // The events are reused by the micro-batch loop's next run: add their
  // times now.
  checkCuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize", function.name);
  for (size_t i = begin; i < end; ++i) {
    float ms = 0;
    if (cudaEventElapsedTime(&ms, function.starts[i], function.ends[i]) ==
        cudaSuccess)
      function.milliseconds[i] += ms;
  }
  cudaGetLastError();
}

void CudaBackend::nextLoopRun(CompiledFunction &function, int64_t run) {
  for (size_t event : function.loopEvents)
    checkCuda(cudaStreamWaitEvent(compute, function.done[event], 0),
              "cudaStreamWaitEvent", function.name + " micro-batch loop");
  // The program checked that every run's rows lie in its input, and that
  // none is a slice refilled before it is read.
  const int64_t stride = function.source.loop->stride;
  for (auto [slice, bytes] : function.slices)
    checkCuda(cudaMemcpyAsync(slice, slice + run * stride * bytes, bytes,
                              cudaMemcpyDeviceToDevice, compute),
              "cudaMemcpyAsync", function.name + " micro-batch loop");
}

void CudaBackend::nextAction(CompiledFunction &function, size_t index) {
  const std::string where = function.name + " action walk";
  for (size_t event : function.walkEvents)
    checkCuda(cudaStreamWaitEvent(compute, function.done[event], 0),
              "cudaStreamWaitEvent", where);
  // The program checked that every action's rows lie in its input.
  const WalkAction &action = function.source.walk->actions[index];
  for (const CompiledFunction::RowsCopy &copy :
       function.actionRows[action.region])
    checkCuda(cudaMemcpyAsync(copy.rows,
                              copy.input + action.microbatch * copy.bytes,
                              copy.bytes, cudaMemcpyDeviceToDevice, compute),
              "cudaMemcpyAsync", where);
}

bool CudaBackend::takeRoutingCounts(RoutingCounts &counts) {
  counts = RoutingCounts{};
  counts.exchangedBytes = routingExchanged;
  routingExchanged = 0;
  if (!routingKept)
    return true;
  // Once per step, after run() has joined the compute stream: one small
  // copy back, then the counters restart (on the compute stream, ordered
  // before the next step's routes).
  const char *what = "reading the expert load";
  checkCuda(cudaSetDevice(device), "cudaSetDevice", what);
  checkCuda(cudaStreamSynchronize(compute), "cudaStreamSynchronize", what);
  std::vector<unsigned long long> kept(size_t(routingExperts), 0);
  checkCuda(cudaMemcpy(kept.data(), routingKept,
                       kept.size() * sizeof(unsigned long long),
                       cudaMemcpyDeviceToHost),
            "cudaMemcpy", what);
  checkCuda(cudaMemsetAsync(routingKept, 0,
                            kept.size() * sizeof(unsigned long long), compute),
            "cudaMemsetAsync", what);
  double aux = 0;
  checkCuda(cudaMemcpy(&aux, routingAux, sizeof(double),
                       cudaMemcpyDeviceToHost),
            "cudaMemcpy", what);
  checkCuda(cudaMemsetAsync(routingAux, 0, sizeof(double), compute),
            "cudaMemsetAsync", what);
  counts.auxLoss = aux;
  counts.auxGroups = routingAuxGroups;
  routingAuxGroups = 0;
  // Every choice is kept by its expert or dropped past its capacity.
  double total = 0;
  counts.kept.assign(kept.begin(), kept.end());
  for (double k : counts.kept)
    total += k;
  counts.choices = routingChoices;
  counts.dropped = std::max(0.0, routingChoices - total);
  routingChoices = 0;
  return true;
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
    if (std::find(function.carriedCommunicators.begin(),
                  function.carriedCommunicators.end(),
                  communicator) == function.carriedCommunicators.end())
      communicator->synchronize({what.c_str(), step});
    else
      // Its last collectives run on into the next run: wait for the
      // compute stream, which waited for all the others (against its
      // timeout: a collective it waits for may hang).
      communicator->synchronizeWith(compute, {what.c_str(), step});
#else
  (void)step;
#endif
  checkCuda(cudaStreamSynchronize(compute), "cudaStreamSynchronize",
            function.name);
  function.carriedPending = !function.carriedEvents.empty();
  // Every tier copy was waited for by the compute stream, so this returns
  // at once; the host tier's bytes are final for read() either way.
  if (tiers)
    tiers->synchronize(function.name);
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
                       "axis index, a position, or an MoE expert id, slot or "
                       "count out of range) reached a kernel; the "
                       "step's results are invalid");
  }
}

void CudaBackend::completeCarried(const CompiledFunction *except,
                                  std::optional<ByteRange> only) {
  for (const auto &function : functions) {
    if (function.get() == except || !function->carriedPending ||
        (only && !cuda::overlapsAny(function->carriedRanges, {*only})))
      continue;
    std::string what = "carried collectives of " + function->name;
#ifdef PARTITION_HAVE_NCCL
    // Polled against the communicators' timeout.
    for (comm::NcclCommunicator *communicator :
         function->carriedCommunicators)
      communicator->synchronize({what.c_str(), currentStep});
#endif
    for (size_t event : function->carriedEvents)
      checkCuda(cudaStreamWaitEvent(compute, function->done[event], 0),
                "cudaStreamWaitEvent", what);
    function->carriedPending = false;
  }
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

} // namespace cudabackend

std::unique_ptr<Backend>
createCudaBackend(const Program &program,
                  const comm::MeshCommunicators *communicators, int device,
                  const OffloadOptions &offload) {
  return std::make_unique<cudabackend::CudaBackend>(program, communicators,
                                                    device, offload);
}

} // namespace partition::runtime
