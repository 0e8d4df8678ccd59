//===- DistDialect.cpp - registration, attributes and attribute checks ----===//

#include "dialects/Dist/DistDialect.h"
#include "dialects/Dist/DistOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace partition::dist;

#include "dialects/Dist/DistDialect.cpp.inc"
#include "dialects/Dist/DistEnums.cpp.inc"

namespace partition::dist {

/// `true` or `false` (#dist.plan's sequence_parallel).
static FailureOr<bool> parseBoolKeyword(AsmParser &parser) {
  SMLoc loc = parser.getCurrentLocation();
  if (succeeded(parser.parseOptionalKeyword("true")))
    return true;
  if (succeeded(parser.parseOptionalKeyword("false")))
    return false;
  return parser.emitError(loc, "expected true or false");
}

/// `[dp = data, pp = pipeline, tp = tensor]` (#dist.plan's axes).
static ParseResult parsePlanAxes(AsmParser &parser,
                                 SmallVector<PlanAxisAttr> &axes) {
  return parser.parseCommaSeparatedList(
      AsmParser::Delimiter::Square, [&]() -> ParseResult {
        std::string name, role;
        SMLoc roleLoc;
        if (parser.parseKeywordOrString(&name) || parser.parseEqual())
          return failure();
        roleLoc = parser.getCurrentLocation();
        if (parser.parseKeywordOrString(&role))
          return failure();
        std::optional<AxisRole> symbol = symbolizeAxisRole(role);
        if (!symbol)
          return parser.emitError(roleLoc, "unknown axis role '")
                 << role
                 << "' (known: data, tensor, pipeline, context, expert)";
        axes.push_back(PlanAxisAttr::get(parser.getContext(), name, *symbol));
        return success();
      });
}

static void printPlanAxes(AsmPrinter &printer, ArrayRef<PlanAxisAttr> axes) {
  printer << '[';
  llvm::interleaveComma(axes, printer, [&](PlanAxisAttr axis) {
    printer.printKeywordOrString(axis.getName());
    printer << " = " << stringifyAxisRole(axis.getRole());
  });
  printer << ']';
}

} // namespace partition::dist

#define GET_ATTRDEF_CLASSES
#include "dialects/Dist/DistAttrs.cpp.inc"

void DistDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/Dist/DistOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/Dist/DistAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// #dist.sharding
//===----------------------------------------------------------------------===//

static SmallVector<StringRef> axisNames(ArrayAttr axes) {
  SmallVector<StringRef> names;
  for (Attribute axis : axes)
    if (auto name = dyn_cast<StringAttr>(axis))
      names.push_back(name.getValue());
  return names;
}

SmallVector<StringRef> ShardingAttr::getDimAxes(unsigned dim) const {
  if (dim >= getDims().size())
    return {};
  return axisNames(dyn_cast<ArrayAttr>(getDims()[dim]));
}

SmallVector<StringRef> ShardingAttr::getPartialAxes() const {
  return axisNames(getPartial());
}

static ArrayAttr axisArray(MLIRContext *context, ArrayRef<StringRef> names) {
  SmallVector<Attribute> attrs;
  for (StringRef name : names)
    attrs.push_back(StringAttr::get(context, name));
  return ArrayAttr::get(context, attrs);
}

ShardingAttr ShardingAttr::get(MLIRContext *context, StringRef mesh,
                               ArrayRef<SmallVector<StringRef>> dims,
                               ArrayRef<StringRef> partial) {
  SmallVector<Attribute> dimAttrs;
  for (const SmallVector<StringRef> &axes : dims)
    dimAttrs.push_back(axisArray(context, axes));
  return get(context, FlatSymbolRefAttr::get(context, mesh),
             ArrayAttr::get(context, dimAttrs), axisArray(context, partial));
}

