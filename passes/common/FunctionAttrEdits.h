//===- FunctionAttrEdits.h - argument attributes in bulk ---*- C++ -*-===//
//
// FunctionOpInterface::setArgAttr and removeArgAttr rebuild the array of
// every argument's dictionary on each call, so setting one attribute on
// each of a step's N arguments (hundreds: parameters and moments) is
// quadratic in N: 2-4% of a pipeline stage's compile in each pass that did
// it. FunctionAttrEdits reads the dictionaries once, edits them, and
// writes them back with one setAllArgAttrs (or setAllResultAttrs).
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_PASSES_COMMON_FUNCTIONATTREDITS_H
#define PARTITION_PASSES_COMMON_FUNCTIONATTREDITS_H

#include "mlir/IR/OperationSupport.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

namespace partition {

class FunctionAttrEdits {
public:
  enum class Of { Arguments, Results };

  explicit FunctionAttrEdits(mlir::FunctionOpInterface function,
                             Of of = Of::Arguments)
      : function(function), of(of) {
    unsigned count = of == Of::Arguments ? function.getNumArguments()
                                         : function.getNumResults();
    for (unsigned index = 0; index < count; ++index)
      lists.emplace_back(of == Of::Arguments ? function.getArgAttrs(index)
                                             : function.getResultAttrs(index));
  }

  void set(unsigned index, llvm::StringRef name, mlir::Attribute value) {
    lists[index].set(mlir::StringAttr::get(context(), name), value);
  }
  void remove(unsigned index, llvm::StringRef name) {
    lists[index].erase(name);
  }

  /// Writes every dictionary back at once.
  void apply() {
    auto dictionaries = llvm::to_vector(
        llvm::map_range(lists, [&](const mlir::NamedAttrList &list) {
          return list.getDictionary(context());
        }));
    if (of == Of::Arguments)
      function.setAllArgAttrs(dictionaries);
    else
      function.setAllResultAttrs(dictionaries);
  }

private:
  mlir::MLIRContext *context() const { return function->getContext(); }

  mlir::FunctionOpInterface function;
  Of of;
  llvm::SmallVector<mlir::NamedAttrList> lists;
};

} // namespace partition

#endif // PARTITION_PASSES_COMMON_FUNCTIONATTREDITS_H
