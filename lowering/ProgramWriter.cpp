//===- ProgramWriter.cpp - rt IR to the .ptp FlatBuffer -------------------===//

#include "lowering/ProgramWriter.h"

#include "lowering/PipelineStages.h"
#include "lowering/ProgramFields.h"

#include "dialects/CheckedSize.h"
#include "dialects/Dist/DistDialect.h"
#include "dialects/Dist/DistOps.h"
#include "dialects/Rt/RtOps.h"
#include "dialects/Xfmr/XfmrDialect.h"
#include "runtime/program/KernelTable.h"
#include "runtime/program/ProgramFormat.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Tools/mlir-translate/Translation.h"

#include <map>

using namespace mlir;
using partition::rt::AllGatherOp;
using partition::rt::AllReduceOp;
using partition::rt::ReduceScatterOp;
using partition::rt::KernelOp;
using partition::rt::RecvOp;
using partition::rt::RtDialect;
using partition::rt::SendOp;

namespace partition {
namespace {

/// Writes one stream (a pipeline stage's buffers and functions) into `fbb`.
class Writer {
public:
  /// `mesh` is the module's device mesh, or null for one device.
  Writer(flatbuffers::FlatBufferBuilder &fbb, int64_t arenaBytes,
         dist::MeshOp mesh)
      : fbb(fbb), arenaBytes(arenaBytes), mesh(mesh) {}
  /// Adds `function`'s buffers and instructions to the stream.
  LogicalResult addFunction(func::FuncOp function);
  flatbuffers::Offset<ptp::Stream> finish() {
    return ptp::CreateStreamDirect(fbb, static_cast<uint64_t>(arenaBytes),
                                   &buffers, &functions);
  }

private:
  LogicalResult addArenaView(memref::ViewOp view, Value arena);
  LogicalResult addViewOfBuffer(Operation *op);
  LogicalResult addBuffer(Value value, int64_t offset, ptp::Role role,
                          StringRef name, Operation *op,
                          dist::ShardingAttr sharding = {},
                          Attribute flatShard = {});
  /// Per dimension, the indices into the mesh of the axes `sharding` splits
  /// it over.
  FailureOr<std::vector<std::vector<uint8_t>>>
  shardingAxes(dist::ShardingAttr sharding, MemRefType type, Operation *op);
  /// The buffer indices of `operands`, which must all be planned buffers.
  FailureOr<std::vector<uint32_t>> bufferArgs(Operation *op,
                                              ValueRange operands);
  FailureOr<flatbuffers::Offset<ptp::Instruction>>
  addAllReduce(AllReduceOp allReduce);
  /// An rt.send or rt.recv: args [buffer].
  FailureOr<flatbuffers::Offset<ptp::Instruction>> addTransfer(Operation *op);
  /// An rt.all_gather or rt.reduce_scatter: args [input, output].
  FailureOr<flatbuffers::Offset<ptp::Instruction>>
  addBlockCollective(Operation *op);
  /// The indices into Program.mesh of `axes`, increasing; fails unless `op`
  /// runs on the module's mesh.
  FailureOr<std::vector<uint8_t>> collectiveAxes(Operation *op,
                                                 FlatSymbolRefAttr meshName,
                                                 ArrayAttr axes);

