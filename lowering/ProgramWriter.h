//===- ProgramWriter.h - serialize a planned step as a .ptp file -*- C++ -*-===//

#ifndef PARTITION_LOWERING_PROGRAMWRITER_H
#define PARTITION_LOWERING_PROGRAMWRITER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "llvm/Support/raw_ostream.h"

namespace partition {

/// Writes the memory-planned training step of `module` (the output of
/// --lower-memory-plan) as a .ptp FlatBuffer. Fails with a diagnostic on
/// anything the runtime could not execute.
mlir::LogicalResult writeProgram(mlir::ModuleOp module, llvm::raw_ostream &os);

/// The dialects of a planned module (what writeProgram reads).
void registerProgramDialects(mlir::DialectRegistry &registry);

/// Registers the `--rt-to-program` translation (mlir-translate style).
void registerProgramTranslation();

} // namespace partition

#endif // PARTITION_LOWERING_PROGRAMWRITER_H
