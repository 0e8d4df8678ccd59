//===- RtDialect.cpp - registration and attribute checks ------------------===//

#include "dialects/Rt/RtDialect.h"
#include "dialects/Dist/DistDialect.h"
#include "dialects/Rt/RtOps.h"
#include "dialects/Rt/RtTiers.h"
#include "mlir/IR/BuiltinOps.h"

using namespace mlir;
using namespace partition::rt;

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

#include "dialects/Rt/RtDialect.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "dialects/Rt/RtTypes.cpp.inc"

void RtDialect::initialize() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "dialects/Rt/RtTypes.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "dialects/Rt/RtOps.cpp.inc"
      >();
}

/// `site` says where the attribute is ("" on an op, " on argument #N").
static LogicalResult verifyBufferAttribute(Operation *op, NamedAttribute attr,
                                           const Twine &site) {
  StringRef name = attr.getName().getValue();
  if (name == RtDialect::kRoleAttrName) {
    auto role = dyn_cast<StringAttr>(attr.getValue());
    if (role && llvm::is_contained({"param", "moment1", "moment2", "step", "lr",
                                    "tokens", "targets", "loss", "gradient",
                                    "axis_index", "logits"},
                                   role.getValue()))
      return success();
    return op->emitError() << "'" << name << "'" << site
                           << " must be one of param, moment1, moment2, "
                              "step, lr, tokens, targets, loss, gradient, "
                              "axis_index, but is "
                           << attr.getValue();
  }
  if (name == RtDialect::kTierAttrName) {
    auto tier = dyn_cast<StringAttr>(attr.getValue());
    if (tier && isTierName(tier.getValue()))
      return success();
    return op->emitError() << "'" << name << "'" << site
                           << " must be \"host\" or \"nvme\", but is "
                           << attr.getValue();
  }
  if (name == RtDialect::kNameAttrName) {
    auto text = dyn_cast<StringAttr>(attr.getValue());
    if (text && !text.getValue().empty())
      return success();
    return op->emitError() << "'" << name << "'" << site
                           << " must be a non-empty string";
  }
  return op->emitError() << "unknown attribute '" << name << "'" << site;
}

LogicalResult RtDialect::verifyOperationAttribute(Operation *op,
                                                  NamedAttribute attr) {
  if (attr.getName() == kOffloadPathAttrName) {
    auto path = dyn_cast<StringAttr>(attr.getValue());
    if (isa<ModuleOp>(op) && path && !path.getValue().empty())
      return success();
    return op->emitError() << "'" << kOffloadPathAttrName
                           << "' must be a non-empty string on the module, "
                              "but is "
                           << attr.getValue();
  }
  if (attr.getName() == kHeldAttrName) {
    if (isa<memref::AllocOp>(op) && isa<UnitAttr>(attr.getValue()))
      return success();
    return op->emitError() << "'" << kHeldAttrName
                           << "' must be a unit attribute on a memref.alloc";
  }
  if (attr.getName() == kArenaBytesAttrName) {
    auto bytes = dyn_cast<IntegerAttr>(attr.getValue());
    if (bytes && bytes.getInt() >= 0)
      return success();
    return op->emitError() << "'" << kArenaBytesAttrName
                           << "' must be a non-negative integer, but is "
                           << attr.getValue();
  }
  return verifyBufferAttribute(op, attr, "");
}

LogicalResult RtDialect::verifyRegionArgAttribute(Operation *op, unsigned,
                                                  unsigned index,
                                                  NamedAttribute attr) {
  return verifyBufferAttribute(op, attr, " on argument #" + Twine(index));
}

// Buffers are arguments or views: a lowered step returns nothing, so an rt
// attribute on a result is a mistake, not something to ignore.
LogicalResult RtDialect::verifyRegionResultAttribute(Operation *op, unsigned,
                                                     unsigned index,
                                                     NamedAttribute attr) {
  return op->emitError() << "'" << attr.getName().getValue() << "' on result #"
                         << index
                         << ": rt attributes belong on arguments and views";
}
