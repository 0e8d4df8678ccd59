//===- XfmrShardingSupport.h - what the sharding rule files share -*- C++ -*-//
//
// The small helpers XfmrSharding.cpp and XfmrAttentionSharding.cpp both use
// to read the shapes of an op's values while writing its rule.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_DIALECTS_XFMR_XFMRSHARDINGSUPPORT_H
#define PARTITION_DIALECTS_XFMR_XFMRSHARDINGSUPPORT_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Value.h"

namespace partition::xfmr::sharding {

inline int64_t rankOf(mlir::Value value) {
  return mlir::cast<mlir::RankedTensorType>(value.getType()).getRank();
}

inline int64_t dimOf(mlir::Value value, int64_t dim) {
  return mlir::cast<mlir::RankedTensorType>(value.getType()).getDimSize(dim);
}

} // namespace partition::xfmr::sharding

#endif // PARTITION_DIALECTS_XFMR_XFMRSHARDINGSUPPORT_H
