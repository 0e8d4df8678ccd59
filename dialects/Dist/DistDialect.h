//===- DistDialect.h - the distribution dialect -----------------*- C++ -*-===//

#ifndef PARTITION_DIALECTS_DIST_DISTDIALECT_H
#define PARTITION_DIALECTS_DIST_DISTDIALECT_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/DialectImplementation.h"

#include <optional>

#include "dialects/Dist/DistDialect.h.inc"

#include "dialects/Dist/DistEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/Dist/DistAttrs.h.inc"

namespace partition::dist {
/// The module's plan (`dist.plan`), or null when --dist-apply-plan has not
/// run.
PlanAttr getPlan(mlir::ModuleOp module);
} // namespace partition::dist

#endif // PARTITION_DIALECTS_DIST_DISTDIALECT_H
