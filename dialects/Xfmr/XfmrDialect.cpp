//===- XfmrDialect.cpp - registration and attribute checks ----------------===//

#include "dialects/Xfmr/XfmrDialect.h"
#include "dialects/Xfmr/XfmrOps.h"

#include "mlir/Interfaces/FunctionInterfaces.h"

#include <cmath>

using namespace mlir;
using namespace partition::xfmr;

#include "dialects/Xfmr/XfmrDialect.cpp.inc"
#include "dialects/Xfmr/XfmrInterfaces.cpp.inc"

void XfmrDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/Xfmr/XfmrOps.cpp.inc"
      >();
}

namespace {

/// Where a discardable xfmr attribute sits.
enum class Site { Argument, Result };

bool isTensorRole(StringRef name) {
  return name == XfmrDialect::kParamAttrName ||
         name == XfmrDialect::kMoment1AttrName ||
         name == XfmrDialect::kMoment2AttrName;
}

/// Checks one `xfmr.*` attribute on the `index`th argument or result of `op`.
LogicalResult verifyValueAttribute(Operation *op, Site site, unsigned index,
                                   Type type, NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  const char *siteName = site == Site::Argument ? "argument" : "result";
  if (site == Site::Argument && name == XfmrDialect::kLayerAttrName) {
    auto layer = dyn_cast<IntegerAttr>(attr.getValue());
    if (!layer || layer.getValue().isNegative())
      return op->emitError() << "'" << name << "' on argument #" << index
                             << " must be a non-negative integer, but is "
                             << attr.getValue();
    return success();
  }
  if (site == Site::Argument && name == XfmrDialect::kRoutingBiasAttrName) {
    auto rate = dyn_cast<FloatAttr>(attr.getValue());
    if (!rate || !(rate.getValueAsDouble() >= 0.0) ||
        !std::isfinite(rate.getValueAsDouble()))
      return op->emitError() << "'" << name << "' on argument #" << index
                             << " must be a finite, non-negative float (the "
                                "update rate), but is "
                             << attr.getValue();
    auto tensor = dyn_cast_if_present<RankedTensorType>(type);
    if (!tensor || tensor.getRank() != 1 || !tensor.getElementType().isF32())
      return op->emitError() << "'" << name << "' on argument #" << index
                             << " needs an [experts] f32 tensor, but the "
                                "argument is "
                             << type;
    return success();
  }
  // Set by --xfmr-explicit-positions: the caller feeds this input's
  // sequence in the layout order of that many chunks.
  if (site == Site::Argument && name == XfmrDialect::kSequenceChunksAttrName) {
    auto chunks = dyn_cast<IntegerAttr>(attr.getValue());
    if (!chunks || chunks.getInt() < 1)
      return op->emitError() << "'" << name << "' on argument #" << index
                             << " must be a positive integer, but is "
                             << attr.getValue();
    return success();
  }
  bool known =
      isTensorRole(name) ||
      (site == Site::Result && name == XfmrDialect::kGradientAttrName) ||
      (site == Site::Argument && name == XfmrDialect::kInputAttrName) ||
      (site == Site::Result && name == XfmrDialect::kOutputAttrName);
  if (!known)
    return op->emitError() << "unknown attribute '" << name << "' on "
                           << siteName << " #" << index;
  auto text = dyn_cast<StringAttr>(attr.getValue());
  if (!text || text.getValue().empty())
    return op->emitError() << "'" << name << "' on " << siteName << " #"
                           << index << " must be a non-empty string";
  if (isTensorRole(name) || name == XfmrDialect::kGradientAttrName) {
    auto tensor = dyn_cast_if_present<RankedTensorType>(type);
    if (!tensor || !isa<FloatType>(tensor.getElementType()))
      return op->emitError() << "'" << name << "' on " << siteName << " #"
                             << index << " needs a float tensor, but the "
                             << siteName << " is " << type;
    return success();
  }
  StringRef role = text.getValue();
  if (site == Site::Argument) {
    if (llvm::is_contained({"tokens", "targets", "step", "lr"}, role))
      return success();
    return op->emitError() << "'" << name << "' on argument #" << index
                           << " is \"" << role
                           << "\"; expected tokens, targets, step or lr";
  }
  if (role == "loss" || role == "step" || role == "logits")
    return success();
  return op->emitError() << "'" << name << "' on result #" << index
                         << " is \"" << role
                         << "\"; expected loss, step or logits";
}

Type regionArgType(Operation *op, unsigned region, unsigned index) {
  Region &body = op->getRegion(region);
  if (auto function = dyn_cast<FunctionOpInterface>(op))
    return function.getArgumentTypes()[index];
  return body.empty() ? Type() : body.getArgument(index).getType();
}

} // namespace

LogicalResult XfmrDialect::verifyRegionArgAttribute(Operation *op,
                                                    unsigned region,
                                                    unsigned index,
                                                    NamedAttribute attr) {
  return verifyValueAttribute(op, Site::Argument, index,
                              regionArgType(op, region, index), attr);
}

LogicalResult XfmrDialect::verifyRegionResultAttribute(Operation *op,
                                                       unsigned,
                                                       unsigned index,
                                                       NamedAttribute attr) {
  Type type;
  if (auto function = dyn_cast<FunctionOpInterface>(op))
    type = function.getResultTypes()[index];
  return verifyValueAttribute(op, Site::Result, index, type, attr);
}

LogicalResult XfmrDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == kContextRingAttrName) {
    if (!isa<AttentionOp, AttentionGradOp>(op) || !isa<UnitAttr>(attr.getValue()))
      return op->emitError() << "'" << name
                             << "' is a unit attribute of xfmr.attention "
                                "and xfmr.attention_grad";
    bool positions = isa<AttentionOp>(op)
                         ? bool(cast<AttentionOp>(op).getQueryPositions())
                         : bool(cast<AttentionGradOp>(op).getQueryPositions());
    if (!positions)
      return op->emitError() << "'" << name
                             << "' needs explicit positions: the ring "
                                "passes key blocks whose positions it must "
                                "know (run --xfmr-explicit-positions)";
    return success();
  }
  if (name != kModelAttrName && name != kTrainStepAttrName &&
      name != kEvalStepAttrName)
    return op->emitError() << "unknown attribute '" << name << "'";
  if (!isa<DictionaryAttr>(attr.getValue()))
    return op->emitError() << "'" << name << "' must be a dictionary";
  return success();
}