LogicalResult
ShardingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                     FlatSymbolRefAttr mesh, ArrayAttr dims,
                     ArrayAttr partial) {
  // Where each axis was first used, to name both places of a repeat.
  llvm::StringMap<std::string> used;
  auto use = [&](Attribute axis, const std::string &where) -> LogicalResult {
    auto name = dyn_cast<StringAttr>(axis);
    if (!name)
      return emitError() << "axis names must be strings, but " << where
                         << " has " << axis;
    auto [it, inserted] = used.try_emplace(name.getValue(), where);
    if (inserted)
      return success();
    return emitError() << "axis '" << name.getValue() << "' is used twice: by "
                       << it->second << " and by " << where;
  };
  for (auto [index, dim] : llvm::enumerate(dims)) {
    auto axes = dyn_cast<ArrayAttr>(dim);
    if (!axes)
      return emitError() << "dimension " << index
                         << " must have an array of axes, but has " << dim;
    for (Attribute axis : axes)
      if (failed(use(axis, "dimension " + std::to_string(index))))
        return failure();
  }
  for (Attribute axis : partial)
    if (failed(use(axis, "partial")))
      return failure();
  return success();
}

static ParseResult parseAxisList(AsmParser &parser, ArrayAttr &result) {
  SmallVector<Attribute> axes;
  if (parser.parseCommaSeparatedList(
          AsmParser::Delimiter::Square, [&]() -> ParseResult {
            std::string name;
            if (parser.parseKeywordOrString(&name))
              return failure();
            axes.push_back(parser.getBuilder().getStringAttr(name));
            return success();
          }))
    return failure();
  result = parser.getBuilder().getArrayAttr(axes);
  return success();
}

static void printAxisList(AsmPrinter &printer, ArrayAttr axes) {
  printer << '[';
  llvm::interleaveComma(axes, printer, [&](Attribute axis) {
    printer.printKeywordOrString(cast<StringAttr>(axis).getValue());
  });
  printer << ']';
}

/// `<@mesh, [[axis, ...], ...] (, partial = [axis, ...])?>`
Attribute ShardingAttr::parse(AsmParser &parser, Type) {
  FlatSymbolRefAttr mesh;
  SmallVector<Attribute> dims;
  ArrayAttr partial = parser.getBuilder().getArrayAttr({});
  if (parser.parseLess() || parser.parseAttribute(mesh) || parser.parseComma())
    return {};
  if (parser.parseCommaSeparatedList(
          AsmParser::Delimiter::Square, [&]() -> ParseResult {
            ArrayAttr axes;
            if (parseAxisList(parser, axes))
              return failure();
            dims.push_back(axes);
            return success();
          }))
    return {};
  if (succeeded(parser.parseOptionalComma()) &&
      (parser.parseKeyword("partial") || parser.parseEqual() ||
       parseAxisList(parser, partial)))
    return {};
  if (parser.parseGreater())
    return {};
  return getChecked([&] { return parser.emitError(parser.getNameLoc()); },
                    parser.getContext(), mesh,
                    parser.getBuilder().getArrayAttr(dims), partial);
}

void ShardingAttr::print(AsmPrinter &printer) const {
  printer << '<';
  printer.printAttributeWithoutType(getMesh());
  printer << ", [";
  llvm::interleaveComma(getDims(), printer, [&](Attribute dim) {
    printAxisList(printer, cast<ArrayAttr>(dim));
  });
  printer << ']';
  if (!getPartial().empty()) {
    printer << ", partial = ";
    printAxisList(printer, getPartial());
  }
  printer << '>';
}

//===----------------------------------------------------------------------===//
// The discardable `dist.sharding` attribute
//===----------------------------------------------------------------------===//

