//===- ProgramChecks.h - cross-checks of a decoded program ------*- C++ -*-===//
//
// Private to the loader (Program.cpp decodes, ProgramChecks.cpp checks):
// each check throws ProgramError naming `origin` and what is wrong.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_PROGRAM_PROGRAMCHECKS_H
#define PARTITION_RUNTIME_PROGRAM_PROGRAMCHECKS_H

#include "runtime/program/Program.h"

#include <cstddef>
#include <string>
#include <vector>

namespace partition::runtime::check {

/// Throws ProgramError("origin: what").
[[noreturn]] void fail(const std::string &origin, const std::string &what);

/// "[2,3]".
std::string shapeText(const std::vector<int64_t> &shape);

/// An AllGather or ReduceScatter's buffers against its kind and group.
void checkBlockCollective(const Collective &collective,
                          const Instruction &decoded, const Program &program,
                          const std::string &origin, const std::string &what);

/// An AllReduce's bucket: one float type, each buffer reduced once.
void checkAllReduceBucket(const Instruction &decoded, const Program &program,
                          const std::string &origin, const std::string &what);

/// A send or receive of stream `stage` against the pipeline axis.
void checkTransfer(const Transfer &transfer, const Instruction &decoded,
                   const Program &program, const std::string &origin,
                   const std::string &what, size_t stage);

/// Every buffer an instruction other than a tier copy names lives in the
/// arena (kernels, collectives and transfers address only the arena).
void checkInArena(const Instruction &decoded, const Program &program,
                  const std::string &origin, const std::string &where);

/// A copy between a tier and the arena: its tier's buffer and the arena's,
/// one type and size, whole blocks on both sides for the NVMe tier.
void checkTierCopy(const TierCopy &copy, const Instruction &decoded,
                   const Program &program, const std::string &origin,
                   const std::string &what);

/// Started collectives and tier copies and their waits in one decoded
/// function: each wait names an earlier started one, each is waited for
/// exactly once, and no instruction in between touches (reads or writes
/// bytes overlapping, in the same tier) its buffers.
/// The micro-batch loop: its range within the instructions, a count of at
/// least 1, slices that lie in the tokens or targets with room for every
/// run's rows after them, and every collective or tier copy started in the
/// loop waited for in it (and none started before it waited for in it).
void checkMicrobatchLoop(const Function &function, const Program &program,
                         const std::string &origin);

void checkStartedCollectives(const Function &function, const Program &program,
                             const std::string &origin);

/// The AxisIndex buffers of the current stream against the mesh.
void checkAxisIndexBuffers(const Program &program, const std::string &origin);

/// The sharded buffers of the current stream against the mesh; fills in
/// their logical shapes.
void checkShardedBuffers(Program &program, const std::string &origin);

/// The roles the trainer relies on, per stream and across stages.
void checkStreamRoles(const Program &program, const std::string &origin);

/// Every send has its receive, with the same bytes in the same order (the
/// order a run executes them).
void checkTransfersMatch(const Program &program, const std::string &origin);

} // namespace partition::runtime::check

#endif // PARTITION_RUNTIME_PROGRAM_PROGRAMCHECKS_H
