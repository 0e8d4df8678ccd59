//===- Offload.cpp - the cost of optimizer offload ------------------------===//

#include "planner/Offload.h"

#include "passes/plan/PlanAxisNames.h"

#include <algorithm>
#include <cmath>

namespace partition::planner {

double offloadSeconds(const std::string &tier, double bytes,
                      int64_t bufferBytes, double update, double window,
                      double lastShare, const Cluster &node,
                      const Cluster &device, int64_t ranksOnNode) {
  if (tier == "none" || !(bytes > 0))
    return 0;
  double read, write;
  if (tier == "nvme") {
    // The node's disk, shared by its ranks (all offloading at once).
    double ranks = double(std::max<int64_t>(1, ranksOnNode));
    read = node.diskReadBandwidth / ranks;
    write = node.diskWriteBandwidth / ranks;
  } else {
    read = write = device.hostLinkBandwidth;
  }
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

void offloadMemory(const Candidate &p, const Cluster &node, const Cluster &c,
                   Prediction &out) {
  if (!(p.offload == "nvme" || (p.offload == "host" && !c.sharedNode)))
    return;
  // The moments leave the device's memory; the staging buffers (at most
  // buffer_bytes, whole blocks) take their place.
  out.memory.optimizer = std::min(out.memory.optimizer,
                                  double(p.offloadBufferBytes) +
                                      double(planfile::kOffloadMinBufferBytes));
  if (p.offload == "host")
    out.tierFits =
        out.offloadedBytes *
            double(std::min<int64_t>(p.devices(), node.devicesPerNode)) <=
        node.hostMemoryBytes;
}

} // namespace partition::planner
