//===- XfmrVerify.h - checks the xfmr verifiers share ------------*- C++ -*-===//
//
// The type and shape checks of XfmrOps.cpp, for the verifiers kept in files
// of their own (XfmrAttention.cpp). Each emits one op error naming the
// operand, the expected type and where its sizes came from.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_DIALECTS_XFMR_XFMRVERIFY_H
#define PARTITION_DIALECTS_XFMR_XFMRVERIFY_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/APFloat.h"

namespace partition::xfmr::verify {

mlir::RankedTensorType tensorType(mlir::Value value);

/// Every xfmr tensor has a static shape: the memory planner and the
/// sharding pass both reason about exact sizes.
mlir::LogicalResult verifyStaticShapes(mlir::Operation *op);

/// `what` must have type tensor<shape x elementType>; `origin` says where
/// the expected sizes come from.
mlir::LogicalResult expectType(mlir::Operation *op, llvm::StringRef what,
                               mlir::Type actual, llvm::ArrayRef<int64_t> shape,
                               mlir::Type elementType, llvm::StringRef origin);

mlir::LogicalResult expectSameType(mlir::Operation *op, llvm::StringRef what,
                                   mlir::Value value, llvm::StringRef reference,
                                   mlir::Value referenceValue);

mlir::LogicalResult expectRank(mlir::Operation *op, llvm::StringRef what,
                               mlir::Value value, int64_t rank,
                               llvm::StringRef layout);

mlir::LogicalResult expectAtLeastRank1(mlir::Operation *op,
                                       llvm::StringRef what, mlir::Value value);

mlir::LogicalResult expectPositive(mlir::Operation *op, llvm::StringRef what,
                                   llvm::APFloat value);

} // namespace partition::xfmr::verify

#endif // PARTITION_DIALECTS_XFMR_XFMRVERIFY_H
