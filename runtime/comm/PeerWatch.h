//===- PeerWatch.h - which rank of the node stopped responding --*- C++ -*-===//
//
// A rank that times out in an MPI operation knows what it waited for, not
// why: the peer of a receive may itself be blocked behind the rank that
// really stopped, and a collective has no single peer to name. PeerWatch
// finds the rank that stopped, and makes every rank say the same.
//
//  - Every process of the node beats: a thread stores CLOCK_MONOTONIC into
//    the process's slot of a table shared by the node's ranks (an MPI-3
//    shared-memory window) every 100 ms. The thread calls no MPI function,
//    so it needs nothing of MPI's thread support (MPI is initialised with
//    MPI_THREAD_MULTIPLE for the communication thread, not for this one);
//    it runs while the rank computes, so only a stopped (SIGSTOP, a
//    debugger) or dead process falls silent.
//  - The first rank to time out looks for the node's silent ranks, names
//    the lowest, and posts the verdict (itself, the silent rank) in the
//    table with a compare-and-swap. Ranks that time out later, or are
//    still waiting, read it and print the same culprit.
//  - A rank that was itself stopped notices the gap in its own waiting and
//    restarts its deadline: stopping a whole job (Ctrl-Z, then fg) does not
//    make it time out.
//
// The table covers one node: a rank on another node that stops is found
// only by the ranks of its own node; the others fall back to naming what
// they waited for.
//
//===----------------------------------------------------------------------===//
#ifndef PARTITION_RUNTIME_COMM_PEERWATCH_H
#define PARTITION_RUNTIME_COMM_PEERWATCH_H

#include <mpi.h>

#include <optional>
#include <string>

namespace partition::runtime::comm {

class PeerWatch {
public:
  /// Seconds without a beat after which a rank counts as stopped or dead:
  /// 10 missed beats; far above any scheduling delay of a running thread.
  static constexpr double kSilentSeconds = 1.0;

  /// Starts the process's watch (collective over MPI_COMM_WORLD, once;
  /// later calls do nothing). Without shared-memory windows the watch stays
  /// off and messages name what the rank waited for.
  static void start();
  /// Stops the beating thread and frees the window; before MPI_Finalize.
  static void stop();

  /// What a timed-out rank says about the job.
  struct Verdict {
    /// The world rank that timed out first on the node.
    int detector = -1;
    /// The world rank it found silent.
    int silent = -1;
    /// How long the silent rank had been silent when it was found.
    double silentSeconds = 0;
  };

  /// Called by a rank whose operation timed out: posts the verdict if no
  /// rank has (naming the lowest silent rank of the node, preferring
  /// `expected`, the world rank it waited for, when that one is silent) and
  /// returns the verdict that stands. nullopt when no rank of the node is
  /// silent (a deadlock, a rank in an endless loop, a rank on another node)
  /// or the watch is off.
  static std::optional<Verdict> judge(int worldRank, int expected = -1);
  /// The verdict another rank posted, if any (a cheap read, for ranks still
  /// waiting).
  static std::optional<Verdict> posted();

  /// The end of the failure line of a rank whose operation timed out after
  /// `timeoutSeconds` (judge()'s verdict):
  ///   "timed out after 5 s; rank 2 has shown no sign of life for 5.3 s
  ///    (stopped or dead)"
  /// or, without a verdict, "timed out after 5 s; a peer is missing or
  /// stuck".
  static std::string timeoutDetail(int worldRank, int expected,
                                   double timeoutSeconds);
  /// For a rank still waiting once another has posted `verdict`:
  ///   "abandoned: rank 0 timed out after 5 s; rank 2 has shown no sign of
  ///    life for 5.3 s (stopped or dead)"
  static std::string abandonDetail(const Verdict &verdict,
                                   double timeoutSeconds);
};

} // namespace partition::runtime::comm

#endif // PARTITION_RUNTIME_COMM_PEERWATCH_H
