//===- RtDialect.cpp - registration and attribute checks ------------------===//

#include "dialects/Rt/RtDialect.h"
#include "dialects/Rt/RtOps.h"

using namespace mlir;
using namespace partition::rt;

#include "dialects/Rt/RtDialect.cpp.inc"

void RtDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/Rt/RtOps.cpp.inc"
      >();
}

static LogicalResult verifyBufferAttribute(Operation *op, NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == RtDialect::kRoleAttrName) {
    auto role = dyn_cast<StringAttr>(attr.getValue());
    if (role && llvm::is_contained({"param", "moment1", "moment2", "step", "lr",
                                    "tokens", "targets", "loss", "gradient"},
                                   role.getValue()))
      return success();
    return op->emitError() << "'" << name
                           << "' must be one of param, moment1, moment2, "
                              "step, lr, tokens, targets, loss, gradient";
  }
  if (name == RtDialect::kNameAttrName) {
    auto text = dyn_cast<StringAttr>(attr.getValue());
    if (text && !text.getValue().empty())
      return success();
    return op->emitError() << "'" << name << "' must be a non-empty string";
  }
  return op->emitError() << "unknown attribute '" << name << "'";
}

LogicalResult RtDialect::verifyOperationAttribute(Operation *op,
                                                  NamedAttribute attr) {
  if (attr.getName() == kArenaBytesAttrName) {
    auto bytes = dyn_cast<IntegerAttr>(attr.getValue());
    if (bytes && bytes.getInt() >= 0)
      return success();
    return op->emitError() << "'" << kArenaBytesAttrName
                           << "' must be a non-negative integer";
  }
  return verifyBufferAttribute(op, attr);
}

LogicalResult RtDialect::verifyRegionArgAttribute(Operation *op, unsigned,
                                                  unsigned, NamedAttribute attr) {
  return verifyBufferAttribute(op, attr);
}
