//===- RtViews.h - the buffer behind a view ---------------------*- C++ -*-===//
//
// Lowered steps name parts of buffers by views: a memref.subview (a slice,
// a tensor's chunk in a flat bucket) and a memref.collapse_shape (a tensor
// seen flat, so that ZeRO slices a parameter's chunk without packing it).
// Making a view reads and writes nothing; the ops that use a view read and
// write the bytes of the buffer it views, which liveness, the memory plan
// and the checks of started collectives must see through.
//
//===----------------------------------------------------------------------===//
#ifndef PARTITION_DIALECTS_RT_RTVIEWS_H
#define PARTITION_DIALECTS_RT_RTVIEWS_H

#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace partition::rt {

/// Whether `op` only makes a view of another buffer.
inline bool isView(mlir::Operation *op) {
  return mlir::isa<mlir::memref::SubViewOp, mlir::memref::CollapseShapeOp>(op);
}

/// The buffer `value` views: the source of its views, recursively.
inline mlir::Value viewedBuffer(mlir::Value value) {
  while (mlir::Operation *op = value.getDefiningOp()) {
    if (auto view = mlir::dyn_cast<mlir::memref::SubViewOp>(op))
      value = view.getSource();
    else if (auto collapse = mlir::dyn_cast<mlir::memref::CollapseShapeOp>(op))
      value = collapse.getSrc();
    else
      break;
  }
  return value;
}

} // namespace partition::rt

#endif // PARTITION_DIALECTS_RT_RTVIEWS_H