/// Checks that `value` is a sharding that fits a value of type `type`;
/// `site` names the value ("result #0", "argument #1").
static LogicalResult verifyShardingOf(Operation *op, Attribute value,
                                      Type type, const Twine &site,
                                      bool local = false) {
  std::string where = ("'" +
                       (local ? DistDialect::kLocalShardingAttrName
                              : DistDialect::kShardingAttrName) +
                       "' of " + site)
                          .str();
  auto emitError = [&]() {
    InFlightDiagnostic diag = op->emitError();
    diag << where << ": ";
    return diag;
  };
  auto sharding = dyn_cast<ShardingAttr>(value);
  if (!sharding)
    return emitError() << "must be a #dist.sharding, but is " << value;
  // After bufferization (rt level) state lives in memrefs of the same shape.
  auto shaped = dyn_cast<ShapedType>(type);
  if (!shaped || !shaped.hasStaticShape() ||
      (!isa<RankedTensorType>(type) && !(local && isa<MemRefType>(type))))
    return emitError() << "the value must be a statically shaped tensor, "
                          "but is "
                       << type;
  auto tensor =
      RankedTensorType::get(shaped.getShape(), shaped.getElementType());
  if (local) {
    // A block of the logical tensor: check the sharding against the logical
    // shape (every dimension times its axes' sizes).
    FailureOr<MeshShape> mesh = lookupMeshShape(op, sharding.getMesh());
    if (succeeded(mesh) &&
        static_cast<int64_t>(sharding.getDims().size()) == tensor.getRank()) {
      SmallVector<int64_t> shape(tensor.getShape());
      for (auto [dim, size] : llvm::enumerate(shape))
        for (StringRef axis : sharding.getDimAxes(dim))
          if (int64_t index = mesh->find(axis); index >= 0)
            size *= mesh->sizes[index];
      tensor = tensor.clone(shape);
    }
  }
  return verifyShardingFor(sharding, tensor, op, emitError);
}

//===----------------------------------------------------------------------===//
// #dist.plan
//===----------------------------------------------------------------------===//

/// The schedules and precisions a plan may name (plan.json's choices).
static constexpr StringLiteral kSchedules[] = {"gpipe", "1f1b",
                                              "interleaved-1f1b",
                                              "zero-bubble"};
static constexpr StringLiteral kPrecisions[] = {"fp32", "bf16"};

LogicalResult PlanAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               FlatSymbolRefAttr mesh,
                               ArrayRef<PlanAxisAttr> axes, bool,
                               StringRef schedule, int64_t microbatches,
                               int64_t zeroStage, RecomputePolicy recompute,
                               int64_t budgetBytes, StringRef precision,
                               int64_t vocabMultiple, DenseI64ArrayAttr layerTp,
                               int64_t embeddingTp, int64_t contextChunks,
                               StringRef contextMethod,
                               int64_t expertParallel) {
  if (expertParallel < 1)
    return emitError() << "expert_parallel must be at least 1, got "
                       << expertParallel;
  if (vocabMultiple < 1)
    return emitError() << "vocab_multiple must be at least 1, got "
                       << vocabMultiple;
  if (layerTp)
    for (auto [layer, degree] : llvm::enumerate(layerTp.asArrayRef()))
      if (degree < 1)
        return emitError() << "layer_tp gives layer " << layer
                           << " the degree " << degree
                           << "; degrees must be at least 1";
  if (embeddingTp < 0)
    return emitError() << "embedding_tp must be at least 1 (or 0: all the "
                          "tensor axes), got "
                       << embeddingTp;
  if (!mesh)
    return emitError() << "the plan needs a mesh symbol";
  llvm::StringSet<> names;
  std::optional<PlanAxisAttr> byRole[5]; // one per AxisRole
  for (PlanAxisAttr axis : axes) {
    if (!axis)
      return emitError() << "the plan's axes must be #dist.axis attributes";
    if (axis.getName().empty())
      return emitError() << "a plan axis has an empty name";
    if (!names.insert(axis.getName()).second)
      return emitError() << "axis '" << axis.getName()
                         << "' is listed twice in the plan";
    // Tensor parallelism may span several axes (the key-value heads' and
    // their replicas', ApplyPlan.cpp); every other role has one.
    auto &slot = byRole[static_cast<unsigned>(axis.getRole())];
    if (slot && axis.getRole() != AxisRole::Tensor)
      return emitError() << "axes '" << slot->getName() << "' and '"
                         << axis.getName() << "' both have role "
                         << stringifyAxisRole(axis.getRole())
                         << "; give each role one axis";
    slot = axis;
  }
  bool hasExperts = byRole[static_cast<unsigned>(AxisRole::Expert)].has_value();
  if ((expertParallel > 1) != hasExperts)
    return emitError() << "expert_parallel = " << expertParallel
                       << (hasExperts ? ", but the plan has an expert axis: "
                                        "give its size"
                                      : ", but the plan has no expert axis");
  bool hasContext = byRole[static_cast<unsigned>(AxisRole::Context)].has_value();
  if (contextChunks < 0 || (contextChunks > 0) != hasContext)
    return emitError() << "context_chunks = " << contextChunks
                       << (hasContext ? ", but the plan has a context axis: "
                                        "give the chunks each sequence is "
                                        "cut into"
                                      : ", but the plan has no context axis "
                                        "(leave it out)");
  if (contextMethod != "all_gather" && contextMethod != "ring")
    return emitError() << "context_method must be all_gather or ring, got \""
                       << contextMethod << "\"";
  if (!llvm::is_contained(kSchedules, schedule))
    return emitError() << "schedule must be one of gpipe, 1f1b, "
                          "interleaved-1f1b, zero-bubble, got \""
                       << schedule << "\"";
  if (microbatches < 1)
    return emitError() << "microbatches must be positive, got "
                       << microbatches;
  if (zeroStage < 0 || zeroStage > 3)
    return emitError() << "zero_stage must be 0, 1, 2 or 3, got "
                       << zeroStage;
  if (recompute == RecomputePolicy::Budget && budgetBytes <= 0)
    return emitError() << "recompute = budget needs budget_bytes > 0, got "
                       << budgetBytes;
  if (recompute != RecomputePolicy::Budget && budgetBytes != 0)
    return emitError() << "budget_bytes is only meaningful with recompute = "
                          "budget, got recompute = "
                       << stringifyRecomputePolicy(recompute);
  if (!llvm::is_contained(kPrecisions, precision))
    return emitError() << "precision must be fp32 or bf16, got \""
                       << precision << "\"";
  return success();
}

