//===- CpuDispatch.cpp - kernel instructions bound to the CPU kernels -----===//
//
// Compiles each kernel instruction once into a call of its fp32 kernel
// (runtime/backend/cpu/Kernels.h) with its pointers and sizes; bf16
// operands are widened into fp32 copies before it and rounded back after,
// except for the kernels that read bf16 themselves: the linear layers'
// GEMMs where oneDNN runs them (Bf16Gemm.h), and GELU, add and the loss
// (the same results as on copies, bit for bit, without the copies).
// The switch in KernelLauncher::compile lists every kernel (no default): a
// kernel added to Kernels.def fails to build here until the CPU backend
// runs it. It is one switch, longer than the other functions, on purpose:
// one case per kernel, each a short call, is the one place the compiler
// can check for completeness.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cpu/CpuBackendImpl.h"

namespace partition::runtime::cpubackend {

namespace {

/// What a call needs: plain pointers, the instruction's sizes and
/// parameters. Each call captures a copy (`[=, *this]`): it outlives the
/// KernelArgs and the launcher it was compiled from.
struct KernelLauncher {
  std::vector<uint8_t *> pointers;
  KernelArgs a;
  void *scratch = nullptr;
  size_t scratchBytes = 0;
  cpu::AttentionConfig attention{};
  std::vector<float> floats;

  float *f(int i) const { return reinterpret_cast<float *>(pointers[i]); }
  int32_t *i32(int i) const {
    return reinterpret_cast<int32_t *>(pointers[i]);
  }
  cpu::MoeShape moe() const {
    return {a.batch, a.seq, a.channels, a.experts, a.topK, a.capacity};
  }
  cpu::ExpertGemmShape expertGemm() const {
    return {a.batch, a.experts, a.capacity, a.inFeatures, a.outFeatures};
  }

