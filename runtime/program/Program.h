//===- Program.h - a loaded and validated .ptp program ----------*- C++ -*-===//
//
// Everything in a program file is checked before anything runs: the
// FlatBuffer itself, the schema version, every buffer against the arena,
// every instruction against the kernel table, the device mesh and every
// collective and transfer against the mesh, each pipeline stage's stream
// alike. The backends then check each kernel
// instruction's shapes when they compile it, so no file can make the
// runtime read or write outside the arena.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_PROGRAM_H
#define PARTITION_RUNTIME_PROGRAM_H

#include "runtime/program/KernelTable.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace partition::runtime {

/// A program that cannot be loaded or run; the message is one line.
class ProgramError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// Mirrors ptp::DType. BF16 (bfloat16, the upper half of an fp32) holds the
/// activations of mixed-precision programs; state is always F32.
enum class DType : uint8_t { F32, I32, BF16 };

/// Bytes per element: 4, 4, 2.
inline uint64_t dtypeBytes(DType dtype) { return dtype == DType::BF16 ? 2 : 4; }
/// "f32", "i32", "bf16".
const char *dtypeName(DType dtype);
/// F32 or BF16.
inline bool isFloat(DType dtype) { return dtype != DType::I32; }

/// Mirrors ptp::Role (runtime/program/Program.fbs).
enum class Role : uint8_t {
  Temporary,
  Param,
  Moment1,
  Moment2,
  Step,
  LearningRate,
  Tokens,
  Targets,
  Loss,
  Gradient,
  /// i32 scalar: this rank's index in the group of the axes `name` lists.
  AxisIndex,
  /// f32 [batch, seq, vocab]: logits_step's output, in blocks like state;
  /// one per micro-batch ("mb0", "mb1", ...), on the last pipeline stage.
  Logits,
};

const char *roleName(Role role);

/// Mirrors ptp::Tier: where a buffer lives (the offload, docs/offload.md).
enum class Tier : uint8_t { Arena, Host, Nvme };

/// "arena", "host", "nvme".
const char *tierName(Tier tier);

/// A tier's buffers, and the arena buffers its copies stage them in, start
/// at whole blocks of this many bytes (O_DIRECT's unit).
inline constexpr uint64_t kTierBlock = 4096;

struct BufferInfo {
  Role role = Role::Temporary;
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t offset = 0;
  int64_t elements = 0;
  uint64_t bytes = 0;
  /// Sharded state (params, moments): per dimension, the mesh axes (indices
  /// into Program::mesh, major first) that dimension of the logical tensor
  /// is split over; the buffer holds this device's block. Empty: replicated.
  std::vector<std::vector<uint32_t>> sharding;
  /// Set by the loader for sharded buffers: `shape` (flatShape for a flat
  /// shard) with each dimension times the sizes of its axes.
  std::vector<int64_t> logical;
  /// ZeRO's flat shards: the mesh axes (major first) whose group holds the
  /// chunks of the flattened, zero-padded tensor of shape flatShape (the
  /// block `sharding` describes); the device of index i in that group holds
  /// chunk i, `shape` is [chunk]. Empty: not a flat shard.
  std::vector<uint32_t> flatAxes;
  std::vector<int64_t> flatShape;

  /// Arena: `offset` counts from the start of the arena. Host or Nvme:
  /// from the start of that tier's space (Program::hostBytes / nvmeBytes),
  /// at a whole kTierBlock; only TierCopy instructions name the buffer,
  /// and the backend's read / write reach it in its tier.
  Tier tier = Tier::Arena;

  /// Set by the loader for the state of a padded vocabulary (the model
  /// description's padded_params, --dist-pad-vocab): logicalShape() with
  /// its padded_vocab rows cut to the model's vocab. The padding rows are
  /// the last ones, zero, and never initialised, saved or restored.
  std::vector<int64_t> unpadded;

  bool sharded() const { return !sharding.empty() || flat(); }
  bool flat() const { return !flatAxes.empty(); }
  /// The tensor `sharding` splits: flatShape for a flat shard, else shape.
  const std::vector<int64_t> &blockShape() const {
    return flat() ? flatShape : shape;
  }
  /// The axes whose group holds all the pieces of the logical tensor
  /// between them (those of `sharding` and flatAxes), increasing.
  std::vector<uint32_t> stateGroup() const;
  /// The whole tensor's shape, as the program computes on it.
  const std::vector<int64_t> &logicalShape() const {
    return sharded() ? logical : shape;
  }
  /// The tensor initialisation and checkpoints see: logicalShape() without
  /// the padding rows of a padded vocabulary.
  const std::vector<int64_t> &tensorShape() const {
    return unpadded.empty() ? logicalShape() : unpadded;
  }
};

