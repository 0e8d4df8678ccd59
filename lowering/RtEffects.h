//===- RtEffects.h - what an op of the lowered step reads and writes -----===//
//
// The scheduling passes on the rt level (--rt-overlap-collectives,
// --rt-offload-optimizer) move ops of a straight-line step across others.
// Every memory effect of the lowered step is on memref operands: a kernel
// writes its outputs and reads its inputs, a collective or wait is taken to
// touch every buffer it names, views only alias. Two ops commute when
// neither writes a buffer the other touches.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_LOWERING_RTEFFECTS_H
#define PARTITION_LOWERING_RTEFFECTS_H

#include "mlir/IR/Operation.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace partition::rteffects {

/// The buffer `value` views: the source of its views, recursively.
mlir::Value baseBuffer(mlir::Value value);

/// Whether `op` reads, writes or defines (a view of) one of `bases`.
bool touches(mlir::Operation *op,
             const llvm::SmallPtrSetImpl<mlir::Value> &bases);

/// Ops another may move across when they do not touch its buffers: the rt
/// ops (whose every memory effect is on their memref operands) and the
/// pure bookkeeping of the lowered step. Anything else stops the move.
bool movableAcross(mlir::Operation *op);

/// The buffers `op` writes (bases): a kernel's outputs; every memref
/// operand of any other op, conservatively.
llvm::SmallPtrSet<mlir::Value, 8> writtenBases(mlir::Operation *op);

/// Whether running `a` and `b` in either order could give another result:
/// one writes a buffer the other reads or writes (reads of one buffer by
/// both, AdamW's learning rate and step, commute).
bool conflicts(mlir::Operation *a, mlir::Operation *b);

/// Whether `op` writes the whole of its operand #`index` without reading
/// it first: a kernel's output (the buffer itself, not a view) that none
/// of its inputs views, or a receive's buffer.
bool overwritesWhole(mlir::Operation *op, unsigned index);
/// Whether `op` writes one of `bases` (a view writes nothing).
bool writesAny(mlir::Operation *op,
               const llvm::SmallPtrSetImpl<mlir::Value> &bases);

} // namespace partition::rteffects

#endif // PARTITION_LOWERING_RTEFFECTS_H
