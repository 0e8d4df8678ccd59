//===- CudaDispatch.cpp - kernel instructions bound to their launches -----===//
//
// Compiles each kernel instruction once into a call that launches it on the
// compute stream with its pointers and sizes (runtime/backend/cuda/kernels,
// runtime/backend/cuda/attention; the linear kernels go to CudaGemm.cpp).
// The switch in KernelLauncher::compile lists every kernel (no default): a
// kernel added to Kernels.def fails to build here until the CUDA backend
// runs it. It is one switch, longer than the other functions, on purpose:
// one case per kernel is the one place the compiler can check for
// completeness.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/CudaBackendImpl.h"

namespace partition::runtime::cudabackend {

namespace {

/// Carries a storage type into compileKernel's generic lambda.
template <typename T> struct Tag {
  using type = T;
};

/// What a launch needs, in storage type T: plain pointers and sizes. Each
/// call captures a copy (`[=, *this]`): it outlives the KernelArgs and the
/// launcher it was compiled from.
template <typename T> struct KernelLauncher {
  std::vector<uint8_t *> p;
  cudaStream_t s = nullptr;
  int *bad = nullptr;
  void *ws = nullptr;
  size_t wsBytes = 0;
  std::vector<float> floats;
  int64_t rows = 0, channels = 0, vocab = 0, size = 0, batch = 0, seq = 0,
          positions = 0;
  cuda::AttentionShape attention{};
  cuda::MoeShape moe{};
  cuda::ExpertGemmShape expertGemm{};
  MoeScoring scoring = MoeScoring::Softmax;
  cublasHandle_t blas = nullptr;
  bool tf32 = false;

  float *f(int i) const { return reinterpret_cast<float *>(p[i]); }
  int32_t *i32(int i) const { return reinterpret_cast<int32_t *>(p[i]); }
  T *t(int i) const { return reinterpret_cast<T *>(p[i]); }

  /// The launch of kernel `a.kernel`. Every kernel is listed (no
  /// default): a kernel added to Kernels.def fails to build here until the
  /// CUDA backend runs it.
  std::function<void()> compile(const KernelArgs &a,
                                const std::string &where) const {
    switch (a.kernel) {
    // Kernels without a storage type of their own (the optimizer, fills,
    // copies, casts, block moves) and the vocabulary-parallel loss (f32).
    case KernelId::AdamW: {
      cuda::AdamWConfig config{floats[0], floats[1], floats[2], floats[3]};
      return [=, *this] {
        cuda::adamw(f(0), f(1), f(2), f(3), i32(4), f(5), f(6), f(7), f(8),
                    size, config, s);
      };
    }
    case KernelId::AdamWBlock: {
      cuda::AdamWConfig config{floats[0], floats[1], floats[2], floats[3]};
      int64_t blocks = a.blocks;
      return [=, *this] {
        cuda::adamwBlock(f(0), i32(1), blocks, f(2), f(3), f(4), i32(5), f(6),
                         f(7), f(8), f(9), size, config, bad, s);
      };
    }
    case KernelId::Fill: {
      float value = floats[0];
      switch (a.buffers[0]->dtype) {
      case DType::I32:
        return [=, *this] {
          cuda::fillI32(i32(0), static_cast<int32_t>(value), size, s);
        };
      case DType::BF16:
        return [=, *this] {
          cuda::fill<bf16>(reinterpret_cast<bf16 *>(p[0]), value, size, s);
        };
      case DType::F32:
        break;
      }
      return [=, *this] { cuda::fill<float>(f(0), value, size, s); };
    }
    case KernelId::AddI32:
      return [=, *this] { cuda::addI32(i32(0), i32(1), i32(2), size, s); };
    case KernelId::Copy: {
      size_t bytes = a.buffers[1]->bytes;
      return [=, *this] { cuda::copyBytes(p[0], p[1], bytes, s); };
    }
    case KernelId::Cast: {
      DType from = a.buffers[0]->dtype, to = a.buffers[1]->dtype;
      int64_t elements = a.buffers[1]->elements;
      if (from == DType::F32 && to == DType::BF16)
        return [=, *this] {
          cuda::cast<float, bf16>(f(0), reinterpret_cast<bf16 *>(p[1]),
                                  elements, s);
        };
      if (from == DType::BF16 && to == DType::F32)
        return [=, *this] {
          cuda::cast<bf16, float>(reinterpret_cast<const bf16 *>(p[0]), f(1),
                                  elements, s);
        };
      size_t bytes = a.buffers[1]->bytes;
      return [=, *this] { cuda::copyBytes(p[0], p[1], bytes, s); };
    }
    case KernelId::FlatPack:
    case KernelId::FlatUnpack: {
      int elementBytes = int(dtypeBytes(a.buffers[0]->dtype));
      int64_t size = a.size, rows = a.rows, columns = a.channels,
              offset = a.inner;
      if (a.kernel == KernelId::FlatPack)
        return [=, *this] {
          cuda::flatPack(p[0], p[1], size, rows, columns, offset,
                         elementBytes, s);
        };
      return [=, *this] {
        cuda::flatUnpack(p[0], p[1], size, rows, columns, offset,
                         elementBytes, s);
      };
    }
    case KernelId::SliceBlock: {
      int elementBytes = int(dtypeBytes(a.buffers[0]->dtype));
      int64_t outer = a.outer, blockDim = a.blockDim, inner = a.inner,
              blocks = a.blocks;
      return [=, *this] {
        cuda::sliceBlock(p[0], i32(1), p[2], outer, blockDim, inner, blocks,
                         elementBytes, bad, s);
      };
    }
    case KernelId::VocabParallelLoss:
      return [=, *this] {
        cuda::vocabParallelLoss(f(0), f(1), f(2), f(3), rows, ws, s);
      };
    // Token and position embeddings, whole or split over the vocabulary.
    case KernelId::Embedding:
      return [=, *this] {
        cuda::embedding<T>(i32(0), t(1), t(2), rows, vocab, channels, bad, s);
      };
    case KernelId::EmbeddingGradAdd: {
      size_t bytes = a.buffers[3]->bytes;
      return [=, *this] {
        if (p[2] != p[3])
          cuda::copyBytes(p[2], p[3], bytes, s);
        cuda::embeddingGrad<T>(t(0), i32(1), t(3), rows, vocab, channels,
                               /*accumulate=*/true, ws, bad, s);
      };
    }
    case KernelId::EmbeddingGrad:
      return [=, *this] {
        cuda::embeddingGrad<T>(t(0), i32(1), t(2), rows, vocab, channels,
                               /*accumulate=*/false, ws, bad, s);
      };
    case KernelId::PositionEmbedding:
      return [=, *this] {
        cuda::positionEmbedding<T>(t(0), t(1), t(2), batch, seq, channels, s);
      };
    case KernelId::PositionEmbeddingGrad:
      return [=, *this] {
        cuda::positionEmbeddingGrad<T>(t(0), t(1), batch, seq, positions,
                                       channels, s);
      };
    case KernelId::VocabParallelEmbedding:
      return [=, *this] {
        cuda::vocabParallelEmbedding<T>(i32(0), t(1), i32(2), t(3), rows,
                                        vocab, channels, bad, s);
      };
    case KernelId::VocabParallelEmbeddingGrad:
      return [=, *this] {
        cuda::vocabParallelEmbeddingGrad<T>(t(0), i32(1), i32(2), t(3), rows,
                                            vocab, channels, ws, bad, s);
      };
    // Norms, activations, elementwise arithmetic and attention.
    case KernelId::LayerNorm: {
      float eps = floats[0];
      return [=, *this] {
        cuda::layerNorm<T>(t(0), t(1), t(2), t(3), rows, channels, eps, s);
      };
    }
    case KernelId::LayerNormGrad: {
      float eps = floats[0];
      return [=, *this] {
        cuda::layerNormGrad<T>(t(0), t(1), t(2), t(3), t(4), t(5), rows,
                               channels, eps, ws, s);
      };
    }
    case KernelId::RMSNorm: {
      float eps = floats[0];
      return [=, *this] {
        cuda::rmsNorm<T>(t(0), t(1), t(2), rows, channels, eps, s);
      };
    }
    case KernelId::RMSNormGrad: {
      float eps = floats[0];
      return [=, *this] {
        cuda::rmsNormGrad<T>(t(0), t(1), t(2), t(3), t(4), rows, channels,
                             eps, ws, s);
      };
    }
    case KernelId::Gelu:
      return [=, *this] { cuda::gelu<T>(t(0), t(1), size, s); };
    case KernelId::GeluGrad:
      return [=, *this] { cuda::geluGrad<T>(t(0), t(1), t(2), size, s); };
    case KernelId::Swiglu:
      return [=, *this] { cuda::swiglu<T>(t(0), t(1), t(2), size, s); };
    case KernelId::SwigluGrad:
      return [=, *this] {
        cuda::swigluGrad<T>(t(0), t(1), t(2), t(3), t(4), size, s);
      };
    case KernelId::Add:
      return [=, *this] { cuda::add<T>(t(0), t(1), t(2), size, s); };
    case KernelId::Scale: {
      float factor = floats[0];
      return [=, *this] { cuda::scale<T>(t(0), factor, t(1), size, s); };
    }
    case KernelId::Attention:
    case KernelId::AttentionScaled:
      return [=, *this] {
        cuda::attention<T>(t(0), t(1), t(2), t(3), attention, ws, wsBytes, s);
      };
    case KernelId::AttentionGrad:
    case KernelId::AttentionScaledGrad:
      return [=, *this] {
        cuda::attentionGrad<T>(t(0), t(1), t(2), t(3), t(4), t(5), t(6),
                               attention, ws, wsBytes, s);
      };
    // Context parallelism: explicit positions and ring attention's merge.
    case KernelId::SequencePositions: {
      int64_t chunks = a.chunks;
      return [=, *this] { cuda::sequencePositions(i32(0), seq, chunks, s); };
    }
    case KernelId::PositionEmbeddingAt:
      return [=, *this] {
        cuda::positionEmbeddingAt<T>(t(0), t(1), i32(2), t(3), batch, seq,
                                     positions, channels, bad, s);
      };
    case KernelId::PositionEmbeddingAtGrad:
      return [=, *this] {
        cuda::positionEmbeddingAtGrad<T>(t(0), i32(1), t(2), batch, seq,
                                         positions, channels, bad, s);
      };
    case KernelId::AttentionMerge: {
      int64_t heads = a.heads, headDim = a.headDim;
      return [=, *this] {
        cuda::attentionMerge<T>(t(0), f(1), t(2), f(3), t(4), f(5), batch, seq,
                                heads, headDim, s);
      };
    }
    // Attention at explicit positions (queries and keys of their own
    // lengths).
    case KernelId::AttentionPositions: {
      int64_t keySeq = a.keySeq;
      return [=, *this] {
        cuda::attentionPositions<T>(t(0), t(1), t(2), i32(3), i32(4), t(5),
                                    attention, keySeq, ws, wsBytes, s);
      };
    }
    case KernelId::AttentionPositionsGrad: {
      int64_t keySeq = a.keySeq;
      return [=, *this] {
        cuda::attentionPositionsGrad<T>(t(0), t(1), t(2), t(3), i32(4), i32(5),
                                        t(6), t(7), t(8), attention, keySeq,
                                        ws, wsBytes, s);
      };
    }
    // Ring attention: one key block with its lse, and its backward from the
    // final out and lse.
    case KernelId::AttentionBlock: {
      int64_t keySeq = a.keySeq;
      return [=, *this] {
        cuda::attentionBlock<T>(t(0), t(1), t(2), i32(3), i32(4), t(5), f(6),
                                attention, keySeq, ws, wsBytes, s);
      };
    }
    case KernelId::AttentionBlockGrad: {
      int64_t keySeq = a.keySeq;
      return [=, *this] {
        cuda::attentionBlockGrad<T>(t(0), t(1), t(2), t(3), i32(4), i32(5),
                                    t(6), f(7), t(8), t(9), t(10), attention,
                                    keySeq, ws, wsBytes, s);
      };
    }
    // The cross-entropy loss, whole or in its vocabulary-parallel steps.
    case KernelId::SoftmaxCrossEntropy:
      return [=, *this] {
        cuda::softmaxCrossEntropy<T>(t(0), i32(1), f(2), rows, vocab, ws, bad,
                                     s);
      };
    case KernelId::SoftmaxCrossEntropyGrad:
      return [=, *this] {
        cuda::softmaxCrossEntropyGrad<T>(f(0), t(1), i32(2), t(3), rows, vocab,
                                         bad, s);
      };
    case KernelId::VocabParallelMax:
      return [=, *this] {
        cuda::vocabParallelMax<T>(t(0), f(1), rows, vocab, s);
      };
    case KernelId::VocabParallelTargetLogit:
      return [=, *this] {
        cuda::vocabParallelTargetLogit<T>(t(0), i32(1), i32(2), f(3), rows,
                                          vocab, bad, s);
      };
    case KernelId::VocabParallelSumExp:
      return [=, *this] {
        cuda::vocabParallelSumExp<T>(t(0), f(1), f(2), rows, vocab, s);
      };
    case KernelId::VocabParallelCrossEntropyGrad:
      return [=, *this] {
        cuda::vocabParallelCrossEntropyGrad<T>(f(0), t(1), i32(2), i32(3),
                                               f(4), f(5), t(6), rows, vocab,
                                               bad, s);
      };
    case KernelId::VocabParallelMaskedMax: {
      int64_t logical = a.logicalVocab;
      return [=, *this] {
        cuda::vocabParallelMax<T>(t(0), f(2), rows, vocab, s, i32(1),
                                  logical);
      };
    }
    case KernelId::VocabParallelMaskedSumExp: {
      int64_t logical = a.logicalVocab;
      return [=, *this] {
        cuda::vocabParallelSumExp<T>(t(0), f(1), f(3), rows, vocab, s, i32(2),
                                     logical);
      };
    }
    case KernelId::VocabParallelMaskedCrossEntropyGrad: {
      int64_t logical = a.logicalVocab;
      return [=, *this] {
        cuda::vocabParallelCrossEntropyGrad<T>(f(0), t(1), i32(2), i32(3),
                                               f(4), f(5), t(6), rows, vocab,
                                               bad, s, logical);
      };
    }
    // GEMMs (the Gemm cost class): cuBLASLt, planned by compileLinear,
    // which compileKernel calls before it gets here.
    case KernelId::Linear:
    case KernelId::LinearBias:
    case KernelId::LinearGradInput:
    case KernelId::LinearGradWeight:
    case KernelId::LinearGradWeightBias:
    case KernelId::NumKernels:
      break;
    // Mixture of experts (kernels/Moe.h): routing, dispatch and combine,
    // the router's losses; gates follow the float type (T), the aux loss
    // and its incoming gradient are f32.
    case KernelId::MoeRoute:
    case KernelId::MoeRouteBiased: {
      if (a.topK > cuda::kMaxRouteTopK || a.experts > cuda::kMaxRouteExperts)
        throw ProgramError(
            where + ": routes to " + std::to_string(a.topK) + " of " +
            std::to_string(a.experts) + " experts; the CUDA routing kernel "
            "takes top_k up to " + std::to_string(cuda::kMaxRouteTopK) +
            " and " + std::to_string(cuda::kMaxRouteExperts) +
            " experts (run it on the CPU backend)");
      int o = a.kernel == KernelId::MoeRouteBiased ? 2 : 1;
      bool biased = o == 2;
      return [=, *this] {
        cuda::moeRoute<T>(t(0), biased ? f(1) : nullptr, t(o), i32(o + 1),
                          i32(o + 2), i32(o + 3), moe, scoring, s);
      };
    }
    case KernelId::MoeRouteGrad:
      return [=, *this] {
        cuda::moeRouteGrad<T>(t(0), t(1), i32(2), t(3), moe, scoring, bad, s);
      };
    case KernelId::MoeDispatch:
      return [=, *this] {
        cuda::moeDispatch<T>(t(0), i32(1), i32(2), t(3), moe, bad, s);
      };
    case KernelId::MoeDispatchGrad:
      return [=, *this] {
        cuda::moeCombine<T>(t(0), nullptr, i32(1), i32(2), t(3), moe, bad, s);
      };
    case KernelId::MoeCombine:
      return [=, *this] {
        cuda::moeCombine<T>(t(0), t(1), i32(2), i32(3), t(4), moe, bad, s);
      };
    case KernelId::MoeCombineGrad:
      return [=, *this] {
        cuda::moeCombineGrad<T>(t(0), t(1), t(2), i32(3), i32(4), t(5), t(6),
                                moe, bad, s);
      };
    case KernelId::MoeAuxLoss: {
      float aux = floats[0], z = floats[1];
      return [=, *this] {
        cuda::moeAuxLoss<T>(t(0), i32(1), f(2), moe, scoring, aux, z, ws, bad,
                            s);
      };
    }
    case KernelId::MoeAuxLossGrad: {
      float aux = floats[0], z = floats[1];
      return [=, *this] {
        cuda::moeAuxLossGrad<T>(f(0), t(1), i32(2), t(3), moe, scoring, aux,
                                z, ws, bad, s);
      };
    }
    // DeepSeek-V3's routing-bias update (f32), once per step.
    case KernelId::MoeExpertLoad: {
      int64_t batch = a.batch, experts = a.experts;
      return [=, *this] {
        cuda::moeExpertLoad(i32(0), f(1), batch, experts, s);
      };
    }
    case KernelId::MoeBiasUpdate: {
      int64_t experts = a.experts;
      float rate = floats[0];
      return [=, *this] {
        cuda::moeBiasUpdate(f(0), f(1), f(2), experts, rate, s);
      };
    }
    // The experts' grouped GEMMs (cost GroupedGemm, so not compileLinear's):
    // cuBLAS strided-batched calls at full capacity, rows past the counts
    // re-zeroed (exact because every producer leaves them zero; see
    // kernels/ExpertGemm.cu).
    case KernelId::ExpertLinear:
      return [=, *this] {
        cuda::expertLinear<T>(blas, t(0), t(1), i32(2), t(3), expertGemm,
                              tf32, bad, s);
      };
    case KernelId::ExpertLinearGradInput:
      return [=, *this] {
        cuda::expertLinearGradInput<T>(blas, t(0), t(1), i32(2), t(3),
                                       expertGemm, tf32, bad, s);
      };
    case KernelId::ExpertLinearGradWeight:
      return [=, *this] {
        cuda::expertLinearGradWeight<T>(blas, t(0), t(1), i32(2), t(3),
                                        expertGemm, tf32, bad, s);
      };
    }
    throw ProgramError(where + ": invalid kernel id");
  }
};

} // namespace

std::function<void()> CudaBackend::compileKernel(const KernelArgs &a,
                                                 const Instruction &instruction,
                                                 const std::string &where) {
  auto typed = [&](auto tag) -> std::function<void()> {
    using T = typename decltype(tag)::type;
    KernelLauncher<T> launcher;
    for (const BufferInfo *buffer : a.buffers)
      launcher.p.push_back(arena + buffer->offset);
    launcher.s = compute;
    launcher.bad = badId;
    launcher.ws = workspace;
    launcher.wsBytes = workspaceSize;
    launcher.floats = instruction.floats;
    launcher.rows = a.rows, launcher.channels = a.channels;
    launcher.vocab = a.vocab, launcher.size = a.size;
    launcher.batch = a.batch, launcher.seq = a.seq;
    launcher.positions = a.positions;
    launcher.attention = {a.batch,   a.seq,    a.heads,      a.kvHeads,
                          a.headDim, a.causal, a.ropeTheta, a.ropeScaling,
                          a.window};
    launcher.moe = {a.batch,   a.seq,  a.channels,
                    a.experts, a.topK, a.capacity};
    launcher.expertGemm = {a.batch, a.experts, a.capacity, a.inFeatures,
                           a.outFeatures};
    launcher.scoring = a.scoring;
    launcher.blas = blas;
    launcher.tf32 = tf32;
    // GEMMs go to cuBLASLt; every other kernel to its launch.
    if (kernelInfo(a.kernel).cost == KernelCost::Gemm)
      return compileLinear(a, where);
    return launcher.compile(a, where);
  };
  std::function<void()> kernel =
      a.floatType == DType::BF16 ? typed(Tag<bf16>{}) : typed(Tag<float>{});
  if (a.kernel == KernelId::MoeAuxLoss && routingAux) {
    // The router's losses for the metrics, weighted by their groups, as
    // the CPU backend tallies them.
    const auto *value =
        reinterpret_cast<const float *>(arena + a.buffers.back()->offset);
    double groups = double(a.batch);
    return [this, kernel, value, groups] {
      kernel();
      cuda::moeAuxLossTally(value, routingAux, groups, compute);
      routingAuxGroups += groups;
    };
  }
  if (a.kernel != KernelId::MoeRoute && a.kernel != KernelId::MoeRouteBiased)
    return kernel;
  // Routing: the expert load for the metrics, summed on the device from
  // the kernel's counts (the last output) as the CPU backend sums its own.
  const auto *counts =
      reinterpret_cast<const int32_t *>(arena + a.buffers.back()->offset);
  cuda::MoeShape shape{a.batch,   a.seq,  a.channels,
                       a.experts, a.topK, a.capacity};
  double choices = double(a.batch * a.seq * a.topK);
  return [this, kernel, counts, shape, choices] {
    kernel();
    cuda::moeRoutingTally(counts, routingKept, shape, compute);
    routingChoices += choices;
  };
}

} // namespace partition::runtime::cudabackend
