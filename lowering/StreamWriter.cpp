//===- StreamWriter.cpp - one stream's buffers and functions --------------===//

#include "lowering/StreamWriter.h"

#include "lowering/PipelineStages.h"
#include "lowering/ProgramFields.h"

#include "dialects/CheckedSize.h"
#include "dialects/Dist/DistDialect.h"
#include "dialects/Rt/RtOps.h"
#include "dialects/Xfmr/XfmrDialect.h"
#include "runtime/program/KernelTable.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using partition::rt::AllGatherOp;
using partition::rt::AllReduceOp;
using partition::rt::KernelOp;
using partition::rt::RecvOp;
using partition::rt::ReduceScatterOp;
using partition::rt::RtDialect;
using partition::rt::SendOp;

namespace partition {
namespace {

/// The program's tier of an rt.tier name.
ptp::Tier toTier(StringRef tier) {
  return tier == "host" ? ptp::Tier::Host : ptp::Tier::Nvme;
}

} // namespace

FailureOr<std::vector<uint32_t>> StreamWriter::bufferArgs(Operation *op,
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

FailureOr<std::vector<std::vector<uint8_t>>>
StreamWriter::shardingAxes(dist::ShardingAttr sharding, MemRefType type,
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
    return op->emitOpError()
           << attrName << " has " << sharding.getDims().size()
           << " dimensions, but the buffer has rank " << type.getRank();
  ArrayAttr names = mesh.getAxisNames();
  std::vector<std::vector<uint8_t>> dims;
  for (unsigned dim = 0, e = type.getRank(); dim < e; ++dim) {
    std::vector<uint8_t> axes;
    for (StringRef axis : sharding.getDimAxes(dim)) {
      auto found = llvm::find_if(names, [&](Attribute name) {
        return cast<StringAttr>(name).getValue() == axis;
      });
      if (found == names.end())
        return op->emitOpError()
               << attrName << " uses axis '" << axis << "', which @"
               << mesh.getSymName() << " does not have";
      axes.push_back(static_cast<uint8_t>(found - names.begin()));
    }
    dims.push_back(std::move(axes));
  }
  return dims;
}

LogicalResult StreamWriter::addBuffer(Value value, int64_t offset,
                                      ptp::Role role, StringRef name,
                                      Operation *op,
                                      dist::ShardingAttr sharding,
                                      Attribute flatShard, ptp::Tier tier) {
  FailureOr<uint32_t> index =
      appendBuffer(cast<MemRefType>(value.getType()), offset, role, name, op,
                   sharding, flatShard, tier);
  if (failed(index))
    return failure();
  bufferIndex[value] = *index;
  bufferOffset[value] = offset;
  if (tier != ptp::Tier::Arena)
    bufferTier[value] = tier;
  return success();
}

FailureOr<uint32_t>
StreamWriter::appendBuffer(MemRefType type, int64_t offset, ptp::Role role,
                           StringRef name, Operation *op,
                           dist::ShardingAttr sharding, Attribute flatShard,
                           ptp::Tier tier) {
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
  int64_t space = tier == ptp::Tier::Arena
                      ? arenaBytes
                      : std::max<int64_t>(tierBytes[size_t(tier)], 0);
  if (offset < 0 || offset > space || *bytes > space - offset) {
    InFlightDiagnostic error = op->emitOpError();
    if (std::optional<int64_t> end = llvm::checkedAdd(offset, *bytes))
      error << "buffer [" << offset << ", " << *end << ")";
    else
      error << "buffer of " << *bytes << " bytes at offset " << offset;
    return error << " lies outside the "
                 << (tier == ptp::Tier::Arena  ? "arena"
                     : tier == ptp::Tier::Host ? "host tier"
                                               : "nvme tier")
                 << " of " << space << " bytes";
  }
  std::vector<int64_t> shape(type.getShape().begin(), type.getShape().end());
  // A flat shard (ZeRO): its dimension sharding describes the tensor before
  // flattening, of the attribute's shape.
  MemRefType shardedType = type;
  std::vector<uint8_t> flatAxes;
  std::vector<int64_t> flatShape;
  if (flatShard) {
    FailureOr<dist::FlatShard> flat =
        dist::readFlatShard(flatShard, [&] { return op->emitOpError(); });
    if (failed(flat))
      return failure();
    if (sharding)
      return op->emitOpError()
             << "has both " << dist::DistDialect::kLocalShardingAttrName
             << " and " << dist::DistDialect::kFlatShardAttrName
             << "; a flat shard names its block's sharding as block_of";
    FailureOr<std::vector<std::vector<uint8_t>>> axes = shardingAxes(
        flat->flat,
        MemRefType::get({type.getDimSize(0)}, type.getElementType()), op);
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
      flatShard ? &flatAxes : nullptr, flatShard ? &flatShape : nullptr, tier));
  return static_cast<uint32_t>(buffers.size() - 1);
}

/// A state buffer or temporary: a memref.view of the arena at a constant
/// offset, with its role, name and sharding. A state buffer seen by an
/// earlier function is the same buffer, and must be sharded alike.
LogicalResult StreamWriter::addArenaView(memref::ViewOp view) {
  auto tierArgument = tierArguments.find(view.getSource());
  ptp::Tier tier = tierArgument == tierArguments.end() ? ptp::Tier::Arena
                                                       : tierArgument->second;
  if (view.getSource() != arena && tier == ptp::Tier::Arena)
    return view.emitOpError("must view the arena argument or a tier "
                            "argument");
  std::optional<int64_t> offset = getConstantIntValue(view.getByteShift());
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
  if (role == ptp::Role::AxisIndex && failed(checkAxisIndex(view, name, mesh)))
    return failure();
  Attribute shardingAttr =
      view->getAttr(dist::DistDialect::kLocalShardingAttrName);
  auto sharding = dyn_cast_or_null<dist::ShardingAttr>(shardingAttr);
  if (shardingAttr && !sharding)
    return view.emitOpError()
           << dist::DistDialect::kLocalShardingAttrName
           << " must be a #dist.sharding, but is " << shardingAttr;
  Attribute flatShard = view->getAttr(dist::DistDialect::kFlatShardAttrName);
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
               << " with another " << dist::DistDialect::kLocalShardingAttrName
               << " than in an earlier function";
      bufferIndex[view.getResult()] = it->second;
      bufferOffset[view.getResult()] = *offset;
      if (tier != ptp::Tier::Arena)
        bufferTier[view.getResult()] = tier;
      return success();
    }
    stateIndex[key] = buffers.size();
    stateSharding[buffers.size()] = shardingAttr;
    stateFlatShard[buffers.size()] = flatShard;
  }
  // A tier holds the optimizer state and ZeRO-3's parameter shards.
  if (tier != ptp::Tier::Arena && role != ptp::Role::Moment1 &&
      role != ptp::Role::Moment2 && !(role == ptp::Role::Param && flatShard))
    return view.emitOpError()
           << "lives in a tier but is neither a moment nor a ZeRO-3 "
              "parameter shard: only those are offloaded";
  return addBuffer(view.getResult(), *offset, role, name, view, sharding,
                   flatShard, tier);
}

