//===- StageFunctions.cpp - one function per pipeline stage ---------------===//
//
// Every stage's stream is built first as a list of the step's ops; sends
// follow the op that makes the value, and a stage receives from a peer in
// the order that peer sends (a message the stage needs later than another
// one sent after it is received early), so that every send has its
// receive in the same order per pair.
//
//===----------------------------------------------------------------------===//

#include "passes/pipeline/StageFunctions.h"

#include "dialects/Rt/RtOps.h"

#include "dialects/Dist/DistOps.h"
#include "dialects/Xfmr/XfmrOps.h"
#include "passes/partition/Layout.h"
#include "passes/pipeline/PipelineInfo.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

#include <functional>
#include <map>
#include <set>

using namespace mlir;
using namespace partition::xfmr;

namespace partition::pipeline {

struct StageBuilder::Streams {
  /// Per stage: its slots' ops, then its optimizer ops, each in program
  /// order.
  std::vector<std::vector<Operation *>> ops;
  /// Per stage: where in `ops` each slot starts, and where the optimizer
  /// ops do (the marks of mark-actions).
  std::vector<std::vector<std::pair<size_t, SlotKey>>> slotStarts;
  std::vector<size_t> optimizerStart;
  /// The stages other than its own that read each value made by a placed op.
  llvm::DenseMap<Value, std::set<int>> readers;
  /// sends[from][to]: the values stage `from` sends to `to`, in the order
  /// it makes them.
  std::vector<std::vector<std::vector<Value>>> sends;
};

std::string phaseName(Phase phase) {
  switch (phase) {
  case Phase::Forward:
    return "F";
  case Phase::BackwardInput:
    return "B";
  case Phase::BackwardWeight:
    return "W";
  case Phase::Optimizer:
    return "optimizer";
  case Phase::OnDemand:
    return "on-demand";
  }
  return "?";
}

namespace {

/// A dist.send (operand) or dist.recv (result type) with one peer on the
/// pipeline axis and a label, built generically so that it does not depend
/// on how the ops declare `label` (an inherent attribute of both).
Operation *createPeerOp(OpBuilder &builder, StringRef name, Location loc,
                        ValueRange operands, TypeRange results,
                        FlatSymbolRefAttr mesh, StringAttr axis, int peer,
                        const std::string &label) {
  OperationState state(loc, name);
  state.addOperands(operands);
  state.addTypes(results);
  state.addAttribute("mesh", mesh);
  state.addAttribute("peer_axes", builder.getArrayAttr({axis}));
  state.addAttribute("peer_coords", builder.getDenseI64ArrayAttr({peer}));
  Operation *op = builder.create(state);
  op->setAttr("label", builder.getStringAttr(label));
  return op;
}

} // namespace

std::string forwardMessagePrefix(int mb, int senderChunk,
                                 int chunksPerStage) {
  std::string out = "F mb" + std::to_string(mb);
  if (chunksPerStage > 1)
    out += " chunk" + std::to_string(senderChunk);
  return out + " activations";
}

std::string StageBuilder::label(const Placement &placement,
                                Operation *producer, int from, int to,
                                func::FuncOp step) const {
  const OpRole &role = placement.analysis.roles.lookup(producer);
  std::string route =
      "stage" + std::to_string(from) + "->" + std::to_string(to);
  // With several chunks per stage, the chunk (on the sending stage) tells
  // apart the messages of one micro-batch.
  int senderChunk = split.chunkOf(role.position) / stages();
  std::string mb = "mb" + std::to_string(role.microbatch);
  if (split.chunksPerStage > 1)
    mb += " chunk" + std::to_string(senderChunk);
  switch (role.phase) {
  case Phase::Forward:
    return forwardMessagePrefix(role.microbatch, senderChunk,
                                split.chunksPerStage) +
           " " + route;
  case Phase::BackwardInput:
  case Phase::BackwardWeight:
    if (placement.replicated.empty() ||
        !llvm::any_of(producer->getUsers(), [&](Operation *user) {
          return placement.replicated.contains(user);
        }))
      return "B " + mb + " gradients " + route;
    break;
  default:
    break;
  }
  // A tied parameter's gradient partial: name the parameter.
  for (Operation *user : producer->getUsers()) {
    auto it = placement.replicated.find(user);
    if (it == placement.replicated.end())
      continue;
    for (Operation *next = user; next;) {
      if (auto adamw = dyn_cast<AdamWOp>(next)) {
        if (BlockArgument param = parameterArgument(adamw.getParam(), step))
          if (auto name = step.getArgAttrOfType<StringAttr>(
                  param.getArgNumber(), XfmrDialect::kParamAttrName))
            return "tied gradient " + name.str() + " " + route;
        break;
      }
      next = next->getNumResults() && !next->getResult(0).use_empty()
                 ? *next->getResult(0).getUsers().begin()
                 : nullptr;
    }
  }
  return "gradient " + route;
}

FailureOr<StageBuilder::Streams>
StageBuilder::orderStreams(func::FuncOp step, const Placement &placement,
                           ArrayRef<std::vector<SlotKey>> slots) const {
  const int stages = split.stages;
  const auto &roles = placement.analysis.roles;
  Block &body = step.getBody().front();
  // Each stage's stream: its slots' ops, then its optimizer ops, each in
  // program order.
  std::map<SlotKey, std::vector<Operation *>> bySlot;
  Streams streams;
  std::vector<std::vector<Operation *>> &stream = streams.ops;
  stream.resize(stages);
  std::vector<std::vector<Operation *>> optimizer(stages);
  for (Operation &op : body) {
    auto it = roles.find(&op);
    if (it == roles.end() || it->second.phase == Phase::OnDemand)
      continue;
    const OpRole &role = it->second;
    if (role.phase == Phase::Optimizer || placement.replicated.contains(&op)) {
      for (int stage : stagesOf(placement, &op))
        optimizer[stage].push_back(&op);
      continue;
    }
    bySlot[{role.phase, split.chunkOf(role.position), role.microbatch}]
        .push_back(&op);
  }
  size_t placed = 0;
  streams.slotStarts.resize(stages);
  streams.optimizerStart.resize(stages);
  for (int s = 0; s < stages; ++s) {
    for (const SlotKey &key : slots[s]) {
      auto it = bySlot.find(key);
      if (it == bySlot.end())
        continue;
      streams.slotStarts[s].push_back({stream[s].size(), key});
      stream[s].insert(stream[s].end(), it->second.begin(), it->second.end());
      placed += it->second.size();
      bySlot.erase(it);
    }
    streams.optimizerStart[s] = stream[s].size();
    stream[s].insert(stream[s].end(), optimizer[s].begin(),
                     optimizer[s].end());
  }
  if (!bySlot.empty()) {
    auto &[key, ops] = *bySlot.begin();
    auto [phase, chunk, mb] = key;
    return ops.front()->emitError()
           << "dist-pipeline: this op (" << phaseName(phase) << " of "
           << "micro-batch " << mb << ", model chunk " << chunk
           << ") has no place in the schedule of stage "
           << chunk % stages << "; the step's micro-batches or chunks do "
           << "not match the plan";
  }
  (void)placed;
  return streams;

}

void StageBuilder::findSends(const Placement &placement,
                             Streams &streams) const {
  const int stages = split.stages;
  const auto &roles = placement.analysis.roles;
  // Which stages read each value made by a placed op, and every stage's
  // sends per peer in the order it makes them.
  const std::vector<std::vector<Operation *>> &stream = streams.ops;
  llvm::DenseMap<Value, std::set<int>> &readers = streams.readers;
  for (int s = 0; s < stages; ++s)
    for (Operation *op : stream[s])
      for (Value operand : op->getOperands())
        if (Operation *def = operand.getDefiningOp();
            def && roles.contains(def) &&
            roles.lookup(def).phase != Phase::OnDemand) {
          llvm::SmallVector<int, 2> home = stagesOf(placement, def);
          if (!llvm::is_contained(home, s))
            readers[operand].insert(s);
        }
  std::vector<std::vector<std::vector<Value>>> &sends = streams.sends;
  sends.assign(stages, std::vector<std::vector<Value>>(stages));
  for (int s = 0; s < stages; ++s)
    for (Operation *op : stream[s])
      for (Value result : op->getResults())
        if (auto it = readers.find(result); it != readers.end())
          for (int reader : it->second) {
            llvm::SmallVector<int, 2> home = stagesOf(placement, op);
            // A value made on several stages is sent by the first of them.
            if (home.front() == s)
              sends[s][reader].push_back(result);
          }
}

LogicalResult StageBuilder::buildStage(int s, func::FuncOp step,
                                       const Placement &placement,
                                       const Streams &streams,
                                       OpBuilder &builder) const {
  const int stages = split.stages;
  const auto &roles = placement.analysis.roles;
  const std::vector<std::vector<Operation *>> &stream = streams.ops;
  const llvm::DenseMap<Value, std::set<int>> &readers = streams.readers;
  const std::vector<std::vector<std::vector<Value>>> &sends = streams.sends;
  Block &body = step.getBody().front();
  auto returnOp = cast<func::ReturnOp>(body.getTerminator());
  StringAttr axisAttr = builder.getStringAttr(axis);
  // The results each stage returns: the values it makes (the loss only on
  // the stage that computes it; each stage's own parameters and moments)
  // and the on-demand ones (the step counter).
  auto homeOf = [&](Value value) -> std::optional<llvm::SmallVector<int, 2>> {
    Operation *def = value.getDefiningOp();
    if (!def || roles.lookup(def).phase == Phase::OnDemand)
      return std::nullopt; // anywhere
    return stagesOf(placement, def);
  };

  // The arguments this stage reads, directly or through on-demand ops.
  llvm::SetVector<unsigned> usedArgs;
  llvm::DenseSet<Operation *> visited;
  std::function<void(Value)> need = [&](Value value) {
    if (auto arg = dyn_cast<BlockArgument>(value)) {
      usedArgs.insert(arg.getArgNumber());
      return;
    }
    Operation *def = value.getDefiningOp();
    if (!def || roles.lookup(def).phase != Phase::OnDemand ||
        !visited.insert(def).second)
      return;
    for (Value operand : def->getOperands())
      need(operand);
  };
  for (Operation *op : stream[s])
    for (Value operand : op->getOperands())
      need(operand);
  llvm::SmallVector<unsigned> results;
  for (auto [index, value] : llvm::enumerate(returnOp.getOperands())) {
    auto home = homeOf(value);
    if (home && !llvm::is_contained(*home, s))
      continue;
    results.push_back(index);
    need(value);
  }
  llvm::SmallVector<unsigned> args(usedArgs.begin(), usedArgs.end());
  llvm::sort(args);

  llvm::SmallVector<Type> argTypes, resultTypes;
  for (unsigned index : args)
    argTypes.push_back(body.getArgument(index).getType());
  for (unsigned index : results)
    resultTypes.push_back(returnOp.getOperand(index).getType());
  std::string name =
      (step.getSymName() + "_stage" + llvm::Twine(s)).str();
  auto function = func::FuncOp::create(
      builder, step.getLoc(), name,
      builder.getFunctionType(argTypes, resultTypes));
  for (NamedAttribute attr : step->getDiscardableAttrs())
    function->setAttr(attr.getName(), attr.getValue());
  function->setAttr(pipeline::kPipelineStageAttrName, builder.getI64IntegerAttr(s));
  // At once: setArgAttrs rebuilds every argument's array on each call.
  SmallVector<DictionaryAttr> argAttrs, resultAttrs;
  for (auto index : args)
    argAttrs.push_back(step.getArgAttrDict(index));
  for (auto index : results)
    resultAttrs.push_back(step.getResultAttrDict(index));
  function.setAllArgAttrs(argAttrs);
  function.setAllResultAttrs(resultAttrs);

  Block *entry = function.addEntryBlock();
  OpBuilder inner = OpBuilder::atBlockEnd(entry);
  IRMapping mapping;
  for (auto [position, index] : llvm::enumerate(args))
    mapping.map(body.getArgument(index), entry->getArgument(position));
  std::vector<size_t> received(stages, 0);
  llvm::DenseSet<Operation *> emitted;

  std::function<FailureOr<Value>(Value, Operation *)> resolve =
      [&](Value value, Operation *user) -> FailureOr<Value> {
    if (Value mapped = mapping.lookupOrNull(value))
      return mapped;
    Operation *def = value.getDefiningOp();
    if (!def)
      return user->emitError() << "dist-pipeline: stage " << s
                               << " reads an argument it does not take";
    if (roles.lookup(def).phase == Phase::OnDemand) {
      for (Value operand : def->getOperands())
        if (failed(resolve(operand, user)))
          return failure();
      inner.clone(*def, mapping);
      return mapping.lookup(value);
    }
    llvm::SmallVector<int, 2> home = stagesOf(placement, def);
    if (llvm::is_contained(home, s))
      return user->emitError()
             << "dist-pipeline: on stage " << s << " this op reads a value "
             << "that its schedule computes later; the step's data flow "
             << "does not follow the layer order";
    // Receive from the peer, in its send order, up to this value.
    int peer = home.front();
    const std::vector<Value> &queue = sends[peer][s];
    while (received[peer] < queue.size()) {
      Value next = queue[received[peer]++];
      Operation *recv = createPeerOp(
          inner, dist::RecvOp::getOperationName(), next.getLoc(), {},
          next.getType(), mesh, axisAttr, peer,
          label(placement, next.getDefiningOp(), peer, s, step));
      mapping.map(next, recv->getResult(0));
      if (next == value)
        return recv->getResult(0);
    }
    return user->emitError() << "dist-pipeline: stage " << s
                             << " reads a value stage " << peer
                             << " never sends";
  };

  // mark-actions: a mark before each slot's first op (before the receives
  // it needs) and before the optimizer ops.
  auto mark = [&](StringRef phase, int chunk, int microbatch) {
    rt::ActionMarkOp::create(inner, step.getLoc(), phase, chunk, microbatch);
  };
  size_t nextStart = 0;
  const auto &starts = streams.slotStarts[s];
  for (auto [index, op] : llvm::enumerate(stream[s])) {
    if (markActions) {
      if (nextStart < starts.size() && starts[nextStart].first == index) {
        auto [phase, chunk, microbatch] = starts[nextStart++].second;
        mark(phase == Phase::Forward         ? "F"
             : phase == Phase::BackwardInput ? "B"
                                             : "W",
             chunk, microbatch);
      }
      if (index == streams.optimizerStart[s])
        mark("update", 0, 0);
    }
    for (Value operand : op->getOperands())
      if (failed(resolve(operand, op)))
        return failure();
    Operation *copy = inner.clone(*op, mapping);
    (void)copy;
    for (Value result : op->getResults())
      if (auto it = readers.find(result);
          it != readers.end() && stagesOf(placement, op).front() == s)
        for (int reader : it->second) {
          createPeerOp(inner, dist::SendOp::getOperationName(),
                       op->getLoc(), {mapping.lookup(result)}, {}, mesh,
                       axisAttr, reader,
                       label(placement, op, s, reader, step));
        }
  }
  if (markActions && streams.optimizerStart[s] == stream[s].size())
    mark("update", 0, 0);
  llvm::SmallVector<Value> returned;
  for (unsigned index : results) {
    FailureOr<Value> value = resolve(returnOp.getOperand(index), returnOp);
    if (failed(value))
      return failure();
    returned.push_back(*value);
  }
  func::ReturnOp::create(inner, returnOp.getLoc(), returned);
  return success();
}

LogicalResult StageBuilder::build(func::FuncOp step, const Placement &placement,
                                  ArrayRef<std::vector<SlotKey>> slots) {
  FailureOr<Streams> streams = orderStreams(step, placement, slots);
  if (failed(streams))
    return failure();
  findSends(placement, *streams);
  OpBuilder builder(module.getContext());
  builder.setInsertionPoint(step);
  for (int s = 0; s < split.stages; ++s)
    if (failed(buildStage(s, step, placement, *streams, builder)))
      return failure();
  return success();
}

} // namespace partition::pipeline
