//===- DistOps.cpp - verifiers and helpers of the dist ops ----------------===//
//
// Checks that need no mesh (distinct axes, dimensions in range, ranks and
// element types) are in the verifiers; checks that need the mesh's axes and
// sizes are in verifySymbolUses, and their messages name the axes and sizes.
//
//===----------------------------------------------------------------------===//

#include "dialects/Dist/DistOps.h"
#include "dialects/Dist/DistSyntax.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OpImplementation.h"


using namespace mlir;
using namespace partition::dist;

//===----------------------------------------------------------------------===//
// MeshShape and mesh lookup
//===----------------------------------------------------------------------===//

int64_t MeshShape::find(StringRef name) const {
  for (auto [index, axis] : llvm::enumerate(names))
    if (axis == name)
      return index;
  return -1;
}

int64_t MeshShape::numDevices() const {
  int64_t product = 1;
  for (int64_t size : sizes)
    product *= size;
  return product;
}

namespace {

using EmitErrorFn = function_ref<InFlightDiagnostic()>;

SmallVector<StringRef> strings(ArrayAttr attr) {
  SmallVector<StringRef> result;
  for (Attribute element : attr)
    result.push_back(cast<StringAttr>(element).getValue());
  return result;
}

std::string formatAxes(ArrayRef<StringRef> axes) {
  std::string text = "[";
  llvm::raw_string_ostream os(text);
  llvm::interleaveComma(axes, os);
  os << "]";
  return text;
}

std::string formatMesh(const MeshShape &mesh) {
  std::string text = "[";
  llvm::raw_string_ostream os(text);
  llvm::interleaveComma(llvm::zip(mesh.names, mesh.sizes), os, [&](auto axis) {
    os << std::get<0>(axis) << " = " << std::get<1>(axis);
  });
  os << "]";
  return text;
}

/// Fails with an error naming the repeated axis.
LogicalResult verifyDistinct(ArrayRef<StringRef> axes, StringRef what,
                             EmitErrorFn emitError) {
  for (unsigned i = 0, e = axes.size(); i < e; ++i)
    for (unsigned j = 0; j < i; ++j)
      if (axes[i] == axes[j])
        return emitError() << "axis '" << axes[i] << "' is listed twice in "
                           << what << " " << formatAxes(axes);
  return success();
}

/// The product of the sizes of `axes`; fails if one is not an axis of `mesh`.
FailureOr<int64_t> groupSize(const MeshShape &mesh, FlatSymbolRefAttr meshName,
                             ArrayRef<StringRef> axes, EmitErrorFn emitError) {
  int64_t product = 1;
  for (StringRef axis : axes) {
    int64_t index = mesh.find(axis);
    if (index < 0) {
      if (emitError)
        emitError() << "axis '" << axis << "' is not an axis of " << meshName
                    << ", whose axes are " << formatMesh(mesh);
      return failure();
    }
    product *= mesh.sizes[index];
  }
  return product;
}

Operation *lookupSymbol(Operation *from, FlatSymbolRefAttr symbol,
                        SymbolTableCollection *tables) {
  if (tables)
    return tables->lookupNearestSymbolFrom(from, symbol);
  return SymbolTable::lookupNearestSymbolFrom(from, symbol);
}

/// The shape of a mesh op, or failure if the op is invalid (it reports that
/// itself).
FailureOr<MeshShape> meshOpShape(MeshOp mesh) {
  MeshShape shape;
  for (Attribute name : mesh.getAxisNames()) {
    auto text = dyn_cast<StringAttr>(name);
    if (!text)
      return failure();
    shape.names.push_back(text.getValue());
  }
  llvm::append_range(shape.sizes, mesh.getAxisSizes());
  if (shape.names.size() != shape.sizes.size() ||
      llvm::any_of(shape.sizes, [](int64_t size) { return size <= 0; }))
    return failure();
  return shape;
}

} // namespace

FailureOr<MeshShape>
partition::dist::lookupMeshShape(Operation *from, FlatSymbolRefAttr mesh,
                                 SymbolTableCollection *tables,
                                 EmitErrorFn emitError) {
  auto meshOp = dyn_cast_if_present<MeshOp>(lookupSymbol(from, mesh, tables));
  if (!meshOp) {
    if (emitError)
      emitError() << mesh << " does not name a dist.mesh";
    return failure();
  }
  return meshOpShape(meshOp);
}