  flatbuffers::FlatBufferBuilder &fbb;
  std::vector<flatbuffers::Offset<ptp::Buffer>> buffers;
  std::vector<flatbuffers::Offset<ptp::Function>> functions;
  DenseMap<Value, uint32_t> bufferIndex;
  /// State buffers are shared by all functions: one entry per role and name.
  std::map<std::pair<std::string, std::string>, uint32_t> stateIndex;
  /// Byte offset of each buffer, for views of views.
  DenseMap<Value, int64_t> bufferOffset;
  /// The dist.local_sharding of each state buffer (null: replicated), so
  /// that every function sees it sharded alike.
  DenseMap<uint32_t, Attribute> stateSharding;
  /// The dist.flat_shard of each state buffer (null: not a flat shard).
  DenseMap<uint32_t, Attribute> stateFlatShard;
  int64_t arenaBytes;
  dist::MeshOp mesh;
};

FailureOr<std::vector<uint32_t>> Writer::bufferArgs(Operation *op,
                                                    ValueRange operands) {
  std::vector<uint32_t> args;
  for (Value operand : operands) {
    auto it = bufferIndex.find(operand);
    if (it == bufferIndex.end())
      return op->emitOpError("operand is not a planned buffer (run "
                             "--lower-memory-plan first)");
    args.push_back(it->second);
  }
  return args;
}

FailureOr<std::vector<uint8_t>>
Writer::collectiveAxes(Operation *op, FlatSymbolRefAttr meshName,
                       ArrayAttr axesAttr) {
  // As for rt.all_reduce: Program.mesh is the module's one mesh.
  if (!mesh || meshName.getValue() != mesh.getSymName())
    return op->emitOpError()
           << "runs on " << meshName
           << ", but a program runs on one mesh, the module's dist.mesh"
           << (mesh ? " @" + mesh.getSymName().str() : std::string());
  ArrayAttr names = mesh.getAxisNames();
  std::vector<uint8_t> axes;
  for (Attribute axis : axesAttr)
    axes.push_back(
        static_cast<uint8_t>(llvm::find(names, axis) - names.begin()));
  // The rt verifier has checked that the axes are in the mesh's order, the
  // order in which the runtime ranks a group; the schema lists them so.
  llvm::sort(axes);
  return axes;
}

FailureOr<flatbuffers::Offset<ptp::Instruction>>
Writer::addBlockCollective(Operation *op) {
  bool gather = isa<AllGatherOp>(op);
  auto axes = collectiveAxes(op, op->getAttrOfType<FlatSymbolRefAttr>("mesh"),
                             op->getAttrOfType<ArrayAttr>("axes"));
  if (failed(axes))
    return failure();
  FailureOr<std::vector<uint32_t>> args = bufferArgs(op, op->getOperands());
  if (failed(args))
    return failure();
  // Distinct values may still be views of overlapping bytes; the runtime
  // would read blocks it has already overwritten (the loader rejects it).
  auto range = [&](Value buffer) {
    int64_t begin = bufferOffset.lookup(buffer);
    // addBuffer has checked that the buffer lies inside the arena.
    int64_t bytes = *checkedByteSize(cast<MemRefType>(buffer.getType()));
    return std::make_pair(begin, begin + bytes);
  };
  auto [inBegin, inEnd] = range(op->getOperand(0));
  auto [outBegin, outEnd] = range(op->getOperand(1));
  if (inBegin < outEnd && outBegin < inEnd)
    return op->emitOpError() << "reads [" << inBegin << ", " << inEnd
                             << ") and writes [" << outBegin << ", " << outEnd
                             << "), which overlap in the arena";
  ptp::ReduceKind reduce = ptp::ReduceKind::Sum;
  if (auto scatter = dyn_cast<ReduceScatterOp>(op))
    reduce = toProgram(scatter.getReduce());
  auto label = op->getAttrOfType<StringAttr>("label");
  bool shift = isa<rt::RingShiftOp>(op);
  auto move = dyn_cast<rt::AllToAllOp>(op);
  int64_t dim = shift  ? 0
                : move ? int64_t(move.getSplitDim())
                       : op->getAttrOfType<IntegerAttr>("dim").getInt();
  auto collective = ptp::CreateCollectiveDirect(
      fbb,
      shift    ? ptp::CollectiveKind::RingShift
      : move   ? ptp::CollectiveKind::AllToAll
      : gather ? ptp::CollectiveKind::AllGather
               : ptp::CollectiveKind::ReduceScatter,
      reduce, &*axes, label.getValue().str().c_str(),
      static_cast<uint32_t>(dim), /*started=*/op->getNumResults() == 1,
      static_cast<uint32_t>(move ? move.getConcatDim() : 0),
      static_cast<uint32_t>(move ? move.getRowsDim().value_or(0) : 0));
  return ptp::CreateInstructionDirect(fbb, /*kernel=*/0, &*args,
                                      /*ints=*/nullptr, /*floats=*/nullptr,
                                      collective);
}

FailureOr<flatbuffers::Offset<ptp::Instruction>>
Writer::addTransfer(Operation *op) {
  auto meshName = op->getAttrOfType<FlatSymbolRefAttr>("mesh");
  // Program.mesh is the module's one mesh; the peer is a coordinate on it.
  if (!mesh || meshName.getValue() != mesh.getSymName())
    return op->emitOpError()
           << "runs on " << meshName
           << ", but a program runs on one mesh, the module's dist.mesh"
           << (mesh ? " @" + mesh.getSymName().str() : std::string());
  ArrayAttr names = mesh.getAxisNames();
  // The verifier has checked one peer axis of the mesh.
  Attribute axis = op->getAttrOfType<ArrayAttr>("peer_axes")[0];
  auto axisIndex =
      static_cast<uint8_t>(llvm::find(names, axis) - names.begin());
  int64_t peer = op->getAttrOfType<DenseI64ArrayAttr>("peer_coords")[0];
  FailureOr<std::vector<uint32_t>> args = bufferArgs(op, op->getOperands());
  if (failed(args))
    return failure();
  auto label = op->getAttrOfType<StringAttr>("label");
  auto transfer = ptp::CreateTransferDirect(
      fbb, isa<SendOp>(op) ? ptp::TransferKind::Send : ptp::TransferKind::Recv,
      axisIndex, peer, label.getValue().str().c_str());
  return ptp::CreateInstructionDirect(fbb, /*kernel=*/0, &*args,
                                      /*ints=*/nullptr, /*floats=*/nullptr,
                                      /*collective=*/0, transfer);
}

FailureOr<flatbuffers::Offset<ptp::Instruction>>
Writer::addAllReduce(AllReduceOp allReduce) {
  // The runtime builds its communicators from Program.mesh alone, so a
  // collective must span axes of that mesh. (Verified IR has a dist.mesh
  // whenever it has a collective.)
  if (!mesh || allReduce.getMesh() != mesh.getSymName())
    return allReduce.emitOpError()
           << "runs on " << allReduce.getMeshAttr()
           << ", but a program runs on one mesh, the module's dist.mesh"
           << (mesh ? " @" + mesh.getSymName().str() : std::string());
  // The verifier has checked that every axis is one of the mesh's.
  ArrayAttr names = mesh.getAxisNames();
  std::vector<uint8_t> axes;
  for (Attribute axis : allReduce.getAxes())
    axes.push_back(
        static_cast<uint8_t>(llvm::find(names, axis) - names.begin()));
  // A group is a set of axes; the schema lists them increasing.
  llvm::sort(axes);
  FailureOr<std::vector<uint32_t>> args =
      bufferArgs(allReduce, allReduce.getBuffers());
  if (failed(args))
    return failure();
  // Distinct values may still be views of the same bytes; reduced twice in
  // one bucket, those bytes would be reduced twice (the loader rejects it).
  auto range = [&](Value buffer) {
    int64_t begin = bufferOffset.lookup(buffer);
    // addBuffer has checked that the buffer lies inside the arena.
    int64_t bytes = *checkedByteSize(cast<MemRefType>(buffer.getType()));
    return std::make_pair(begin, begin + bytes);
  };
  OperandRange buffers = allReduce.getBuffers();
  for (unsigned i = 0, e = buffers.size(); i < e; ++i)
    for (unsigned j = 0; j < i; ++j) {
      auto [beginI, endI] = range(buffers[i]);
      auto [beginJ, endJ] = range(buffers[j]);
      if (beginI < endJ && beginJ < endI)
        return allReduce.emitOpError()
               << "reduces buffers #" << j << " [" << beginJ << ", " << endJ
               << ") and #" << i << " [" << beginI << ", " << endI
               << "), which overlap in the arena";
    }
  auto collective = ptp::CreateCollectiveDirect(
      fbb, ptp::CollectiveKind::AllReduce, toProgram(allReduce.getReduce()),
      &axes, allReduce.getLabel().str().c_str(), /*dim=*/0,
      /*started=*/allReduce.getToken() != nullptr);
  return ptp::CreateInstructionDirect(fbb, /*kernel=*/0, &*args,
                                      /*ints=*/nullptr, /*floats=*/nullptr,
                                      collective);
}

FailureOr<std::vector<std::vector<uint8_t>>>
Writer::shardingAxes(dist::ShardingAttr sharding, MemRefType type,
                     Operation *op) {
  StringRef attrName = dist::DistDialect::kLocalShardingAttrName;
  // Axes are recorded as indices into Program.mesh, the module's one mesh.
  if (!mesh || sharding.getMesh().getValue() != mesh.getSymName())
    return op->emitOpError()
           << attrName << " is on " << sharding.getMesh()
           << ", but a program runs on one mesh, the module's dist.mesh"
           << (mesh ? " @" + mesh.getSymName().str() : std::string());
  if (!sharding.getPartialAxes().empty())
    return op->emitOpError() << attrName << " " << sharding
                             << " is a partial sum; state must be whole";
  if (sharding.getDims().size() != static_cast<size_t>(type.getRank()))
    return op->emitOpError() << attrName << " has "
                             << sharding.getDims().size()
                             << " dimensions, but the buffer has rank "
                             << type.getRank();
  ArrayAttr names = mesh.getAxisNames();
  std::vector<std::vector<uint8_t>> dims;
  for (unsigned dim = 0, e = type.getRank(); dim < e; ++dim) {
    std::vector<uint8_t> axes;
    for (StringRef axis : sharding.getDimAxes(dim)) {
      auto found = llvm::find_if(names, [&](Attribute name) {
        return cast<StringAttr>(name).getValue() == axis;
      });
      if (found == names.end())
        return op->emitOpError() << attrName << " uses axis '" << axis
                                 << "', which @" << mesh.getSymName()
                                 << " does not have";
      axes.push_back(static_cast<uint8_t>(found - names.begin()));
    }
    dims.push_back(std::move(axes));
  }
  return dims;
}

LogicalResult Writer::addBuffer(Value value, int64_t offset, ptp::Role role,
                                StringRef name, Operation *op,
                                dist::ShardingAttr sharding,
                                Attribute flatShard) {
  auto type = cast<MemRefType>(value.getType());
  ptp::DType dtype;
  if (type.getElementType().isF32()) {
    dtype = ptp::DType::F32;
  } else if (type.getElementType().isInteger(32)) {
    dtype = ptp::DType::I32;
  } else if (type.getElementType().isBF16()) {
    dtype = ptp::DType::BF16;
  } else {
    return op->emitOpError() << "buffer element type " << type.getElementType()
                             << " is not supported by the runtime (f32, "
                                "bf16, i32)";
  }
  std::optional<int64_t> bytes = checkedByteSize(type);
  if (!bytes)
    return op->emitOpError() << "buffer " << type
                             << " has more bytes than 64-bit sizes can count";
  // offset + bytes could overflow: compare with what is left instead.
  if (offset < 0 || offset > arenaBytes || *bytes > arenaBytes - offset) {
    InFlightDiagnostic error = op->emitOpError();
    if (std::optional<int64_t> end = llvm::checkedAdd(offset, *bytes))
      error << "buffer [" << offset << ", " << *end << ")";
    else
      error << "buffer of " << *bytes << " bytes at offset " << offset;
    return error << " lies outside the arena of " << arenaBytes << " bytes";
  }
  std::vector<int64_t> shape(type.getShape().begin(), type.getShape().end());
  // A flat shard (ZeRO): its dimension sharding describes the tensor before
  // flattening, of the attribute's shape.
  MemRefType shardedType = type;
  std::vector<uint8_t> flatAxes;
  std::vector<int64_t> flatShape;
  if (flatShard) {
    FailureOr<dist::FlatShard> flat = dist::readFlatShard(
        flatShard, [&] { return op->emitOpError(); });
    if (failed(flat))
      return failure();
    if (sharding)
      return op->emitOpError()
             << "has both " << dist::DistDialect::kLocalShardingAttrName
             << " and " << dist::DistDialect::kFlatShardAttrName
             << "; a flat shard names its block's sharding as block_of";
    FailureOr<std::vector<std::vector<uint8_t>>> axes = shardingAxes(
        flat->flat, MemRefType::get({type.getDimSize(0)}, type.getElementType()),
        op);
    if (failed(axes))
      return failure();
    flatAxes = axes->front();
    flatShape.assign(flat->shape.begin(), flat->shape.end());
    sharding = flat->blockOf;
    shardedType = MemRefType::get(flat->shape, type.getElementType());
  }
  std::vector<flatbuffers::Offset<ptp::DimSharding>> dims;
  if (sharding) {
    FailureOr<std::vector<std::vector<uint8_t>>> axes =
        shardingAxes(sharding, shardedType, op);
    if (failed(axes))
      return failure();
    for (std::vector<uint8_t> &dim : *axes)
      dims.push_back(ptp::CreateDimShardingDirect(fbb, &dim));
  }
  buffers.push_back(ptp::CreateBufferDirect(
      fbb, role, name.empty() ? nullptr : name.str().c_str(), dtype, &shape,
      static_cast<uint64_t>(offset), sharding ? &dims : nullptr,
      flatShard ? &flatAxes : nullptr, flatShard ? &flatShape : nullptr));
  bufferIndex[value] = buffers.size() - 1;
  bufferOffset[value] = offset;
  return success();
}

/// A state buffer or temporary: a memref.view of the arena at a constant
/// offset, with its role, name and sharding. A state buffer seen by an
/// earlier function is the same buffer, and must be sharded alike.
LogicalResult Writer::addArenaView(memref::ViewOp view, Value arena) {
  if (view.getSource() != arena)
    return view.emitOpError("must view the arena argument");
  std::optional<int64_t> offset =
      getConstantIntValue(view.getByteShift());
  if (!offset)
    return view.emitOpError("needs a constant byte offset");
  ptp::Role role = ptp::Role::Temporary;
  StringRef name;
  auto roleAttr = view->getAttrOfType<StringAttr>(RtDialect::kRoleAttrName);
  if (roleAttr) {
    std::optional<ptp::Role> parsed = parseRole(roleAttr.getValue());
    if (!parsed)
      return view.emitOpError() << "unknown role " << roleAttr;
    role = *parsed;
  }
  if (auto nameAttr = view->getAttrOfType<StringAttr>(RtDialect::kNameAttrName))
    name = nameAttr.getValue();
  if (role == ptp::Role::AxisIndex &&
      failed(checkAxisIndex(view, name, mesh)))
    return failure();
  Attribute shardingAttr =
      view->getAttr(dist::DistDialect::kLocalShardingAttrName);
  auto sharding = dyn_cast_or_null<dist::ShardingAttr>(shardingAttr);
  if (shardingAttr && !sharding)
    return view.emitOpError()
           << dist::DistDialect::kLocalShardingAttrName
           << " must be a #dist.sharding, but is " << shardingAttr;
  Attribute flatShard =
      view->getAttr(dist::DistDialect::kFlatShardAttrName);
  if ((sharding || flatShard) && !roleAttr)
    return view.emitOpError()
           << "is a temporary with "
           << (sharding ? dist::DistDialect::kLocalShardingAttrName
                        : dist::DistDialect::kFlatShardAttrName)
           << "; only state buffers are sharded";
  if (roleAttr) {
    auto key = std::make_pair(roleAttr.getValue().str(), name.str());
    if (auto it = stateIndex.find(key); it != stateIndex.end()) {
      if (stateSharding.lookup(it->second) != shardingAttr ||
          stateFlatShard.lookup(it->second) != flatShard)
        return view.emitOpError()
               << "is the " << key.first << " " << key.second
               << " with another "
               << dist::DistDialect::kLocalShardingAttrName
               << " than in an earlier function";
      bufferIndex[view.getResult()] = it->second;
      bufferOffset[view.getResult()] = *offset;
      return success();
    }
    stateIndex[key] = buffers.size();
    stateSharding[buffers.size()] = shardingAttr;
    stateFlatShard[buffers.size()] = flatShard;
  }
  return addBuffer(view.getResult(), *offset, role, name, view, sharding,
                   flatShard);
}

/// A view of a planned buffer: a subview at a static offset, or a
/// contiguous buffer seen flat (its bytes, another shape).
LogicalResult Writer::addViewOfBuffer(Operation *op) {
  if (auto subview = dyn_cast<memref::SubViewOp>(op)) {
    auto base = bufferOffset.find(subview.getSource());
    if (base == bufferOffset.end())
      return subview.emitOpError("must view a planned buffer");
    // Layout offsets count from the start of the underlying allocation, so
    // for a view of a view only the difference to the source's offset is
    // new.
    int64_t elementOffset, sourceOffset;
    SmallVector<int64_t> strides;
    if (failed(subview.getType().getStridesAndOffset(strides,
                                                     elementOffset)) ||
        failed(subview.getSourceType().getStridesAndOffset(strides,
                                                           sourceOffset)) ||
        ShapedType::isDynamic(elementOffset) ||
        ShapedType::isDynamic(sourceOffset))
      return subview.emitOpError("needs a static offset");
    int64_t bytes = subview.getType().getElementTypeBitWidth() / 8;
    return addBuffer(subview.getResult(),
                     base->second + (elementOffset - sourceOffset) * bytes,
                     ptp::Role::Temporary, "", subview);
  }
  auto collapse = cast<memref::CollapseShapeOp>(op);
  auto base = bufferOffset.find(collapse.getSrc());
  if (base == bufferOffset.end() ||
      !collapse.getSrcType().getLayout().isIdentity())
    return collapse.emitOpError(
        "must collapse a planned buffer of the identity layout");
  return addBuffer(collapse.getResult(), base->second, ptp::Role::Temporary,
                   "", collapse);
}

LogicalResult Writer::addFunction(func::FuncOp function) {
  if (function.getNumArguments() != 1)
    return function.emitError("a planned step takes exactly one argument, "
                              "the arena");
  Value arena = function.getArgument(0);
  std::vector<flatbuffers::Offset<ptp::Instruction>> instructions;
  // Each started collective's instruction index, for its wait.
  DenseMap<Value, uint32_t> startedAt;

  for (Operation &op : function.getBody().front()) {
    if (isa<arith::ConstantIndexOp, func::ReturnOp>(op))
      continue;
    if (op.getNumResults() == 1 && isa<rt::TokenType>(op.getResult(0).getType()))
      startedAt[op.getResult(0)] = instructions.size();
    if (auto wait = dyn_cast<rt::WaitOp>(op)) {
      // The rt verifier has checked that the token comes from a collective
      // of this block, so its instruction is already written.
      auto completes = ptp::CreateWait(fbb, startedAt.lookup(wait.getToken()));
      instructions.push_back(ptp::CreateInstructionDirect(
          fbb, /*kernel=*/0, /*args=*/nullptr, /*ints=*/nullptr,
          /*floats=*/nullptr, /*collective=*/0, /*transfer=*/0, completes));
      continue;
    }
    if (auto view = dyn_cast<memref::ViewOp>(op)) {
      if (failed(addArenaView(view, arena)))
        return failure();
      continue;
    }
    if (isa<memref::SubViewOp, memref::CollapseShapeOp>(op)) {
      if (failed(addViewOfBuffer(&op)))
        return failure();
      continue;
    }
    if (isa<AllGatherOp, ReduceScatterOp, rt::RingShiftOp, rt::AllToAllOp,
            SendOp, RecvOp, AllReduceOp>(op)) {
      FailureOr<flatbuffers::Offset<ptp::Instruction>> instruction =
          isa<SendOp, RecvOp>(op)  ? addTransfer(&op)
          : isa<AllReduceOp>(op) ? addAllReduce(cast<AllReduceOp>(op))
                                 : addBlockCollective(&op);
      if (failed(instruction))
        return failure();
      instructions.push_back(*instruction);
      continue;
    }
    auto kernel = dyn_cast<KernelOp>(op);
    if (!kernel)
      return op.emitOpError("cannot be written to a program: the runtime "
                            "executes rt.kernel, collective, rt.wait, "
                            "rt.send and rt.recv ops only");
    StringRef name = kernel.getKernel();
    const runtime::KernelInfo *info =
        runtime::lookupKernel(std::string_view(name.data(), name.size()));
    FailureOr<std::vector<uint32_t>> args =
        bufferArgs(kernel, kernel->getOperands());
    if (failed(args))
      return failure();
    std::vector<int64_t> ints(kernel.getInts().begin(), kernel.getInts().end());
    std::vector<float> floats(kernel.getFloats().begin(),
                              kernel.getFloats().end());
    instructions.push_back(ptp::CreateInstructionDirect(
        fbb, static_cast<uint16_t>(info->id), &*args, &ints, &floats));
  }
  // A stage's @train_step_stage<k> / @eval_step_stage<k> /
  // @logits_step_stage<k> is its stream's "train_step" / "eval_step" /
  // "logits_step": the runtime runs the entry points by role.
  std::string name = function.getSymName().str();
  if (function->hasAttr(kPipelineStageAttrName)) {
    if (function->hasAttr(xfmr::XfmrDialect::kTrainStepAttrName))
      name = "train_step";
    else if (auto eval = function->getAttrOfType<DictionaryAttr>(
                 xfmr::XfmrDialect::kEvalStepAttrName))
      name = eval.get("logits") ? "logits_step" : "eval_step";
  }
  functions.push_back(
      ptp::CreateFunctionDirect(fbb, name.c_str(), &instructions));
  return success();
}

/// Writes the program of `streams` (written into `fbb`, in stage order):
/// the model description from `trainStep`, the module's mesh with each
/// axis's role.
void finishProgram(flatbuffers::FlatBufferBuilder &fbb, ModuleOp module,
                   dist::MeshOp mesh, func::FuncOp trainStep,
                   std::vector<flatbuffers::Offset<ptp::Stream>> &streams,
                   llvm::raw_ostream &os) {
  std::string model = toJson(trainStep->getAttrOfType<DictionaryAttr>(
      xfmr::XfmrDialect::kModelAttrName));
  std::string train = toJson(trainStep->getAttrOfType<DictionaryAttr>(
      xfmr::XfmrDialect::kTrainStepAttrName));
  // Without a mesh the field stays absent: one device.
  // Each axis with the role the plan gives it (none without a plan).
  dist::PlanAttr plan = dist::getPlan(module);
  auto roleOf = [&](StringRef axis) {
    if (plan)
      for (dist::PlanAxisAttr planAxis : plan.getAxes())
        if (planAxis.getName() == axis)
          switch (planAxis.getRole()) {
          case dist::AxisRole::Data:
            return ptp::AxisRole::Data;
          case dist::AxisRole::Expert:
            return ptp::AxisRole::Expert;
          case dist::AxisRole::Tensor:
            return ptp::AxisRole::Tensor;
          case dist::AxisRole::Pipeline:
            return ptp::AxisRole::Pipeline;
          case dist::AxisRole::Context:
            return ptp::AxisRole::Context;
          }
    return ptp::AxisRole::None;
  };
  std::vector<flatbuffers::Offset<ptp::MeshAxis>> meshAxes;
  if (mesh)
    for (auto [name, size] :
         llvm::zip(mesh.getAxisNames(), mesh.getAxisSizes())) {
      StringRef axis = cast<StringAttr>(name).getValue();
      meshAxes.push_back(ptp::CreateMeshAxisDirect(fbb, axis.str().c_str(),
                                                   size, roleOf(axis)));
    }
  // Context parallelism's zigzag: the order the tokens are fed in.
  int64_t sequenceChunks =
      plan && plan.getContextChunks() > 1 ? plan.getContextChunks() : 0;
  auto program = ptp::CreateProgramDirect(
      fbb, ptp::kSchemaVersion, model.c_str(), train.c_str(),
      mesh ? &meshAxes : nullptr, &streams, /*replicas=*/nullptr,
      sequenceChunks);
  ptp::FinishProgramBuffer(fbb, program);
  os.write(reinterpret_cast<const char *>(fbb.GetBufferPointer()),
           fbb.GetSize());
}

} // namespace

LogicalResult writeProgram(ModuleOp module, llvm::raw_ostream &os) {
  SmallVector<func::FuncOp> planned;
  for (auto function : module.getOps<func::FuncOp>())
    if (function->hasAttr(RtDialect::kArenaBytesAttrName))
      planned.push_back(function);
  if (planned.empty())
    return module.emitError("no memory-planned function (rt.arena_bytes); "
                            "run --lower-to-rt --lower-memory-plan first");
  // The program runs on one mesh (Program.mesh).
  dist::MeshOp mesh;
  for (auto candidate : module.getOps<dist::MeshOp>()) {
    if (mesh)
      return candidate.emitOpError()
             << "is a second device mesh: a program runs on one mesh, and "
             << "this module already declares @" << mesh.getSymName();
    mesh = candidate;
  }
  if (mesh && mesh.getAxisNames().size() > 255)
    return mesh.emitOpError("has more than 255 axes, more than a program can "
                            "index");
  // One stream per pipeline stage (dist.pipeline_stage), or one.
  FailureOr<SmallVector<SmallVector<func::FuncOp>>> stages =
      groupByPipelineStage(module, planned);
  if (failed(stages))
    return failure();
  auto arenaBytes = [](func::FuncOp function) {
    return cast<IntegerAttr>(function->getAttr(RtDialect::kArenaBytesAttrName))
        .getInt();
  };
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<flatbuffers::Offset<ptp::Stream>> streams;
  func::FuncOp firstTrainStep;
  for (SmallVector<func::FuncOp> &stage : *stages) {
    // The training step comes first; the model description is taken from
    // the first stage's.
    std::stable_partition(stage.begin(), stage.end(), [](func::FuncOp f) {
      return f->hasAttr(xfmr::XfmrDialect::kTrainStepAttrName);
    });
    if (!firstTrainStep)
      firstTrainStep = stage.front();
    int64_t arena = arenaBytes(stage.front());
    if (arena < 0 || arena > kMaxAddressableBytes)
      return stage.front().emitError()
             << "arena of " << arena << " bytes: it must be between 0 and "
             << kMaxAddressableBytes << " bytes (2^48, what a machine can "
             << "address)";
    Writer writer(fbb, arena, mesh);
    for (func::FuncOp function : stage) {
      if (arenaBytes(function) != arena)
        return function.emitError("all planned functions of a stage must "
                                  "share one arena");
      if (failed(writer.addFunction(function)))
        return failure();
    }
    streams.push_back(writer.finish());
  }
  finishProgram(fbb, module, mesh, firstTrainStep, streams, os);
  return success();
}

void registerProgramDialects(DialectRegistry &registry) {
  registry.insert<rt::RtDialect, dist::DistDialect, xfmr::XfmrDialect,
                  arith::ArithDialect, func::FuncDialect,
                  memref::MemRefDialect>();
}

void registerProgramTranslation() {
  TranslateFromMLIRRegistration registration(
      "rt-to-program", "write a memory-planned training step as a .ptp program",
      [](Operation *op, llvm::raw_ostream &os) -> LogicalResult {
        auto module = dyn_cast<ModuleOp>(op);
        if (!module)
          return op->emitError("expected a module");
        return writeProgram(module, os);
      },
      registerProgramDialects);
}

} // namespace partition
