//===- ContextParallel.cpp - context parallelism's costs ------------------===//

#include "planner/ContextParallel.h"

#include "planner/Collectives.h"

#include <algorithm>

namespace partition::planner {

double causalShare(int64_t cp, const std::string &loadBalance) {
  if (cp <= 1)
    return 1;
  double n = double(cp);
  // Of 2 cp chunks, chunk j's queries do work proportional to 2j + 1;
  // zigzag gives rank r chunks r and 2 cp - 1 - r, 4 cp on every rank: a
  // cp-th of the whole.
  if (loadBalance == "zigzag")
    return 1 / n;
  // Contiguous pieces: the last rank's queries meet every earlier key.
  return (2 * n - 1) / (n * n);
}

double attendedKeysPerQuery(const ModelShape &m, const Candidate &p,
                            const Cluster &c) {
  // The rank's s/cp queries do causalShare of the causal work: the slowest
  // rank's queries meet s x cp x causalShare keys of the square, s when
  // balanced, up to 2s - s/cp without zigzag. A kernel that skips the
  // masked blocks does half of that, plus half a block of rows (a block on
  // the diagonal computes its whole square).
  double s = double(m.seqLen);
  double share = double(p.cp) * causalShare(p.cp, p.cpLoadBalance);
  double full = c.attentionSkipsMasked
                    ? std::min(s, s / 2 * share + kAttentionBlockRows / 2)
                    : s * share;
  if (m.slidingWindow <= 0 || m.slidingWindow >= m.seqLen || m.layers <= 0)
    return full;
  double windowed = double(m.layers - m.windowFromLayer);
  return (windowed * double(m.slidingWindow) +
          double(m.windowFromLayer) * full) /
         double(m.layers);
}

double kvGatherBytes(const ModelShape &m, const Candidate &p) {
  if (p.cp <= 1)
    return 0;
  double e = p.precision == "bf16" ? 2 : 4;
  double kvHeads = std::max(1.0, double(m.kvHeads) / double(p.tp));
  return 2 * kvHeads * double(m.headDim()) * double(m.seqLen) *
         double(p.microBatch) * e;
}

ContextComm contextComm(const ModelShape &m, const Candidate &p,
                        const Cluster &c, double attentionForward,
                        double attentionBackward) {
  ContextComm out;
  if (p.cp <= 1)
    return out;
  double bytes = kvGatherBytes(m, p);
  // The context group: cp ranks tp apart (mesh order dp, pp, cp, tp), so it
  // stays on NVLink while cp x tp fits a node.
  Link link = groupLink(c, p.cp, p.tp);
  if (p.cpMethod == "ring") {
    // cp - 1 steps; each moves one rank's block (forward: K and V;
    // backward: K, V and their gradients) while the block in hand is
    // computed. Only a step's excess over its block is exposed.
    double steps = double(p.cp - 1), blocks = double(p.cp);
    double block = bytes / double(p.cp);
    auto exposed = [&](double stepBytes, double compute) {
      return steps * std::max(0.0, sendTime(stepBytes, link) -
                                       compute / blocks);
    };
    out.forward = exposed(block, attentionForward);
    out.backward = exposed(2 * block, attentionBackward);
    if (p.recompute == "full")
      out.recompute = out.forward;
    return out;
  }
  // all_gather: exposed (the attention waits for its keys).
  double gather = allGatherTime(bytes, p.cp, link);
  double scatter = reduceScatterTime(bytes, p.cp, link);
  out.forward = gather;
  if (p.recompute == "full") {
    // The repeated forward gathers them; the backward that follows it
    // reads those.
    out.recompute = gather;
    out.backward = scatter;
  } else {
    // Gathered again: they live only while their layer runs.
    out.backward = gather + scatter;
  }
  return out;
}

double contextTransientBytes(const ModelShape &m, const Candidate &p) {
  double bytes = kvGatherBytes(m, p);
  if (p.cpMethod == "ring")
    return 4 * bytes / double(std::max<int64_t>(1, p.cp));
  return 2 * bytes;
}

bool searchContextParallel(const ModelShape &m) {
  return m.seqLen >= kContextSearchMinSeqLen;
}

} // namespace partition::planner