//===----------------------------------------------------------------------===//
// Sharding helpers
//===----------------------------------------------------------------------===//

LogicalResult partition::dist::verifyShardingFor(ShardingAttr sharding,
                                                 RankedTensorType type,
                                                 Operation *user,
                                                 EmitErrorFn emitError,
                                                 SymbolTableCollection *tables) {
  FailureOr<MeshShape> mesh =
      lookupMeshShape(user, sharding.getMesh(), tables, emitError);
  if (failed(mesh))
    return failure();
  if (sharding.getDims().size() != static_cast<size_t>(type.getRank()))
    return emitError() << "the sharding has " << sharding.getDims().size()
                       << " dimensions, but the value " << type << " has rank "
                       << type.getRank();
  if (failed(groupSize(*mesh, sharding.getMesh(), sharding.getPartialAxes(),
                       emitError)))
    return failure();
  for (int64_t dim = 0, rank = type.getRank(); dim < rank; ++dim) {
    SmallVector<StringRef> axes = sharding.getDimAxes(dim);
    FailureOr<int64_t> shards =
        groupSize(*mesh, sharding.getMesh(), axes, emitError);
    if (failed(shards))
      return failure();
    int64_t size = type.getDimSize(dim);
    if (!ShapedType::isDynamic(size) && size % *shards != 0)
      return emitError() << "dimension " << dim << " of size " << size
                         << " is not divisible by " << *shards
                         << ", the size of axes " << formatAxes(axes);
  }
  return success();
}

FailureOr<SmallVector<int64_t>>
partition::dist::getLocalShape(ShardingAttr sharding,
                               ArrayRef<int64_t> globalShape,
                               const MeshShape &mesh) {
  if (sharding.getDims().size() != globalShape.size())
    return failure();
  SmallVector<int64_t> local(globalShape);
  for (auto [dim, size] : llvm::enumerate(local)) {
    FailureOr<int64_t> shards = groupSize(mesh, sharding.getMesh(),
                                          sharding.getDimAxes(dim), {});
    if (failed(shards))
      return failure();
    if (ShapedType::isDynamic(size))
      continue;
    if (size % *shards != 0)
      return failure();
    size /= *shards;
  }
  return local;
}

FailureOr<SmallVector<int64_t>>
partition::dist::getLocalShape(ShardingAttr sharding,
                               ArrayRef<int64_t> globalShape, Operation *user) {
  FailureOr<MeshShape> mesh = lookupMeshShape(user, sharding.getMesh());
  if (failed(mesh))
    return failure();
  return getLocalShape(sharding, globalShape, *mesh);
}

//===----------------------------------------------------------------------===//
// Custom directives
//===----------------------------------------------------------------------===//

/// `[name, ...]`
ParseResult partition::dist::parseAxisNames(OpAsmParser &parser,
                                            ArrayAttr &axes) {
  SmallVector<Attribute> names;
  if (parser.parseCommaSeparatedList(
          OpAsmParser::Delimiter::Square, [&]() -> ParseResult {
            std::string name;
            if (parser.parseKeywordOrString(&name))
              return failure();
            names.push_back(parser.getBuilder().getStringAttr(name));
            return success();
          }))
    return failure();
  axes = parser.getBuilder().getArrayAttr(names);
  return success();
}

void partition::dist::printAxisNames(OpAsmPrinter &printer, Operation *,
                                     ArrayAttr axes) {
  printer << '[';
  llvm::interleaveComma(axes, printer, [&](Attribute axis) {
    printer.printKeywordOrString(cast<StringAttr>(axis).getValue());
  });
  printer << ']';
}

/// `[name = value, ...]`
ParseResult partition::dist::parseAxisValues(OpAsmParser &parser,
                                             ArrayAttr &axes,
                                             DenseI64ArrayAttr &values) {
  SmallVector<Attribute> names;
  SmallVector<int64_t> numbers;
  if (parser.parseCommaSeparatedList(
          OpAsmParser::Delimiter::Square, [&]() -> ParseResult {
            std::string name;
            int64_t value = 0;
            if (parser.parseKeywordOrString(&name) || parser.parseEqual() ||
                parser.parseInteger(value))
              return failure();
            names.push_back(parser.getBuilder().getStringAttr(name));
            numbers.push_back(value);
            return success();
          }))
    return failure();
  axes = parser.getBuilder().getArrayAttr(names);
  values = parser.getBuilder().getDenseI64ArrayAttr(numbers);
  return success();
}

