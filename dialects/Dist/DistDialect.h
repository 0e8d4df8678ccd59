//===- DistDialect.h - the distribution dialect -----------------*- C++ -*-===//

#ifndef PARTITION_DIALECTS_DIST_DISTDIALECT_H
#define PARTITION_DIALECTS_DIST_DISTDIALECT_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"

#include "dialects/Dist/DistDialect.h.inc"

#include "dialects/Dist/DistEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/Dist/DistAttrs.h.inc"

#endif // PARTITION_DIALECTS_DIST_DISTDIALECT_H