/// A view of a planned buffer: a subview at a static offset, or a
/// contiguous buffer seen flat (its bytes, another shape).
LogicalResult StreamWriter::addViewOfBuffer(Operation *op) {
  if (auto subview = dyn_cast<memref::SubViewOp>(op)) {
    auto base = bufferOffset.find(subview.getSource());
    if (base == bufferOffset.end())
      return subview.emitOpError("must view a planned buffer");
    // Layout offsets count from the start of the underlying allocation, so
    // for a view of a view only the difference to the source's offset is
    // new.
    int64_t elementOffset, sourceOffset;
    SmallVector<int64_t> strides;
    if (failed(subview.getType().getStridesAndOffset(strides, elementOffset)) ||
        failed(subview.getSourceType().getStridesAndOffset(strides,
                                                           sourceOffset)) ||
        ShapedType::isDynamic(elementOffset) ||
        ShapedType::isDynamic(sourceOffset))
      return subview.emitOpError("needs a static offset");
    int64_t bytes = subview.getType().getElementTypeBitWidth() / 8;
    noteView(subview.getResult(), subview.getSource());
    return addBuffer(subview.getResult(),
                     base->second + (elementOffset - sourceOffset) * bytes,
                     ptp::Role::Temporary, "", subview, {}, {},
                     bufferTier.lookup(subview.getSource()));
  }
  auto collapse = cast<memref::CollapseShapeOp>(op);
  auto base = bufferOffset.find(collapse.getSrc());
  if (base == bufferOffset.end() ||
      !collapse.getSrcType().getLayout().isIdentity())
    return collapse.emitOpError(
        "must collapse a planned buffer of the identity layout");
  noteView(collapse.getResult(), collapse.getSrc());
  return addBuffer(collapse.getResult(), base->second, ptp::Role::Temporary, "",
                   collapse, {}, {}, bufferTier.lookup(collapse.getSrc()));
}

