//===- ModelBuilder.h - emits a model's forward-plus-loss function -*- C++ -*-===//

#ifndef PARTITION_MODEL_MODELBUILDER_H
#define PARTITION_MODEL_MODELBUILDER_H

#include "model/ModelConfig.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace partition::model {

/// Builds a module holding `func.func @forward(parameters..., tokens,
/// targets) -> loss` for a valid `config` (see validate()). Parameter
/// arguments carry `xfmr.param = "<name>"`, the inputs `xfmr.input`, and the
/// function the configuration as `xfmr.model`.
mlir::OwningOpRef<mlir::ModuleOp> buildForwardModule(mlir::MLIRContext &context,
                                                    const ModelConfig &config);

} // namespace partition::model

#endif // PARTITION_MODEL_MODELBUILDER_H
