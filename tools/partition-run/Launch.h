//===- Launch.h - the ranks of a partition-run job --------------*- C++ -*-===//
//
// partition-run is one process per rank. A launcher (mpirun, mpiexec, srun)
// starts them and MPI connects them; a process started any other way is a
// world of one and never initialises MPI, so single-device runs need none.
//
//===----------------------------------------------------------------------===//
#ifndef PARTITION_TOOLS_PARTITION_RUN_LAUNCH_H
#define PARTITION_TOOLS_PARTITION_RUN_LAUNCH_H

#include "runtime/comm/Communicator.h"

#include <memory>
#include <string>
#include <vector>

namespace partition::run {

/// True when a launcher started this process: OpenMPI's mpirun
/// (OMPI_COMM_WORLD_SIZE), PMI (MPICH, Intel MPI: PMI_SIZE), PMIx
/// (PMIX_RANK) or Slurm's srun (SLURM_PROCID).
bool launchedByLauncher();

/// The world communicator: MPI's (initialised here, through PMI under srun)
/// when `useMpi`, else this process alone. `timeoutSeconds` bounds every
/// collective. Throws std::runtime_error when MPI is wanted but this build
/// has none.
std::unique_ptr<runtime::comm::Communicator>
openWorld(bool useMpi, double timeoutSeconds, int *argc, char ***argv);

/// `world`'s ranks on this process's node: this one's index among them and
/// their number (MPI_Comm_split_type SHARED; {0, 1} without MPI).
/// Collective over `world`.
struct NodeRanks {
  int rank = 0;
  int size = 1;
};
NodeRanks nodeRanks(runtime::comm::Communicator &world);

/// Ends every rank of an MPI job with `code` (MPI_Abort): the other ranks
/// would otherwise wait for this one until their timeout.
[[noreturn]] void abortJob(int code);

/// partition-run --nproc N: replaces this process by
///   mpirun -n N [--oversubscribe] <this binary> ARGS...
/// (mpirun from $PARTITION_MPIRUN, else PATH; OMPI_ALLOW_RUN_AS_ROOT set
/// when running as root, OMP_NUM_THREADS = cores / N unless set), so the
/// job's exit status is mpirun's. Returns only with an error message.
std::string relaunchUnderMpirun(int nproc,
                                const std::vector<std::string> &args);

} // namespace partition::run

#endif // PARTITION_TOOLS_PARTITION_RUN_LAUNCH_H
