//===- ProgramFields.cpp - program fields from IR attributes --------------===//

#include "lowering/ProgramFields.h"

#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/JSON.h"

using namespace mlir;

namespace partition {

std::string toJson(DictionaryAttr dict) {
  llvm::json::Object object;
  if (dict)
    for (NamedAttribute attr : dict) {
      Attribute value = attr.getValue();
      // Before IntegerAttr: a BoolAttr is an i1 IntegerAttr, whose getInt()
      // would write `true` as -1.
      if (auto b = dyn_cast<BoolAttr>(value))
        object[attr.getName().getValue()] = b.getValue();
      else if (auto i = dyn_cast<IntegerAttr>(value))
        object[attr.getName().getValue()] = i.getInt();
      else if (auto f = dyn_cast<FloatAttr>(value))
        object[attr.getName().getValue()] = f.getValueAsDouble();
      else if (auto s = dyn_cast<StringAttr>(value))
        object[attr.getName().getValue()] = s.getValue().str();
      else if (auto list = dyn_cast<ArrayAttr>(value)) {
        // A list of names (padded_params).
        llvm::json::Array names;
        for (Attribute item : list)
          if (auto name = dyn_cast<StringAttr>(item))
            names.push_back(name.getValue().str());
        object[attr.getName().getValue()] = std::move(names);
      }
    }
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::json::Value(std::move(object));
  return text;
}

std::optional<ptp::Role> parseRole(StringRef role) {
  return llvm::StringSwitch<std::optional<ptp::Role>>(role)
      .Case("param", ptp::Role::Param)
      .Case("moment1", ptp::Role::Moment1)
      .Case("moment2", ptp::Role::Moment2)
      .Case("step", ptp::Role::Step)
      .Case("lr", ptp::Role::LearningRate)
      .Case("tokens", ptp::Role::Tokens)
      .Case("targets", ptp::Role::Targets)
      .Case("loss", ptp::Role::Loss)
      .Case("gradient", ptp::Role::Gradient)
      .Case("axis_index", ptp::Role::AxisIndex)
      .Case("logits", ptp::Role::Logits)
      .Default(std::nullopt);
}

ptp::ReduceKind toProgram(dist::ReduceKind kind) {
  switch (kind) {
  case dist::ReduceKind::Sum:
    return ptp::ReduceKind::Sum;
  case dist::ReduceKind::Avg:
    return ptp::ReduceKind::Avg;
  case dist::ReduceKind::Max:
    return ptp::ReduceKind::Max;
  }
  llvm_unreachable("unknown reduce kind");
}

LogicalResult checkAxisIndex(memref::ViewOp view, StringRef name,
                             dist::MeshOp mesh) {
  auto type = cast<MemRefType>(view.getType());
  if (type.getRank() != 0 || !type.getElementType().isInteger(32))
    return view.emitOpError() << "is an axis index, which must be memref<i32>";
  if (!mesh)
    return view.emitOpError() << "is the index on axes '" << name
                              << "', but the module has no dist.mesh";
  SmallVector<StringRef> axes;
  name.split(axes, ',');
  for (StringRef axis : axes)
    if (!llvm::is_contained(mesh.getAxisNames(),
                            StringAttr::get(view.getContext(), axis)))
      return view.emitOpError() << "is the index on axes '" << name << "', but '"
                                << axis << "' is not an axis of @"
                                << mesh.getSymName();
  return success();
}

} // namespace partition