LogicalResult StreamWriter::addArguments(func::FuncOp function) {
  auto fail = [&] {
    return function.emitError("a planned step takes the arena, then one "
                              "argument per tier it offloads to "
                              "(rt.tier, at most one each of host and "
                              "nvme), each an i8 buffer");
  };
  if (function.getNumArguments() < 1 || function.getNumArguments() > 3)
    return fail();
  arena = function.getArgument(0);
  tierArguments.clear();
  int64_t bytes[3] = {0, 0, 0};
  for (unsigned i = 1, e = function.getNumArguments(); i < e; ++i) {
    auto name =
        function.getArgAttrOfType<StringAttr>(i, RtDialect::kTierAttrName);
    auto type = dyn_cast<MemRefType>(function.getArgument(i).getType());
    if (!name || !type || type.getRank() != 1 || !type.hasStaticShape() ||
        !type.getElementType().isInteger(8))
      return fail();
    ptp::Tier tier = toTier(name.getValue());
    if (bytes[size_t(tier)] > 0)
      return fail();
    bytes[size_t(tier)] = type.getDimSize(0);
    tierArguments[function.getArgument(i)] = tier;
  }
  // Every function of a stream shares its tiers, as it shares the arena.
  for (ptp::Tier tier : {ptp::Tier::Host, ptp::Tier::Nvme}) {
    int64_t &known = tierBytes[size_t(tier)];
    if (known >= 0 && known != bytes[size_t(tier)])
      return function.emitError()
             << "has a " << (tier == ptp::Tier::Host ? "host" : "nvme")
             << " tier of " << bytes[size_t(tier)]
             << " bytes, but another function of its stage has one of " << known
             << "; the functions of a stage share their tiers";
    known = bytes[size_t(tier)];
  }
  return success();
}

