//===- RtOps.cpp - verifiers and custom syntax of the rt ops --------------===//

#include "dialects/Rt/RtOps.h"
#include "dialects/Rt/RtTiers.h"
#include "dialects/Rt/RtViews.h"

#include "dialects/Dist/DistOps.h"
#include "dialects/Dist/DistSyntax.h"
#include "runtime/program/KernelTable.h"

#include "mlir/Dialect/MemRef/Utils/MemRefUtils.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace partition::rt;

// The rt collectives spell axes and reductions as the dist ones do.
using partition::dist::parseAxisNames;
using partition::dist::parseAxisValues;
using partition::dist::printAxisValues;
using partition::dist::parseReduceKind;
using partition::dist::printAxisNames;
using partition::dist::printReduceKind;

//===----------------------------------------------------------------------===//
// async collectives and rt.wait
//===----------------------------------------------------------------------===//

namespace {

/// `async` before a collective's operands: it returns a `!rt.token`.
ParseResult parseAsyncToken(OpAsmParser &parser, Type &tokenType) {
  if (succeeded(parser.parseOptionalKeyword("async")))
    tokenType = TokenType::get(parser.getContext());
  return success();
}

void printAsyncToken(OpAsmPrinter &printer, Operation *, Type tokenType) {
  if (tokenType)
    printer << "async ";
}

} // namespace

/// A started collective's token is completed by exactly one rt.wait: a
/// second wait would wait for nothing, none would leave the collective
/// running past the step (the runtime refuses both, this says where).
LogicalResult partition::rt::verifyAsyncToken(Operation *op, Value token) {
  if (!token)
    return success();
  unsigned waits = 0, uses = 0;
  for (Operation *user : token.getUsers()) {
    ++uses;
    waits += isa<WaitOp>(user);
  }
  if (uses != 1 || waits != 1)
    return op->emitOpError() << "is async: its token must be waited for by "
                                "exactly one rt.wait and used nowhere else, "
                                "but has "
                             << waits << " rt.wait and " << uses - waits
                             << " other uses";
  return success();
}

namespace {

Value baseBuffer(Value value) { return viewedBuffer(value); }

/// Whether `op` reads the buffer `base` and never writes it: a kernel
/// input that is no output, the input of an out-of-place collective or a
/// send.
bool onlyReads(Operation *op, Value base) {
  auto is = [&](Value value) { return baseBuffer(value) == base; };
  if (auto kernel = dyn_cast<KernelOp>(op))
    return llvm::none_of(kernel.getOutputs(), is);
  if (isa<AllGatherOp, ReduceScatterOp, RingShiftOp, AllToAllOp>(op))
    return !is(op->getOperand(1));
  return isa<SendOp>(op);
}

} // namespace

LogicalResult WaitOp::verify() {
  Operation *start = getToken().getDefiningOp();
  if (!start ||
      !isa<AllReduceOp, AllGatherOp, ReduceScatterOp, RingShiftOp,
           AllToAllOp, TierReadOp, TierWriteOp>(start) ||
      start->getBlock() != getOperation()->getBlock())
    return emitOpError("must wait for a token returned by an async rt "
                       "collective or tier transfer of the same block");
  // The collective's buffers: the wait keeps exactly those in use.
  SmallVector<Value> expected;
  for (Value operand : start->getOperands())
    expected.push_back(operand);
  if (!llvm::equal(expected, getBuffers()))
    return emitOpError() << "must name the buffers of the collective it waits "
                            "for ("
                         << expected.size() << " buffers, in its order), but "
                         << "names " << getBuffers().size();
  // Between the start and the wait the buffers belong to the collective
  // (views of other bytes of one buffer, as the slices of a tier transfer,
  // do not); a ring shift's input may still be read (it only reads it too).
  Value sharedInput = isa<RingShiftOp>(start)
                          ? baseBuffer(start->getOperand(0))
                          : Value();
  StringRef what = isa<TierReadOp, TierWriteOp>(start) ? "tier transfer"
                                                         : "collective";
  auto owned = [&](Value operand) {
    return llvm::any_of(expected, [&](Value buffer) {
      return mayOverlap(operand, buffer);
    });
  };
  for (Operation *op = start->getNextNode(); op && op != getOperation();
       op = op->getNextNode()) {
    // Making a view reads and writes nothing; using it does.
    if (isView(op))
      continue;
    for (Value operand : op->getOperands())
      if (isa<MemRefType>(operand.getType()) && owned(operand) &&
          !(sharedInput && baseBuffer(operand) == sharedInput &&
            onlyReads(op, sharedInput))) {
        InFlightDiagnostic diag =
            op->emitOpError() << "uses a buffer of an async " << what
                              << " before "
                                 "its rt.wait";
        diag.attachNote(start->getLoc()) << "the " << what << " starts here";
        diag.attachNote(getLoc()) << "and is waited for here";
        return diag;
      }
  }
  return success();
}

