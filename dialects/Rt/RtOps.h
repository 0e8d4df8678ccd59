//===- RtOps.h - ops of the runtime-level dialect ---------------*- C++ -*-===//

#ifndef PARTITION_DIALECTS_RT_RTOPS_H
#define PARTITION_DIALECTS_RT_RTOPS_H

#include "dialects/Dist/DistDialect.h"
#include "dialects/Rt/RtDialect.h"
#include "runtime/program/KernelTable.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_TYPEDEF_CLASSES
#include "dialects/Rt/RtTypes.h.inc"

#define GET_OP_CLASSES
#include "dialects/Rt/RtOps.h.inc"

#endif // PARTITION_DIALECTS_RT_RTOPS_H
