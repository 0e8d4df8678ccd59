//===- ActionWalkSlots.cpp - --rt-action-walk's slot buffers -------------===//
//
// The values one of micro-batch 1's actions makes and another reads are
// slot buffers: a copy per micro-batch in flight, the slots assigned by
// walking the plan's schedule (one pool per interleaved stage when it
// saves bytes), none for what lives from its region to its last reader's
// only, a backward's own temporaries copied per slot on a 1F1B or ZB-H1
// stage, and GPipe's slots after the first copy repeated at a stride
// (docs/action-walk.md, "Memory").
//
//===----------------------------------------------------------------------===//

#include "lowering/ActionWalkFormation.h"
#include "lowering/RepeatedKernels.h"

#include "dialects/CheckedSize.h"
#include "dialects/Rt/RtViews.h"
#include "scheduling/ActionSlots.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace partition::actionwalk {

void WalkFormation::findSlotBuffers() {
  // Micro-batch 1's buffers that another of its actions reads (directly or
  // through a view, wherever the view is): one per micro-batch in flight.
  for (int a : templates)
    for (size_t i = actions[a].begin; i < actions[a].end; ++i) {
      auto alloc = dyn_cast<memref::AllocOp>(ops[i]);
      if (!alloc || sumBefore.count(alloc.getResult()))
        continue;
      bool crosses = false;
      anyReader(alloc.getResult(), [&](Operation *user) {
        int at = actionOf(user);
        if (at >= 0 && at != a && isTemplate.contains(at)) {
          crosses = true;
          // Another chunk's action reads it (an interleaved stage's MoE
          // auxiliary loss, which the micro-batch's last chunk adds).
          crossesChunks |= actions[at].kind.second != actions[a].kind.second;
        }
        return false; // Every reader.
      });
      if (crosses)
        slotted.insert({alloc.getResult(), actions[a].kind.second});
    }
}

void WalkFormation::shareSlots() {
  // One pool of slots for all of the stage's chunks holds as many as the
  // most micro-batch chunks in flight at once, where each chunk's own pool
  // holds its own most (interleaved stage 0 of pp 2, v 2: 5 against 4 + 2);
  // a slot's buffers of two chunks, never held at once, then share bytes
  // (the memory plan reads which from the actions, ActionWalkMemory.h).
  // A chunk has a copy for each pool slot it takes, and a pool slot needs
  // the bytes of its largest chunk.
  //
  // Region-local buffers cost less where they are (they live from their
  // region to their reader's, and the reader's later temporaries reuse
  // them), so a chunk's go into the pool only as far as the other chunks'
  // slots have room for them: the last stage's last chunk, whose buffers
  // are all region-local, fills the room its stage's other chunk leaves
  // (gpt2-tiny interleaved pp 2, v 2, stage 1: pooled whole, the last
  // chunk would take 3 slots of 704 KB where the one before needs 512 KB,
  // an arena of 4.69 MB against 4.43 MB).
  if (schedule.config.chunks < 2 || crossesChunks)
    return;
  // Per local chunk: one slot's buffers but the region-local ones, and
  // those.
  std::map<int, double> bytes;
  std::map<int, SmallVector<Value>> locals;
  for (auto &[value, model] : slotted) {
    int chunk = static_cast<int>(model / schedule.config.stages);
    if (regionLocal.contains(value))
      locals[chunk].push_back(value);
    else
      bytes[chunk] += saturatedByteSize(value.getType());
  }
  double own = 0, widest = 0;
  for (auto &[chunk, chunkBytes] : bytes) {
    own += slotCount[chunk] * chunkBytes;
    widest = std::max(widest, chunkBytes);
  }
  // The largest region-local buffers that fit the room, first; pooling
  // saves their bytes.
  std::map<int, double> pooledBytes = bytes;
  SmallVector<Value> pooledLocals;
  for (auto &[chunk, values] : locals) {
    llvm::stable_sort(values, [](Value a, Value b) {
      return saturatedByteSize(a.getType()) > saturatedByteSize(b.getType());
    });
    double &chunkBytes = pooledBytes[chunk];
    for (Value value : values) {
      double size = saturatedByteSize(value.getType());
      if (chunkBytes + size > widest)
        continue;
      chunkBytes += size;
      own += size;
      pooledLocals.push_back(value);
    }
  }
  std::map<int, int> sharedCount;
  std::vector<double> poolBytes;
  std::vector<int> sharedSlot = pipeline::assignSharedSlots(
      walked, pooledBytes, sharedCount, &poolBytes);
  double pooled = 0;
  for (double slotBytes : poolBytes)
    pooled += slotBytes;
  if (pooled >= own)
    return;
  for (auto [i, slot] : llvm::enumerate(sharedSlot))
    triples[3 * i + 1] = slot;
  slotCount = std::move(sharedCount);
  slots = 1;
  for (auto &[chunk, count] : slotCount)
    slots = std::max(slots, count);
  for (Value value : pooledLocals)
    regionLocal.erase(value);
}