//===----------------------------------------------------------------------===//
// rt.kernel
//===----------------------------------------------------------------------===//

const partition::runtime::KernelInfo &KernelOp::getInfo() {
  return *partition::runtime::lookupKernel(
      std::string_view(getKernel().data(), getKernel().size()));
}

LogicalResult KernelOp::verify() {
  const runtime::KernelInfo *info = runtime::lookupKernel(
      std::string_view(getKernel().data(), getKernel().size()));
  if (!info)
    return emitOpError() << "unknown kernel \"" << getKernel() << "\"";
  auto expectCount = [&](StringRef what, size_t actual,
                         int expected) -> LogicalResult {
    if (actual == static_cast<size_t>(expected))
      return success();
    return emitOpError() << "kernel \"" << getKernel() << "\" takes "
                         << expected << " " << what << ", but has " << actual;
  };
  if (failed(expectCount("inputs", getInputs().size(), info->inputs)) ||
      failed(expectCount("outputs", getOutputs().size(), info->outputs)) ||
      failed(expectCount("ints", getInts().size(), info->ints)) ||
      failed(expectCount("floats", getFloats().size(), info->floats)))
    return failure();
  for (Value operand : getOperation()->getOperands()) {
    auto type = cast<MemRefType>(operand.getType());
    if (!isContiguousRowMajor(type))
      return emitOpError() << "operand " << type
                           << " must have a static shape and a contiguous "
                              "row-major layout";
  }
  // Two outputs on one buffer would make the result depend on the order in
  // which the kernel writes them, even for kernels that run in place.
  OperandRange outputs = getOutputs();
  for (unsigned i = 0, e = outputs.size(); i < e; ++i)
    for (unsigned j = 0; j < i; ++j)
      if (outputs[i] == outputs[j])
        return emitOpError() << "kernel \"" << getKernel() << "\" writes one "
                             << "buffer twice: output #" << i
                             << " is output #" << j;
  if (!info->inPlace)
    for (Value output : getOutputs())
      if (llvm::is_contained(getInputs(), output))
        return emitOpError() << "kernel \"" << getKernel()
                             << "\" cannot write one of its inputs";
  return verifyInArena(*this);
}

//===----------------------------------------------------------------------===//
// rt.all_reduce
//===----------------------------------------------------------------------===//

LogicalResult AllReduceOp::verify() {
  if (failed(verifyAsyncToken(*this, getToken())))
    return failure();
  OperandRange buffers = getBuffers();
  if (buffers.empty())
    return emitOpError("must reduce at least one buffer");
  for (auto [index, buffer] : llvm::enumerate(buffers)) {
    auto type = cast<MemRefType>(buffer.getType());
    // The runtime reduces f32 / bf16 arena buffers as flat arrays (NCCL /
    // MPI on the whole byte range), so a strided view would reduce the wrong
    // bytes.
    Type element = type.getElementType();
    if (!(element.isF32() || element.isBF16()) || !type.hasStaticShape() ||
        !type.getLayout().isIdentity())
      return emitOpError() << "buffer #" << index << " " << type
                           << " must be f32 or bf16 with a static shape and "
                              "the identity layout";
    if (element != cast<MemRefType>(buffers[0].getType()).getElementType())
      return emitOpError() << "buffer #" << index << " " << type
                           << " has another element type than buffer #0 (a "
                              "bucket is reduced as one array)";
    // Reducing one buffer twice in a bucket would add it to itself.
    for (unsigned j = 0; j < index; ++j)
      if (buffers[j] == buffer)
        return emitOpError() << "reduces one buffer twice: buffer #" << index
                             << " is buffer #" << j;
  }
  if (getLabel().empty())
    return emitOpError("must have a non-empty label");
  ArrayAttr axes = getAxes();
  if (axes.empty())
    return emitOpError("must name at least one mesh axis");
  for (unsigned i = 0, e = axes.size(); i < e; ++i)
    for (unsigned j = 0; j < i; ++j)
      if (axes[i] == axes[j])
        return emitOpError()
               << "axis '" << cast<StringAttr>(axes[i]).getValue()
               << "' is listed twice in axes " << axes;
  return verifyInArena(*this);
}

