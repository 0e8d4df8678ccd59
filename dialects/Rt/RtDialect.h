//===- RtDialect.h - the runtime-level dialect ------------------*- C++ -*-===//

#ifndef PARTITION_DIALECTS_RT_RTDIALECT_H
#define PARTITION_DIALECTS_RT_RTDIALECT_H

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Dialect.h"

#include "dialects/Rt/RtDialect.h.inc"

#include "mlir/Interfaces/FunctionInterfaces.h"

namespace partition::rt {

/// The `rt.role` of `value` when it is an argument of its function (a
/// step's "param", "tokens", "targets", ...), else "".
inline llvm::StringRef argumentRole(mlir::Value value) {
  auto argument = llvm::dyn_cast<mlir::BlockArgument>(value);
  if (!argument)
    return {};
  auto function = llvm::dyn_cast_or_null<mlir::FunctionOpInterface>(
      argument.getOwner()->getParentOp());
  if (!function || argument.getOwner() != &function.getFunctionBody().front())
    return {};
  auto role = function.getArgAttrOfType<mlir::StringAttr>(
      argument.getArgNumber(), RtDialect::kRoleAttrName);
  return role ? role.getValue() : llvm::StringRef();
}

} // namespace partition::rt

#endif // PARTITION_DIALECTS_RT_RTDIALECT_H
