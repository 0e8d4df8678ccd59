//===- Passes.h - lowering of a training step to the runtime ----*- C++ -*-===//

#ifndef PARTITION_LOWERING_PASSES_H
#define PARTITION_LOWERING_PASSES_H

#include "dialects/Rt/RtDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Pass/Pass.h"

namespace partition {

#define GEN_PASS_DECL
#include "lowering/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "lowering/Passes.h.inc"

} // namespace partition

#endif // PARTITION_LOWERING_PASSES_H
