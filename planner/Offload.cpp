//===- Offload.cpp - the cost of offload ----------------------------------===//

#include "planner/Offload.h"

#include "passes/plan/PlanAxisNames.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace partition::planner {

namespace {

/// One rank's read and write bandwidth of `tier` (0 where it has none).
void tierBandwidth(const std::string &tier, const Cluster &node,
                   const Cluster &device, int64_t ranksOnNode, double &read,
                   double &write) {
  if (tier == "nvme") {
    // The node's disk, shared by its ranks (all offloading at once).
    double ranks = double(std::max<int64_t>(1, ranksOnNode));
    read = node.diskReadBandwidth / ranks;
    write = node.diskWriteBandwidth / ranks;
  } else {
    read = write = device.hostLinkBandwidth;
  }
}

/// A read of `bytes` packed after `before` seconds of compute since the
/// previous one.
struct Read {
  double before = 0, bytes = 0;
};

/// The seconds the rank waits for `reads` (program order) at `bandwidth`,
/// reads in slices of `slice` bytes started `ahead` bytes ahead of their
/// pack (as OffloadOptimizer.cpp's stage() places them: slice i's reads
/// start where the first of the slices before it within `ahead` bytes is
/// packed, at least one slice ahead; the first at the start).
double exposedReads(const std::vector<Read> &reads, double slice, double ahead,
                    double bandwidth) {
  struct Unit {
    double before, bytes;
  };
  std::vector<Unit> units;
  double pending = 0;
  for (const Read &read : reads) {
    if (!(read.bytes > 0)) {
      pending += read.before;
      continue;
    }
    // At most 64 slices per read (larger ones, the same bytes): the
    // search predicts many plans.
    double count = std::clamp(std::ceil(read.bytes / slice), 1.0, 64.0);
    for (int k = 0; k < int(count); ++k)
      units.push_back({k == 0 ? read.before + pending : 0.0,
                       read.bytes / count});
    pending = 0;
  }
  std::vector<double> packed(units.size());
  double clock = 0, disk = 0, compute = 0, aheadBytes = 0;
  size_t first = 0;
  for (size_t i = 0; i < units.size(); ++i) {
    double start = 0;
    if (i > 0) {
      aheadBytes += units[i - 1].bytes;
      while (first + 1 < i && aheadBytes + units[i].bytes > ahead) {
        aheadBytes -= units[first].bytes;
        ++first;
      }
      start = packed[first];
    }
    disk = std::max(disk, start) + units[i].bytes / bandwidth;
    clock += units[i].before;
    compute += units[i].before;
    clock = std::max(clock, disk);
    packed[i] = clock;
  }
  return clock - compute;
}

} // namespace

double offloadIoSeconds(const std::string &tier, double readBytes,
                        double writeBytes, const Cluster &node,
                        const Cluster &device, int64_t ranksOnNode) {
  if (tier == "none" || !(readBytes + writeBytes > 0))
    return 0;
  double read, write;
  tierBandwidth(tier, node, device, ranksOnNode, read, write);
  if (!(read > 0) || !(write > 0))
    return INFINITY;
  if (tier == "nvme" || device.sharedNode)
    return readBytes / read + writeBytes / write;
  return std::max(readBytes / read, writeBytes / write);
}

double diskSlowdownSeconds(double hidden, const Cluster &node) {
  double s = node.diskComputeSlowdown;
  if (!(s > 0) || !(hidden > 0))
    return 0;
  return hidden * s / (1 + s);
}

