//===- RepeatedKernels.h - one kernel where several compute the same value -*- C++ -*-===//
//
// Helpers of --rt-microbatch-loop (MicrobatchLoop.cpp) over rt IR before
// the memory plan: which kernel alone writes a buffer, and the merging of
// kernels that compute the same value from the step's arguments.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_LOWERING_REPEATEDKERNELS_H
#define PARTITION_LOWERING_REPEATEDKERNELS_H

#include "dialects/Rt/RtOps.h"

#include "mlir/IR/Operation.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace partition {

/// A hash of `op`'s attributes (its properties and its discardable
/// attributes), and whether two ops of one name have equal ones: what
/// comparing getAttrDictionary() says, without the dictionary it assembles
/// from the properties on every call (a fifth of --rt-microbatch-loop's
/// time).
llvm::hash_code attributesHash(mlir::Operation *op);
bool sameAttributes(mlir::Operation *a, mlir::Operation *b);
/// sameAttributes, or the same but for their `label` (a collective's or
/// transfer's name in traces and errors: "partial sum 7 over [tp]", "F mb3
/// activations"), which differs from micro-batch to micro-batch.
bool sameAttributesButLabels(mlir::Operation *a, mlir::Operation *b);

/// The one kernel that writes `buffer`, an allocation its kernels and
/// views alone use; else null (any other user, a collective, may write it).
rt::KernelOp soleKernelWriter(mlir::Value buffer);

/// Adds to `written` the buffers `op` may write: a kernel's outputs, any
/// other op's buffer operands (collectives and transfers write theirs),
/// views and allocations aside; each as the buffer it views.
void addWrittenBuffers(mlir::Operation *op,
                       llvm::DenseSet<mlir::Value> &written);

/// Merges the kernels among `ops` (one block's, in order) for which
/// `mayMerge` holds that compute the same value: the same kernel and
/// attributes on the same inputs (at least one: constants are left alone),
/// each input a function argument (or a view of one) that no earlier op of
/// `ops` writes or the output of a kernel kept here, each output an
/// allocation the kernel alone writes. The later of two goes, with its
/// allocations, where the first one's outputs are still read after it (the
/// two buffers then become one, live over both their ranges; a first result
/// read no more is not kept alive for the second); its outputs' users read
/// the first one's. Returns whether any went.
///
/// The micro-batch loop's use: a bf16 plan casts each weight once per
/// micro-batch; the casts of the warm-up's micro-batches in flight at once
/// read the same parameter, and kept apart each copy lives through the loop
/// until its micro-batch's backward. Where the backward casts again
/// (recomputation), the forward's copy is read no more and stays apart.
bool mergeRepeatedKernels(llvm::ArrayRef<mlir::Operation *> ops,
                          llvm::function_ref<bool(mlir::Operation *)> mayMerge);

/// Of `candidates` (kernels of a micro-batch loop's body and its copy, in
/// order, that read only the step's arguments, constants and one another),
/// those to compute once above the loop: constants (no input, or reading
/// constants and arguments alone: the zero a sum starts at, its tensor-
/// parallel block, carried into the loop); kernels whose outputs a kernel
/// of another block (`blockOf`: body, copy, rest) reads, with the
/// candidates they read; and, so that body and copy stay alike, the
/// counterpart of each in the other block (the same kernel on the same
/// inputs) and each kernel that has none there (the other micro-batch
/// has that value from up front).
/// A kernel its own micro-batch alone reads, as a weight's bf16 copy cast
/// anew by each (and again by a backward that recomputes), stays: its
/// buffer lives no longer than unrolled. `isConstant` says which writer
/// outside the candidates fills a constant.
llvm::DenseSet<mlir::Operation *>
kernelsToHoist(llvm::ArrayRef<rt::KernelOp> candidates,
               llvm::function_ref<int(mlir::Operation *)> blockOf,
               llvm::function_ref<bool(rt::KernelOp)> isConstant);

/// Whether `reads` holds for an op reading `kernel`'s outputs (through
/// views), asked of each until it does.
bool anyReader(rt::KernelOp kernel,
               llvm::function_ref<bool(mlir::Operation *)> reads);
/// The same for the ops using `buffer` (through views).
bool anyReader(mlir::Value buffer,
               llvm::function_ref<bool(mlir::Operation *)> reads);

/// Replaces each `slice_block` of a buffer that one `fill` alone writes by
/// a fill of the block, and drops the fills nothing reads any more. A sum
/// of a tensor-parallel gradient starts at zero: built at the parameter's
/// full shape, then sliced, which kept the full-shape zeros of every
/// parameter through a micro-batch loop (293 GB on llama-70b tp8).
/// Returns whether anything changed.
bool fillBlocksOfFills(mlir::Block &body);

} // namespace partition

#endif // PARTITION_LOWERING_REPEATEDKERNELS_H
