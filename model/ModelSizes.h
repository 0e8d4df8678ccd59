//===- ModelSizes.h - whether a model's sizes fit 64 bits -------*- C++ -*-===//

#ifndef PARTITION_MODEL_MODELSIZES_H
#define PARTITION_MODEL_MODELSIZES_H

#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace partition::model {

/// Checks, in checked arithmetic, that the bytes of every tensor of the
/// model, and of all its parameters together, fit in int64, the sizes the
/// compiler and the runtime count in. Returns "" when they do, else one
/// line naming the first size that does not.
std::string checkModelSizes(mlir::ModuleOp module);

} // namespace partition::model

#endif // PARTITION_MODEL_MODELSIZES_H