void WalkFormation::copyBackwardTemporaries() {
  // A backward's own temporaries, one per slot: the memory plan may then put
  // each on the part of its own slot that backward has finished reading,
  // which no other action holds then (ActionWalkMemory.h), as the unrolled
  // step does; one buffer for all slots conflicts with the other slots,
  // which 1F1B holds through every backward. Only where a stage has one
  // chunk and the slots are bounded by the stages (1F1B, ZB-H1): GPipe's
  // slots grow with the micro-batches (1024 of them: 23 s to compile
  // against 1.4 s) and its first backward's temporaries already take the
  // finished slot; an interleaved stage's pool gained 0-4% for 1.7x the
  // program.
  if (schedule.config.chunks > 1 ||
      schedule.config.kind == pipeline::ScheduleKind::GPipe)
    return;
  for (int a : templates) {
    const Kind &kind = actions[a].kind;
    if (kind.first != "B" && kind.first != "W")
      continue;
    int local = static_cast<int>(kind.second / schedule.config.stages);
    if (slotCount[local] < 2)
      continue;
    for (size_t i = actions[a].begin; i < actions[a].end; ++i) {
      auto alloc = dyn_cast_or_null<memref::AllocOp>(ops[i]);
      if (!alloc || slotted.count(alloc.getResult()) ||
          sumBefore.count(alloc.getResult()))
        continue;
      if (!anyReader(alloc.getResult(),
                     [&](Operation *user) { return actionOf(user) != a; }))
        slotted.insert({alloc.getResult(), kind.second});
    }
  }
}

void WalkFormation::findRegionLocalSlots() {
  // A slot buffer written by region P and read by regions after it up to
  // R needs neither a copy per slot nor a place across the whole walk when
  // no two micro-batches hold it at once and the walk runs nothing but
  // regions P..R from a micro-batch's P to its last reader (the last stage
  // of 1F1B: F, B, F, B, ...; what only B reads on ZB-H1's, whose W waits):
  // the memory plan then sees it live from P to R in the program's order,
  // as it is at run time, and R's later temporaries may take its place
  // (the logits once the loss's gradient has read them).
  std::vector<std::map<int32_t, size_t>> last(templates.size());
  for (size_t i = 0; i < triples.size(); i += 3)
    last[triples[i]][triples[i + 2]] = i / 3;
  for (auto &[value, model] : slotted) {
    int producer = regionOf[actions[actionOf(value)].kind];
    int latest = producer;
    bool after = true;
    anyReader(value, [&](Operation *user) {
      int at = actionOf(user);
      if (at >= 0 && isTemplate.contains(at)) {
        int region = regionOf[actions[at].kind];
        after &= region >= producer;
        latest = std::max(latest, region);
      }
      return false; // Every reader.
    });
    if (!after || latest == producer)
      continue;
    // Every action from a micro-batch's producer to its last reader runs a
    // region in [producer, latest], and the next micro-batch's producer
    // comes after that reader.
    bool inside = true;
    size_t previousEnd = 0;
    bool first = true;
    for (size_t i = 0; i < triples.size() && inside; i += 3) {
      if (triples[i] != producer)
        continue;
      int32_t microbatch = triples[i + 2];
      size_t end = i / 3;
      for (int region = producer + 1; region <= latest; ++region)
        if (auto it = last[region].find(microbatch); it != last[region].end())
          end = std::max(end, it->second);
      inside = first || previousEnd < i / 3;
      for (size_t j = i / 3; j <= end && inside; ++j)
        inside = triples[3 * j] >= producer && triples[3 * j] <= latest;
      previousEnd = end;
      first = false;
    }
    if (inside)
      regionLocal.insert(value);
  }
}

void WalkFormation::copySlots(Operation *first) {
  // Slot buffers above the walk (an action of one kind reads what another
  // wrote, in any order), and a copy for each further slot of their chunk.
  OpBuilder builder(first);
  for (auto &[value, chunk] : slotted) {
    if (regionLocal.contains(value))
      continue;
    value.getDefiningOp()->setAttr(rt::RtDialect::kHeldAttrName,
                                   builder.getUnitAttr());
    Operation *alloc = value.getDefiningOp();
    alloc->moveBefore(first);
    ops[position.lookup(alloc)] = nullptr; // No longer in its action.
  }
  // GPipe holds every micro-batch at once, a slot each: its slots after
  // the first copy are that copy repeated at a stride (the memory plan
  // reserves them), so that the program and its memory plan stay the
  // size of two slots (1024 micro-batches: 1.4 s and 2.8 MB with a copy
  // per slot).
  int copied = slots;
  if (schedule.config.kind == pipeline::ScheduleKind::GPipe &&
      slotCount.size() == 1 && slots > 2) {
    copied = 2;
    slotRepeats = slots - 2;
  }
  for (int s = 1; s < copied; ++s) {
    int32_t size = 0;
    for (auto &[value, model] : slotted) {
      int local = static_cast<int>(model / schedule.config.stages);
      if (s >= slotCount[local] || regionLocal.contains(value))
        continue;
      slotTemplates.push_back(value);
      auto copy = memref::AllocOp::create(builder, value.getLoc(),
                                          cast<MemRefType>(value.getType()));
      copy->setAttr(rt::RtDialect::kHeldAttrName, builder.getUnitAttr());
      slotCopies.push_back(copy);
      ++size;
    }
    slotSizes.push_back(size);
  }
}

} // namespace partition::actionwalk
