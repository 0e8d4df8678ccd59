//===- CudaWorkspace.cpp - checking instructions, sizing workspaces -------===//
//
// Before the CUDA backend allocates anything large it checks every kernel
// instruction (checkInstruction) and sizes the device memory they share:
// the kernel workspace (the largest any kernel asks for) and the staging
// buffer of all-gathers and reduce-scatters along an inner dimension.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/CudaBackendImpl.h"

#include <algorithm>

namespace partition::runtime::cudabackend {

namespace {

/// The kernel workspace `a` needs on the device. The size functions check
/// the shapes (invalid_argument) and may query CUB (runtime_error).
size_t kernelWorkspaceBytes(const KernelArgs &a) {
  bool bf = a.floatType == DType::BF16;
  switch (a.kernel) {
  case KernelId::EmbeddingGrad:
  case KernelId::EmbeddingGradAdd:
    return cuda::embeddingGradWorkspaceSize(a.rows, a.vocab, a.channels);
  case KernelId::VocabParallelEmbeddingGrad:
    return cuda::vocabParallelEmbeddingGradWorkspaceSize(a.rows, a.vocab,
                                                         a.channels);
  case KernelId::LayerNormGrad:
    return cuda::layerNormGradWorkspaceSize(a.rows, a.channels);
  case KernelId::RMSNormGrad:
    return cuda::rmsNormGradWorkspaceSize(a.rows, a.channels);
  case KernelId::LinearGradWeightBias:
    return cuda::biasGradWorkspaceSize(a.rows, a.outFeatures);
  case KernelId::SoftmaxCrossEntropy:
    return cuda::softmaxCrossEntropyWorkspaceSize(a.rows);
  case KernelId::VocabParallelLoss:
    return cuda::vocabParallelLossWorkspaceSize(a.rows);
  case KernelId::Attention:
  case KernelId::AttentionGrad:
  case KernelId::AttentionScaled:
  case KernelId::AttentionScaledGrad: {
    cuda::AttentionShape shape{a.batch,   a.seq,     a.heads,
                               a.kvHeads, a.headDim, a.causal,
                               a.ropeTheta, a.ropeScaling, a.window};
    return std::max(cuda::attentionWorkspaceSize(shape, bf),
                    cuda::attentionGradWorkspaceSize(shape, bf));
  }
  case KernelId::AttentionPositions:
  case KernelId::AttentionPositionsGrad:
  case KernelId::AttentionBlock:
  case KernelId::AttentionBlockGrad: {
    cuda::AttentionShape shape{a.batch,   a.seq,     a.heads,
                               a.kvHeads, a.headDim, a.causal,
                               a.ropeTheta, a.ropeScaling, a.window};
    return std::max(
        cuda::attentionPositionsWorkspaceSize(shape, a.keySeq, false),
        cuda::attentionPositionsWorkspaceSize(shape, a.keySeq, true));
  }
  // Per-token statistics and per-group sums of the router's losses.
  case KernelId::MoeAuxLoss:
  case KernelId::MoeAuxLossGrad:
    return cuda::moeAuxLossWorkspaceSize(
        {a.batch, a.seq, a.channels, a.experts, a.topK, a.capacity});
  // No workspace. Every kernel is listed (no default): a kernel added
  // to Kernels.def fails to build here until it says what it needs.
  case KernelId::Embedding:
  case KernelId::PositionEmbedding:
  case KernelId::PositionEmbeddingGrad:
  case KernelId::SequencePositions:
  case KernelId::PositionEmbeddingAt:
  case KernelId::PositionEmbeddingAtGrad:
  case KernelId::AttentionMerge:
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
  case KernelId::AdamWBlock:
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
  case KernelId::MoeRoute:
  case KernelId::MoeRouteBiased:
  case KernelId::MoeRouteGrad:
  case KernelId::MoeDispatch:
  case KernelId::MoeDispatchGrad:
  case KernelId::MoeCombine:
  case KernelId::MoeCombineGrad:
  case KernelId::ExpertLinear:
  case KernelId::ExpertLinearGradInput:
  case KernelId::ExpertLinearGradWeight:
  case KernelId::MoeExpertLoad:
  case KernelId::MoeBiasUpdate:
  case KernelId::NumKernels:
    break;
  }
  return 0;
}

} // namespace

std::vector<std::vector<KernelArgs>>
CudaBackend::checkAndSize(const Program &program) {
  std::vector<std::vector<KernelArgs>> checked = checkInstructions(program);
  for (size_t f = 0; f < program.functions.size(); ++f) {
    const Function &function = program.functions[f];
    for (size_t i = 0; i < function.instructions.size(); ++i) {
      if (!function.instructions[i].isKernel())
        continue;
      const KernelArgs &a = checked[f][i];
      // Name the instruction in the size functions' errors.
      size_t need = 0;
      try {
        need = kernelWorkspaceBytes(a);
      } catch (const ProgramError &) {
        throw;
      } catch (const std::exception &error) {
        throw ProgramError(function.name + " instruction #" +
                           std::to_string(i) + ": " + error.what());
      }
      workspaceSize = std::max(workspaceSize, need);
      if (a.kernel == KernelId::MoeRoute ||
          a.kernel == KernelId::MoeRouteBiased)
        routingExperts = std::max(routingExperts, a.experts);
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
      // An all_to_all packs its input and receives into staging: twice.
      size_t copies =
          instruction.collective->kind == CollectiveKind::AllToAll ? 2 : 1;
      stagingSize = std::max<size_t>(
          stagingSize, copies * size_t(std::max(input.bytes, output.bytes)));
    }
  return checked;
}

} // namespace partition::runtime::cudabackend