/// Mirrors ptp::CollectiveKind and ptp::ReduceKind.
enum class CollectiveKind : uint8_t {
  AllReduce,
  AllGather,
  ReduceScatter,
  RingShift,
  AllToAll
};
enum class ReduceKind : uint8_t { Sum, Avg, Max };

const char *reduceKindName(ReduceKind reduce);
/// "all_reduce", "all_gather", "reduce_scatter", "ring_shift",
/// "all_to_all".
const char *collectiveKindName(CollectiveKind kind);

/// A tensor of `shape` seen as [outer, shape[dim], inner]: the products of
/// the dimensions before and after `dim` (how the backends cut a buffer
/// into blocks along one dimension).
std::pair<int64_t, int64_t> outerAndInner(const std::vector<int64_t> &shape,
                                          uint32_t dim);

/// A collective over the ranks that share every mesh coordinate except
/// those on `axes`.
struct Collective {
  CollectiveKind kind = CollectiveKind::AllReduce;
  ReduceKind reduce = ReduceKind::Sum;
  /// Indices into Program::mesh: non-empty, strictly increasing.
  std::vector<uint32_t> axes;
  /// Names it in error messages; never empty (the loader fills in
  /// "<function> instruction #i" when the file has none).
  std::string label;
  /// AllGather / ReduceScatter: the dimension blocks are taken along;
  /// AllToAll: the dimension the input is cut along.
  uint32_t dim = 0;
  /// AllToAll: the dimension the received blocks are concatenated along.
  uint32_t concatDim = 0;
  /// AllToAll: 0, or the dimension of rows of which only the filled ones
  /// move (args[2] and args[3] count them per cell of the input and the
  /// output: ptp::Collective.rows_dim).
  uint32_t rowsDim = 0;
  /// Started: runs in the background until the Wait instruction that names
  /// it (ptp::Collective.started); no instruction in between touches its
  /// buffers (checked at load).
  bool started = false;
};

/// A send or receive between pipeline stages (ptp::Transfer): the peer is
/// the rank whose coordinate on mesh axis `axis` is `peer` and whose other
/// coordinates are this rank's.
struct Transfer {
  bool send = true;
  /// Index into Program::mesh: the axis whose role is Pipeline.
  uint32_t axis = 0;
  /// The peer's stage (its coordinate on `axis`), never this rank's own.
  int64_t peer = 0;
  /// Names it in traces and error messages; never empty (the loader fills
  /// in "<function> instruction #i" when the file has none).
  std::string label;
};

/// "send" or "recv".
inline const char *transferKindName(const Transfer &transfer) {
  return transfer.send ? "send" : "recv";
}

/// A copy between a tier and the arena (ptp::TierCopy): args are [tier
/// buffer, arena buffer] for a read, [arena buffer, tier buffer] for a
/// write, of one type and size.
struct TierCopy {
  bool write = false;
  /// Names it in traces and error messages ("moment1 wte [0, 4096)"); never
  /// empty (the loader fills in "<function> instruction #i").
  std::string label;
  /// Runs in the background until the Wait that names it; no instruction
  /// in between touches its buffers (checked at load).
  bool started = false;
  /// The indices into args of the tier's buffer and the arena's.
  size_t tierArg() const { return write ? 1 : 0; }
  size_t arenaArg() const { return write ? 0 : 1; }
};

/// "tier_read" or "tier_write".
inline const char *tierCopyKindName(const TierCopy &copy) {
  return copy.write ? "tier_write" : "tier_read";
}

struct Instruction {
  /// Meaningless when `collective` or `transfer` is set.
  KernelId kernel = KernelId::NumKernels;
  /// Kernel: inputs, then outputs. AllReduce: the F32 buffers it reduces in
  /// place as one bucket (distinct, not overlapping in the arena).
  /// AllGather / ReduceScatter: input, output (f32, not overlapping; the
  /// output is the input with `dim` multiplied / divided by the group size).
  std::vector<uint32_t> args;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::optional<Collective> collective;
  /// Set for a send or receive: args holds its one buffer.
  std::optional<Transfer> transfer;
  /// Set for the wait of a started collective or tier copy: the index of
  /// its instruction in the function (earlier; args is empty).
  std::optional<uint32_t> waitFor;
  /// Set for a copy between a tier and the arena: args holds its two
  /// buffers.
  std::optional<TierCopy> tierCopy;
  /// A kernel call: neither a collective, a transfer, a wait nor a tier
  /// copy.
  bool isKernel() const {
    return !collective && !transfer && !waitFor && !tierCopy;
  }
  /// Started here, completed by a later Wait: a collective or tier copy.
  bool started() const {
    return (collective && collective->started) ||
           (tierCopy && tierCopy->started);
  }
};

