//===- RtDialect.h - the runtime-level dialect ------------------*- C++ -*-===//

#ifndef PARTITION_DIALECTS_RT_RTDIALECT_H
#define PARTITION_DIALECTS_RT_RTDIALECT_H

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Dialect.h"

#include "dialects/Rt/RtDialect.h.inc"

#endif // PARTITION_DIALECTS_RT_RTDIALECT_H
