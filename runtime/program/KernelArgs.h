//===- KernelArgs.h - the checked sizes of one instruction ------*- C++ -*-===//
//
// Every backend runs an instruction from the same sizes, derived here from
// its buffers' shapes and checked against each other, so a program whose
// shapes disagree is rejected at load time instead of reading or writing
// out of bounds.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_KERNELARGS_H
#define PARTITION_RUNTIME_KERNELARGS_H

#include "runtime/program/MoeScoring.h"
#include "runtime/program/Program.h"
#include "runtime/program/Rope.h"

namespace partition::runtime {

struct KernelArgs {
  KernelId kernel;
  /// The instruction's buffers: inputs, then outputs.
  std::vector<const BufferInfo *> buffers;
  /// The storage type (F32 or BF16) of the activation operands. Always F32
  /// whatever it is: losses and loss gradients, the vocabulary-parallel
  /// per-row statistics, and every adamw operand.
  DType floatType = DType::F32;

  /// Rows (product of leading dimensions) and the last dimension.
  int64_t rows = 0, channels = 0;
  /// linear: [rows, inFeatures] x [outFeatures, inFeatures]^T.
  int64_t inFeatures = 0, outFeatures = 0;
  /// Embedding tables and logits.
  int64_t vocab = 0, positions = 0;
  /// The masked vocabulary-parallel kernels: the logical vocabulary (global
  /// ids at or beyond it are padding); -1 for every other kernel.
  int64_t logicalVocab = -1;
  int64_t batch = 0, seq = 0;
  /// Attention's key sequence: seq, or with explicit positions the keys'
  /// own length (queries local, keys gathered).
  int64_t keySeq = 0;
  /// sequence_positions: the chunks of its layout order.
  int64_t chunks = 1;
  /// Attention.
  int64_t heads = 0, kvHeads = 0, headDim = 0;
  bool causal = true;
  float ropeTheta = 0.0f;
  /// attention_scaled and the ring attention kernels: the RoPE scaling
  /// (runtime/program/Rope.h) and the sliding window (0: none).
  RopeScaling ropeScaling;
  int64_t window = 0;
  /// Elementwise kernels: elements of the output.
  int64_t size = 0;
  /// slice_block: the input as [outer, blocks * blockDim, inner].
  /// flat_pack / flat_unpack: the bucket is [rows, channels]; the tensor
  /// (size elements) takes blockDim columns from column inner.
  int64_t outer = 0, blockDim = 0, inner = 0, blocks = 0;
  /// Mixture of experts: batch and seq are the groups and their tokens,
  /// channels the features of a token; experts E, choices per token top_k,
  /// rows per group and expert capacity, the router's MoeScoring.
  /// expert_linear: inFeatures / outFeatures of each expert's weight.
  int64_t experts = 0, topK = 0, capacity = 0;
  MoeScoring scoring = MoeScoring::Softmax;
};

/// Checks `instruction` of `program`; throws ProgramError naming it (as
/// `where`), its kernel and the sizes that disagree. An instruction that
/// never `runs` (a walk's region in a slot no action runs it in) may have
/// an output overlapping an input.
KernelArgs checkInstruction(const Program &program,
                            const Instruction &instruction,
                            const std::string &where, bool runs = true);

/// checkInstruction for every kernel instruction of every function, by
/// function and instruction; a collective or a transfer gets an empty
/// KernelArgs (they have no shapes to check here). What each backend does
/// first, before it allocates anything large.
std::vector<std::vector<KernelArgs>> checkInstructions(const Program &program);

} // namespace partition::runtime

#endif // PARTITION_RUNTIME_KERNELARGS_H