  /// The call of kernel `a.kernel`. Every kernel is listed (no default):
  /// a kernel added to Kernels.def fails to build here until the CPU
  /// backend runs it.
  std::function<void()> compile() const {
    switch (a.kernel) {
    // Token and position embeddings, whole or split over the vocabulary.
    case KernelId::Embedding:
      return [=, *this] {
        cpu::embedding(i32(0), f(1), f(2), a.rows, a.vocab, a.channels);
      };
    case KernelId::EmbeddingGradAdd: {
      size_t bytes = a.buffers[3]->bytes;
      return [=, *this] {
        if (f(2) != f(3))
          std::memcpy(f(3), f(2), bytes);
        cpu::embeddingGrad(f(0), i32(1), f(3), a.rows, a.vocab, a.channels,
                           /*accumulate=*/true);
      };
    }
    case KernelId::EmbeddingGrad:
      return [=, *this] {
        cpu::embeddingGrad(f(0), i32(1), f(2), a.rows, a.vocab, a.channels);
      };
    case KernelId::PositionEmbedding:
      return [=, *this] {
        cpu::positionEmbedding(f(0), f(1), f(2), a.batch, a.seq, a.channels);
      };
    case KernelId::PositionEmbeddingGrad:
      return [=, *this] {
        cpu::positionEmbeddingGrad(f(0), f(1), a.batch, a.seq, a.positions,
                                   a.channels);
      };
    case KernelId::VocabParallelEmbedding:
      return [=, *this] {
        cpu::vocabParallelEmbedding(i32(0), f(1), i32(2), f(3), a.rows, a.vocab,
                                    a.channels);
      };
    case KernelId::VocabParallelEmbeddingGrad:
      return [=, *this] {
        cpu::vocabParallelEmbeddingGrad(f(0), i32(1), i32(2), f(3), a.rows,
                                        a.vocab, a.channels);
      };
    // Norms, the linear layers, activations, elementwise arithmetic and
    // attention.
    case KernelId::LayerNorm: {
      float eps = floats[0];
      return [=, *this] {
        cpu::layerNorm(f(0), f(1), f(2), f(3), a.rows, a.channels, eps);
      };
    }
    case KernelId::LayerNormGrad: {
      float eps = floats[0];
      return [=, *this] {
        cpu::layerNormGrad(f(0), f(1), f(2), f(3), f(4), f(5), a.rows,
                           a.channels, eps);
      };
    }
    case KernelId::RMSNorm: {
      float eps = floats[0];
      return [=, *this] {
        cpu::rmsNorm(f(0), f(1), f(2), a.rows, a.channels, eps);
      };
    }
    case KernelId::RMSNormGrad: {
      float eps = floats[0];
      return [=, *this] {
        cpu::rmsNormGrad(f(0), f(1), f(2), f(3), f(4), a.rows, a.channels, eps);
      };
    }
    case KernelId::Linear:
      return [=, *this] {
        cpu::linear(f(0), f(1), nullptr, f(2), a.rows, a.inFeatures,
                    a.outFeatures);
      };
    case KernelId::LinearBias:
      return [=, *this] {
        cpu::linear(f(0), f(1), f(2), f(3), a.rows, a.inFeatures,
                    a.outFeatures);
      };
    case KernelId::LinearGradInput:
      return [=, *this] {
        cpu::linearGradInput(f(0), f(1), f(2), a.rows, a.inFeatures,
                             a.outFeatures);
      };
    case KernelId::LinearGradWeight:
      return [=, *this] {
        cpu::linearGradWeight(f(0), f(1), f(2), nullptr, a.rows, a.inFeatures,
                              a.outFeatures);
      };
    case KernelId::LinearGradWeightBias:
      return [=, *this] {
        cpu::linearGradWeight(f(0), f(1), f(2), f(3), a.rows, a.inFeatures,
                              a.outFeatures);
      };
    case KernelId::Gelu:
      return [=, *this] { cpu::gelu(f(0), f(1), a.size); };
    case KernelId::GeluGrad:
      return [=, *this] { cpu::geluGrad(f(0), f(1), f(2), a.size); };
    case KernelId::Swiglu:
      return [=, *this] { cpu::swiglu(f(0), f(1), f(2), a.size); };
    case KernelId::SwigluGrad:
      return [=, *this] {
        cpu::swigluGrad(f(0), f(1), f(2), f(3), f(4), a.size);
      };
    case KernelId::Add:
      return [=, *this] { cpu::add(f(0), f(1), f(2), a.size); };
    case KernelId::Scale: {
      float factor = floats[0];
      return [=, *this] { cpu::scale(f(0), factor, f(1), a.size); };
    }
    case KernelId::Attention:
    case KernelId::AttentionScaled:
      return [=, *this] {
        cpu::attention(f(0), f(1), f(2), f(3), attention, scratch,
                       scratchBytes);
      };
    case KernelId::AttentionGrad:
    case KernelId::AttentionScaledGrad:
      return [=, *this] {
        cpu::attentionGrad(f(0), f(1), f(2), f(3), f(4), f(5), f(6), attention,
                           scratch, scratchBytes);
      };
    // Explicit positions (a permuted sequence; context parallelism).
    case KernelId::AttentionPositions:
      return [=, *this] {
        cpu::attentionPositions(f(0), f(1), f(2), i32(3), i32(4), f(5),
                                a.keySeq, attention);
      };
    case KernelId::AttentionPositionsGrad:
      return [=, *this] {
        cpu::attentionPositionsGrad(f(0), f(1), f(2), f(3), i32(4), i32(5),
                                    f(6), f(7), f(8), a.keySeq, attention);
      };
    case KernelId::SequencePositions:
      return [=, *this] { cpu::sequencePositions(i32(0), a.seq, a.chunks); };
    case KernelId::PositionEmbeddingAt:
      return [=, *this] {
        cpu::positionEmbeddingAt(f(0), f(1), i32(2), f(3), a.batch, a.seq,
                                 a.positions, a.channels);
      };
    case KernelId::PositionEmbeddingAtGrad:
      return [=, *this] {
        cpu::positionEmbeddingAtGrad(f(0), i32(1), f(2), a.batch, a.seq,
                                     a.positions, a.channels);
      };
    // Ring attention: one key block at explicit positions, the merge of two
    // partial attentions, one block's backward.
    case KernelId::AttentionBlock:
      return [=, *this] {
        cpu::attentionBlock(f(0), f(1), f(2), i32(3), i32(4), f(5), f(6),
                            attention, a.keySeq);
      };
    case KernelId::AttentionMerge:
      return [=, *this] {
        cpu::attentionMerge(f(0), f(1), f(2), f(3), f(4), f(5), a.batch, a.seq,
                            a.heads, a.headDim);
      };
    case KernelId::AttentionBlockGrad:
      return [=, *this] {
        cpu::attentionBlockGrad(f(0), f(1), f(2), f(3), i32(4), i32(5), f(6),
                                f(7), f(8), f(9), f(10), attention, a.keySeq);
      };
    // Mixture of experts: routing, dispatch and combine, the grouped
    // expert GEMMs and the load-balancing loss.
    case KernelId::MoeRoute:
    case KernelId::MoeRouteBiased: {
      bool biased = a.kernel == KernelId::MoeRouteBiased;
      int o = biased ? 2 : 1;
      return [=, *this] {
        cpu::moeRoute(f(0), biased ? f(1) : nullptr, f(o), i32(o + 1),
                      i32(o + 2), i32(o + 3), moe(), a.scoring);
      };
    }
    case KernelId::MoeRouteGrad:
      return [=, *this] {
        cpu::moeRouteGrad(f(0), f(1), i32(2), f(3), moe(), a.scoring);
      };
    case KernelId::MoeDispatch:
      return [=, *this] { cpu::moeDispatch(f(0), i32(1), i32(2), f(3), moe()); };
    case KernelId::MoeDispatchGrad:
      return [=, *this] {
        cpu::moeDispatchGrad(f(0), i32(1), i32(2), f(3), moe());
      };
    case KernelId::MoeCombine:
      return [=, *this] {
        cpu::moeCombine(f(0), f(1), i32(2), i32(3), f(4), moe());
      };
    case KernelId::MoeCombineGrad:
      return [=, *this] {
        cpu::moeCombineGrad(f(0), f(1), f(2), i32(3), i32(4), f(5), f(6),
                            moe());
      };
    case KernelId::ExpertLinear:
      return [=, *this] {
        cpu::expertLinear(f(0), f(1), i32(2), f(3), expertGemm());
      };
    case KernelId::ExpertLinearGradInput:
      return [=, *this] {
        cpu::expertLinearGradInput(f(0), f(1), i32(2), f(3), expertGemm());
      };
    case KernelId::ExpertLinearGradWeight:
      return [=, *this] {
        cpu::expertLinearGradWeight(f(0), f(1), i32(2), f(3), expertGemm());
      };
    case KernelId::MoeAuxLoss: {
      float aux = floats[0], z = floats[1];
      return [=, *this] {
        cpu::moeAuxLoss(f(0), i32(1), f(2), moe(), a.scoring, aux, z);
      };
    }
    case KernelId::MoeAuxLossGrad: {
      float aux = floats[0], z = floats[1];
      return [=, *this] {
        cpu::moeAuxLossGrad(f(0), f(1), i32(2), f(3), moe(), a.scoring, aux,
                            z);
      };
    }
    // DeepSeek-V3's routing-bias update, once per step.
    case KernelId::MoeExpertLoad: {
      int64_t batch = a.batch, experts = a.experts;
      return [=, *this] { cpu::moeExpertLoad(i32(0), f(1), batch, experts); };
    }
    case KernelId::MoeBiasUpdate: {
      int64_t experts = a.experts;
      float rate = floats[0];
      return [=, *this] {
        cpu::moeBiasUpdate(f(0), f(1), f(2), experts, rate);
      };
    }
    // The cross-entropy loss, whole or in its vocabulary-parallel steps.
    case KernelId::SoftmaxCrossEntropy:
      return [=, *this] {
        cpu::softmaxCrossEntropy(f(0), i32(1), f(2), a.rows, a.vocab);
      };
    case KernelId::SoftmaxCrossEntropyGrad:
      return [=, *this] {
        cpu::softmaxCrossEntropyGrad(f(0), f(1), i32(2), f(3), a.rows, a.vocab);
      };
    case KernelId::VocabParallelMax:
      return [=, *this] { cpu::vocabParallelMax(f(0), f(1), a.rows, a.vocab); };
    case KernelId::VocabParallelTargetLogit:
      return [=, *this] {
        cpu::vocabParallelTargetLogit(f(0), i32(1), i32(2), f(3), a.rows,
                                      a.vocab);
      };
    case KernelId::VocabParallelSumExp:
      return [=, *this] {
        cpu::vocabParallelSumExp(f(0), f(1), f(2), a.rows, a.vocab);
      };
    case KernelId::VocabParallelLoss:
      return [=, *this] {
        cpu::vocabParallelLoss(f(0), f(1), f(2), f(3), a.rows);
      };
    case KernelId::VocabParallelCrossEntropyGrad:
      return [=, *this] {
        cpu::vocabParallelCrossEntropyGrad(f(0), f(1), i32(2), i32(3), f(4),
                                           f(5), f(6), a.rows, a.vocab);
      };
    case KernelId::VocabParallelMaskedMax:
      return [=, *this] {
        cpu::vocabParallelMax(f(0), f(2), a.rows, a.vocab, i32(1),
                              a.logicalVocab);
      };
    case KernelId::VocabParallelMaskedSumExp:
      return [=, *this] {
        cpu::vocabParallelSumExp(f(0), f(1), f(3), a.rows, a.vocab, i32(2),
                                 a.logicalVocab);
      };
    case KernelId::VocabParallelMaskedCrossEntropyGrad:
      return [=, *this] {
        cpu::vocabParallelCrossEntropyGrad(f(0), f(1), i32(2), i32(3), f(4),
                                           f(5), f(6), a.rows, a.vocab,
                                           a.logicalVocab);
      };
    // The optimizer and the kernels that move or convert data (fills,
    // copies, block moves, casts).
    case KernelId::AdamW: {
      cpu::AdamWConfig config{floats[0], floats[1], floats[2], floats[3]};
      return [=, *this] {
        cpu::adamw(f(0), f(1), f(2), f(3), i32(4), f(5), f(6), f(7), f(8),
                   a.size, config);
      };
    }
    case KernelId::AdamWBlock: {
      cpu::AdamWConfig config{floats[0], floats[1], floats[2], floats[3]};
      return [=, *this] {
        cpu::adamwBlock(f(0), i32(1), a.blocks, f(2), f(3), f(4), i32(5), f(6),
                        f(7), f(8), f(9), a.size, config);
      };
    }
    case KernelId::Fill: {
      float value = floats[0];
      if (a.buffers[0]->dtype == DType::I32)
        return [=, *this] {
          std::fill(i32(0), i32(0) + a.size, static_cast<int32_t>(value));
        };
      return [=, *this] { std::fill(f(0), f(0) + a.size, value); };
    }
    case KernelId::AddI32:
      return [=, *this] {
        for (int64_t i = 0; i < a.size; ++i)
          i32(2)[i] = i32(0)[i] + i32(1)[i];
      };
    case KernelId::Copy: {
      size_t bytes = a.buffers[1]->bytes;
      return [=, *this] { std::memcpy(f(1), f(0), bytes); };
    }
    case KernelId::FlatPack:
    case KernelId::FlatUnpack: {
      int64_t elementBytes = a.buffers[0]->dtype == DType::BF16 ? 2 : 4;
      if (a.kernel == KernelId::FlatPack)
        return [=, *this] {
          cpu::flatPack(pointers[0], pointers[1], a.size, a.rows, a.channels,
                        a.inner, elementBytes);
        };
      return [=, *this] {
        cpu::flatUnpack(pointers[0], pointers[1], a.size, a.rows, a.channels,
                        a.inner, elementBytes);
      };
    }
    case KernelId::SliceBlock:
      return [=, *this] {
        cpu::sliceBlock(f(0), i32(1), f(2), a.outer, a.blockDim, a.inner,
                        a.blocks);
      };
    case KernelId::Cast: {
      DType from = a.buffers[0]->dtype, to = a.buffers[1]->dtype;
      int64_t size = a.size;
      if (from == to) {
        size_t bytes = a.buffers[1]->bytes;
        return [=, *this] { std::memcpy(pointers[1], pointers[0], bytes); };
      }
      if (from == DType::F32)
        return [=, *this] {
          cpu::roundToBFloat16(f(0), reinterpret_cast<uint16_t *>(pointers[1]),
                               size);
        };
      return [=, *this] {
        cpu::widenBFloat16(reinterpret_cast<const uint16_t *>(pointers[0]),
                           f(1), size);
      };
    }
    case KernelId::NumKernels:
      break;
    }
    throw ProgramError("invalid kernel");
  }
};

} // namespace

std::function<void()> CpuBackend::compileBf16Gemm(const KernelArgs &a) {
  if (cpu::bf16GemmChoice().engine != cpu::Bf16GemmEngine::OneDnn ||
      a.buffers.empty() ||
      std::any_of(a.buffers.begin(), a.buffers.end(),
                  [](const BufferInfo *b) { return b->dtype != DType::BF16; }))
    return {};
  auto p = [&](int i) {
    return reinterpret_cast<uint16_t *>(arena.get() + a.buffers[i]->offset);
  };
  auto gemm = [&](cpu::LinearProduct product, int first, int second,
                  const uint16_t *bias, int result) {
    if (!bf16Gemms)
      bf16Gemms = std::make_unique<cpu::Bf16Gemms>();
    return bf16Gemms->compile(product, p(first), p(second), bias, p(result),
                              a.rows, a.inFeatures, a.outFeatures);
  };
  using cpu::LinearProduct;
  switch (a.kernel) {
  case KernelId::Linear:
    return gemm(LinearProduct::Forward, 0, 1, nullptr, 2);
  case KernelId::LinearBias:
    return gemm(LinearProduct::Forward, 0, 1, p(2), 3);
  case KernelId::LinearGradInput:
    return gemm(LinearProduct::GradInput, 0, 1, nullptr, 2);
  case KernelId::LinearGradWeight:
    return gemm(LinearProduct::GradWeight, 0, 1, nullptr, 2);
  case KernelId::LinearGradWeightBias: {
    std::function<void()> weight =
        gemm(LinearProduct::GradWeight, 0, 1, nullptr, 2);
    if (!weight)
      return {};
    return [weight, grad = p(0), bias = p(3), rows = a.rows,
            columns = a.outFeatures] {
      weight();
      cpu::linearBiasGradBFloat16(grad, bias, rows, columns);
    };
  }
  default:
    return {};
  }
}

std::function<void()> CpuBackend::compileBf16Native(const KernelArgs &a) {
  auto types = [&](std::initializer_list<DType> expected) {
    if (a.buffers.size() != expected.size())
      return false;
    size_t i = 0;
    for (DType type : expected)
      if (a.buffers[i++]->dtype != type)
        return false;
    return true;
  };
  auto bits = [&](int i) {
    return reinterpret_cast<uint16_t *>(arena.get() + a.buffers[i]->offset);
  };
  auto f32 = [&](int i) {
    return reinterpret_cast<float *>(arena.get() + a.buffers[i]->offset);
  };
  auto i32 = [&](int i) {
    return reinterpret_cast<int32_t *>(arena.get() + a.buffers[i]->offset);
  };
  const DType B = DType::BF16, F = DType::F32, I = DType::I32;
  switch (a.kernel) {
  case KernelId::Gelu:
    if (!types({B, B}))
      return {};
    return [x = bits(0), y = bits(1), n = a.size] {
      cpu::geluBFloat16(x, y, n);
    };
  case KernelId::GeluGrad:
    if (!types({B, B, B}))
      return {};
    return [g = bits(0), x = bits(1), y = bits(2), n = a.size] {
      cpu::geluGradBFloat16(g, x, y, n);
    };
  case KernelId::Add:
    if (!types({B, B, B}))
      return {};
    return [x = bits(0), y = bits(1), z = bits(2), n = a.size] {
      cpu::addBFloat16(x, y, z, n);
    };
  case KernelId::SoftmaxCrossEntropy:
    if (!types({B, I, F}))
      return {};
    return [x = bits(0), t = i32(1), loss = f32(2), rows = a.rows,
            vocab = a.vocab] {
      cpu::softmaxCrossEntropyBFloat16(x, t, loss, rows, vocab);
    };
  case KernelId::SoftmaxCrossEntropyGrad:
    if (!types({F, B, I, B}))
      return {};
    return [g = f32(0), x = bits(1), t = i32(2), y = bits(3), rows = a.rows,
            vocab = a.vocab] {
      cpu::softmaxCrossEntropyGradBFloat16(g, x, t, y, rows, vocab);
    };
  default:
    return {};
  }
}

std::function<void()> CpuBackend::compile(const KernelArgs &a,
                                          const Instruction &instruction) {
  if (auto direct = bf16Direct.find(&instruction); direct != bf16Direct.end())
    return direct->second;
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
  KernelLauncher launcher;
  launcher.pointers = pointers;
  launcher.a = a;
  launcher.scratch = workspace.data.get();
  launcher.scratchBytes = workspace.size;
  launcher.attention = {a.batch,   a.seq,    a.heads,      a.kvHeads,
                        a.headDim, a.causal, a.ropeTheta, a.ropeScaling,
                        a.window};
  launcher.floats = instruction.floats;
  std::function<void()> kernel = launcher.compile();
  if (a.kernel == KernelId::MoeAuxLoss) {
    // The router's losses for the metrics: the kernel's mean over its
    // groups, weighted by their number (Backend::RoutingCounts).
    const float *value = reinterpret_cast<const float *>(pointers[2]);
    double groups = double(a.batch);
    return [this, kernel, value, groups] {
      kernel();
      routing.auxLoss += double(*value) * groups;
      routing.auxGroups += groups;
    };
  }
  if (a.kernel != KernelId::MoeRoute && a.kernel != KernelId::MoeRouteBiased)
    return kernel;
  // Routing: count what each expert kept and what was dropped, from the
  // kernel's own outputs (slots and counts), for the metrics.
  int outputs = a.kernel == KernelId::MoeRoute ? 1 : 2;
  const int32_t *slots = reinterpret_cast<const int32_t *>(pointers[outputs + 2]);
  const int32_t *counts = reinterpret_cast<const int32_t *>(pointers[outputs + 3]);
  int64_t choices = a.batch * a.seq * a.topK, experts = a.experts,
          groups = a.batch;
  return [this, kernel, slots, counts, choices, experts, groups] {
    kernel();
    if (int64_t(routing.kept.size()) < experts)
      routing.kept.resize(size_t(experts), 0.0);
    for (int64_t b = 0; b < groups; ++b)
      for (int64_t e = 0; e < experts; ++e)
        routing.kept[size_t(e)] += counts[b * experts + e];
    for (int64_t i = 0; i < choices; ++i)
      routing.dropped += slots[i] < 0;
    routing.choices += double(choices);
  };
}

} // namespace partition::runtime::cpubackend