void partition::dist::printAxisValues(OpAsmPrinter &printer, Operation *,
                                      ArrayAttr axes,
                                      DenseI64ArrayAttr values) {
  printer << '[';
  llvm::interleaveComma(llvm::zip(axes, values.asArrayRef()), printer,
                        [&](auto axis) {
                          printer.printKeywordOrString(
                              cast<StringAttr>(std::get<0>(axis)).getValue());
                          printer << " = " << std::get<1>(axis);
                        });
  printer << ']';
}

/// The bare keyword `sum`, `avg` or `max`.
ParseResult partition::dist::parseReduceKind(OpAsmParser &parser,
                                             ReduceKindAttr &kind) {
  SMLoc loc = parser.getCurrentLocation();
  StringRef keyword;
  if (parser.parseKeyword(&keyword))
    return failure();
  std::optional<ReduceKind> value = symbolizeReduceKind(keyword);
  if (!value)
    return parser.emitError(loc) << "expected sum, avg or max, but got '"
                                 << keyword << "'";
  kind = ReduceKindAttr::get(parser.getContext(), *value);
  return success();
}

void partition::dist::printReduceKind(OpAsmPrinter &printer, Operation *,
                                      ReduceKindAttr kind) {
  printer << stringifyReduceKind(kind.getValue());
}

//===----------------------------------------------------------------------===//
// Meshes
//===----------------------------------------------------------------------===//

