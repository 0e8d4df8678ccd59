//===- ModelSizes.cpp - whether a model's sizes fit 64 bits ---------------===//

#include "model/ModelSizes.h"

#include "dialects/CheckedSize.h"
#include "dialects/Xfmr/XfmrDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;

namespace partition::model {

namespace {

/// "" when `value`'s tensor has a byte count that fits int64.
std::string tooLarge(Value value, const llvm::Twine &what) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type || !type.hasStaticShape() || checkedByteSize(type))
    return "";
  std::string text;
  llvm::raw_string_ostream os(text);
  os << what << " (" << type << ") would take about "
     << llvm::formatv("{0:e2}", approximateByteSize(type))
     << " bytes, more than 64-bit sizes can count";
  return text;
}

} // namespace

std::string checkModelSizes(ModuleOp module) {
  for (auto function : module.getOps<func::FuncOp>()) {
    int64_t parameterBytes = 0;
    for (BlockArgument arg : function.getArguments()) {
      auto name = function.getArgAttrOfType<StringAttr>(
          arg.getArgNumber(), xfmr::XfmrDialect::kParamAttrName);
      std::string what = name ? "parameter " + name.getValue().str()
                              : "argument #" + std::to_string(arg.getArgNumber());
      if (std::string problem = tooLarge(arg, what); !problem.empty())
        return problem;
      if (!name)
        continue;
      std::optional<int64_t> sum = llvm::checkedAdd(
          parameterBytes, *checkedByteSize(cast<ShapedType>(arg.getType())));
      if (!sum)
        return "the parameters together (up to " + name.getValue().str() +
               ") take more bytes than 64-bit sizes can count";
      parameterBytes = *sum;
    }
    std::string problem;
    function.walk([&](Operation *op) {
      for (Value result : op->getResults()) {
        problem = tooLarge(result, "the result of " +
                                       op->getName().getStringRef());
        if (!problem.empty())
          return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (!problem.empty())
      return problem;
  }
  return "";
}

} // namespace partition::model
