//===- StreamWalk.cpp - an action walk's program form ---------------------===//
//
// StreamWriter::addActionWalk: an rt.action_walk_begin's regions, slots,
// rows and actions as a ptp::ActionWalk. A slot substitutes its copy for
// each template buffer the regions name, and so for each view of it the
// regions name: the writer adds, for every view of a template, a view of
// the copy at the same distance from its start. A repeated last slot
// (GPipe's) is written once, with its repeats and each copy's stride.
//
//===----------------------------------------------------------------------===//

#include "lowering/StreamWriter.h"

using namespace mlir;

namespace partition {

FailureOr<flatbuffers::Offset<ptp::ActionWalk>>
StreamWriter::addActionWalk(rt::ActionWalkBeginOp begin,
                            ArrayRef<uint32_t> regionBegins,
                            ArrayRef<std::string> regionNames, uint32_t end) {
  FailureOr<std::vector<uint32_t>> rows = bufferArgs(begin, begin.getRows());
  FailureOr<std::vector<uint32_t>> sources =
      bufferArgs(begin, begin.getRowsSources());
  if (failed(rows) || failed(sources))
    return failure();
  std::vector<flatbuffers::Offset<ptp::ActionRegion>> regions;
  size_t rowsAt = 0;
  for (auto [index, regionBegin] : llvm::enumerate(regionBegins)) {
    uint32_t regionEnd =
        index + 1 < regionBegins.size() ? regionBegins[index + 1] : end;
    size_t count = static_cast<size_t>(begin.getRegionRows()[index]);
    std::vector<uint32_t> regionRows(rows->begin() + rowsAt,
                                     rows->begin() + rowsAt + count);
    std::vector<uint32_t> regionSources(sources->begin() + rowsAt,
                                        sources->begin() + rowsAt + count);
    rowsAt += count;
    regions.push_back(ptp::CreateActionRegionDirect(
        fbb, regionBegin, regionEnd, regionNames[index].c_str(), &regionRows,
        &regionSources));
  }
  // Slot 0 substitutes nothing; slot s > 0 its templates, and their views.
  // The last slot may repeat, each copy (and its views) at its stride.
  std::vector<flatbuffers::Offset<ptp::ActionSlot>> slots;
  slots.push_back(ptp::CreateActionSlotDirect(fbb));
  OperandRange templates = begin.getTemplates(), copies = begin.getCopies();
  ArrayRef<int32_t> sizes = begin.getSlotSizes();
  const uint32_t repeats = static_cast<uint32_t>(begin.getSlotRepeats());
  ArrayRef<int64_t> strideOf;
  if (repeats > 0) {
    if (!begin.getSlotStrides())
      return begin.emitOpError("repeats its last slot without strides; "
                               "run --lower-memory-plan first");
    strideOf = *begin.getSlotStrides();
  }
  size_t at = 0;
  for (auto [index, size] : llvm::enumerate(sizes)) {
    const bool repeated = repeats > 0 && index + 1 == sizes.size();
    std::vector<uint32_t> from, to;
    std::vector<uint64_t> strides;
    for (size_t i = at; i < at + static_cast<size_t>(size); ++i) {
      Value original = templates[i], copy = copies[i];
      FailureOr<std::vector<uint32_t>> pair =
          bufferArgs(begin, ValueRange{original, copy});
      if (failed(pair))
        return failure();
      from.push_back((*pair)[0]);
      to.push_back((*pair)[1]);
      const uint64_t stride = repeated ? strideOf[i - at] : 0;
      if (repeated)
        strides.push_back(stride);
      const int64_t shift = bufferOffset.lookup(copy) -
                            bufferOffset.lookup(original);
      for (Value view : viewsOf.lookup(original)) {
        FailureOr<uint32_t> index = appendBuffer(
            cast<MemRefType>(view.getType()),
            bufferOffset.lookup(view) + shift, ptp::Role::Temporary, "",
            view.getDefiningOp());
        if (failed(index))
          return failure();
        from.push_back(bufferIndex.lookup(view));
        to.push_back(*index);
        if (repeated)
          strides.push_back(stride);
      }
    }
    at += static_cast<size_t>(size);
    slots.push_back(ptp::CreateActionSlotDirect(
        fbb, &from, &to, repeated ? repeats : 0,
        repeated ? &strides : nullptr));
  }
  std::vector<ptp::WalkAction> actions;
  ArrayRef<int32_t> triples = begin.getActions();
  for (size_t i = 0; i + 2 < triples.size(); i += 3)
    actions.emplace_back(static_cast<uint32_t>(triples[i]),
                         static_cast<uint32_t>(triples[i + 1]),
                         static_cast<uint32_t>(triples[i + 2]));
  return ptp::CreateActionWalkDirect(fbb, &regions, &slots, &actions);
}

} // namespace partition