LogicalResult MeshOp::verify() {
  SmallVector<StringRef> names = strings(getAxisNames());
  ArrayRef<int64_t> sizes = getAxisSizes();
  if (names.size() != sizes.size())
    return emitOpError() << "has " << names.size() << " axis names but "
                         << sizes.size() << " sizes";
  if (names.empty())
    return emitOpError() << "must have at least one axis";
  for (auto [name, size] : llvm::zip(names, sizes)) {
    if (name.empty())
      return emitOpError() << "axis names must not be empty";
    if (size <= 0)
      return emitOpError() << "axis '" << name << "' has size " << size
                           << ", but sizes must be positive";
  }
  return verifyDistinct(names, "axes", [&] { return emitOpError(); });
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

namespace {

/// Mesh-independent checks of a collective: at least one axis, distinct.
LogicalResult verifyCollectiveAxes(Operation *op, ArrayAttr axesAttr) {
  SmallVector<StringRef> axes = strings(axesAttr);
  if (axes.empty())
    return op->emitOpError() << "must name at least one mesh axis";
  return verifyDistinct(axes, "axes", [&] { return op->emitOpError(); });
}

/// `dim` must be a dimension of `type`; `what` names the attribute.
LogicalResult verifyDimInRange(Operation *op, StringRef what, int64_t dim,
                               RankedTensorType type) {
  if (dim < type.getRank())
    return success();
  return op->emitOpError() << what << " " << dim
                           << " is not a dimension of the input " << type
                           << " of rank " << type.getRank();
}

/// The result must have the input's rank and element type.
LogicalResult verifyRankAndElementType(Operation *op, RankedTensorType input,
                                       RankedTensorType result) {
  if (input.getRank() == result.getRank() &&
      input.getElementType() == result.getElementType())
    return success();
  return op->emitOpError() << "result " << result
                           << " must have the rank and element type of the "
                              "input "
                           << input;
}

/// The mesh of a collective and the size of its group.
FailureOr<int64_t> resolveGroup(Operation *op, FlatSymbolRefAttr meshName,
                                ArrayAttr axes, SymbolTableCollection &tables) {
  auto emitError = [&] { return op->emitOpError(); };
  FailureOr<MeshShape> mesh =
      lookupMeshShape(op, meshName, &tables, emitError);
  if (failed(mesh))
    return failure();
  return groupSize(*mesh, meshName, strings(axes), emitError);
}

LogicalResult verifyDivisible(Operation *op, StringRef what, int64_t dim,
                              RankedTensorType input, int64_t shards,
                              ArrayAttr axes) {
  int64_t size = input.getDimSize(dim);
  if (size % shards == 0)
    return success();
  return op->emitOpError() << what << " " << dim << " of size " << size
                           << " is not divisible by " << shards
                           << ", the size of axes "
                           << formatAxes(strings(axes));
}

/// The result must be `expected`; `origin` says how it was derived.
LogicalResult verifyResultType(Operation *op, RankedTensorType actual,
                               ArrayRef<int64_t> shape, Type elementType,
                               const Twine &origin) {
  auto expected = RankedTensorType::get(shape, elementType);
  if (actual == expected)
    return success();
  return op->emitOpError() << "result must be " << expected << " (" << origin
                           << "), but is " << actual;
}

RankedTensorType tensorType(Value value) {
  return cast<RankedTensorType>(value.getType());
}

} // namespace

LogicalResult AllReduceOp::verify() {
  if (getInputs().empty())
    return emitOpError("must reduce at least one tensor");
  return verifyCollectiveAxes(*this, getAxes());
}

LogicalResult AllReduceOp::verifySymbolUses(SymbolTableCollection &tables) {
  return resolveGroup(*this, getMeshAttr(), getAxes(), tables);
}

LogicalResult RingShiftOp::verify() {
  return verifyCollectiveAxes(*this, getAxes());
}

LogicalResult RingShiftOp::verifySymbolUses(SymbolTableCollection &tables) {
  return success(
      succeeded(resolveGroup(*this, getMeshAttr(), getAxes(), tables)));
}

LogicalResult AllGatherOp::verify() {
  RankedTensorType input = tensorType(getInput());
  if (failed(verifyCollectiveAxes(*this, getAxes())) ||
      failed(verifyDimInRange(*this, "dim", getDim(), input)))
    return failure();
  return verifyRankAndElementType(*this, input, tensorType(getResult()));
}

LogicalResult AllGatherOp::verifySymbolUses(SymbolTableCollection &tables) {
  FailureOr<int64_t> shards =
      resolveGroup(*this, getMeshAttr(), getAxes(), tables);
  if (failed(shards))
    return failure();
  RankedTensorType input = tensorType(getInput());
  int64_t dim = getDim();
  SmallVector<int64_t> shape(input.getShape());
  shape[dim] *= *shards;
  return verifyResultType(*this, tensorType(getResult()), shape,
                          input.getElementType(),
                          "dimension " + Twine(dim) + " of size " +
                              Twine(input.getDimSize(dim)) + " times " +
                              Twine(*shards) + ", the size of axes " +
                              formatAxes(strings(getAxes())));
}

LogicalResult AllToAllOp::verify() {
  RankedTensorType input = tensorType(getInput());
  if (failed(verifyCollectiveAxes(*this, getAxes())) ||
      failed(verifyDimInRange(*this, "split_dim", getSplitDim(), input)) ||
      failed(verifyDimInRange(*this, "concat_dim", getConcatDim(), input)))
    return failure();
  if (getSplitDim() == getConcatDim())
    return emitOpError() << "split_dim and concat_dim are both "
                         << getSplitDim()
                         << "; an all_to_all moves a split between two "
                            "dimensions";
  return verifyRankAndElementType(*this, input, tensorType(getResult()));
}

LogicalResult AllToAllOp::verifySymbolUses(SymbolTableCollection &tables) {
  FailureOr<int64_t> shards =
      resolveGroup(*this, getMeshAttr(), getAxes(), tables);
  if (failed(shards))
    return failure();
  RankedTensorType input = tensorType(getInput());
  int64_t split = getSplitDim(), concat = getConcatDim();
  if (input.getDimSize(split) % *shards != 0)
    return emitOpError() << "split_dim " << split << " of size "
                         << input.getDimSize(split)
                         << " is not divisible by " << *shards
                         << ", the size of axes "
                         << formatAxes(strings(getAxes()));
  SmallVector<int64_t> shape(input.getShape());
  shape[split] /= *shards;
  shape[concat] *= *shards;
  return verifyResultType(*this, tensorType(getResult()), shape,
                          input.getElementType(),
                          "split_dim " + Twine(split) + " divided and "
                              "concat_dim " + Twine(concat) + " multiplied "
                              "by " + Twine(*shards) + ", the size of axes " +
                              formatAxes(strings(getAxes())));
}

/// An op whose result is its input with dimension `dim` split into as many
/// blocks as the group of `axes` has devices (reduce_scatter, all_slice):
/// the checks that need no mesh, then those that do.
template <typename BlockSplitOp>
static LogicalResult verifyBlockSplit(BlockSplitOp op) {
  RankedTensorType input = tensorType(op.getInput());
  if (failed(verifyCollectiveAxes(op, op.getAxes())) ||
      failed(verifyDimInRange(op, "dim", op.getDim(), input)))
    return failure();
  return verifyRankAndElementType(op, input, tensorType(op.getResult()));
}

template <typename BlockSplitOp>
static LogicalResult verifyBlockSplitSymbols(BlockSplitOp op,
                                             SymbolTableCollection &tables) {
  FailureOr<int64_t> shards =
      resolveGroup(op, op.getMeshAttr(), op.getAxes(), tables);
  if (failed(shards))
    return failure();
  RankedTensorType input = tensorType(op.getInput());
  int64_t dim = op.getDim();
  if (failed(verifyDivisible(op, "dimension", dim, input, *shards,
                             op.getAxes())))
    return failure();
  SmallVector<int64_t> shape(input.getShape());
  shape[dim] /= *shards;
  return verifyResultType(op, tensorType(op.getResult()), shape,
                          input.getElementType(),
                          "dimension " + Twine(dim) + " of size " +
                              Twine(input.getDimSize(dim)) + " divided by " +
                              Twine(*shards) + ", the size of axes " +
                              formatAxes(strings(op.getAxes())));
}

LogicalResult ReduceScatterOp::verify() { return verifyBlockSplit(*this); }

LogicalResult ReduceScatterOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyBlockSplitSymbols(*this, tables);
}

