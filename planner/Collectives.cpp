//===- Collectives.cpp - alpha-beta times of collectives ------------------===//

#include "planner/Collectives.h"

#include <algorithm>
#include <cmath>

namespace partition::planner {

Link groupLink(const Cluster &cluster, int64_t size, int64_t stride) {
  if (size * stride <= cluster.devicesPerNode)
    return {cluster.intraNodeBandwidth, cluster.intraNodeLatency};
  return {cluster.interNodeBandwidth, cluster.interNodeLatency};
}

double allReduceTime(double bytes, int64_t size, const Link &link) {
  if (size <= 1 || bytes <= 0)
    return 0;
  double n = double(size);
  double ring = 2 * (n - 1) * (link.latency + bytes / n / link.bandwidth);
  // Double binary tree (NCCL): pipelined, each device sends and receives
  // about the whole buffer twice (reduce up, broadcast down).
  double tree = 2 * std::ceil(std::log2(n)) * link.latency +
                2 * bytes / link.bandwidth;
  return std::min(ring, tree);
}

double allGatherTime(double bytes, int64_t size, const Link &link) {
  if (size <= 1 || bytes <= 0)
    return 0;
  double n = double(size);
  return (n - 1) * (link.latency + bytes / n / link.bandwidth);
}

double reduceScatterTime(double bytes, int64_t size, const Link &link) {
  return allGatherTime(bytes, size, link);
}

double allToAllTime(double bytes, int64_t size, const Link &link) {
  // Pairwise exchange (NCCL's grouped send/recv, MPI_Alltoall): the same
  // steps as a ring all-gather of this output size.
  return allGatherTime(bytes, size, link);
}

double sendTime(double bytes, const Link &link) {
  if (bytes <= 0)
    return 0;
  return link.latency + bytes / link.bandwidth;
}

} // namespace partition::planner
