//===- ForwardFunction.h - the model's forward function ---------*- C++ -*-===//
//
// The passes that run before --xfmr-train-step work on the forward function:
// the one function of the module with xfmr.param arguments.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_PASSES_ANALYSIS_FORWARDFUNCTION_H
#define PARTITION_PASSES_ANALYSIS_FORWARDFUNCTION_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace partition {

/// The one function of `module` with an xfmr.param argument; otherwise
/// emits "<pass> expects exactly one function with xfmr.param arguments
/// (<expectation>), found N" on the module and fails.
mlir::FailureOr<mlir::func::FuncOp>
findForwardFunction(mlir::ModuleOp module, llvm::StringRef pass,
                    llvm::StringRef expectation);

} // namespace partition

#endif // PARTITION_PASSES_ANALYSIS_FORWARDFUNCTION_H