LogicalResult AxisIndexOp::verify() {
  return verifyCollectiveAxes(*this, getAxes());
}

LogicalResult AxisIndexOp::verifySymbolUses(SymbolTableCollection &tables) {
  return resolveGroup(*this, getMeshAttr(), getAxes(), tables);
}

LogicalResult AllSliceOp::verify() { return verifyBlockSplit(*this); }

LogicalResult AllSliceOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyBlockSplitSymbols(*this, tables);
}

//===----------------------------------------------------------------------===//
// Point to point
//===----------------------------------------------------------------------===//

namespace {

LogicalResult verifyPeer(Operation *op, ArrayAttr axesAttr,
                         ArrayRef<int64_t> coords) {
  SmallVector<StringRef> axes = strings(axesAttr);
  if (axes.size() != coords.size())
    return op->emitOpError() << "has " << axes.size() << " peer axes but "
                             << coords.size() << " coordinates";
  if (axes.empty())
    return op->emitOpError() << "must give the peer's coordinate on at least "
                                "one mesh axis";
  for (auto [axis, coord] : llvm::zip(axes, coords))
    if (coord < 0)
      return op->emitOpError() << "coordinate " << coord << " of axis '"
                               << axis << "' is negative";
  return verifyDistinct(axes, "peer axes", [&] { return op->emitOpError(); });
}

LogicalResult verifyPeerUses(Operation *op, FlatSymbolRefAttr meshName,
                             ArrayAttr axesAttr, ArrayRef<int64_t> coords,
                             SymbolTableCollection &tables) {
  auto emitError = [&] { return op->emitOpError(); };
  FailureOr<MeshShape> mesh = lookupMeshShape(op, meshName, &tables, emitError);
  if (failed(mesh))
    return failure();
  SmallVector<StringRef> axes = strings(axesAttr);
  if (failed(groupSize(*mesh, meshName, axes, emitError)))
    return failure();
  for (auto [axis, coord] : llvm::zip(axes, coords)) {
    int64_t size = mesh->sizes[mesh->find(axis)];
    if (coord >= size)
      return op->emitOpError() << "coordinate " << coord << " of axis '"
                               << axis << "' is out of range: the axis has "
                               << "size " << size;
  }
  return success();
}

} // namespace

LogicalResult SendOp::verify() {
  return verifyPeer(*this, getPeerAxes(), getPeerCoords());
}

LogicalResult SendOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyPeerUses(*this, getMeshAttr(), getPeerAxes(), getPeerCoords(),
                        tables);
}

LogicalResult RecvOp::verify() {
  return verifyPeer(*this, getPeerAxes(), getPeerCoords());
}

