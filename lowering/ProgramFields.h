//===- ProgramFields.h - program fields from IR attributes --------*- C++ -*-===//
//
// What the program writer translates field by field: the model and
// training descriptions (JSON), buffer roles, reduction kinds, and the
// check of an axis-index buffer against the module's mesh.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_LOWERING_PROGRAMFIELDS_H
#define PARTITION_LOWERING_PROGRAMFIELDS_H

#include "dialects/Dist/DistOps.h"
#include "runtime/program/ProgramFormat.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinAttributes.h"

#include <optional>
#include <string>

namespace partition {

/// A dictionary attribute of scalars (and lists of names) as a JSON object.
std::string toJson(mlir::DictionaryAttr dict);

/// The program role of an rt.role name ("param", "moment1", ...), or none.
std::optional<ptp::Role> parseRole(llvm::StringRef role);

ptp::ReduceKind toProgram(dist::ReduceKind kind);

/// An axis-index buffer names axes of the program's mesh, which the runtime
/// looks up by name ("dp,tp"), and holds one i32.
mlir::LogicalResult checkAxisIndex(mlir::memref::ViewOp view,
                                   llvm::StringRef name, dist::MeshOp mesh);

} // namespace partition

#endif // PARTITION_LOWERING_PROGRAMFIELDS_H
