//===- XfmrOps.h - ops of the transformer model dialect ---------*- C++ -*-===//

#ifndef PARTITION_DIALECTS_XFMR_XFMROPS_H
#define PARTITION_DIALECTS_XFMR_XFMROPS_H

#include "dialects/Xfmr/KernelCall.h"
#include "dialects/Xfmr/ShardingRule.h"
#include "dialects/Xfmr/XfmrDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/Xfmr/XfmrInterfaces.h.inc"

#define GET_OP_CLASSES
#include "dialects/Xfmr/XfmrOps.h.inc"

#endif // PARTITION_DIALECTS_XFMR_XFMROPS_H
