//===- Calibrate.h - measure this machine into a cluster profile -*- C++ -*-===//
//
// `partition-plan --calibrate` times, here: OpenBLAS sgemm on large and on
// transformer-shaped matrices (the best rate is the peak, efficiency 1),
// a streaming triad (memory bandwidth), an empty OpenMP parallel region
// (the per-kernel cost), and, under `mpirun -n R` of itself
// (--calibrate-collectives-worker), MPI_Allreduce of 8 bytes and of 16 MiB
// (latency and bandwidth by the ring's alpha-beta model). It writes the
// cpu-local profile's fields as JSON, which `--cluster FILE.json` reads.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_TOOLS_PARTITION_PLAN_CALIBRATE_H
#define PARTITION_TOOLS_PARTITION_PLAN_CALIBRATE_H

#include <cstddef>
#include <string>

namespace partition::planner {

/// Measures and writes the profile to `output` (stdout when empty);
/// `self` is argv[0], re-run under mpirun for the collectives. The disk's
/// bandwidth (the offload's nvme tier) is measured on a temporary file of
/// `diskBytes` in `diskDirectory`.
int runCalibration(const char *self, int ranks, const std::string &output,
                   const std::string &diskDirectory, std::size_t diskBytes);

/// The MPI side: every rank times all-reduces; rank 0 prints one JSON
/// line {"latency": s, "bandwidth": bytes/s}.
int runCollectivesWorker();

} // namespace partition::planner

#endif