/// What a mesh axis splits (the plan's role for it).
/// Expert: the part of the data-parallel ranks MoE experts are split over
/// (expert parallelism); the batch is split over it as over Data.
enum class AxisRole : uint8_t {
  None = 0,
  Data,
  Tensor,
  Pipeline,
  Context,
  Expert
};

/// One named axis of the device mesh.
struct MeshAxis {
  std::string name;
  int64_t size = 1;
  AxisRole role = AxisRole::None;
};

/// An entry point of the program: "train_step" or "eval_step".
/// ptp::MicrobatchLoop: instructions [begin, end) run `count` times, each
/// run after the first reading the next micro-batch's rows into `slices`.
struct MicrobatchLoop {
  size_t begin = 0, end = 0;
  int64_t count = 1;
  std::vector<uint32_t> slices;
  /// Micro-batches one run advances: run i reads the rows i x stride
  /// micro-batches past the slices'.
  int64_t stride = 1;
  /// Without a pipeline, the micro-batch the first run computes (1: the
  /// instructions before the loop hold micro-batch 0).
  int64_t first = 1;
};

/// ptp::ActionRegion: the code of one kind of action, instructions
/// [begin, end); before each action that runs it, the rows of the action's
/// micro-batch of step input `rowsSources[i]` are copied into `rows[i]`.
struct ActionRegion {
  size_t begin = 0, end = 0;
  std::string name;
  std::vector<uint32_t> rows, rowsSources;
};

/// ptp::ActionSlot: in an action run in this slot, `copies[i]` stands for
/// `templates[i]`. As read from the file, a slot may stand for 1 + `repeat`
/// slots, its copies `strides[i]` bytes apart; the loader expands it
/// (expandRepeatedSlots), so that a loaded walk's slots never repeat.
struct ActionSlot {
  std::vector<uint32_t> templates, copies;
  uint32_t repeat = 0;
  std::vector<uint64_t> strides;
};

/// ptp::WalkAction.
struct WalkAction {
  uint32_t region = 0, slot = 0, microbatch = 0;
};

/// ptp::ActionWalk: a pipeline stage's schedule as data. The instructions
/// before the first region run once, then each action's region with its
/// slot's buffers, then the instructions from the last region's end to
/// `written`.
struct ActionWalk {
  std::vector<ActionRegion> regions;
  std::vector<ActionSlot> slots;
  std::vector<WalkAction> actions;
  /// The function's instructions in the file. The loader appends after
  /// them, for each region and slot > 0 that an action uses, the region's
  /// instructions with the slot's buffers (and their waits' indices moved
  /// along): the backends compile every instruction once and run ranges.
  size_t written = 0;
  /// Where region r's instructions for slot s lie: ranges[r][s] (empty for
  /// a pair no action runs).
  std::vector<std::vector<std::pair<size_t, size_t>>> ranges;
  /// How many actions run ranges[r][s].
  std::vector<std::vector<int64_t>> runs;
};

struct Function {
  std::string name;
  std::vector<Instruction> instructions;
  /// The micro-batch loop, when the step keeps one copy of its middle
  /// micro-batches' code.
  std::optional<MicrobatchLoop> loop;
  /// The action walk, when a pipeline stage's step keeps one copy of each
  /// kind of action (never with a loop).
  std::optional<ActionWalk> walk;
  /// The instructions the file holds (after the loader's expansion, the
  /// rest are a walk's slot copies).
  size_t writtenSize() const {
    return walk && !walk->ranges.empty() ? walk->written : instructions.size();
  }
};

/// What one rank role (a pipeline stage) runs: ptp::Stream.
struct Stream {
  uint64_t arenaBytes = 0;
  std::vector<BufferInfo> buffers;
  std::vector<Function> functions;
  /// The bytes of its host and NVMe tiers (multiples of kTierBlock; 0:
  /// none).
  uint64_t hostBytes = 0, nvmeBytes = 0;
};

class Program;