LogicalResult AllReduceOp::verifySymbolUses(SymbolTableCollection &tables) {
  FailureOr<partition::dist::MeshShape> mesh = partition::dist::lookupMeshShape(
      *this, getMeshAttr(), &tables, [&] { return emitOpError(); });
  if (failed(mesh))
    return failure();
  for (Attribute axis : getAxes()) {
    StringRef name = cast<StringAttr>(axis).getValue();
    if (mesh->find(name) >= 0)
      continue;
    InFlightDiagnostic diag = emitOpError()
                              << "axis '" << name << "' is not an axis of "
                              << getMeshAttr() << ", whose axes are [";
    llvm::interleaveComma(llvm::zip(mesh->names, mesh->sizes), diag,
                          [&](auto entry) {
                            diag << std::get<0>(entry) << " = "
                                 << std::get<1>(entry);
                          });
    return diag << "]";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// rt.all_gather, rt.reduce_scatter
//===----------------------------------------------------------------------===//

namespace {

/// The mesh-independent checks of an out-of-place block collective.
LogicalResult verifyBlockCollective(Operation *op, Value input, Value output,
                                    int64_t dim, StringRef label,
                                    ArrayAttr axes) {
  for (auto [what, value] : {std::pair<StringRef, Value>{"input", input},
                             {"output", output}}) {
    auto type = cast<MemRefType>(value.getType());
    // The runtime moves whole arena buffers (and blocks of them), not
    // strided views.
    // A gather moves elements (token ids too); a reduction adds floats.
    Type element = type.getElementType();
    bool words = isa<AllGatherOp, RingShiftOp, AllToAllOp>(op) &&
                 element.isInteger(32);
    if ((!element.isF32() && !element.isBF16() && !words) ||
        !type.hasStaticShape() || !type.getLayout().isIdentity())
      return op->emitOpError() << what << " " << type
                               << " must be f32 or bf16 (or i32 for an "
                                  "all_gather, ring_shift or all_to_all) "
                                  "with a static "
                                  "shape and the identity layout";
  }
  if (cast<MemRefType>(input.getType()).getElementType() !=
      cast<MemRefType>(output.getType()).getElementType())
    return op->emitOpError("input and output must have one element type");
  if (input == output)
    return op->emitOpError("cannot write its input: it runs out of place");
  auto inputType = cast<MemRefType>(input.getType());
  auto outputType = cast<MemRefType>(output.getType());
  if (dim >= inputType.getRank())
    return op->emitOpError() << "dim " << dim << " is not a dimension of the "
                             << "input " << inputType;
  if (inputType.getRank() != outputType.getRank())
    return op->emitOpError() << "output " << outputType
                             << " must have the rank of the input "
                             << inputType;
  if (label.empty())
    return op->emitOpError("must have a non-empty label");
  if (axes.empty())
    return op->emitOpError("must name at least one mesh axis");
  for (unsigned i = 0, e = axes.size(); i < e; ++i)
    for (unsigned j = 0; j < i; ++j)
      if (axes[i] == axes[j])
        return op->emitOpError()
               << "axis '" << cast<StringAttr>(axes[i]).getValue()
               << "' is listed twice in axes " << axes;
  return verifyInArena(op);
}

/// How a block collective's output relates to its input.
enum class BlockKind { Gather, Scatter, Shift, Move };

/// Checks the mesh, the axes and their order, and that the output is the
/// input with `dim` multiplied (gather) or divided (scatter) by the group's
/// size, or the input's type (a ring shift).
LogicalResult verifyBlockCollectiveUses(Operation *op, FlatSymbolRefAttr meshName,
                                        ArrayAttr axes, Value input,
                                        Value output, int64_t dim,
                                        BlockKind kind,
                                        SymbolTableCollection &tables,
                                        int64_t concatDim = -1) {
  bool gather = kind == BlockKind::Gather;
  FailureOr<partition::dist::MeshShape> mesh = partition::dist::lookupMeshShape(
      op, meshName, &tables, [&] { return op->emitOpError(); });
  if (failed(mesh))
    return failure();
  int64_t group = 1, previous = -1;
  for (Attribute axis : axes) {
    StringRef name = cast<StringAttr>(axis).getValue();
    int64_t index = mesh->find(name);
    if (index < 0)
      return op->emitOpError() << "axis '" << name << "' is not an axis of "
                               << meshName;
    // The runtime ranks a group by mesh coordinates in the mesh's order, so
    // any other order would put the blocks in another order.
    if (index < previous)
      return op->emitOpError() << "axes " << axes
                               << " must be listed in the order of the axes "
                                  "of "
                               << meshName;
    previous = index;
    group *= mesh->sizes[index];
  }
  auto inputType = cast<MemRefType>(input.getType());
  if (kind == BlockKind::Shift) {
    if (output.getType() != inputType)
      return op->emitOpError() << "output must be " << inputType
                               << " (the input's type), but is "
                               << output.getType();
    return success();
  }
  SmallVector<int64_t> shape(inputType.getShape());
  if (kind == BlockKind::Move) {
    if (shape[dim] % group != 0)
      return op->emitOpError() << "split_dim " << dim << " of size "
                               << shape[dim] << " is not divisible by "
                               << group << ", the size of axes " << axes;
    shape[dim] /= group;
    shape[concatDim] *= group;
    auto expected = MemRefType::get(shape, inputType.getElementType());
    if (output.getType() != expected)
      return op->emitOpError()
             << "output must be " << expected << " (the input divided by "
             << group << " along split_dim " << dim << " and multiplied by "
             << "it along concat_dim " << concatDim << "), but is "
             << output.getType();
    return success();
  }
  if (!gather && shape[dim] % group != 0)
    return op->emitOpError() << "dimension " << dim << " of size "
                             << shape[dim] << " is not divisible by " << group
                             << ", the size of axes " << axes;
  shape[dim] = gather ? shape[dim] * group : shape[dim] / group;
  auto expected = MemRefType::get(shape, inputType.getElementType());
  if (output.getType() != expected)
    return op->emitOpError() << "output must be " << expected << " (the input "
                             << (gather ? "times " : "divided by ") << group
                             << " along dimension " << dim << "), but is "
                             << output.getType();
  return success();
}

/// A ZeRO bucket's name, when a collective moves one tensor of it.
LogicalResult verifyBucket(Operation *op, std::optional<StringRef> bucket) {
  if (bucket && bucket->empty())
    return op->emitOpError("must name a non-empty bucket, or none");
  return success();
}

} // namespace

LogicalResult AllGatherOp::verify() {
  if (failed(verifyAsyncToken(*this, getToken())) ||
      failed(verifyBucket(*this, getBucket())))
    return failure();
  return verifyBlockCollective(*this, getInput(), getOutput(), getDim(),
                               getLabel(), getAxes());
}

LogicalResult AllGatherOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyBlockCollectiveUses(*this, getMeshAttr(), getAxes(), getInput(),
                                   getOutput(), getDim(), BlockKind::Gather,
                                   tables);
}

LogicalResult AllToAllOp::verify() {
  if (failed(verifyAsyncToken(*this, getToken())) ||
      failed(verifyBlockCollective(*this, getInput(), getOutput(),
                                   getSplitDim(), getLabel(), getAxes())) ||
      failed(verifyBlockCollective(*this, getInput(), getOutput(),
                                   getConcatDim(), getLabel(), getAxes())))
    return failure();
  if (getSplitDim() == getConcatDim())
    return emitOpError() << "split_dim and concat_dim are both "
                         << getSplitDim() << "; they must differ";
  std::optional<uint64_t> rows = getRowsDim();
  if (getCounts().empty() != !rows)
    return emitOpError("takes counts and rows_dim together: the filled rows "
                       "of the input's and the output's cells");
  if (!rows)
    return success();
  if (getCounts().size() != 2)
    return emitOpError() << "takes two counts (the input's and the output's "
                            "cells), not "
                         << getCounts().size();
  auto inputType = cast<MemRefType>(getInput().getType());
  int64_t r = int64_t(*rows);
  if (r <= int64_t(getSplitDim()) || r <= int64_t(getConcatDim()) ||
      r + 1 >= inputType.getRank())
    return emitOpError() << "rows_dim " << r
                         << " must come after split_dim and concat_dim and "
                            "before the last dimension of "
                         << inputType;
  for (auto [what, counts, buffer] :
       {std::tuple<StringRef, Value, Value>{"input", getCounts()[0],
                                            getInput()},
        {"output", getCounts()[1], getOutput()}}) {
    auto type = cast<MemRefType>(counts.getType());
    auto shape = cast<MemRefType>(buffer.getType()).getShape().take_front(r);
    if (!type.getElementType().isInteger(32) || !type.hasStaticShape() ||
        !type.getLayout().isIdentity() || type.getShape() != shape)
      return emitOpError() << "the " << what << "'s counts " << type
                           << " must be i32 of the " << what
                           << "'s cells (its dimensions before rows_dim "
                           << r << ") with the identity layout";
  }
  return success();
}

LogicalResult AllToAllOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyBlockCollectiveUses(*this, getMeshAttr(), getAxes(), getInput(),
                                   getOutput(), getSplitDim(), BlockKind::Move,
                                   tables, getConcatDim());
}

