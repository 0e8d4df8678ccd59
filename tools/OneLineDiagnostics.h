//===- OneLineDiagnostics.h - diagnostics without the source line -*- C++ -*-===//
//
// MLIR's SourceMgrDiagnosticHandler follows each diagnostic with the source
// line it points at. A model's forward function is one line of kilobytes
// (every parameter in its signature), and errors about the model are
// located there, so each such error printed the model's IR. The tools print
// each diagnostic and note as one line instead:
//   model.mlir:2:3: error: optimizer must be adamw or none, but is sgd
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_TOOLS_ONELINEDIAGNOSTICS_H
#define PARTITION_TOOLS_ONELINEDIAGNOSTICS_H

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "llvm/Support/raw_ostream.h"

namespace partition {

/// "file:line:col: " of the first file location inside `loc`, or "".
inline std::string fileLocationPrefix(mlir::Location loc) {
  auto file = loc->findInstanceOf<mlir::FileLineColRange>();
  if (!file)
    return "";
  return (file.getFilename().getValue() + ":" +
          llvm::Twine(file.getStartLine()) + ":" +
          llvm::Twine(file.getStartColumn()) + ": ")
      .str();
}

inline llvm::StringRef severityName(mlir::DiagnosticSeverity severity) {
  switch (severity) {
  case mlir::DiagnosticSeverity::Error:
    return "error";
  case mlir::DiagnosticSeverity::Warning:
    return "warning";
  case mlir::DiagnosticSeverity::Note:
    return "note";
  case mlir::DiagnosticSeverity::Remark:
    return "remark";
  }
  return "error";
}

/// Prints `diagnostic` and its notes, one line each, to `os`.
inline void printDiagnosticLines(mlir::Diagnostic &diagnostic,
                                 llvm::raw_ostream &os) {
  os << fileLocationPrefix(diagnostic.getLocation())
     << severityName(diagnostic.getSeverity()) << ": " << diagnostic << "\n";
  for (mlir::Diagnostic &note : diagnostic.getNotes())
    os << fileLocationPrefix(note.getLocation()) << "note: " << note << "\n";
}

/// While alive, every diagnostic of `context` is printed by
/// printDiagnosticLines to stderr.
class OneLineDiagnostics : public mlir::ScopedDiagnosticHandler {
public:
  explicit OneLineDiagnostics(mlir::MLIRContext *context)
      : ScopedDiagnosticHandler(context, [](mlir::Diagnostic &diagnostic) {
          printDiagnosticLines(diagnostic, llvm::errs());
          return mlir::success();
        }) {}
};

} // namespace partition

#endif // PARTITION_TOOLS_ONELINEDIAGNOSTICS_H