std::optional<StringRef> PlanAttr::getAxis(AxisRole role) const {
  for (PlanAxisAttr axis : getAxes())
    if (axis.getRole() == role)
      return axis.getName();
  return std::nullopt;
}

PlanAttr partition::dist::getPlan(ModuleOp module) {
  return module->getAttrOfType<PlanAttr>(DistDialect::kPlanAttrName);
}

/// The plan on `module`: its mesh is a `dist.mesh` of the module that has
/// every axis the plan gives a role.
static LogicalResult verifyPlanOn(Operation *op, Attribute value) {
  StringRef name = DistDialect::kPlanAttrName;
  if (!isa<ModuleOp>(op))
    return op->emitError() << "'" << name << "' belongs on a module, not on '"
                           << op->getName() << "'";
  auto plan = dyn_cast<PlanAttr>(value);
  if (!plan)
    return op->emitError() << "'" << name << "' must be a #dist.plan, but is "
                           << value;
  auto mesh = dyn_cast_or_null<MeshOp>(
      SymbolTable::lookupSymbolIn(op, plan.getMesh().getAttr()));
  if (!mesh)
    return op->emitError() << "'" << name << "': the mesh "
                           << plan.getMesh()
                           << " is not a dist.mesh of this module";
  for (PlanAxisAttr axis : plan.getAxes())
    if (!llvm::is_contained(mesh.getAxisNames(),
                            StringAttr::get(op->getContext(), axis.getName())))
      return op->emitError() << "'" << name << "': axis '" << axis.getName()
                             << "' (role "
                             << stringifyAxisRole(axis.getRole())
                             << ") is not an axis of the mesh "
                             << plan.getMesh();
  if (std::optional<StringRef> context = plan.getAxis(AxisRole::Context)) {
    int64_t size = 1;
    for (auto [axisName, axisSize] :
         llvm::zip(mesh.getAxisNames(), mesh.getAxisSizes()))
      if (cast<StringAttr>(axisName).getValue() == *context)
        size = axisSize;
    if (plan.getContextChunks() != 1 && plan.getContextChunks() != 2 * size)
      return op->emitError()
             << "'" << name << "': context_chunks = "
             << plan.getContextChunks() << " is neither 1 (natural order) "
             << "nor twice the context axis '" << *context << "' (size "
             << size << ", the zigzag layout)";
  }
  return success();
}