LogicalResult StreamWriter::addFunction(func::FuncOp function) {
  if (failed(addArguments(function)))
    return failure();
  std::vector<flatbuffers::Offset<ptp::Instruction>> instructions;
  // Each started collective's instruction index, for its wait.
  DenseMap<Value, uint32_t> startedAt;

  // The micro-batch loop: its first instruction, then its end and slices.
  std::optional<uint32_t> loopBegin;
  flatbuffers::Offset<ptp::MicrobatchLoop> loop;
  int64_t loopCount = 0, loopStride = 1;
  std::vector<uint32_t> loopSlices;
  // The action walk: its begin, then where each region starts.
  rt::ActionWalkBeginOp walkBegin;
  std::vector<uint32_t> regionBegins;
  std::vector<std::string> regionNames;
  flatbuffers::Offset<ptp::ActionWalk> walk;

  for (Operation &op : function.getBody().front()) {
    if (isa<arith::ConstantIndexOp, func::ReturnOp>(op))
      continue;
    if (auto begin = dyn_cast<rt::MicrobatchLoopBeginOp>(op)) {
      FailureOr<std::vector<uint32_t>> slices =
          bufferArgs(&op, begin.getSlices());
      if (failed(slices))
        return failure();
      loopBegin = instructions.size();
      loopCount = begin.getCount();
      loopStride = begin.getStride();
      loopSlices = std::move(*slices);
      continue;
    }
    if (isa<rt::MicrobatchLoopEndOp>(op)) {
      // The rt verifier has checked that the begin came first.
      // The body is the first period when the step's sums start at zero
      // (its entry's microbatch_loop_settle is 0, passes/frontend/
      // StepEntries.h): then no micro-batch precedes the loop.
      int64_t first = 1;
      for (StringRef entry : {xfmr::XfmrDialect::kTrainStepAttrName,
                              xfmr::XfmrDialect::kEvalStepAttrName})
        if (auto dict = function->getAttrOfType<DictionaryAttr>(entry))
          if (auto settle = dict.getAs<IntegerAttr>("microbatch_loop_settle"))
            first = settle.getInt() == 0 ? 0 : 1;
      loop = ptp::CreateMicrobatchLoopDirect(
          fbb, *loopBegin, static_cast<uint32_t>(instructions.size()),
          loopCount, &loopSlices, loopStride, first);
      continue;
    }
    // The rt verifier has checked the walk's markers' order.
    if (auto begin = dyn_cast<rt::ActionWalkBeginOp>(op)) {
      walkBegin = begin;
      continue;
    }
    if (auto region = dyn_cast<rt::ActionRegionOp>(op)) {
      regionBegins.push_back(instructions.size());
      regionNames.push_back(region.getName().str());
      continue;
    }
    if (isa<rt::ActionWalkEndOp>(op)) {
      FailureOr<flatbuffers::Offset<ptp::ActionWalk>> written = addActionWalk(
          walkBegin, regionBegins, regionNames, instructions.size());
      if (failed(written))
        return failure();
      walk = *written;
      continue;
    }
    if (op.getNumResults() == 1 &&
        isa<rt::TokenType>(op.getResult(0).getType()))
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
      if (failed(addArenaView(view)))
        return failure();
      continue;
    }
    if (isa<memref::SubViewOp, memref::CollapseShapeOp>(op)) {
      if (failed(addViewOfBuffer(&op)))
        return failure();
      continue;
    }
    if (isa<AllGatherOp, ReduceScatterOp, rt::RingShiftOp, rt::AllToAllOp,
            SendOp, RecvOp, AllReduceOp, rt::TierReadOp, rt::TierWriteOp>(op)) {
      FailureOr<flatbuffers::Offset<ptp::Instruction>> instruction =
          isa<SendOp, RecvOp>(op) ? addTransfer(&op)
          : isa<AllReduceOp>(op)  ? addAllReduce(cast<AllReduceOp>(op))
          : isa<rt::TierReadOp, rt::TierWriteOp>(op) ? addTierCopy(&op)
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
                            "rt.send, rt.recv, rt.tier_read and "
                            "rt.tier_write ops only");
    FailureOr<std::vector<uint32_t>> args =
        bufferArgs(kernel, kernel->getOperands());
    if (failed(args))
      return failure();
    std::vector<int64_t> ints(kernel.getInts().begin(), kernel.getInts().end());
    std::vector<float> floats(kernel.getFloats().begin(),
                              kernel.getFloats().end());
    instructions.push_back(ptp::CreateInstructionDirect(
        fbb, static_cast<uint16_t>(kernel.getInfo().id), &*args, &ints,
        &floats));
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
      ptp::CreateFunctionDirect(fbb, name.c_str(), &instructions, loop, walk));
  return success();
}

} // namespace partition