LogicalResult RecvOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyPeerUses(*this, getMeshAttr(), getPeerAxes(), getPeerCoords(),
                        tables);
}

//===----------------------------------------------------------------------===//
// Flat buckets
//===----------------------------------------------------------------------===//

int64_t partition::dist::flatChunk(int64_t elements, int64_t rows) {
  return (elements + rows - 1) / rows;
}

namespace {

/// Checks a bucket against the tensors it packs: one element type, and
/// [R, sum of ceil(n_i / R)] columns.
LogicalResult verifyFlatBucket(Operation *op, RankedTensorType bucket,
                               TypeRange tensors, StringRef what) {
  if (tensors.empty())
    return op->emitOpError() << "needs at least one " << what;
  int64_t rows = bucket.getDimSize(0);
  if (rows < 1)
    return op->emitOpError() << "bucket " << bucket
                             << " must have at least one row";
  int64_t columns = 0;
  for (auto [index, type] : llvm::enumerate(tensors)) {
    auto tensor = cast<RankedTensorType>(type);
    if (tensor.getElementType() != bucket.getElementType())
      return op->emitOpError()
             << what << " #" << index << " is " << tensor
             << " but the bucket holds " << bucket.getElementType();
    columns += flatChunk(tensor.getNumElements(), rows);
  }
  if (bucket.getDimSize(1) != columns)
    return op->emitOpError() << "bucket " << bucket << " must have " << columns
                             << " columns: the " << what
                             << "s take ceil(elements / " << rows
                             << ") each";
  return success();
}

} // namespace

FailureOr<FlatShard>
partition::dist::readFlatShard(Attribute attr,
                               function_ref<InFlightDiagnostic()> emitError) {
  auto fail = [&](const Twine &message) -> FailureOr<FlatShard> {
    if (emitError)
      emitError() << "'" << DistDialect::kFlatShardAttrName << "' " << message
                  << ", but is " << attr;
    return failure();
  };
  auto dict = dyn_cast<DictionaryAttr>(attr);
  if (!dict)
    return fail("must be a dictionary {flat, shape[, block_of]}");
  FlatShard shard;
  shard.flat = dict.getAs<ShardingAttr>("flat");
  auto shape = dict.getAs<DenseI64ArrayAttr>("shape");
  Attribute blockOf = dict.get("block_of");
  if (!shard.flat || shard.flat.getDims().size() != 1 ||
      shard.flat.getDimAxes(0).empty() || !shard.flat.getPartialAxes().empty())
    return fail("needs 'flat', a #dist.sharding of one dimension split over "
                "at least one axis");
  if (!shape)
    return fail("needs 'shape', an array<i64>");
  if (blockOf && !isa<ShardingAttr>(blockOf))
    return fail("has a 'block_of' that is not a #dist.sharding");
  if (dict.size() != 2u + (blockOf ? 1 : 0))
    return fail("has keys other than flat, shape and block_of");
  shard.shape.assign(shape.asArrayRef().begin(), shape.asArrayRef().end());
  for (int64_t dim : shard.shape)
    if (dim < 1)
      return fail("has a 'shape' with a dimension below 1");
  shard.blockOf = dyn_cast_or_null<ShardingAttr>(blockOf);
  return shard;
}

DictionaryAttr partition::dist::buildFlatShard(ShardingAttr flat,
                                               ArrayRef<int64_t> shape,
                                               ShardingAttr blockOf) {
  MLIRContext *context = flat.getContext();
  SmallVector<NamedAttribute> entries{
      NamedAttribute(StringAttr::get(context, "flat"), flat),
      NamedAttribute(StringAttr::get(context, "shape"),
                     DenseI64ArrayAttr::get(context, shape))};
  if (blockOf)
    entries.push_back(
        NamedAttribute(StringAttr::get(context, "block_of"), blockOf));
  return DictionaryAttr::get(context, entries);
}

LogicalResult FlatPackOp::verify() {
  return verifyFlatBucket(*this, getResult().getType(),
                          getInputs().getTypes(), "input");
}

LogicalResult FlatUnpackOp::verify() {
  return verifyFlatBucket(*this, getInput().getType(),
                          getResults().getTypes(), "result");
}

#define GET_OP_CLASSES
#include "dialects/Dist/DistOps.cpp.inc"
