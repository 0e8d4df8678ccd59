//===- ReplicaGradients.h - exact gradient sums across NTP replicas -*- C++ -*-===//
//
// Nonuniform tensor parallelism (docs/nonuniform-tp.md): replicas of
// different tp degrees hold different blocks of each parameter, so the
// data-parallel all-reduce of a uniform mesh does not apply. For every
// parameter the blocks of all replicas' ranks are cut into their common
// refinement (the coarsest boxes inside one block of every rank); each box
// is summed over the group of world ranks that hold it, one rank of each
// replica contributing its gradient (weighted by its share of the batch)
// and the others zeros, so that every holder receives the exact weighted
// sum. Everything one group sums in a step is one all-reduce; the groups
// are split from the world once, at start-up, by every rank in one order.
// Megatron-LM's nonuniform_tp.py pairs a tp group [0, 1] with [2, 3, 4, 5]
// the same way: rank 0 holds the blocks of ranks 2 and 3.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_REPLICAGRADIENTS_H
#define PARTITION_RUNTIME_REPLICAGRADIENTS_H

#include "runtime/program/Program.h"
#include "runtime/comm/Communicator.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace partition::runtime {

class Backend;

/// One box of the common refinement of a parameter's blocks.
struct ReplicaBox {
  std::string param;
  /// [lo, hi) per dimension, in the coordinates of the unpadded tensor.
  std::vector<int64_t> lo, hi;
  /// World ranks that hold the box, increasing.
  std::vector<int> holders;
  /// Per replica, the holder that contributes its gradient.
  std::vector<int> contributors;
  int64_t elements() const;
};

/// The common refinement of every parameter's blocks over the replicas of
/// `program` (which has replicas), parameters in replica 0's order. Throws
/// ProgramError when the replicas do not hold the same parameters.
std::vector<ReplicaBox> replicaBoxes(const Program &program);

/// The start-up and per-step halves of the exact gradient sum, on one
/// rank. `program` is the whole (loaded) program, `replica` the program
/// this rank runs (its replica's, with its train_step's optimizer part
/// split off), `world` every rank of the job.
class ReplicaGradientSum {
public:
  /// Collective over `world`: splits one communicator per group.
  ReplicaGradientSum(const Program &program, const Program &replica,
                     comm::Communicator &world);
  ~ReplicaGradientSum();

  /// Replaces this rank's gradients (read from and written to `backend`)
  /// by their weighted sums over the replicas.
  void sum(Backend &backend, int64_t step);

  /// Whether every holder of each box holds the same parameter and AdamW
  /// moments there (a hash compared over each group; one all-reduce per
  /// group). False on the ranks of a group that disagrees.
  bool sameState(Backend &backend, int64_t step);

  /// Groups this rank is in, and all groups of the job.
  size_t groupsOfRank() const { return mine.size(); }
  size_t groups() const { return allGroups; }

private:
  struct Piece {
    /// This rank's gradient buffer of the parameter and the box's offset
    /// in it (per dimension), the box's shape, and its place in the
    /// group's buffer; the parameter's and its moments' buffers (AdamW's
    /// first, third and fourth inputs), laid out as the gradient.
    size_t gradient;
    std::vector<size_t> state;
    std::vector<int64_t> at, shape;
    size_t offset;
    bool contributes;
  };
  struct Group {
    std::vector<int> ranks;
    std::unique_ptr<comm::Communicator> communicator;
    std::vector<Piece> pieces;
    size_t elements = 0;
    std::string label;
  };
  const Program &replica;
  std::vector<Group> mine;
  size_t allGroups = 0;
  /// This replica's rows of the batch, and the batch.
  float rows = 1, batch = 1;
  /// Buffer indices (into replica.buffers) of the gradients the optimizer
  /// reads, by parameter name, and of the parameter and its moments.
  std::map<std::string, size_t> gradients;
  std::map<std::string, std::vector<size_t>> states;
};

/// `program` with its train_step cut before the first optimizer kernel:
/// "train_step" computes the gradients, "train_step_update" applies them
/// (the runtime sums the gradients across replicas in between). Throws
/// ProgramError when the step has no AdamW.
Program splitAtOptimizer(Program program);

} // namespace partition::runtime

#endif // PARTITION_RUNTIME_REPLICAGRADIENTS_H
