//===- CpuBackend.cpp - runs a program with the CPU kernels ---------------===//

#include "runtime/backend/Backend.h"

#include "runtime/program/KernelArgs.h"
#include "runtime/backend/Profile.h"
#include "runtime/backend/Trace.h"
#include "runtime/comm/MeshCommunicators.h"
#include "runtime/backend/cpu/Kernels.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <stdexcept>

namespace partition::runtime {

namespace {

namespace cpu = partition::runtime::cpu;

struct AlignedFree {
  void operator()(void *p) const { std::free(p); }
};

/// Kernels that move bf16 bits themselves instead of computing on fp32
/// copies.
bool movesBits(KernelId kernel) {
  return kernel == KernelId::Cast || kernel == KernelId::Copy ||
         kernel == KernelId::FlatPack || kernel == KernelId::FlatUnpack;
}

/// Distinct bf16 buffers of an instruction, by arena offset: an in-place
/// output shares its input's copy.
std::vector<const BufferInfo *> stagedBuffers(const KernelArgs &args) {
  std::vector<const BufferInfo *> staged;
  if (movesBits(args.kernel))
    return staged;
  for (const BufferInfo *buffer : args.buffers)
    if (buffer->dtype == DType::BF16 &&
        std::none_of(staged.begin(), staged.end(), [&](const BufferInfo *b) {
          return b->offset == buffer->offset;
        }))
      staged.push_back(buffer);
  return staged;
}

size_t stagedElements(const KernelArgs &args) {
  size_t elements = 0;
  for (const BufferInfo *buffer : stagedBuffers(args))
    elements += size_t(buffer->elements);
  return elements;
}

class CpuBackend final : public Backend {
public:
  CpuBackend(const Program &program,
             const comm::MeshCommunicators *communicators);
  ~CpuBackend() override;

  const char *name() const override { return "cpu"; }
  void write(const BufferInfo &buffer, const void *source) override {
    std::memcpy(arena.get() + buffer.offset, source, buffer.bytes);
  }
  void read(const BufferInfo &buffer, void *destination) override {
    std::memcpy(destination, arena.get() + buffer.offset, buffer.bytes);
  }
  using Backend::run;
  void run(size_t index, int64_t step) override;
  uint64_t workspaceBytes() const override {
    return workspace.size +
           (staging.size() + bf16Staging.size() + collectiveCopyElements) *
               sizeof(float);
  }

private:
  /// One instruction, bound to its buffers and sizes. Kernels with bf16
  /// operands run the fp32 kernel on fp32 copies (bf16 storage, fp32
  /// arithmetic: the copies of the inputs are exact, the results are
  /// rounded once, to nearest even, as a GPU kernel that loads bf16 and
  /// computes in fp32 stores them).
  std::function<void()> compile(const KernelArgs &args,
                                const Instruction &instruction);
  /// The fp32 kernel of `args` on the buffers at `pointers`.
  std::function<void()> compileKernel(const KernelArgs &args,
                                      const Instruction &instruction,
                                      const std::vector<uint8_t *> &pointers);
  /// One collective, bound to its buffers and its group's communicator;
  /// bf16 buffers are reduced or moved as fp32 copies.
  std::function<void()> compileCollective(const Program &program,
                                          const Instruction &instruction,
                                          const std::string &where);
  /// The collective on fp32 data at `addresses` (one per argument).
  std::function<void()>
  compileF32Collective(const Program &program, const Instruction &instruction,
                       comm::Communicator &group,
                       const std::vector<float *> &addresses);
  /// An all-gather or reduce-scatter along `dim`, through `group`.
  std::function<void()> compileBlockCollective(const Program &program,
                                               const Instruction &instruction,
                                               comm::Communicator &group,
                                               float *in, float *out);

  /// Writes this rank's index in each AxisIndex buffer's group: constant
  /// for the run, so once, before any step.
  void writeAxisIndices(const Program &program);

