//===- StreamInstructions.cpp - collectives, transfers, tier copies -------===//
//
// The program instructions of the rt ops that are not kernels: a
// collective (its group's mesh axes, its buffers never overlapping), a
// send or receive between pipeline stages, a copy between a tier and the
// arena.
//
//===----------------------------------------------------------------------===//

#include "lowering/StreamWriter.h"

#include "lowering/ProgramFields.h"

#include "dialects/CheckedSize.h"
#include "dialects/Dist/DistDialect.h"
#include "dialects/Rt/RtOps.h"
#include "runtime/program/KernelTable.h"

using namespace mlir;
using partition::rt::AllGatherOp;
using partition::rt::AllReduceOp;
using partition::rt::KernelOp;
using partition::rt::RecvOp;
using partition::rt::ReduceScatterOp;
using partition::rt::RtDialect;
using partition::rt::SendOp;

namespace partition {

FailureOr<std::vector<uint8_t>>
StreamWriter::collectiveAxes(Operation *op, FlatSymbolRefAttr meshName,
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

std::pair<int64_t, int64_t> StreamWriter::arenaRange(Value buffer) const {
  int64_t begin = bufferOffset.lookup(buffer);
  // addBuffer has checked that the buffer lies inside the arena.
  int64_t bytes = *checkedByteSize(cast<MemRefType>(buffer.getType()));
  return std::make_pair(begin, begin + bytes);
}

FailureOr<flatbuffers::Offset<ptp::Instruction>>
StreamWriter::addBlockCollective(Operation *op) {
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
  auto [inBegin, inEnd] = arenaRange(op->getOperand(0));
  auto [outBegin, outEnd] = arenaRange(op->getOperand(1));
  if (inBegin < outEnd && outBegin < inEnd)
    return op->emitOpError()
           << "reads [" << inBegin << ", " << inEnd << ") and writes ["
           << outBegin << ", " << outEnd << "), which overlap in the arena";
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
StreamWriter::addTransfer(Operation *op) {
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
StreamWriter::addAllReduce(AllReduceOp allReduce) {
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
  OperandRange buffers = allReduce.getBuffers();
  for (unsigned i = 0, e = buffers.size(); i < e; ++i)
    for (unsigned j = 0; j < i; ++j) {
      auto [beginI, endI] = arenaRange(buffers[i]);
      auto [beginJ, endJ] = arenaRange(buffers[j]);
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

FailureOr<flatbuffers::Offset<ptp::Instruction>>
StreamWriter::addTierCopy(Operation *op) {
  FailureOr<std::vector<uint32_t>> args = bufferArgs(op, op->getOperands());
  if (failed(args))
    return failure();
  auto label = op->getAttrOfType<StringAttr>("label");
  auto copy = ptp::CreateTierCopyDirect(
      fbb,
      isa<rt::TierReadOp>(op) ? ptp::TierCopyKind::Read
                              : ptp::TierCopyKind::Write,
      label.getValue().str().c_str(), /*started=*/op->getNumResults() == 1);
  return ptp::CreateInstructionDirect(
      fbb, /*kernel=*/0, &*args, /*ints=*/nullptr, /*floats=*/nullptr,
      /*collective=*/0, /*transfer=*/0, /*wait=*/0, copy);
}

} // namespace partition
