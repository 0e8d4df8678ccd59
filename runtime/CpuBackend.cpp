//===- CpuBackend.cpp - runs a program with the CPU kernels ---------------===//

#include "runtime/Backend.h"

#include "runtime/KernelArgs.h"
#include "runtime/cpu/Kernels.h"

#include <cstdlib>
#include <cstring>
#include <functional>
#include <stdexcept>

namespace partition::runtime {

Backend::~Backend() = default;

namespace {

namespace cpu = partition::runtime::cpu;

struct AlignedFree {
  void operator()(void *p) const { std::free(p); }
};

class CpuBackend final : public Backend {
public:
  explicit CpuBackend(const Program &program);

  const char *name() const override { return "cpu"; }
  void write(const BufferInfo &buffer, const void *source) override {
    std::memcpy(arena.get() + buffer.offset, source, buffer.bytes);
  }
  void read(const BufferInfo &buffer, void *destination) override {
    std::memcpy(destination, arena.get() + buffer.offset, buffer.bytes);
  }
  void run(size_t index) override;
  uint64_t workspaceBytes() const override { return workspace.size; }

private:
  /// One instruction, bound to its buffers and sizes.
  std::function<void()> compile(const KernelArgs &args,
                                const Instruction &instruction);

  std::unique_ptr<uint8_t[], AlignedFree> arena;
  /// Attention scratch, sized for the largest attention of the program.
  struct Workspace {
    std::unique_ptr<uint8_t[], AlignedFree> data;
    size_t size = 0;
  } workspace;
  /// Per function: its compiled instructions and their names for errors.
  struct CompiledFunction {
    std::vector<std::function<void()>> calls;
    std::vector<std::string> names;
  };
  std::vector<CompiledFunction> functions;
};

uint8_t *allocateAligned(size_t bytes) {
  size_t rounded = (bytes + 63) / 64 * 64;
  void *memory = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  if (!memory)
    throw ProgramError("cannot allocate " + std::to_string(bytes) +
                       " bytes of host memory for the arena");
  return static_cast<uint8_t *>(memory);
}

CpuBackend::CpuBackend(const Program &program)
    : arena(allocateAligned(program.arenaBytes)) {
  // Zero so that uninitialised state (moments, the step) starts at zero.
  std::memset(arena.get(), 0, program.arenaBytes);
  std::vector<std::vector<KernelArgs>> checked;
  for (const Function &function : program.functions) {
    checked.emplace_back();
    for (size_t i = 0; i < function.instructions.size(); ++i) {
      checked.back().push_back(checkInstruction(
          program, function.instructions[i],
          function.name + " instruction #" + std::to_string(i)));
      const KernelArgs &args = checked.back().back();
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
  for (size_t f = 0; f < program.functions.size(); ++f) {
    const Function &function = program.functions[f];
    CompiledFunction compiled;
    for (size_t i = 0; i < function.instructions.size(); ++i) {
      compiled.calls.push_back(
          compile(checked[f][i], function.instructions[i]));
      compiled.names.push_back(
          function.name + " instruction #" + std::to_string(i) + " (" +
          std::string(
              lookupKernel(static_cast<uint32_t>(checked[f][i].kernel))->name) +
          ")");
    }
    functions.push_back(std::move(compiled));
  }
}

void CpuBackend::run(size_t index) {
  CompiledFunction &function = functions.at(index);
  for (size_t i = 0; i < function.calls.size(); ++i) {
    try {
      function.calls[i]();
    } catch (const std::invalid_argument &error) {
      throw ProgramError(function.names[i] + ": " + error.what());
    }
  }
}

std::function<void()> CpuBackend::compile(const KernelArgs &a,
                                          const Instruction &instruction) {
  // Each call captures plain pointers and sizes by value: it outlives `a`.
  std::vector<uint8_t *> pointers;
  for (const BufferInfo *buffer : a.buffers)
    pointers.push_back(arena.get() + buffer->offset);
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
    return [=] {
      if (f(0) != f(1))
        std::memcpy(f(1), f(0), bytes);
    };
  }
  case KernelId::NumKernels:
    break;
  }
  throw ProgramError("invalid kernel");
}

} // namespace

std::unique_ptr<Backend> createCpuBackend(const Program &program) {
  return std::make_unique<CpuBackend>(program);
}

} // namespace partition::runtime