  std::unique_ptr<uint8_t[], AlignedFree> arena;
  /// Attention scratch, sized for the largest attention of the program.
  struct Workspace {
    std::unique_ptr<uint8_t[], AlignedFree> data;
    size_t size = 0;
  } workspace;
  /// Per function: its compiled instructions and their names for errors.
  struct CompiledFunction {
    std::string name;
    std::vector<std::function<void()>> calls;
    std::vector<std::string> names;
    /// PARTITION_PROFILE only: per instruction, its cost and the seconds
    /// spent in it over the profiled runs.
    std::vector<InstructionCost> costs;
    std::vector<double> seconds;
    int64_t runs = 0, profiledRuns = 0;
    /// Per instruction, the span --trace records for it (times unset).
    std::vector<TraceSpan> spans;
    /// The pair communicators its eager sends went through: run() waits
    /// for their delivery at its end.
    std::vector<comm::Communicator *> sendGroups;
  };
  /// A send (eager: the communicator copies the buffer) or a receive (waits
  /// for the data, under the communicator's timeout).
  std::function<void()> compileTransfer(const Program &program,
                                        const Instruction &instruction,
                                        const std::string &where,
                                        CompiledFunction &function);
  void runTraced(CompiledFunction &function);
  void runProfiled(CompiledFunction &function);
  void printProfile(const CompiledFunction &function) const;