/// dist.flat_shard on a value of `type` named `site`: the value is the
/// 1-D shard of ceil(elements / group) elements the attribute describes.
static LogicalResult verifyFlatShardOf(Operation *op, Attribute value,
                                       Type type, const Twine &site) {
  std::string where =
      ("'" + DistDialect::kFlatShardAttrName + "' of " + site).str();
  auto emitError = [&]() {
    InFlightDiagnostic diag = op->emitError();
    diag << where << ": ";
    return diag;
  };
  FailureOr<FlatShard> shard = readFlatShard(value, emitError);
  if (failed(shard))
    return failure();
  auto shaped = dyn_cast<ShapedType>(type);
  if (!shaped || !shaped.hasStaticShape() || shaped.getRank() != 1)
    return emitError() << "the value must be a static 1-D tensor or memref, "
                          "but is "
                       << type;
  FailureOr<MeshShape> mesh = lookupMeshShape(op, shard->flat.getMesh());
  if (failed(mesh))
    return emitError() << "mesh " << shard->flat.getMesh() << " not found";
  int64_t group = 1;
  for (StringRef axis : shard->flat.getDimAxes(0)) {
    int64_t index = mesh->find(axis);
    if (index < 0)
      return emitError() << "axis '" << axis << "' is not an axis of "
                         << shard->flat.getMesh();
    group *= mesh->sizes[index];
  }
  int64_t elements = 1;
  for (int64_t dim : shard->shape)
    elements *= dim;
  int64_t chunk = flatChunk(elements, group);
  if (shaped.getDimSize(0) != chunk)
    return emitError() << "a shard of " << elements << " elements over "
                       << group << " devices has " << chunk
                       << " elements, but the value is " << type;
  if (shard->blockOf)
    return verifyShardingOf(
        op, shard->blockOf,
        RankedTensorType::get(shard->shape, shaped.getElementType()), site,
        /*local=*/true);
  return success();
}

LogicalResult DistDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attr) {
  if (attr.getName() == kPlanAttrName)
    return verifyPlanOn(op, attr.getValue());
  if (attr.getName() == kRecomputedAttrName) {
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitError() << "'" << kRecomputedAttrName
                             << "' must be a unit attribute, but is "
                             << attr.getValue();
    return success();
  }
  if (attr.getName() == kPipelineAttrName) {
    if (!isa<ModuleOp>(op) || !isa<DictionaryAttr>(attr.getValue()))
      return op->emitError() << "'" << kPipelineAttrName
                             << "' must be a dictionary on a module";
    return success();
  }
  if (attr.getName() == kLabelAttrName) {
    if (!isa<StringAttr>(attr.getValue()))
      return op->emitError() << "'" << kLabelAttrName
                             << "' must be a string, but is "
                             << attr.getValue();
    return success();
  }
  // Where a stage function's micro-batch loop starts, repeats and ends
  // (--dist-pipeline for --rt-microbatch-loop).
  if (attr.getName() == "dist.microbatch_loop_anchors") {
    auto anchors = dyn_cast<ArrayAttr>(attr.getValue());
    if (!anchors || anchors.size() != 3 ||
        !llvm::all_of(anchors, [](Attribute a) { return isa<StringAttr>(a); }))
      return op->emitError() << "'dist.microbatch_loop_anchors' must be "
                                "three strings, but is "
                             << attr.getValue();
    return success();
  }
  // The stage of a step function after --dist-pipeline (issue 12).
  if (attr.getName() == "dist.pipeline_stage") {
    auto stage = dyn_cast<IntegerAttr>(attr.getValue());
    if (!stage || !stage.getType().isInteger(64) || stage.getInt() < 0)
      return op->emitError() << "'dist.pipeline_stage' must be a "
                                "non-negative i64, but is "
                             << attr.getValue();
    return success();
  }
  if (attr.getName() == kFlatShardAttrName) {
    if (op->getNumResults() != 1)
      return op->emitError() << "'" << kFlatShardAttrName
                             << "' belongs on an op with one result";
    return verifyFlatShardOf(op, attr.getValue(), op->getResult(0).getType(),
                             "result #0");
  }
  if (attr.getName() == kLocalShardingAttrName) {
    // On the one-result op that defines a state buffer after memory
    // planning (a memref.view of the arena).
    if (op->getNumResults() != 1)
      return op->emitError() << "'" << kLocalShardingAttrName
                             << "' belongs on an op with one result";
    return verifyShardingOf(op, attr.getValue(), op->getResult(0).getType(),
                            "result #0", /*local=*/true);
  }
  if (attr.getName() == kOperandShardingsAttrName) {
    auto shardings = dyn_cast<ArrayAttr>(attr.getValue());
    if (!shardings || shardings.size() != op->getNumOperands())
      return op->emitError()
             << "'" << kOperandShardingsAttrName
             << "' must be an array of shardings, one per operand, "
             << op->getNumOperands() << ", but is " << attr.getValue();
    for (auto [index, sharding] : llvm::enumerate(shardings))
      if (failed(verifyShardingOf(op, sharding, op->getOperand(index).getType(),
                                  "operand #" + Twine(index))))
        return failure();
    return success();
  }
  if (attr.getName() != kShardingAttrName)
    return op->emitError() << "unknown attribute '"
                           << attr.getName().getValue() << "'";
  unsigned numResults = op->getNumResults();
  if (auto shardings = dyn_cast<ArrayAttr>(attr.getValue())) {
    if (shardings.size() != numResults)
      return op->emitError()
             << "'" << kShardingAttrName << "' must have one sharding per "
             << "result, " << numResults << ", but has " << shardings.size();
    for (auto [index, sharding] : llvm::enumerate(shardings))
      if (failed(verifyShardingOf(op, sharding, op->getResult(index).getType(),
                                  "result #" + Twine(index))))
        return failure();
    return success();
  }
  if (numResults != 1)
    return op->emitError() << "'" << kShardingAttrName << "' on an op with "
                           << numResults
                           << " results must be an array of shardings, one "
                              "per result";
  return verifyShardingOf(op, attr.getValue(), op->getResult(0).getType(),
                          "result #0");
}

