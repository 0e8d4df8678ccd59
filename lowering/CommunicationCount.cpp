//===- CommunicationCount.cpp - bytes a rank sends per step ---------------===//

#include "lowering/CommunicationCount.h"

#include "dialects/CheckedSize.h"
#include "dialects/Dist/DistOps.h"
#include "dialects/Rt/RtOps.h"

#include "mlir/IR/SymbolTable.h"
#include "llvm/Support/CheckedArithmetic.h"

using namespace mlir;
using partition::rt::AllGatherOp;
using partition::rt::AllReduceOp;
using partition::rt::ReduceScatterOp;
using partition::rt::SendOp;

namespace partition {
namespace {

/// The bytes of a buffer the memory plan has placed (and so checked).
int64_t byteSize(Type type) {
  return *checkedByteSize(cast<MemRefType>(type));
}

void addBytes(BytesByGroup &byGroup, const std::string &group, int64_t bytes) {
  auto entry = llvm::find_if(byGroup,
                             [&](const auto &e) { return e.first == group; });
  if (entry == byGroup.end())
    byGroup.push_back({group, bytes});
  else
    entry->second += bytes;
}

/// `total` plus what one rank sends for a collective of `bytes` over `ranks`
/// ranks: (ranks - 1) / ranks of them, twice for an all-reduce; nullopt once
/// anything overflows.
std::optional<int64_t> sendBytes(std::optional<int64_t> total, int64_t bytes,
                                 int64_t ranks, bool twice) {
  std::optional<int64_t> sent =
      llvm::checkedMul(bytes, (twice ? 2 : 1) * (ranks - 1));
  if (!total || !sent)
    return std::nullopt;
  return llvm::checkedAdd(*total, *sent / ranks);
}

} // namespace

/// Counts the collectives of `function`, as ring algorithms over N ranks
/// send them from every rank, rounded down per collective: an all-reduce
/// of S bytes 2 (N - 1) / N * S (a reduce-scatter and an all-gather, each
/// N - 1 steps of S / N bytes); an all-gather (N - 1) / N of its output
/// (every rank forwards the N - 1 blocks it does not own); a
/// reduce-scatter (N - 1) / N of its input.
FailureOr<Communication> countCommunication(func::FuncOp function) {
  Communication result;
  result.function = function.getSymName();
  SymbolTableCollection tables;
  // A send moves its buffer once, to one peer.
  auto countSend = [&](SendOp send) -> LogicalResult {
    int64_t bytes = byteSize(send.getInput().getType());
    std::optional<int64_t> sent = llvm::checkedAdd(result.sentBytes, bytes);
    if (!sent)
      return send->emitOpError() << "the bytes " << function.getSymName()
                                 << " sends per step overflow 64 bits";
    result.sentBytes = *sent;
    addBytes(result.sentBytesByPeer,
             cast<StringAttr>(send.getPeerAxes()[0]).getValue().str() + "=" +
                 std::to_string(send.getPeerCoords()[0]),
             bytes);
    ++result.sends;
    return success();
  };
  auto countCollective = [&](Operation *op) -> LogicalResult {
    auto meshName = op->getAttrOfType<FlatSymbolRefAttr>("mesh");
    FailureOr<dist::MeshShape> mesh = dist::lookupMeshShape(
        op, meshName, &tables, [&] { return op->emitOpError(); });
    if (failed(mesh))
      return failure();
    int64_t ranks = 1;
    std::optional<int64_t> sent = result.sentBytes;
    std::string group;
    llvm::raw_string_ostream os(group);
    for (auto [index, axis] :
         llvm::enumerate(op->getAttrOfType<ArrayAttr>("axes"))) {
      StringRef name = cast<StringAttr>(axis).getValue();
      int64_t at = mesh->find(name);
      if (at < 0)
        return op->emitOpError() << "axis '" << name << "' is not an axis of "
                                 << meshName;
      ranks *= mesh->sizes[at]; // The mesh verifier bounds its size.
      os << (index ? "," : "") << name << "=" << mesh->sizes[at];
    }
    if (auto allReduce = dyn_cast<AllReduceOp>(op)) {
      int64_t bytes = 0;
      for (Value buffer : allReduce.getBuffers())
        bytes += byteSize(buffer.getType());
      sent = sendBytes(sent, bytes, ranks, /*twice=*/true);
      addBytes(result.reducedBytes, group, bytes);
      ++result.buckets;
    } else if (auto allGather = dyn_cast<AllGatherOp>(op)) {
      int64_t bytes = byteSize(allGather.getOutput().getType());
      sent = sendBytes(sent, bytes, ranks, /*twice=*/false);
      addBytes(result.gatheredBytes, group, bytes);
      ++result.gathers;
    } else if (auto move = dyn_cast<rt::AllToAllOp>(op)) {
      // Every rank keeps one of its N blocks and sends the other N - 1.
      int64_t bytes = byteSize(move.getInput().getType());
      sent = sendBytes(sent, bytes, ranks, /*twice=*/false);
      addBytes(result.movedBytes, group, bytes);
      ++result.moves;
    } else if (auto shift = dyn_cast<rt::RingShiftOp>(op)) {
      // Every rank of the ring sends its whole buffer once.
      int64_t bytes = byteSize(shift.getInput().getType());
      sent = ranks > 1 && sent ? std::optional<int64_t>(*sent + bytes) : sent;
      addBytes(result.shiftedBytes, group, bytes);
      ++result.shifts;
    } else {
      int64_t bytes =
          byteSize(cast<ReduceScatterOp>(op).getInput().getType());
      sent = sendBytes(sent, bytes, ranks, /*twice=*/false);
      addBytes(result.scatteredBytes, group, bytes);
      ++result.scatters;
    }
    if (!sent)
      return op->emitOpError() << "the bytes " << function.getSymName()
                               << " sends per step overflow 64 bits";
    result.sentBytes = *sent;
    return success();
  };
  // Inside the micro-batch loop every send and collective runs once per
  // run of it.
  int64_t runs = 1;
  for (Operation &op : function.getBody().front()) {
    if (auto begin = dyn_cast<rt::MicrobatchLoopBeginOp>(op))
      runs = begin.getCount();
    if (isa<rt::MicrobatchLoopEndOp>(op))
      runs = 1;
    bool collective = isa<AllReduceOp, AllGatherOp, ReduceScatterOp,
                          rt::RingShiftOp, rt::AllToAllOp>(op);
    if (!collective && !isa<SendOp>(op))
      continue;
    for (int64_t run = 0; run < runs; ++run)
      if (failed(collective ? countCollective(&op)
                            : countSend(cast<SendOp>(op))))
        return failure();
  }
  return result;
}

void printCommunication(const Communication &comm, llvm::raw_ostream &os) {
  os << "communication: " << comm.function << " sends " << comm.sentBytes
     << " bytes per rank per step (";
  if (comm.buckets + comm.gathers + comm.scatters + comm.shifts +
          comm.moves + comm.sends ==
      0) {
    os << "no collectives)\n";
    return;
  }
  StringRef separator = "";
  auto part = [&](unsigned count, StringRef singular, StringRef plural,
                  const BytesByGroup &byGroup, StringRef verb) {
    if (count == 0)
      return;
    os << separator << count << " " << (count == 1 ? singular : plural);
    for (const auto &[group, bytes] : byGroup)
      os << ", " << bytes << " bytes " << verb
         << (verb == "sent to" ? " " : " over ") << group;
    separator = "; ";
  };
  part(comm.buckets, "all-reduce bucket", "all-reduce buckets",
       comm.reducedBytes, "reduced");
  part(comm.gathers, "all-gather", "all-gathers", comm.gatheredBytes,
       "gathered");
  part(comm.scatters, "reduce-scatter", "reduce-scatters",
       comm.scatteredBytes, "scattered");
  part(comm.shifts, "ring shift", "ring shifts", comm.shiftedBytes,
       "passed on");
  part(comm.moves, "all-to-all", "all-to-alls", comm.movedBytes, "exchanged");
  part(comm.sends, "send", "sends", comm.sentBytesByPeer, "sent to");
  os << ")\n";
}


} // namespace partition
