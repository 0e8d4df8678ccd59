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
#include "llvm/ADT/STLFunctionalExtras.h"

namespace partition {

/// The one kernel that writes `buffer`, an allocation its kernels and
/// views alone use; else null (any other user, a collective, may write it).
rt::KernelOp soleKernelWriter(mlir::Value buffer);

/// Merges the kernels among `ops` (one block's, in order) for which
/// `mayMerge` holds that compute the same value: the same kernel and
/// attributes on the same inputs (at least one: constants are left alone),
/// each input a function argument (or a view of one) that no earlier op of
/// `ops` writes or the output of a kernel kept here, each output an
/// allocation the kernel alone writes. The later of two goes, with its
/// allocations; its outputs' users read the first one's. Returns whether
/// any went.
///
/// The micro-batch loop's use: a bf16 plan casts each weight once per
/// micro-batch (twice where the backward recomputes); the casts of the
/// warm-up, of the body (moved above it) and of the tail all read the same
/// parameter, and kept apart those begun before the loop live through it,
/// one copy per micro-batch.
bool mergeRepeatedKernels(llvm::ArrayRef<mlir::Operation *> ops,
                          llvm::function_ref<bool(mlir::Operation *)> mayMerge);

} // namespace partition

#endif // PARTITION_LOWERING_REPEATEDKERNELS_H
