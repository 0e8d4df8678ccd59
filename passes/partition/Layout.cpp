//===- Layout.cpp - what the partitioning phases share --------------------===//

#include "passes/partition/Layout.h"

#include "dialects/CheckedSize.h"

#include "dialects/Xfmr/XfmrDialect.h"
#include "dialects/Xfmr/XfmrOps.h"

#include "llvm/ADT/StringExtras.h"

using namespace mlir;

namespace partition {

Layout Layout::replicated(Type type) {
  Layout layout;
  if (auto tensor = dyn_cast<RankedTensorType>(type))
    layout.dims.resize(tensor.getRank());
  return layout;
}

Layout Layout::fromAttr(dist::ShardingAttr sharding, Type type) {
  Layout layout = replicated(type);
  if (!sharding)
    return layout;
  for (unsigned dim = 0; dim < layout.dims.size(); ++dim)
    for (StringRef axis : sharding.getDimAxes(dim))
      layout.dims[dim].push_back(axis);
  for (StringRef axis : sharding.getPartialAxes())
    layout.partial.push_back(axis);
  return layout;
}

dist::ShardingAttr Layout::toAttr(MLIRContext *context, StringRef mesh) const {
  SmallVector<SmallVector<StringRef>> axes;
  for (const Axes &dim : dims)
    axes.emplace_back(dim.begin(), dim.end());
  SmallVector<StringRef> partialAxes(partial.begin(), partial.end());
  return dist::ShardingAttr::get(context, mesh, axes, partialAxes);
}

bool Layout::isSharded() const {
  return llvm::any_of(dims, [](const Axes &axes) { return !axes.empty(); });
}

int64_t PartitionMesh::sizeOf(StringRef axis) const {
  int64_t index = shape.find(axis);
  return index < 0 ? 1 : shape.sizes[index];
}

int64_t PartitionMesh::shardsOf(ArrayRef<StringRef> axes) const {
  int64_t shards = 1;
  for (StringRef axis : axes)
    shards *= sizeOf(axis);
  return shards;
}

Axes PartitionMesh::inMeshOrder(ArrayRef<StringRef> axes) const {
  Axes ordered(axes.begin(), axes.end());
  llvm::sort(ordered, [&](StringRef a, StringRef b) {
    return shape.find(a) < shape.find(b);
  });
  return ordered;
}

FailureOr<PartitionMesh> lookupPartitionMesh(ModuleOp module) {
  dist::PlanAttr plan = dist::getPlan(module);
  if (!plan)
    return module.emitError()
           << "partitioning needs the plan (run --dist-apply-plan first)";
  PartitionMesh mesh;
  mesh.symbol = plan.getMesh();
  FailureOr<dist::MeshShape> shape = dist::lookupMeshShape(
      module, mesh.symbol, nullptr, [&] { return module.emitError(); });
  if (failed(shape))
    return failure();
  mesh.shape = *shape;
  auto axisFor = [&](dist::AxisRole role) -> StringRef {
    std::optional<StringRef> axis = plan.getAxis(role);
    return axis && mesh.shape.find(*axis) >= 0 ? *axis : StringRef();
  };
  mesh.dataAxis = axisFor(dist::AxisRole::Data);
  mesh.contextAxis = axisFor(dist::AxisRole::Context);
  mesh.contextRing = plan.getContextMethod() == "ring";
  mesh.expertAxis = axisFor(dist::AxisRole::Expert);
  for (dist::PlanAxisAttr axis : plan.getAxes())
    if (axis.getRole() == dist::AxisRole::Tensor &&
        mesh.shape.find(axis.getName()) >= 0)
      mesh.tensorAxes.push_back(axis.getName());
  mesh.sequenceParallel = plan.getSequenceParallel();
  if (DenseI64ArrayAttr layerTp = plan.getLayerTp())
    mesh.layerDegrees.assign(layerTp.asArrayRef().begin(),
                             layerTp.asArrayRef().end());
  mesh.embeddingDegree = plan.getEmbeddingTp();
  // Every part's degree must be a major prefix of the tensor axes
  // (--dist-apply-plan lays them out so).
  SmallVector<int64_t> degrees(mesh.layerDegrees);
  if (mesh.embeddingDegree)
    degrees.push_back(mesh.embeddingDegree);
  for (int64_t degree : degrees) {
    int64_t prefix = 1;
    bool found = degree == 1;
    for (StringRef axis : mesh.tensorAxes) {
      prefix *= mesh.sizeOf(axis);
      found |= prefix == degree;
    }
    if (!found)
      return module.emitError()
             << "the plan gives a part of the model the tensor-parallel "
                "degree "
             << degree << ", which is not the size of a major prefix of "
             << "the tensor axes " << describe(mesh.tensorAxes)
             << "; apply the plan with --dist-apply-plan, which lays the "
                "axes out for the degrees";
  }
  return mesh;
}

Axes PartitionMesh::tensorAxesOf(std::optional<int64_t> layer) const {
  int64_t degree = embeddingDegree;
  if (layer && *layer >= 0 && *layer < int64_t(layerDegrees.size()))
    degree = layerDegrees[*layer];
  if (degree == 0)
    return tensorAxes;
  Axes axes;
  int64_t product = 1;
  size_t length = 0;
  for (StringRef axis : tensorAxes) {
    product *= sizeOf(axis);
    axes.push_back(axis);
    if (product == degree)
      length = axes.size();
    if (product > degree)
      break;
  }
  axes.resize(length);
  return axes;
}

bool PartitionMesh::isDataSum(ArrayRef<StringRef> axes) const {
  return !axes.empty() && llvm::all_of(axes, [&](StringRef axis) {
    return (!dataAxis.empty() && axis == dataAxis) ||
           (!expertAxis.empty() && axis == expertAxis) ||
           (!contextAxis.empty() && axis == contextAxis);
  });
}

bool PartitionMesh::isPartAxes(ArrayRef<StringRef> axes) const {
  if (axes.empty())
    return false;
  if (layerDegrees.empty() && !embeddingDegree)
    return ArrayRef<StringRef>(tensorAxes) == axes;
  if (ArrayRef<StringRef>(tensorAxesOf(std::nullopt)) == axes)
    return true;
  for (int64_t layer = 0; layer < int64_t(layerDegrees.size()); ++layer)
    if (ArrayRef<StringRef>(tensorAxesOf(layer)) == axes)
      return true;
  return false;
}

bool isLayoutPreserving(Operation *op) {
  auto ruled = dyn_cast<xfmr::ShardingRuleOpInterface>(op);
  if (!ruled || op->getNumOperands() != 1 || op->getNumResults() != 1)
    return false;
  xfmr::ShardingRule rule = ruled.getShardingRule();
  return rule.getNumOperands() == 1 && rule.getNumResults() == 1 &&
         rule.getOperand(0) == rule.getResult(0);
}

std::optional<int64_t> stateLayer(func::FuncOp step, Value value) {
  if (Operation *def = value.getDefiningOp())
    if (isLayoutPreserving(def))
      value = def->getOperand(0);
  auto arg = dyn_cast<BlockArgument>(value);
  if (!arg || arg.getOwner()->getParentOp() != step)
    return std::nullopt;
  auto layer = step.getArgAttrOfType<IntegerAttr>(
      arg.getArgNumber(), xfmr::XfmrDialect::kLayerAttrName);
  return layer ? std::optional<int64_t>(layer.getInt()) : std::nullopt;
}

BlockArgument parameterArgument(Value value, func::FuncOp step) {
  while (Operation *def = value.getDefiningOp()) {
    if (!isLayoutPreserving(def) && !isa<dist::AllGatherOp>(def))
      return {};
    value = def->getOperand(0);
  }
  auto arg = cast<BlockArgument>(value);
  if (arg.getOwner()->getParentOp() != step ||
      !step.getArgAttr(arg.getArgNumber(), xfmr::XfmrDialect::kParamAttrName))
    return {};
  return arg;
}

std::optional<int64_t> parameterLayer(Value value, func::FuncOp step) {
  BlockArgument arg = parameterArgument(value, step);
  if (!arg)
    return std::nullopt;
  auto layer = step.getArgAttrOfType<IntegerAttr>(
      arg.getArgNumber(), xfmr::XfmrDialect::kLayerAttrName);
  return layer ? layer.getInt() : -1;
}

std::string describe(ArrayRef<StringRef> axes) {
  return "[" + llvm::join(axes, ", ") + "]";
}

std::pair<StringRef, StringRef> stateOf(func::FuncOp step, unsigned index) {
  using xfmr::XfmrDialect;
  for (auto [attr, role] :
       {std::pair<StringRef, StringRef>{XfmrDialect::kParamAttrName, "param"},
        {XfmrDialect::kMoment1AttrName, "moment1"},
        {XfmrDialect::kMoment2AttrName, "moment2"}})
    if (auto name = step.getArgAttrOfType<StringAttr>(index, attr))
      return {role, name.getValue()};
  return {"", ""};
}

SmallVector<func::FuncOp> stepsToPartition(ModuleOp module) {
  using xfmr::XfmrDialect;
  SmallVector<func::FuncOp> steps;
  for (auto function : module.getOps<func::FuncOp>())
    if (function->hasAttr(XfmrDialect::kTrainStepAttrName))
      steps.push_back(function);
  for (auto function : module.getOps<func::FuncOp>())
    if (function->hasAttr(XfmrDialect::kEvalStepAttrName))
      steps.push_back(function);
  return steps;
}

Layout recordedResultLayout(OpResult result) {
  Operation *op = result.getOwner();
  Attribute recorded = op->getAttr(dist::DistDialect::kShardingAttrName);
  if (auto array = dyn_cast_or_null<ArrayAttr>(recorded))
    recorded = array[result.getResultNumber()];
  return Layout::fromAttr(dyn_cast_or_null<dist::ShardingAttr>(recorded),
                          result.getType());
}

Layout recordedOperandLayout(OpOperand &operand) {
  auto recorded = operand.getOwner()->getAttrOfType<ArrayAttr>(
      kOperandShardingsAttrName);
  dist::ShardingAttr sharding;
  if (recorded)
    sharding = dyn_cast<dist::ShardingAttr>(
        recorded[operand.getOperandNumber()]);
  return Layout::fromAttr(sharding, operand.get().getType());
}

Layout recordedArgumentLayout(func::FuncOp step, unsigned index) {
  return Layout::fromAttr(step.getArgAttrOfType<dist::ShardingAttr>(
                              index, dist::DistDialect::kShardingAttrName),
                          step.getArgument(index).getType());
}

/// Whether `use` may take a rank-3 activation (batch, sequence, features)
/// split along its sequence over `axes`: the dimension is not split yet,
/// divides evenly, and the op's sequence factor is not opaque (or the op
/// partitions it itself).
static bool takesSequenceBlocks(const PartitionMesh &mesh,
                                const Layout &layout, OpOperand &use,
                                ArrayRef<StringRef> axes) {
  auto type = cast<RankedTensorType>(use.get().getType());
  auto ruled = dyn_cast<xfmr::ShardingRuleOpInterface>(use.getOwner());
  if (type.getRank() != 3 || !layout.dims[kSequenceDim].empty() || !ruled ||
      type.getDimSize(kSequenceDim) % mesh.shardsOf(axes) != 0)
    return false;
  xfmr::ShardingRule rule = ruled.getShardingRule();
  int factor = rule.getOperand(use.getOperandNumber())[kSequenceDim];
  return factor != xfmr::ShardingRule::kNoFactor &&
         (!rule.getFactors()[factor].opaque ||
          rule.getFactors()[factor].partitionedByOp);
}

bool scattersContext(const PartitionMesh &mesh, const Layout &layout,
                     OpOperand &use) {
  return mesh.hasContext() && layout.partial == Axes{mesh.contextAxis} &&
         takesSequenceBlocks(mesh, layout, use, layout.partial);
}

bool scattersSequence(const PartitionMesh &mesh, const Layout &layout,
                      OpOperand &use) {
  return mesh.sequenceParallel && mesh.hasTensor() &&
         mesh.isPartAxes(layout.partial) &&
         takesSequenceBlocks(mesh, layout, use, layout.partial);
}

} // namespace partition