GatherReads parameterGatherSeconds(const std::string &tier,
                                   const ParameterGathers &g,
                                   int64_t bufferBytes, const Cluster &node,
                                   const Cluster &device,
                                   int64_t ranksOnNode) {
  GatherReads out;
  if (tier == "none")
    return out;
  double read, write;
  tierBandwidth(tier, node, device, ranksOnNode, read, write);
  // One micro-batch's packs in program order. Forward: the embedding's
  // and the first layer's at the start (nothing before them to hide
  // behind), then layer k + 1's before layer k's compute. Backward: the
  // head's after the forward's last layer and head, the last layer's with
  // it, then layer k - 1's before layer k's backward.
  // What the reads hide behind between two packs: the compute and the
  // collectives the rank waits for.
  auto span = [&](double compute, double comm) {
    return g.overlapsCommunication ? std::max(compute, comm) : compute + comm;
  };
  double layerForward = span(g.layerForward, g.layerGather);
  double layerBackward = span(g.layerBackward, g.layerBackwardComm);
  std::vector<Read> forward, backward;
  forward.push_back({0, g.embeddingBytes});
  for (int64_t k = 0; k < g.layers; ++k)
    forward.push_back({k == 0   ? 0.0
                       : k == 1 ? span(g.embeddingForward, g.embeddingGather)
                                : layerForward,
                       g.layerBytes});
  // Between the last forward pack (layer n - 1's, before layer n - 2's
  // compute) and the backward's first: two layers and the head.
  double tail = (g.layers > 1 ? 2 * layerForward
                              : span(g.embeddingForward, g.embeddingGather) +
                                    layerForward) +
                g.headForward;
  if (g.headBytes > 0)
    backward.push_back({tail, g.headBytes});
  for (int64_t k = g.layers - 1; k >= 0; --k)
    backward.push_back({k == g.layers - 1
                            ? (g.headBytes > 0 ? 0.0 : tail)
                        : k == g.layers - 2 ? g.headBackward
                                            : layerBackward,
                        g.layerBytes});
  double forwardBytes = g.embeddingBytes + double(g.layers) * g.layerBytes;
  double backwardBytes = g.headBytes + double(g.layers) * g.layerBytes;
  double mbs = double(std::max<int64_t>(1, g.microbatches));
  out.bytes = mbs * (forwardBytes + backwardBytes);
  if (!(out.bytes > 0))
    return out;
  if (!(read > 0)) {
    out.exposed = out.seconds = out.backwardSeconds = INFINITY;
    return out;
  }
  out.seconds = out.bytes / read;
  out.backwardSeconds = backwardBytes / read;
  if (tier == "host" && device.sharedNode) {
    // The CPU backend's host tier: a memcpy on the rank, nothing overlaps.
    out.exposed = out.seconds;
    return out;
  }
  std::vector<Read> all = forward;
  all.insert(all.end(), backward.begin(), backward.end());
  // Each micro-batch reads again from its start (under the micro-batch
  // loop the reads of a run start and end within it: stageByRegion).
  double slice = 2.0 * double(planfile::offloadSliceBytes(bufferBytes));
  out.exposed =
      mbs * exposedReads(all, slice, double(bufferBytes) / 2, read);
  return out;
}

double offloadSeconds(const std::string &tier, double bytes,
                      int64_t bufferBytes, double update, double window,
                      double lastShare, const Cluster &node,
                      const Cluster &device, int64_t ranksOnNode) {
  if (tier == "none" || !(bytes > 0))
    return 0;
  double read, write;
  tierBandwidth(tier, node, device, ranksOnNode, read, write);
  if (!(read > 0) || !(write > 0))
    return INFINITY;
  // Both moments, fp32: `bytes` read in and written back. The disk moves
  // one after the other; a host link (PCIe, NVLink-C2C) moves both
  // directions at once. The CPU backend copies to the host tier at once,
  // on the rank (a memcpy: nothing overlaps).
  double readTime = bytes / read, writeTime = bytes / write;
  if (tier == "host" && device.sharedNode)
    return readTime + writeTime;
  double io =
      tier == "nvme" ? readTime + writeTime : std::max(readTime, writeTime);
  // --rt-offload-optimizer moves each update into the backward pass below
  // the kernel completing its gradient and reads its slices ahead, so the
  // transfers of every tensor but the one completed last run under the
  // rest of the backward (`window`) and the updates; what they leave
  // spills into the last tensor's (the embedding's: `lastShare` of the
  // bytes and of the update), whose update stays at the end of the step
  // with only its own update to hide under. The last slice's write-back is
  // waited for at the end of the step, and the first slice's read where it
  // is longer than the window. Slices: sliceBytes per moment, two moments.
  double slice =
      std::min(bytes, 2.0 * double(planfile::offloadSliceBytes(bufferBytes)));
  double share = std::clamp(lastShare, 0.0, 1.0);
  double spill =
      std::max(0.0, io * (1 - share) - window - update * (1 - share));
  double ends = std::max(0.0, slice / read - window) + slice / write;
  return std::max(ends, spill + io * share - update * share);
}

