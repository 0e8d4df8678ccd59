//===- Launch.cpp - the ranks of a partition-run job ----------------------===//

#include "tools/partition-run/Launch.h"

#include "runtime/comm/SelfCommunicator.h"
#ifdef PARTITION_HAVE_MPI
#include "runtime/comm/MpiCommunicator.h"
#endif

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace partition::run {

bool launchedByLauncher() {
  for (const char *variable :
       {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "SLURM_PROCID"})
    if (std::getenv(variable))
      return true;
  return false;
}

std::unique_ptr<runtime::comm::Communicator>
openWorld(bool useMpi, double timeoutSeconds, int *argc, char ***argv) {
  if (!useMpi)
    return std::make_unique<runtime::comm::SelfCommunicator>();
#ifdef PARTITION_HAVE_MPI
  runtime::comm::MpiOptions options;
  options.timeoutSeconds = timeoutSeconds;
  return runtime::comm::MpiCommunicator::world(argc, argv, options);
#else
  throw std::runtime_error("this partition-run was built without MPI and "
                           "cannot run under a launcher; install "
                           "libopenmpi-dev and rebuild");
#endif
}

NodeRanks nodeRanks(runtime::comm::Communicator &world) {
#ifdef PARTITION_HAVE_MPI
  if (auto *mpi = dynamic_cast<runtime::comm::MpiCommunicator *>(&world)) {
    runtime::comm::MpiCommunicator::NodeRanks node = mpi->nodeRanks();
    return {node.rank, node.size};
  }
#endif
  (void)world;
  return {};
}

void abortJob(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
#ifdef PARTITION_HAVE_MPI
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized)
    MPI_Abort(MPI_COMM_WORLD, code);
#endif
  std::_Exit(code);
}

namespace {

/// `name` if it contains a slash, else its first match on PATH; empty when
/// there is none.
std::string findExecutable(const std::string &name) {
  if (name.find('/') != std::string::npos)
    return access(name.c_str(), X_OK) == 0 ? name : "";
  const char *path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos)
      end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0)
      return candidate;
    start = end + 1;
  }
  return "";
}

} // namespace

std::string relaunchUnderMpirun(int nproc,
                                const std::vector<std::string> &args) {
  const char *configured = std::getenv("PARTITION_MPIRUN");
  std::string mpirun = configured && *configured ? configured : "mpirun";
  std::string found = findExecutable(mpirun);
  if (found.empty())
    return "--nproc needs mpirun (OpenMPI), but '" + mpirun + "' is not " +
           (mpirun.find('/') == std::string::npos ? "on PATH"
                                                  : "an executable") +
           "; install openmpi-bin or set PARTITION_MPIRUN";
  char self[PATH_MAX];
  ssize_t length = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (length <= 0)
    return std::string("--nproc cannot find its own executable: ") +
           std::strerror(errno);
  self[length] = '\0';

  unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::string> command = {found, "-n", std::to_string(nproc)};
  // OpenMPI refuses more ranks than cores unless told; a CPU job on one
  // machine may well want more (tests, small models).
  if (unsigned(nproc) > cores)
    command.push_back("--oversubscribe");
  command.push_back(self);
  command.insert(command.end(), args.begin(), args.end());

  if (geteuid() == 0) {
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  }
  // N ranks with an OpenMP team of `cores` threads each would spin against
  // each other; split the cores, as torchrun does.
  if (!std::getenv("OMP_NUM_THREADS"))
    setenv("OMP_NUM_THREADS",
           std::to_string(std::max(1u, cores / unsigned(nproc))).c_str(), 1);

  std::vector<char *> argv;
  for (std::string &arg : command)
    argv.push_back(arg.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  execv(found.c_str(), argv.data());
  return "cannot run " + found + ": " + std::strerror(errno);
}

} // namespace partition::run
