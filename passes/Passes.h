//===- Passes.h - the passes of the partition compiler ----------*- C++ -*-===//

#ifndef PARTITION_PASSES_PASSES_H
#define PARTITION_PASSES_PASSES_H

#include "dialects/Rt/RtDialect.h"
#include "dialects/Xfmr/XfmrDialect.h"
#include "mlir/Pass/Pass.h"

namespace partition {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

} // namespace partition

#endif // PARTITION_PASSES_PASSES_H