  std::vector<CompiledFunction> functions;
  /// PARTITION_PROFILE (runtime/backend/Profile.h): wall clock around every call (a
  /// GEMM's time includes waking OpenBLAS's threads).
  ProfileSettings profile = ProfileSettings::fromEnvironment();
  const comm::MeshCommunicators *communicators;
  /// A bucket of several buffers is packed here and reduced in one call (one
  /// message per bucket, as PyTorch DDP's flat bucket buffers), and blocks
  /// along a dimension other than the first are packed here for an
  /// all-gather or reduce-scatter; sized for the largest such use.
  std::vector<float> staging;
  /// fp32 copies of one kernel instruction's bf16 operands, sized for the
  /// instruction with the most (instructions run one at a time).
  std::vector<float> bf16Staging;
  /// fp32 copies of each bf16 collective's buffers.
  std::vector<std::unique_ptr<float[]>> collectiveCopies;
  size_t collectiveCopyElements = 0;
  /// The step run() was given, for the collectives' error messages.
  int64_t currentStep = -1;
};

uint8_t *allocateAligned(size_t bytes) {
  size_t rounded = (bytes + 63) / 64 * 64;
  void *memory = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  if (!memory)
    throw ProgramError("cannot allocate " + std::to_string(bytes) +
                       " bytes of host memory for the arena");
  return static_cast<uint8_t *>(memory);
}

CpuBackend::CpuBackend(const Program &program,
                       const comm::MeshCommunicators *communicators)
    : arena(allocateAligned(program.arenaBytes)),
      communicators(communicators) {
  // Zero so that uninitialised state (moments, the step) starts at zero.
  std::memset(arena.get(), 0, program.arenaBytes);
  writeAxisIndices(program);
  std::vector<std::vector<KernelArgs>> checked;
  size_t bf16StagingElements = 0;
  for (const Function &function : program.functions) {
    checked.emplace_back();
    for (size_t i = 0; i < function.instructions.size(); ++i) {
      if (function.instructions[i].collective ||
          function.instructions[i].transfer) {
        // Unused: collectives and transfers have no shapes to check.
        checked.back().emplace_back();
        continue;
      }
      checked.back().push_back(checkInstruction(
          program, function.instructions[i],
          function.name + " instruction #" + std::to_string(i)));
      const KernelArgs &args = checked.back().back();
      bf16StagingElements = std::max(bf16StagingElements,
                                     stagedElements(args));
      if (args.kernel == KernelId::Attention ||
          args.kernel == KernelId::AttentionGrad) {
        cpu::AttentionConfig config{args.batch,   args.seq,     args.heads,
                                    args.kvHeads, args.headDim, args.causal,
                                    args.ropeTheta};
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
    for (size_t i = 0; i < function.instructions.size(); ++i) {
      const Instruction &instruction = function.instructions[i];
      std::string where = function.name + " instruction #" + std::to_string(i);
      if (instruction.collective || instruction.transfer) {
        compiled.calls.push_back(
            instruction.transfer
                ? compileTransfer(program, instruction, where, compiled)
                : compileCollective(program, instruction, where));
        compiled.names.push_back(instruction.transfer
                                     ? transferName(instruction, where)
                                     : collectiveName(instruction, where));
        compiled.spans.push_back(traceSpanOf(program, instruction));
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
      compiled.spans.push_back(traceSpanOf(program, instruction));
      if (profile.enabled)
        compiled.costs.push_back(describeKernel(checked[f][i]));
    }
    compiled.seconds.assign(profile.enabled ? compiled.calls.size() : 0, 0.0);
    functions.push_back(std::move(compiled));
  }
}

CpuBackend::~CpuBackend() {
  if (!profile.enabled)
    return;
  for (const CompiledFunction &function : functions)
    if (function.profiledRuns > 0)
      printProfile(function);
}

void CpuBackend::runProfiled(CompiledFunction &function) {
  using Clock = std::chrono::steady_clock;
  bool record = function.runs++ >= profile.skip;
  if (record)
    ++function.profiledRuns;
  for (size_t i = 0; i < function.calls.size(); ++i) {
    Clock::time_point start = Clock::now();
    try {
      function.calls[i]();
    } catch (const std::invalid_argument &error) {
      throw ProgramError(function.names[i] + ": " + error.what());
    }
    if (record)
      function.seconds[i] +=
          std::chrono::duration<double>(Clock::now() - start).count();
  }
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
  if (profile.enabled)
    runProfiled(function);
  else if (trace)
    runTraced(function);
  else
    for (size_t i = 0; i < function.calls.size(); ++i) {
      try {
        function.calls[i]();
      } catch (const std::invalid_argument &error) {
        throw ProgramError(function.names[i] + ": " + error.what());
      }
    }
  // Every send of the step has its receive on a peer that needs nothing
  // more from this rank in this step: waiting for delivery here cannot
  // deadlock, and a stuck peer is named by the send that waits.
  for (comm::Communicator *group : function.sendGroups)
    group->completeSends({function.name.c_str(), step});
}

void CpuBackend::runTraced(CompiledFunction &function) {
  using Clock = TraceRecorder::Clock;
  for (size_t i = 0; i < function.calls.size(); ++i) {
    Clock::time_point start = Clock::now();
    try {
      function.calls[i]();
    } catch (const std::invalid_argument &error) {
      throw ProgramError(function.names[i] + ": " + error.what());
    }
    TraceSpan span = function.spans[i];
    span.startUs = trace->microsecondsSince(start);
    span.durationUs = trace->microsecondsSince(Clock::now()) - span.startUs;
    span.step = currentStep;
    trace->add(std::move(span));
  }
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

std::function<void()>
CpuBackend::compileCollective(const Program &program,
                              const Instruction &instruction,
                              const std::string &where) {
  const Collective &collective = *instruction.collective;
  comm::Communicator *group =
      &collectiveGroup(program, instruction, communicators, where);
  std::vector<float *> addresses;
  for (uint32_t arg : instruction.args)
    addresses.push_back(
        reinterpret_cast<float *>(arena.get() + program.buffers[arg].offset));
  // The loader checked that a collective's buffers share one type.
  if (program.buffers[instruction.args[0]].dtype != DType::BF16)
    return compileF32Collective(program, instruction, *group, addresses);

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
      compileF32Collective(program, instruction, *group, addresses);
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
                                 const std::vector<float *> &addresses) {
  const Collective &collective = *instruction.collective;
  comm::Communicator *group = &groupRef;
  comm::ReduceOp op = reduceOpOf(collective.reduce);
  std::string label = collective.label;
  if (collective.kind != CollectiveKind::AllReduce)
    return compileBlockCollective(program, instruction, *group, addresses[0],
                                  addresses[1]);
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
  if (staging.size() < total)
    staging.resize(total);
  return [this, group, op, label, parts, total] {
    float *packed = staging.data();
    for (const Part &part : parts) {
      std::memcpy(packed, part.data, part.count * sizeof(float));
      packed += part.count;
    }
    group->allReduce(staging.data(), total, op, {label.c_str(), currentStep});
    const float *unpacked = staging.data();
    for (const Part &part : parts) {
      std::memcpy(part.data, unpacked, part.count * sizeof(float));
      unpacked += part.count;
    }
  };
}

std::function<void()>
CpuBackend::compileBlockCollective(const Program &program,
                                   const Instruction &instruction,
                                   comm::Communicator &group, float *in,
                                   float *out) {
  const Collective &collective = *instruction.collective;
  const BufferInfo &input = program.buffers[instruction.args[0]];
  const BufferInfo &output = program.buffers[instruction.args[1]];
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
  if (staging.size() < count * size_t(blocks))
    staging.resize(count * size_t(blocks));
  if (gather)
    return [this, communicator, in, out, count, label, outer, blockDim, inner,
            blocks] {
      communicator->allGather(in, staging.data(), count,
                              {label.c_str(), currentStep});
      cpu::unpackBlocks(staging.data(), out, outer, blockDim, inner, blocks);
    };
  return [this, communicator, in, out, count, op, label, outer, blockDim,
          inner, blocks] {
    cpu::packBlocks(in, staging.data(), outer, blockDim, inner, blocks);
    communicator->reduceScatter(staging.data(), out, count, op,
                                {label.c_str(), currentStep});
  };
}

std::function<void()> CpuBackend::compile(const KernelArgs &a,
                                          const Instruction &instruction) {
  std::vector<uint8_t *> pointers;
  for (const BufferInfo *buffer : a.buffers)
    pointers.push_back(arena.get() + buffer->offset);
  std::vector<const BufferInfo *> staged = stagedBuffers(a);
  if (staged.empty())
    return compileKernel(a, instruction, pointers);

  // Point the kernel at fp32 copies; widen the copies of inputs before it
  // runs and round those of outputs after.
  struct Copy {
    uint16_t *bf16;
    float *f32;
    size_t elements;
  };
  std::vector<Copy> widen, narrow;
  const int inputs = lookupKernel(static_cast<uint32_t>(a.kernel))->inputs;
  float *next = bf16Staging.data();
  for (const BufferInfo *buffer : staged) {
    Copy copy{reinterpret_cast<uint16_t *>(arena.get() + buffer->offset), next,
              size_t(buffer->elements)};
    next += buffer->elements;
    bool read = false, written = false;
    for (size_t i = 0; i < a.buffers.size(); ++i) {
      if (a.buffers[i]->offset != buffer->offset)
        continue;
      pointers[i] = reinterpret_cast<uint8_t *>(copy.f32);
      (int(i) < inputs ? read : written) = true;
    }
    if (read)
      widen.push_back(copy);
    if (written)
      narrow.push_back(copy);
  }
  std::function<void()> kernel = compileKernel(a, instruction, pointers);
  return [widen, narrow, kernel] {
    for (const Copy &copy : widen)
      cpu::widenBFloat16(copy.bf16, copy.f32, copy.elements);
    kernel();
    for (const Copy &copy : narrow)
      cpu::roundToBFloat16(copy.f32, copy.bf16, copy.elements);
  };
}

std::function<void()>
CpuBackend::compileKernel(const KernelArgs &a, const Instruction &instruction,
                          const std::vector<uint8_t *> &pointers) {
  // Each call captures plain pointers and sizes by value: it outlives `a`.
  auto f = [pointers](int i) { return reinterpret_cast<float *>(pointers[i]); };
  auto i32 = [pointers](int i) {
    return reinterpret_cast<int32_t *>(pointers[i]);
  };
  void *scratch = workspace.data.get();
  size_t scratchBytes = workspace.size;
  cpu::AttentionConfig attention{a.batch,   a.seq,     a.heads,
                                 a.kvHeads, a.headDim, a.causal,
                                 a.ropeTheta};
  const std::vector<float> &floats = instruction.floats;

  switch (a.kernel) {
  case KernelId::Embedding:
    return [=] { cpu::embedding(i32(0), f(1), f(2), a.rows, a.vocab, a.channels); };
  case KernelId::EmbeddingGradAdd: {
    size_t bytes = a.buffers[3]->bytes;
    return [=] {
      if (f(2) != f(3))
        std::memcpy(f(3), f(2), bytes);
      cpu::embeddingGrad(f(0), i32(1), f(3), a.rows, a.vocab, a.channels,
                         /*accumulate=*/true);
    };
  }
  case KernelId::EmbeddingGrad:
    return [=] {
      cpu::embeddingGrad(f(0), i32(1), f(2), a.rows, a.vocab, a.channels);
    };
  case KernelId::PositionEmbedding:
    return [=] {
      cpu::positionEmbedding(f(0), f(1), f(2), a.batch, a.seq, a.channels);
    };
  case KernelId::PositionEmbeddingGrad:
    return [=] {
      cpu::positionEmbeddingGrad(f(0), f(1), a.batch, a.seq, a.positions,
                                 a.channels);
    };
  case KernelId::LayerNorm: {
    float eps = floats[0];
    return [=] { cpu::layerNorm(f(0), f(1), f(2), f(3), a.rows, a.channels, eps); };
  }
  case KernelId::LayerNormGrad: {
    float eps = floats[0];
    return [=] {
      cpu::layerNormGrad(f(0), f(1), f(2), f(3), f(4), f(5), a.rows,
                         a.channels, eps);
    };
  }
  case KernelId::RMSNorm: {
    float eps = floats[0];
    return [=] { cpu::rmsNorm(f(0), f(1), f(2), a.rows, a.channels, eps); };
  }
  case KernelId::RMSNormGrad: {
    float eps = floats[0];
    return [=] {
      cpu::rmsNormGrad(f(0), f(1), f(2), f(3), f(4), a.rows, a.channels, eps);
    };
  }
  case KernelId::Linear:
    return [=] {
      cpu::linear(f(0), f(1), nullptr, f(2), a.rows, a.inFeatures,
                  a.outFeatures);
    };
  case KernelId::LinearBias:
    return [=] {
      cpu::linear(f(0), f(1), f(2), f(3), a.rows, a.inFeatures, a.outFeatures);
    };
  case KernelId::LinearGradInput:
    return [=] {
      cpu::linearGradInput(f(0), f(1), f(2), a.rows, a.inFeatures,
                           a.outFeatures);
    };
  case KernelId::LinearGradWeight:
    return [=] {
      cpu::linearGradWeight(f(0), f(1), f(2), nullptr, a.rows, a.inFeatures,
                            a.outFeatures);
    };
  case KernelId::LinearGradWeightBias:
    return [=] {
      cpu::linearGradWeight(f(0), f(1), f(2), f(3), a.rows, a.inFeatures,
                            a.outFeatures);
    };
  case KernelId::Gelu:
    return [=] { cpu::gelu(f(0), f(1), a.size); };
  case KernelId::GeluGrad:
    return [=] { cpu::geluGrad(f(0), f(1), f(2), a.size); };
  case KernelId::Swiglu:
    return [=] { cpu::swiglu(f(0), f(1), f(2), a.size); };
  case KernelId::SwigluGrad:
    return [=] { cpu::swigluGrad(f(0), f(1), f(2), f(3), f(4), a.size); };
  case KernelId::Add:
    return [=] { cpu::add(f(0), f(1), f(2), a.size); };
  case KernelId::Scale: {
    float factor = floats[0];
    return [=] { cpu::scale(f(0), factor, f(1), a.size); };
  }
  case KernelId::Attention:
    return [=] {
      cpu::attention(f(0), f(1), f(2), f(3), attention, scratch, scratchBytes);
    };
  case KernelId::AttentionGrad:
    return [=] {
      cpu::attentionGrad(f(0), f(1), f(2), f(3), f(4), f(5), f(6), attention,
                         scratch, scratchBytes);
    };
  case KernelId::SoftmaxCrossEntropy:
    return [=] {
      cpu::softmaxCrossEntropy(f(0), i32(1), f(2), a.rows, a.vocab);
    };
  case KernelId::SoftmaxCrossEntropyGrad:
    return [=] {
      cpu::softmaxCrossEntropyGrad(f(0), f(1), i32(2), f(3), a.rows, a.vocab);
    };
  case KernelId::AdamW: {
    cpu::AdamWConfig config{floats[0], floats[1], floats[2], floats[3]};
    return [=] {
      cpu::adamw(f(0), f(1), f(2), f(3), i32(4), f(5), f(6), f(7), f(8),
                 a.size, config);
    };
  }
  case KernelId::Fill: {
    float value = floats[0];
    if (a.buffers[0]->dtype == DType::I32)
      return [=] {
        std::fill(i32(0), i32(0) + a.size, static_cast<int32_t>(value));
      };
    return [=] { std::fill(f(0), f(0) + a.size, value); };
  }
  case KernelId::AddI32:
    return [=] {
      for (int64_t i = 0; i < a.size; ++i)
        i32(2)[i] = i32(0)[i] + i32(1)[i];
    };
  case KernelId::Copy: {
    size_t bytes = a.buffers[1]->bytes;
    return [=] { std::memcpy(f(1), f(0), bytes); };
  }
  case KernelId::FlatPack:
  case KernelId::FlatUnpack: {
    int64_t elementBytes = a.buffers[0]->dtype == DType::BF16 ? 2 : 4;
    if (a.kernel == KernelId::FlatPack)
      return [=] {
        cpu::flatPack(pointers[0], pointers[1], a.size, a.rows, a.channels,
                      a.inner, elementBytes);
      };
    return [=] {
      cpu::flatUnpack(pointers[0], pointers[1], a.size, a.rows, a.channels,
                      a.inner, elementBytes);
    };
  }
  case KernelId::SliceBlock:
    return [=] {
      cpu::sliceBlock(f(0), i32(1), f(2), a.outer, a.blockDim, a.inner,
                      a.blocks);
    };
  case KernelId::VocabParallelEmbedding:
    return [=] {
      cpu::vocabParallelEmbedding(i32(0), f(1), i32(2), f(3), a.rows, a.vocab,
                                  a.channels);
    };
  case KernelId::VocabParallelEmbeddingGrad:
    return [=] {
      cpu::vocabParallelEmbeddingGrad(f(0), i32(1), i32(2), f(3), a.rows,
                                      a.vocab, a.channels);
    };
  case KernelId::VocabParallelMax:
    return [=] { cpu::vocabParallelMax(f(0), f(1), a.rows, a.vocab); };
  case KernelId::VocabParallelTargetLogit:
    return [=] {
      cpu::vocabParallelTargetLogit(f(0), i32(1), i32(2), f(3), a.rows,
                                    a.vocab);
    };
  case KernelId::VocabParallelSumExp:
    return [=] { cpu::vocabParallelSumExp(f(0), f(1), f(2), a.rows, a.vocab); };
  case KernelId::VocabParallelLoss:
    return [=] { cpu::vocabParallelLoss(f(0), f(1), f(2), f(3), a.rows); };
  case KernelId::VocabParallelCrossEntropyGrad:
    return [=] {
      cpu::vocabParallelCrossEntropyGrad(f(0), f(1), i32(2), i32(3), f(4),
                                         f(5), f(6), a.rows, a.vocab);
    };
  case KernelId::VocabParallelMaskedMax:
    return [=] {
      cpu::vocabParallelMax(f(0), f(2), a.rows, a.vocab, i32(1),
                            a.logicalVocab);
    };
  case KernelId::VocabParallelMaskedSumExp:
    return [=] {
      cpu::vocabParallelSumExp(f(0), f(1), f(3), a.rows, a.vocab, i32(2),
                               a.logicalVocab);
    };
  case KernelId::VocabParallelMaskedCrossEntropyGrad:
    return [=] {
      cpu::vocabParallelCrossEntropyGrad(f(0), f(1), i32(2), i32(3), f(4),
                                         f(5), f(6), a.rows, a.vocab,
                                         a.logicalVocab);
    };
  case KernelId::Cast: {
    DType from = a.buffers[0]->dtype, to = a.buffers[1]->dtype;
    int64_t size = a.size;
    if (from == to) {
      size_t bytes = a.buffers[1]->bytes;
      return [=] { std::memcpy(pointers[1], pointers[0], bytes); };
    }
    if (from == DType::F32)
      return [=] {
        cpu::roundToBFloat16(f(0), reinterpret_cast<uint16_t *>(pointers[1]),
                             size);
      };
    return [=] {
      cpu::widenBFloat16(reinterpret_cast<const uint16_t *>(pointers[0]), f(1),
                         size);
    };
  }
  case KernelId::NumKernels:
    break;
  }
  throw ProgramError("invalid kernel");
}

} // namespace

std::unique_ptr<Backend>
createCpuBackend(const Program &program,
                 const comm::MeshCommunicators *communicators) {
  return std::make_unique<CpuBackend>(program, communicators);
}

} // namespace partition::runtime
