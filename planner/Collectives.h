//===- Collectives.h - alpha-beta times of collectives -----------*- C++ -*-===//
//
// The time of a collective over a group of devices, by the alpha-beta model
// of the algorithm NCCL or MPI would pick (ring or tree, whichever is
// faster for the size), on the slowest link the group crosses. Ranks are
// numbered with the plan's first mesh axis major (dp, pp, tp: tp
// innermost, as partition-run numbers them), so a group of `size` ranks
// `stride` apart stays inside a node when size x stride <= devices per
// node: tensor parallelism uses NVLink first.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_PLANNER_COLLECTIVES_H
#define PARTITION_PLANNER_COLLECTIVES_H

#include "planner/Cluster.h"

#include <cstdint>

namespace partition::planner {

/// One link: bandwidth per device, one direction (bytes/s), and latency (s).
struct Link {
  double bandwidth = 0;
  double latency = 0;
};

/// The slowest link a group of `size` ranks `stride` apart crosses.
Link groupLink(const Cluster &cluster, int64_t size, int64_t stride);

/// All-reduce of `bytes` (each rank's buffer): ring 2(n-1) steps of
/// bytes/n, or a double binary tree, 2 log2(n) latencies and 2 bytes of
/// traffic per device; the faster.
double allReduceTime(double bytes, int64_t size, const Link &link);
/// All-gather whose output is `bytes` (ring: n-1 steps of bytes/n).
double allGatherTime(double bytes, int64_t size, const Link &link);
/// Reduce-scatter whose input is `bytes`.
double reduceScatterTime(double bytes, int64_t size, const Link &link);
/// All-to-all of `bytes` per rank (each rank sends bytes/n to each of the
/// n - 1 others, keeps its own n-th): n - 1 pairwise steps of bytes/n,
/// (n - 1)/n of the buffer on the wire per rank, at the group's slowest
/// link (the bytes to a rank of the same node go as fast, but the step
/// waits for the inter-node ones).
double allToAllTime(double bytes, int64_t size, const Link &link);
/// One message between two ranks.
double sendTime(double bytes, const Link &link);

} // namespace partition::planner

#endif // PARTITION_PLANNER_COLLECTIVES_H