/// dist.label, dist.sharding or dist.local_sharding on the value of `type`
/// named `site` ("argument #0", "result #1").
static LogicalResult verifyValueAttribute(Operation *op, NamedAttribute attr,
                                          Type type, const Twine &site) {
  if (attr.getName() == DistDialect::kLabelAttrName) {
    if (!isa<StringAttr>(attr.getValue()))
      return op->emitError() << "'" << DistDialect::kLabelAttrName
                             << "' must be a string, but is "
                             << attr.getValue();
    return success();
  }
  if (attr.getName() == DistDialect::kFlatShardAttrName)
    return verifyFlatShardOf(op, attr.getValue(), type, site);
  bool local = attr.getName() == DistDialect::kLocalShardingAttrName;
  if (attr.getName() != DistDialect::kShardingAttrName && !local)
    return op->emitError() << "unknown attribute '"
                           << attr.getName().getValue() << "' on " << site;
  return verifyShardingOf(op, attr.getValue(), type, site, local);
}

LogicalResult DistDialect::verifyRegionArgAttribute(Operation *op,
                                                    unsigned regionIndex,
                                                    unsigned argIndex,
                                                    NamedAttribute attr) {
  Type type;
  if (auto function = dyn_cast<FunctionOpInterface>(op))
    type = function.getArgumentTypes()[argIndex];
  else
    type = op->getRegion(regionIndex).getArgument(argIndex).getType();
  return verifyValueAttribute(op, attr, type, "argument #" + Twine(argIndex));
}

LogicalResult DistDialect::verifyRegionResultAttribute(Operation *op, unsigned,
                                                       unsigned resultIndex,
                                                       NamedAttribute attr) {
  auto function = dyn_cast<FunctionOpInterface>(op);
  if (!function)
    return op->emitError() << "'" << attr.getName().getValue()
                           << "' on a region result needs a function";
  return verifyValueAttribute(op, attr, function.getResultTypes()[resultIndex],
                              "result #" + Twine(resultIndex));
}