/// NTP (ptp::Replica): a data-parallel replica with its own tensor-parallel
/// degree, running its own uniform program on `tp` ranks.
struct ReplicaProgram {
  int64_t tp = 1;
  /// Its rows of each global batch: [batchOffset, batchOffset + batchRows).
  int64_t batchOffset = 0, batchRows = 0;
  /// The replica's program (mesh [dp = 1, pp = 1, tp]), validated.
  std::shared_ptr<const Program> program;
};

class Program {
public:
  /// Reads and validates `path`; throws ProgramError.
  static Program load(const std::string &path);
  /// Validates a program held in memory; `origin` names it in errors.
  static Program parse(const uint8_t *data, size_t size,
                       const std::string &origin);

  /// The selected stream (selectStream; stream 0 after loading): what this
  /// rank runs. Every stream was validated at load.
  uint64_t arenaBytes = 0;
  std::vector<BufferInfo> buffers;
  std::vector<Function> functions;
  /// The selected stream's tiers (Stream::hostBytes, nvmeBytes).
  uint64_t hostBytes = 0, nvmeBytes = 0;
  /// The directory of the NVMe tier's files (ptp::Program.offload_path;
  /// partition-run --offload-path replaces it); set when a stream has an
  /// NVMe tier.
  std::string offloadPath;
  /// Every stream of the program, one per pipeline stage (one without a
  /// pipeline axis), and the index of the selected one.
  std::vector<Stream> streams;
  size_t stream = 0;
  /// The model configuration (arch, layers, hidden, vocab, seq_len, batch...).
  nlohmann::json model;
  /// The step's hyper-parameters (microbatches, beta1, ...).
  nlohmann::json train;
  /// The device mesh, first axis major in rank numbering; empty: one device.
  std::vector<MeshAxis> mesh;
  /// ptp::Program.sequence_chunks: the zigzag layout order the program
  /// takes each sequence in (runtime/data/SequenceLayout.h); 1: natural.
  int64_t sequenceChunks = 1;
  /// NTP: the replicas in rank order (replica 0 on the first ranks); then
  /// `streams` is empty, `mesh` is [dp = replicas, tp = the largest degree]
  /// and each rank runs its replica's program. Empty: uniform.
  std::vector<ReplicaProgram> replicas;
  /// The replica rank `rank` belongs to and its rank inside it.
  std::pair<size_t, int> replicaOf(int rank) const;

  /// Ranks the program runs on: the product of the mesh's sizes.
  int64_t devices() const;
  /// "dp=2 pp=1 tp=1", or "no mesh".
  std::string describeMesh() const;
  /// Index into `mesh` of the axis called `name`, or -1.
  int axisIndex(const std::string &name) const;
  /// The index of the mesh axis with the data role (the batch's rows, the
  /// replicas compared at start-up), or -1.
  int dataAxisIndex() const;
  /// The axes the batch is split over: the data axis and, with expert
  /// parallelism, the expert axis (in mesh order); the data-parallel ranks
  /// are their group.
  std::vector<uint32_t> dataAxisIndices() const;
  /// The index of the mesh axis with the pipeline role (a rank's stage is
  /// its coordinate on it), or -1.
  int pipelineAxisIndex() const;
  /// Makes stream `index` the one arenaBytes, buffers and functions show.
  void selectStream(size_t index);
  /// True when any function of any stream has a collective or a transfer
  /// (the run needs communicators).
  bool hasCollectives() const;
  /// True when any stream (or replica) keeps buffers in a tier outside its
  /// arena (the offload).
  bool hasTiers() const;
  /// The buffers of `role` in every stream: (stream, buffer index), streams
  /// in order.
  std::vector<std::pair<size_t, size_t>> withRoleInStreams(Role role) const;
  /// The mesh axes an AxisIndex buffer's name lists ("dp,tp" -> {0, 2}), in
  /// the listed order; throws when one is not an axis of the mesh.
  std::vector<uint32_t> axisIndexAxes(const BufferInfo &buffer) const;

  /// The one buffer with `role`; throws when there is none or several.
  const BufferInfo &single(Role role) const;
  /// Indices of the buffers with `role`, in program order.
  std::vector<size_t> withRole(Role role) const;
  /// The function called `name`, or null.
  const Function *function(const std::string &name) const;
  /// An integer field of the model configuration; throws when absent.
  int64_t modelInt(const char *field) const;
};

} // namespace partition::runtime

#endif // PARTITION_RUNTIME_PROGRAM_H
