//===- ForwardFunction.cpp - the model's forward function -----------------===//

#include "passes/analysis/ForwardFunction.h"

#include "dialects/Xfmr/XfmrDialect.h"

using namespace mlir;

namespace partition {

FailureOr<func::FuncOp> findForwardFunction(ModuleOp module, StringRef pass,
                                            StringRef expectation) {
  SmallVector<func::FuncOp> forwards;
  for (auto function : module.getOps<func::FuncOp>())
    for (unsigned i = 0, e = function.getNumArguments(); i < e; ++i)
      if (function.getArgAttr(i, xfmr::XfmrDialect::kParamAttrName)) {
        forwards.push_back(function);
        break;
      }
  if (forwards.size() == 1)
    return forwards.front();
  return module.emitError() << pass << " expects exactly one function with "
                            << "xfmr.param arguments (" << expectation
                            << "), found " << forwards.size();
}

} // namespace partition