LogicalResult ReduceScatterOp::verify() {
  if (failed(verifyAsyncToken(*this, getToken())) ||
      failed(verifyBucket(*this, getBucket())))
    return failure();
  return verifyBlockCollective(*this, getInput(), getOutput(), getDim(),
                               getLabel(), getAxes());
}

LogicalResult ReduceScatterOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyBlockCollectiveUses(*this, getMeshAttr(), getAxes(), getInput(),
                                   getOutput(), getDim(), BlockKind::Scatter,
                                   tables);
}

LogicalResult RingShiftOp::verify() {
  if (failed(verifyAsyncToken(*this, getToken())))
    return failure();
  return verifyBlockCollective(*this, getInput(), getOutput(), /*dim=*/0,
                               getLabel(), getAxes());
}

LogicalResult RingShiftOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyBlockCollectiveUses(*this, getMeshAttr(), getAxes(), getInput(),
                                   getOutput(), /*dim=*/0, BlockKind::Shift,
                                   tables);
}

//===----------------------------------------------------------------------===//
// rt.send, rt.recv
//===----------------------------------------------------------------------===//

namespace {

/// The mesh-independent checks of a send or receive of `buffer`.
LogicalResult verifyPointToPoint(Operation *op, Value buffer, ArrayAttr axes,
                                 ArrayRef<int64_t> coords, StringRef label) {
  auto type = cast<MemRefType>(buffer.getType());
  // The runtime moves whole arena buffers, not strided views.
  Type element = type.getElementType();
  if (!(element.isF32() || element.isBF16() || element.isInteger(32)) ||
      !type.hasStaticShape() || !type.getLayout().isIdentity())
    return op->emitOpError() << "buffer " << type
                             << " must be f32, bf16 or i32 with a static "
                                "shape and the identity layout";
  if (axes.size() != 1 || coords.size() != 1)
    return op->emitOpError() << "must give the peer by one coordinate, on "
                                "the pipeline axis, but has "
                             << coords.size();
  if (coords[0] < 0)
    return op->emitOpError() << "peer coordinate " << coords[0]
                             << " is negative";
  if (label.empty())
    return op->emitOpError("must have a non-empty label");
  return verifyInArena(op);
}

LogicalResult verifyPointToPointUses(Operation *op, FlatSymbolRefAttr meshName,
                                     ArrayAttr axes, ArrayRef<int64_t> coords,
                                     SymbolTableCollection &tables) {
  FailureOr<partition::dist::MeshShape> mesh = partition::dist::lookupMeshShape(
      op, meshName, &tables, [&] { return op->emitOpError(); });
  if (failed(mesh))
    return failure();
  StringRef name = cast<StringAttr>(axes[0]).getValue();
  int64_t index = mesh->find(name);
  if (index < 0)
    return op->emitOpError() << "axis '" << name << "' is not an axis of "
                             << meshName;
  if (coords[0] >= mesh->sizes[index])
    return op->emitOpError() << "peer coordinate " << coords[0]
                             << " of axis '" << name
                             << "' is out of range: the axis has size "
                             << mesh->sizes[index];
  return success();
}

} // namespace

LogicalResult SendOp::verify() {
  return verifyPointToPoint(*this, getInput(), getPeerAxes(), getPeerCoords(),
                            getLabel());
}

LogicalResult SendOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyPointToPointUses(*this, getMeshAttr(), getPeerAxes(),
                                getPeerCoords(), tables);
}

LogicalResult RecvOp::verify() {
  return verifyPointToPoint(*this, getOutput(), getPeerAxes(), getPeerCoords(),
                            getLabel());
}

LogicalResult RecvOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyPointToPointUses(*this, getMeshAttr(), getPeerAxes(),
                                getPeerCoords(), tables);
}

#define GET_OP_CLASSES
#include "dialects/Rt/RtOps.cpp.inc"