double offloadStepSeconds(const Candidate &p, const OffloadStep &step,
                          const Cluster &node, const Cluster &c,
                          Prediction &out) {
  int64_t ranks = std::min<int64_t>(p.devices(), node.devicesPerNode);
  const std::string &moments = p.offload, &shards = p.offloadParameters;
  double momentBytes = moments != "none" ? 8 * step.shardParams : 0.0;
  double shardBytes = shards != "none" ? 4 * step.shardParams : 0.0;
  out.offloadedBytes = momentBytes;
  GatherReads gathers = parameterGatherSeconds(
      shards, step.gathers, p.offloadBufferBytes, node, c, ranks);
  out.offloadGatherSeconds = gathers.exposed;
  // The updates read their moments and shards and write them back; in
  // one tier one transfer stream (a unit stages all three), in two each
  // its own, at once. The backward's shard reads take the shards' tier
  // for part of the window.
  auto update = [&](const std::string &tier, double bytes) {
    double window = step.window;
    if (tier == shards)
      window = std::max(0.0, window - gathers.backwardSeconds);
    return offloadSeconds(tier, bytes, p.offloadBufferBytes, step.update,
                          window, step.lastShare, node, c, ranks);
  };
  double updates = 0, diskExposed = 0;
  if (moments == shards || moments == "none" || shards == "none") {
    const std::string &tier = moments != "none" ? moments : shards;
    updates = update(tier, momentBytes + shardBytes);
    if (tier == "nvme")
      diskExposed += updates;
  } else {
    double a = update(moments, momentBytes), b = update(shards, shardBytes);
    updates = std::max(a, b);
    diskExposed += moments == "nvme" ? a : b;
  }
  if (shards == "nvme")
    diskExposed += gathers.exposed;
  double updateBytes = momentBytes + shardBytes;
  out.offloadReadBytes = gathers.bytes + updateBytes;
  out.offloadWriteBytes = updateBytes;
  // The disk's seconds beside the compute: its transfers less what the
  // rank waited for them, at most the step's compute.
  double disk =
      offloadIoSeconds("nvme", (moments == "nvme" ? momentBytes : 0.0) +
                                   (shards == "nvme" ? shardBytes : 0.0),
                       (moments == "nvme" ? momentBytes : 0.0) +
                           (shards == "nvme" ? shardBytes : 0.0),
                       node, c, ranks) +
      (shards == "nvme" ? gathers.seconds : 0.0);
  double hidden = std::isfinite(disk)
                      ? std::clamp(disk - diskExposed, 0.0, step.compute)
                      : 0.0;
  out.offloadSlowdownSeconds = diskSlowdownSeconds(hidden, node);
  return gathers.exposed + updates + out.offloadSlowdownSeconds;
}

void offloadMemory(const Candidate &p, const Cluster &node, const Cluster &c,
                   Prediction &out) {
  auto leaves = [&](const std::string &tier) {
    return tier == "nvme" || (tier == "host" && !c.sharedNode);
  };
  // The staging buffers (at most buffer_bytes, whole blocks), one budget
  // for the moments and the shards.
  double staging = double(p.offloadBufferBytes) +
                   double(planfile::kOffloadMinBufferBytes);
  bool moments = leaves(p.offload), shards = leaves(p.offloadParameters);
  if (p.offloadParameters != "none")
    out.offloadedParameterBytes = out.memory.parameters;
  // The moments leave the device's memory, and the fp32 parameter shards
  // (ZeRO-3's masters; bf16 copies stay in `other`); the staging buffers
  // take their place.
  if (moments)
    out.memory.optimizer = std::min(out.memory.optimizer, staging);
  if (shards)
    out.memory.parameters =
        moments ? 0.0 : std::min(out.memory.parameters, staging);
  double hostBytes = (p.offload == "host" ? out.offloadedBytes : 0.0) +
                     (p.offloadParameters == "host"
                          ? out.offloadedParameterBytes
                          : 0.0);
  if ((p.offload == "host" && moments) || (p.offloadParameters == "host" &&
                                           shards))
    out.tierFits =
        hostBytes *
            double(std::min<int64_t>(p.devices(), node.devicesPerNode)) <=
        node.hostMemoryBytes;
}

} // namespace partition::planner
