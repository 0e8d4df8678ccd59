//===- CpuBackend.cpp - runs a program with the CPU kernels ---------------===//
//
// The CPU backend's executor: one aligned host arena, every instruction
// checked and compiled once (the kernels in CpuDispatch.cpp), collectives
// and transfers through the mesh's communicators, bf16 operands staged as
// fp32 copies; run() calls the compiled instructions in order, timed under
// PARTITION_PROFILE or traced under --trace.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cpu/CpuBackendImpl.h"

namespace partition::runtime {
namespace cpubackend {

CpuBackend::CpuBackend(const Program &program,
                       const comm::MeshCommunicators *communicators,
                       const OffloadOptions &offload)
    : arena(allocateAligned(program.arenaBytes)),
      communicators(communicators) {
  // Zero so that uninitialised state (moments, the step) starts at zero.
  std::memset(arena.get(), 0, program.arenaBytes);
  if (program.hostBytes > 0 || program.nvmeBytes > 0)
    tiers = std::make_unique<CpuTiers>(program, offload);
  writeAxisIndices(program);
  std::vector<std::vector<KernelArgs>> checked = checkInstructions(program);
  size_t bf16StagingElements = 0;
  for (size_t f = 0; f < program.functions.size(); ++f) {
    const Function &function = program.functions[f];
    for (size_t i = 0; i < function.instructions.size(); ++i) {
      if (!function.instructions[i].isKernel())
        continue;
      const KernelArgs &args = checked[f][i];
      std::function<void()> direct = compileBf16Gemm(args);
      if (!direct)
        direct = compileBf16Native(args);
      if (direct)
        bf16Direct.emplace(&function.instructions[i], std::move(direct));
      else
        bf16StagingElements = std::max(bf16StagingElements,
                                       stagedElements(args));
      if (args.kernel == KernelId::Attention ||
          args.kernel == KernelId::AttentionGrad ||
          args.kernel == KernelId::AttentionScaled ||
          args.kernel == KernelId::AttentionScaledGrad) {
        cpu::AttentionConfig config{args.batch,   args.seq,     args.heads,
                                    args.kvHeads, args.headDim, args.causal,
                                    args.ropeTheta, args.ropeScaling,
                                    args.window};
        workspace.size = std::max(
            {workspace.size, cpu::attentionWorkspaceSize(config),
             cpu::attentionGradWorkspaceSize(config)});
      }
    }
  }
  if (workspace.size)
    workspace.data.reset(allocateAligned(workspace.size));
  bf16Staging.resize(bf16StagingElements);
  for (size_t f = 0; f < program.functions.size(); ++f) {
    const Function &function = program.functions[f];
    CompiledFunction compiled;
    compiled.name = function.name;
    // Only the loop is needed: the instructions are compiled below.
    compiled.source.name = function.name;
    compiled.source.instructions.resize(function.instructions.size());
    compiled.source.loop = function.loop;
    compiled.source.walk = function.walk;
    if (function.loop)
      for (uint32_t slice : function.loop->slices)
        compiled.slices.push_back({arena.get() + program.buffers[slice].offset,
                                   program.buffers[slice].bytes});
    if (function.walk)
      for (const ActionRegion &region : function.walk->regions) {
        auto &copies = compiled.actionRows.emplace_back();
        for (size_t i = 0; i < region.rows.size(); ++i)
          copies.push_back(
              {arena.get() + program.buffers[region.rowsSources[i]].offset,
               arena.get() + program.buffers[region.rows[i]].offset,
               program.buffers[region.rows[i]].bytes});
      }
    compiled.tickets.assign(function.instructions.size(), -1);
    // Each tier copy's index in `tiers`, for its wait.
    std::map<size_t, size_t> tierCopies;
    for (size_t i = 0; i < function.instructions.size(); ++i) {
      const Instruction &instruction = function.instructions[i];
      std::string where = function.name + " instruction #" + std::to_string(i);
      if (instruction.tierCopy) {
        std::string name = tierCopyName(instruction, where);
        size_t copy = tiers->compile(program, instruction, arena.get(), name);
        tierCopies[i] = copy;
        if (tierStarted.size() <= copy)
          tierStarted.resize(copy + 1);
        compiled.calls.push_back([this, copy] {
          if (trace)
            tierStarted[copy] = TraceRecorder::Clock::now();
          tiers->start(copy);
        });
        compiled.names.push_back(name);
        compiled.spans.push_back(traceSpanOf(program, function, instruction));
        if (profile.enabled)
          compiled.costs.push_back(describeCollective(program, instruction));
        continue;
      }
      if (instruction.waitFor && tierCopies.count(*instruction.waitFor)) {
        size_t copy = tierCopies[*instruction.waitFor];
        size_t started = *instruction.waitFor;
        compiled.calls.push_back([this, copy, f, started] {
          tiers->wait(copy);
          if (!trace)
            return;
          // The tier track: the copy in flight, from its start to its
          // wait's return (an I/O engine says when a copy is done only
          // when asked: its end is at most this).
          trace->add(functions[f].spans[started], tierStarted[copy],
                     TraceRecorder::Clock::now(), currentStep, /*tid=*/3);
        });
        compiled.names.push_back(where + " (wait)");
        compiled.spans.push_back(traceSpanOf(program, function, instruction));
        if (profile.enabled)
          compiled.costs.push_back(describeCollective(program, instruction));
        continue;
      }
      if (instruction.waitFor) {
        compiled.calls.push_back(compileWait(f, *instruction.waitFor));
        compiled.names.push_back(where + " (wait)");
        compiled.spans.push_back(traceSpanOf(program, function, instruction));
        if (profile.enabled)
          compiled.costs.push_back(describeCollective(program, instruction));
        continue;
      }
      if (instruction.collective || instruction.transfer) {
        compiled.calls.push_back(
            instruction.transfer
                ? compileTransfer(program, instruction, where, compiled)
                : compileCollective(program, instruction, where, f, i));
        compiled.names.push_back(instruction.transfer
                                     ? transferName(instruction, where)
                                     : collectiveName(instruction, where));
        compiled.spans.push_back(traceSpanOf(program, function, instruction));
        if (profile.enabled)
          compiled.costs.push_back(describeCollective(program, instruction));
        continue;
      }
      compiled.calls.push_back(
          compile(checked[f][i], function.instructions[i]));
      compiled.names.push_back(
          function.name + " instruction #" + std::to_string(i) + " (" +
          std::string(
              lookupKernel(static_cast<uint32_t>(checked[f][i].kernel))->name) +
          ")");
      compiled.spans.push_back(traceSpanOf(program, function, instruction));
      if (profile.enabled)
        compiled.costs.push_back(describeKernel(checked[f][i]));
    }
    // A step runs the micro-batch loop's instructions `count` times: so
    // many times their work per step.
    std::vector<int64_t> runs = instructionRuns(function);
    for (size_t i = 0; i < compiled.costs.size(); ++i) {
      compiled.costs[i].flops *= double(runs[i]);
      compiled.costs[i].bytes *= double(runs[i]);
      compiled.costs[i].executions = runs[i];
    }
    compiled.seconds.assign(profile.enabled ? compiled.calls.size() : 0, 0.0);
    carryTrailingWaits(program, compiled, function);
    functions.push_back(std::move(compiled));
  }
}

CpuBackend::~CpuBackend() {
  try {
    completeCarried();
  } catch (const std::exception &) {
    // Shutting down after an error: the collective's peers are gone too.
  }
  if (!profile.enabled)
    return;
  for (const CompiledFunction &function : functions)
    if (function.profiledRuns > 0)
      printProfile(function);
}

void CpuBackend::runRange(CompiledFunction &function, size_t begin,
                          size_t end, bool record) {
  using Clock = TraceRecorder::Clock;
  bool timed = (profile.enabled && record) || trace;
  for (size_t i = begin; i < end; ++i) {
    if (!function.carriedBefore.empty() && !function.carriedBefore[i].empty())
      runCarriedBefore(function, i, record);
    Clock::time_point start = timed ? Clock::now() : Clock::time_point();
    try {
      function.calls[i]();
    } catch (const std::invalid_argument &error) {
      throw ProgramError(function.names[i] + ": " + error.what());
    }
    if (timed && (function.carriedOut.empty() || !function.carriedOut[i]))
      recordTime(function, i, start, record);
  }
}

void CpuBackend::recordTime(CompiledFunction &function, size_t index,
                            TraceRecorder::Clock::time_point start,
                            bool record) {
  TraceRecorder::Clock::time_point stop = TraceRecorder::Clock::now();
  if (profile.enabled && record)
    function.seconds[index] +=
        std::chrono::duration<double>(stop - start).count();
  if (trace) {
    trace->add(function.spans[index], start, stop, currentStep);
  }
}

void CpuBackend::readRows(const CompiledFunction &function, int64_t run) {
  // The program checked that every run's rows lie in its input, and that
  // none is a slice refilled before it is read.
  const int64_t stride = function.source.loop->stride;
  for (auto [slice, bytes] : function.slices)
    std::memcpy(slice, slice + run * stride * bytes, bytes);
}

void CpuBackend::copyActionRows(const CompiledFunction &function,
                                size_t index) {
  // The program checked that every action's rows lie in its input.
  const WalkAction &action = function.source.walk->actions[index];
  for (const CompiledFunction::RowsCopy &copy :
       function.actionRows[action.region])
    std::memcpy(copy.rows, copy.input + action.microbatch * copy.bytes,
                copy.bytes);
}

void CpuBackend::printProfile(const CompiledFunction &function) const {
  double total = 0, flops = 0;
  for (size_t i = 0; i < function.calls.size(); ++i) {
    total += function.seconds[i];
    flops += function.costs[i].flops;
  }
  double runs = double(function.profiledRuns);
  std::fprintf(stderr,
               "\nPARTITION_PROFILE %s: %lld runs profiled (%lld skipped), "
               "%.1f ms per run in kernels, matmuls %.1f GFLOP per run\n",
               function.name.c_str(),
               static_cast<long long>(function.profiledRuns),
               static_cast<long long>(function.runs - function.profiledRuns),
               1e3 * total / runs, flops / 1e9);
  printProfileTables(stderr, function.costs, function.seconds, runs,
                     /*tera=*/false);
}

void CpuBackend::writeAxisIndices(const Program &program) {
  for (size_t index : program.withRole(Role::AxisIndex)) {
    const BufferInfo &buffer = program.buffers[index];
    int32_t value = axisIndexValue(program, buffer, communicators);
    std::memcpy(arena.get() + buffer.offset, &value, sizeof(value));
  }
}

void CpuBackend::run(size_t index, int64_t step) {
  currentStep = step;
  CompiledFunction &function = functions.at(index);
  // Another function may read anything a carried collective writes.
  if (index != lastRun)
    completeCarried();
  lastRun = index;
  bool record = false;
  if (profile.enabled) {
    record = function.runs++ >= profile.skip;
    if (record)
      ++function.profiledRuns;
  }
  walkFunctionTraced(
      function.source, trace, step,
      [&](size_t begin, size_t end) {
        runRange(function, begin, end, record);
      },
      [&](int64_t run) { readRows(function, run); },
      [&](size_t action) { copyActionRows(function, action); });
  // Every send of the step has its receive on a peer that needs nothing
  // more from this rank in this step: waiting for delivery here cannot
  // deadlock, and a stuck peer is named by the send that waits.
  for (comm::Communicator *group : function.sendGroups)
    group->completeSends({function.name.c_str(), step});
}

std::function<void()>
CpuBackend::compileTransfer(const Program &program,
                            const Instruction &instruction,
                            const std::string &where,
                            CompiledFunction &function) {
  TransferRoute route =
      transferRoute(program, instruction, communicators, where);
  const BufferInfo &buffer = program.buffers[instruction.args[0]];
  uint8_t *data = arena.get() + buffer.offset;
  size_t bytes = buffer.bytes;
  std::string label = instruction.transfer->label;
  comm::Communicator *group = route.group;
  int peer = route.peer;
  std::string peerText = route.peerText;
  if (instruction.transfer->send) {
    if (std::find(function.sendGroups.begin(), function.sendGroups.end(),
                  group) == function.sendGroups.end())
      function.sendGroups.push_back(group);
    return [this, group, data, bytes, peer, label, peerText] {
      group->sendEager(data, bytes, peer, kTransferTag,
                       {label.c_str(), currentStep, peerText.c_str()});
    };
  }
  return [this, group, data, bytes, peer, label, peerText] {
    group->recvBytes(data, bytes, peer, kTransferTag,
                     {label.c_str(), currentStep, peerText.c_str()});
  };
}

std::function<void()> CpuBackend::compileWait(size_t function,
                                              uint32_t waitFor) {
  return [this, function, waitFor] {
    CompiledFunction &compiled = functions[function];
    int64_t ticket = compiled.tickets[waitFor];
    if (ticket < 0)
      return; // run synchronously at its start
    compiled.tickets[waitFor] = -1;
    CommunicationThread::Span ran = communication->wait(uint64_t(ticket));
    if (!trace)
      return;
    // The communication track: when the thread ran the collective.
    trace->add(compiled.spans[waitFor], ran.start, ran.end, currentStep,
               /*tid=*/2);
  };
}

std::function<void()>
CpuBackend::compileCollective(const Program &program,
                              const Instruction &instruction,
                              const std::string &where, size_t function,
                              size_t index) {
  const Collective &collective = *instruction.collective;
  comm::Communicator *started =
      collective.started && communicators
          ? communicators->startedGroup(collective.axes)
          : nullptr;
  comm::Communicator *group =
      started ? started
              : &collectiveGroup(program, instruction, communicators, where);
  std::vector<float> *pack = started ? &startedStaging : &staging;
  std::function<void()> body;
  std::vector<float *> addresses;
  for (uint32_t arg : instruction.args)
    addresses.push_back(
        reinterpret_cast<float *>(arena.get() + program.buffers[arg].offset));
  // The loader checked that a collective's buffers share one type.
  if (collective.kind == CollectiveKind::RingShift)
    body = compileRingShift(program, instruction, *group);
  else if (program.buffers[instruction.args[0]].dtype != DType::BF16)
    body = compileF32Collective(program, instruction, *group, addresses, pack);
  else
    body = compileBF16Collective(program, instruction, *group, addresses,
                                 pack);
  if (!started)
    return body;
  // Started: the communication thread runs it; the main thread goes on
  // until the wait. The loader checked that nothing in between touches
  // its buffers.
  if (!communication)
    communication = std::make_unique<CommunicationThread>();
  return [this, function, index, body] {
    functions[function].tickets[index] =
        int64_t(communication->start(body));
  };
}

std::function<void()> CpuBackend::compileBF16Collective(
    const Program &program, const Instruction &instruction,
    comm::Communicator &groupRef, std::vector<float *> addresses,
    std::vector<float> *pack) {
  const Collective &collective = *instruction.collective;
  comm::Communicator *group = &groupRef;

  // bf16: reduce fp32 copies (every rank's contributions summed in fp32,
  // rounded once); a gather's copies round-trip exactly.
  struct Copy {
    uint16_t *bf16;
    float *f32;
    size_t elements;
  };
  std::vector<Copy> copies;
  for (size_t i = 0; i < instruction.args.size(); ++i) {
    size_t elements = size_t(program.buffers[instruction.args[i]].elements);
    collectiveCopies.emplace_back(new float[elements]);
    collectiveCopyElements += elements;
    copies.push_back({reinterpret_cast<uint16_t *>(addresses[i]),
                      collectiveCopies.back().get(), elements});
    addresses[i] = copies.back().f32;
  }
  // An all-reduce reads and writes every buffer; a gather or scatter reads
  // its input and writes its output.
  bool allReduce = collective.kind == CollectiveKind::AllReduce;
  std::function<void()> f32 =
      compileF32Collective(program, instruction, *group, addresses, pack);
  return [copies, allReduce, f32] {
    for (size_t i = 0; i < copies.size(); ++i)
      if (allReduce || i == 0)
        cpu::widenBFloat16(copies[i].bf16, copies[i].f32, copies[i].elements);
    f32();
    for (size_t i = 0; i < copies.size(); ++i)
      if (allReduce || i == 1)
        cpu::roundToBFloat16(copies[i].f32, copies[i].bf16, copies[i].elements);
  };
}

std::function<void()>
CpuBackend::compileF32Collective(const Program &program,
                                 const Instruction &instruction,
                                 comm::Communicator &groupRef,
                                 const std::vector<float *> &addresses,
                                 std::vector<float> *pack) {
  const Collective &collective = *instruction.collective;
  comm::Communicator *group = &groupRef;
  comm::ReduceOp op = reduceOpOf(collective.reduce);
  std::string label = collective.label;
  if (collective.kind != CollectiveKind::AllReduce)
    return compileBlockCollective(program, instruction, *group, addresses[0],
                                  addresses[1], pack);
  struct Part {
    float *data;
    size_t count;
  };
  std::vector<Part> parts;
  size_t total = 0;
  for (size_t i = 0; i < instruction.args.size(); ++i) {
    const BufferInfo &buffer = program.buffers[instruction.args[i]];
    parts.push_back({addresses[i], size_t(buffer.elements)});
    total += size_t(buffer.elements);
  }
  if (parts.size() == 1)
    return [this, group, op, label, part = parts[0]] {
      group->allReduce(part.data, part.count, op, {label.c_str(), currentStep});
    };
  if (pack->size() < total)
    pack->resize(total);
  return [this, group, op, label, parts, total, pack] {
    float *packed = pack->data();
    for (const Part &part : parts) {
      std::memcpy(packed, part.data, part.count * sizeof(float));
      packed += part.count;
    }
    group->allReduce(pack->data(), total, op, {label.c_str(), currentStep});
    const float *unpacked = pack->data();
    for (const Part &part : parts) {
      std::memcpy(part.data, unpacked, part.count * sizeof(float));
      unpacked += part.count;
    }
  };
}

std::function<void()>
CpuBackend::compileRingShift(const Program &program,
                             const Instruction &instruction,
                             comm::Communicator &groupRef) {
  const BufferInfo &input = program.buffers[instruction.args[0]];
  const BufferInfo &output = program.buffers[instruction.args[1]];
  const uint8_t *in = arena.get() + input.offset;
  uint8_t *out = arena.get() + output.offset;
  size_t bytes = size_t(input.bytes);
  comm::Communicator *group = &groupRef;
  std::string label = instruction.collective->label;
  // One tag for every shift: between one pair of ranks sends arrive in
  // order, and every rank of a ring runs the same shifts in the same order.
  constexpr int kRingShiftTag = 17;
  return [this, group, in, out, bytes, label] {
    int size = group->size(), rank = group->rank();
    if (size == 1) {
      std::memcpy(out, in, bytes);
      return;
    }
    comm::Context context{label.c_str(), currentStep};
    // The send returns at once (eager), so every rank posts its send before
    // any waits for its receive: no cycle of ranks waits on another.
    group->sendEager(in, bytes, (rank + 1) % size, kRingShiftTag, context);
    group->recvBytes(out, bytes, (rank + size - 1) % size, kRingShiftTag,
                     context);
    group->completeSends(context);
  };
}

std::function<void()>
CpuBackend::compileBlockCollective(const Program &program,
                                   const Instruction &instruction,
                                   comm::Communicator &group, float *in,
                                   float *out, std::vector<float> *pack) {
  const Collective &collective = *instruction.collective;
  const BufferInfo &input = program.buffers[instruction.args[0]];
  const BufferInfo &output = program.buffers[instruction.args[1]];
  if (collective.kind == CollectiveKind::AllToAll)
    return compileAllToAll(program, instruction, group, in, out, pack);
  bool gather = collective.kind == CollectiveKind::AllGather;
  // The local block (the input of a gather, the output of a scatter) as
  // [outer, blockDim, inner]; the loader checked the shapes.
  const BufferInfo &block = gather ? input : output;
  int64_t outer = 1, inner = 1;
  for (uint32_t d = 0; d < collective.dim; ++d)
    outer *= block.shape[d];
  for (size_t d = collective.dim + 1; d < block.shape.size(); ++d)
    inner *= block.shape[d];
  int64_t blockDim = block.shape[collective.dim];
  int64_t blocks = group.size();
  size_t count = size_t(block.elements);
  comm::Communicator *communicator = &group;
  std::string label = collective.label;
  comm::ReduceOp op = reduceOpOf(collective.reduce);
  // Along the first dimension (or below size-1 ones) each block is
  // contiguous and the communicator's block layout is the tensor's.
  if (outer == 1) {
    if (gather)
      return [this, communicator, in, out, count, label] {
        communicator->allGather(in, out, count, {label.c_str(), currentStep});
      };
    return [this, communicator, in, out, count, op, label] {
      communicator->reduceScatter(in, out, count, op,
                                  {label.c_str(), currentStep});
    };
  }
  if (pack->size() < count * size_t(blocks))
    pack->resize(count * size_t(blocks));
  if (gather)
    return [this, communicator, in, out, count, label, outer, blockDim, inner,
            blocks, pack] {
      communicator->allGather(in, pack->data(), count,
                              {label.c_str(), currentStep});
      cpu::unpackBlocks(pack->data(), out, outer, blockDim, inner, blocks);
    };
  return [this, communicator, in, out, count, op, label, outer, blockDim,
          inner, blocks, pack] {
    cpu::packBlocks(in, pack->data(), outer, blockDim, inner, blocks);
    communicator->reduceScatter(pack->data(), out, count, op,
                                {label.c_str(), currentStep});
  };
}

} // namespace cpubackend

std::unique_ptr<Backend>
createCpuBackend(const Program &program,
                 const comm::MeshCommunicators *communicators,
                 const OffloadOptions &offload) {
  return std::make_unique<cpubackend::CpuBackend>(program, communicators,
                                                  offload);
}

} // namespace partition::runtime
