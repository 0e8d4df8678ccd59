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
#include "mlir/Dialect/MemRef/Utils/MemRefUtils.h"

#include <optional>
#include <utility>

namespace partition::rt {

/// Whether `type` has a static shape and covers one contiguous row-major
/// block (memref::isStaticShapeAndContiguousRowMajor). An identity layout
/// is answered without deriving its strides, which MLIR does through
/// affine expressions it builds and simplifies on each call: 3% of a
/// compile, most of it in the verifier of every rt.kernel.
inline bool isContiguousRowMajor(mlir::MemRefType type) {
  if (!type.hasStaticShape())
    return false;
  if (type.getLayout().isIdentity())
    return true;
  return mlir::memref::isStaticShapeAndContiguousRowMajor(type);
}

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

/// The bytes of the buffer it views (viewedBuffer) that `value` covers,
/// [begin, end), from its layout's static offset (which counts from the
/// start of that buffer through any chain of views); nullopt when the
/// layout is not static and contiguous.
inline std::optional<std::pair<int64_t, int64_t>> viewedBytes(mlir::Value value) {
  auto type = mlir::dyn_cast<mlir::MemRefType>(value.getType());
  if (!type || !type.getElementType().isIntOrFloat() ||
      type.getElementTypeBitWidth() % 8 != 0 || !isContiguousRowMajor(type))
    return std::nullopt;
  llvm::SmallVector<int64_t> strides;
  int64_t offset = 0;
  if (mlir::failed(type.getStridesAndOffset(strides, offset)) ||
      mlir::ShapedType::isDynamic(offset))
    return std::nullopt;
  int64_t bytes = type.getElementTypeBitWidth() / 8;
  return std::make_pair(offset * bytes,
                        (offset + type.getNumElements()) * bytes);
}

/// Whether `a` and `b` may share bytes: views of one buffer, unless both
/// cover known, disjoint byte ranges of it (two slices of one tensor).
inline bool mayOverlap(mlir::Value a, mlir::Value b) {
  if (viewedBuffer(a) != viewedBuffer(b))
    return false;
  std::optional<std::pair<int64_t, int64_t>> x = viewedBytes(a),
                                              y = viewedBytes(b);
  return !x || !y || (x->first < y->second && y->first < x->second);
}

} // namespace partition::rt

#endif // PARTITION_DIALECTS_RT_RTVIEWS_H
