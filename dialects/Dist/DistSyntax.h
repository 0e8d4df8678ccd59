//===- DistSyntax.h - the spelling of meshes, axes and reductions -*- C++ -*-//
//
// Custom assembly directives shared by the dist ops and the rt collectives,
// which spell axes and reductions the same way: `axes [dp, tp]`,
// `reduce = sum`.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_DIALECTS_DIST_DISTSYNTAX_H
#define PARTITION_DIALECTS_DIST_DISTSYNTAX_H

#include "dialects/Dist/DistOps.h"

#include "mlir/IR/OpImplementation.h"

namespace partition::dist {

/// `[name, ...]`
mlir::ParseResult parseAxisNames(mlir::OpAsmParser &parser,
                                 mlir::ArrayAttr &axes);
void printAxisNames(mlir::OpAsmPrinter &printer, mlir::Operation *,
                    mlir::ArrayAttr axes);

/// `[name = value, ...]`: a peer's coordinates (dist.send, rt.send).
mlir::ParseResult parseAxisValues(mlir::OpAsmParser &parser,
                                  mlir::ArrayAttr &axes,
                                  mlir::DenseI64ArrayAttr &values);
void printAxisValues(mlir::OpAsmPrinter &printer, mlir::Operation *,
                     mlir::ArrayAttr axes, mlir::DenseI64ArrayAttr values);

/// The bare keyword `sum`, `avg` or `max`.
mlir::ParseResult parseReduceKind(mlir::OpAsmParser &parser,
                                  ReduceKindAttr &kind);
void printReduceKind(mlir::OpAsmPrinter &printer, mlir::Operation *,
                     ReduceKindAttr kind);

} // namespace partition::dist

#endif // PARTITION_DIALECTS_DIST_DISTSYNTAX_H
