//===- Program.cpp - decoding .ptp programs -------------------------------===//
//
// Reads a .ptp file into a Program: the mesh, the model description, one
// stream per pipeline stage (buffers, functions, instructions) or the
// replicas of a non-uniform tensor-parallel program. Each field is checked
// as it is decoded; the checks that relate several fields or streams are in
// ProgramChecks.cpp, what a loaded Program answers in ProgramQueries.cpp.
//
//===----------------------------------------------------------------------===//

#include "runtime/program/Program.h"

#include "runtime/program/ActionWalk.h"
#include "runtime/program/ProgramChecks.h"
#include "runtime/program/ProgramFormat.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <set>
#include <tuple>

namespace partition::runtime {

using check::fail;

namespace {

using namespace check;

/// Program files are never this large; a corrupt size must not become an
/// allocation attempt of exabytes.
constexpr uint64_t kMaxArenaBytes = uint64_t(1) << 40;
/// The arena may exceed the end of its last buffer by alignment padding,
/// up to one page.
constexpr uint64_t kArenaSlack = 4096;
/// A tier (the offload's host memory or NVMe file) holds at most what a
/// machine addresses.
constexpr uint64_t kMaxTierBytes = uint64_t(1) << 48;
/// A corrupt mesh must not ask for more ranks than any launcher could give
/// (and its product must not overflow).
constexpr int64_t kMaxDevices = int64_t(1) << 20;

/// The elements of a [long] vector. The verifier checks the alignment of
/// scalar fields and of a vector's 4-byte length, not of its 8-byte
/// elements: in a corrupt file they can be misaligned, and reading them
/// through Vector<int64_t> would be a misaligned load (undefined behaviour;
/// found by fuzz/ProgramLoaderFuzzer.cpp under UBSan). Copy the bytes.
std::vector<int64_t> readLongs(const flatbuffers::Vector<int64_t> *vector) {
  static_assert(FLATBUFFERS_LITTLEENDIAN, "the .ptp format is little-endian");
  std::vector<int64_t> values(vector ? vector->size() : 0);
  if (!values.empty())
    std::memcpy(values.data(), vector->Data(), values.size() * sizeof(int64_t));
  return values;
}

std::vector<uint32_t> readUints(const flatbuffers::Vector<uint32_t> *vector) {
  return vector ? std::vector<uint32_t>(vector->begin(), vector->end())
                : std::vector<uint32_t>();
}

/// ptp::ActionWalk, field by field (checkActionWalk checks it whole).
ActionWalk decodeActionWalk(const ptp::ActionWalk &file) {
  ActionWalk walk;
  if (file.regions())
    for (const ptp::ActionRegion *region : *file.regions()) {
      ActionRegion &decoded = walk.regions.emplace_back();
      decoded.begin = region->begin();
      decoded.end = region->end();
      decoded.name = region->name() ? region->name()->str() : "";
      decoded.rows = readUints(region->rows());
      decoded.rowsSources = readUints(region->rows_sources());
    }
  if (file.slots())
    for (const ptp::ActionSlot *slot : *file.slots()) {
      ActionSlot &decoded = walk.slots.emplace_back();
      decoded.templates = readUints(slot->templates());
      decoded.copies = readUints(slot->copies());
      decoded.repeat = slot->repeat();
      if (slot->strides())
        decoded.strides.assign(slot->strides()->begin(),
                               slot->strides()->end());
    }
  if (file.actions())
    for (const ptp::WalkAction *action : *file.actions())
      walk.actions.push_back(
          {action->region(), action->slot(), action->microbatch()});
  return walk;
}

std::vector<MeshAxis> readMesh(const ptp::Program &file,
                               const std::string &origin) {
  std::vector<MeshAxis> mesh;
  if (!file.mesh())
    return mesh;
  int64_t devices = 1;
  for (const ptp::MeshAxis *axis : *file.mesh()) {
    MeshAxis decoded{axis->name() ? axis->name()->str() : "", axis->size(),
                     static_cast<AxisRole>(axis->role())};
    if (axis->role() > ptp::AxisRole::MAX)
      fail(origin, "mesh axis #" + std::to_string(mesh.size()) +
                       " has an unknown role " +
                       std::to_string(int(axis->role())) +
                       "; the file is corrupt");
    std::string where = "mesh axis #" + std::to_string(mesh.size());
    if (decoded.name.empty())
      fail(origin, where + " has no name");
    for (const MeshAxis &other : mesh)
      if (other.name == decoded.name)
        fail(origin, "mesh axis '" + decoded.name + "' appears twice");
    if (decoded.size < 1)
      fail(origin, "mesh axis '" + decoded.name + "' has size " +
                       std::to_string(decoded.size) +
                       "; sizes must be positive");
    if (decoded.size > kMaxDevices / devices)
      fail(origin, "the mesh has more than " + std::to_string(kMaxDevices) +
                       " devices; the file is corrupt");
    devices *= decoded.size;
    mesh.push_back(std::move(decoded));
  }
  return mesh;
}

/// Decodes and checks a collective instruction's own fields and its buffers.
Collective readCollective(const ptp::Collective &collective,
                          const Instruction &decoded, const Program &program,
                          const std::string &origin, const std::string &where) {
  Collective result;
  auto kind = static_cast<uint8_t>(collective.kind());
  if (kind > static_cast<uint8_t>(CollectiveKind::AllToAll))
    fail(origin, where + " has an unknown collective kind " +
                     std::to_string(kind));
  result.kind = static_cast<CollectiveKind>(kind);
  auto reduce = static_cast<uint8_t>(collective.reduce());
  if (reduce > static_cast<uint8_t>(ReduceKind::Max))
    fail(origin, where + " has an unknown reduction " + std::to_string(reduce));
  result.reduce = static_cast<ReduceKind>(reduce);
  result.label = collective.label() && collective.label()->size()
                     ? collective.label()->str()
                     : where;
  result.dim = collective.dim();
  result.concatDim = collective.concat_dim();
  result.rowsDim = collective.rows_dim();
  result.started = collective.started();
  std::string what = where + " (" + collectiveKindName(result.kind) + " '" +
                     result.label + "')";
  if (program.mesh.empty())
    fail(origin, what + " needs a device mesh, but the program has none");
  if (collective.axes())
    result.axes.assign(collective.axes()->begin(), collective.axes()->end());
  if (result.axes.empty())
    fail(origin, what + " names no mesh axis");
  for (size_t i = 0; i < result.axes.size(); ++i) {
    if (result.axes[i] >= program.mesh.size())
      fail(origin, what + " names mesh axis #" +
                       std::to_string(result.axes[i]) + " of " +
                       std::to_string(program.mesh.size()));
    if (i > 0 && result.axes[i] <= result.axes[i - 1])
      fail(origin, what + " has mesh axes out of order or repeated; they "
                          "must be strictly increasing");
  }
  if (!decoded.ints.empty() || !decoded.floats.empty())
    fail(origin, what + " has integer or float parameters; collectives take "
                        "none");
  if (result.kind == CollectiveKind::AllReduce)
    checkAllReduceBucket(decoded, program, origin, what);
  else
    checkBlockCollective(result, decoded, program, origin, what);
  return result;
}

/// Decodes a send or receive of stream `stage` and checks it (checkTransfer).
Transfer readTransfer(const ptp::Transfer &transfer, const Instruction &decoded,
                      const Program &program, const std::string &origin,
                      const std::string &where, size_t stage) {
  Transfer result;
  auto kind = static_cast<uint8_t>(transfer.kind());
  if (kind > static_cast<uint8_t>(ptp::TransferKind::MAX))
    fail(origin, where + " has an unknown transfer kind " +
                     std::to_string(kind));
  result.send = transfer.kind() == ptp::TransferKind::Send;
  result.axis = transfer.axis();
  result.peer = transfer.peer();
  result.label = transfer.label() && transfer.label()->size()
                     ? transfer.label()->str()
                     : where;
  std::string what = where + " (" + transferKindName(result) + " '" +
                     result.label + "')";
  checkTransfer(result, decoded, program, origin, what, stage);
  return result;
}

/// Decodes a copy between a tier and the arena and checks it
/// (checkTierCopy).
TierCopy readTierCopy(const ptp::TierCopy &copy, const Instruction &decoded,
                      const Program &program, const std::string &origin,
                      const std::string &where) {
  TierCopy result;
  auto kind = static_cast<uint8_t>(copy.kind());
  if (kind > static_cast<uint8_t>(ptp::TierCopyKind::MAX))
    fail(origin, where + " has an unknown tier copy kind " +
                     std::to_string(kind));
  result.write = copy.kind() == ptp::TierCopyKind::Write;
  result.started = copy.started();
  result.label = copy.label() && copy.label()->size() ? copy.label()->str()
                                                      : where;
  checkTierCopy(result, decoded, program, origin,
                where + " (" + tierCopyKindName(result) + " '" +
                    result.label + "')");
  return result;
}

/// Decodes buffer #`index` of the stream `program` is reading (its arena
/// and tiers known): its role, type, shape, place in the arena or its tier
/// and sharding.
BufferInfo readBuffer(const ptp::Buffer *buffer, size_t index,
                      const Program &program, const std::string &origin) {
  BufferInfo info;
  std::string where = "buffer #" + std::to_string(index);
  auto role = static_cast<uint8_t>(buffer->role());
  if (role > static_cast<uint8_t>(Role::Logits))
    fail(origin, where + " has an unknown role " + std::to_string(role));
  info.role = static_cast<Role>(role);
  if (buffer->name())
    info.name = buffer->name()->str();
  auto dtype = static_cast<uint8_t>(buffer->dtype());
  if (dtype > static_cast<uint8_t>(DType::BF16))
    fail(origin, where + " has an unknown dtype " + std::to_string(dtype));
  info.dtype = static_cast<DType>(dtype);
  int64_t elements = 1;
  for (int64_t dim : readLongs(buffer->shape())) {
    if (dim < 0 ||
        (dim > 0 && elements > std::numeric_limits<int64_t>::max() / 4 / dim))
      fail(origin, where + " has an invalid shape");
    info.shape.push_back(dim);
    elements *= dim;
  }
  info.elements = elements;
  info.bytes = static_cast<uint64_t>(elements) * dtypeBytes(info.dtype);
  info.offset = buffer->offset();
  auto tier = static_cast<uint8_t>(buffer->tier());
  if (tier > static_cast<uint8_t>(Tier::Nvme))
    fail(origin, where + " has an unknown tier " + std::to_string(tier));
  info.tier = static_cast<Tier>(tier);
  uint64_t space = info.tier == Tier::Arena  ? program.arenaBytes
                   : info.tier == Tier::Host ? program.hostBytes
                                             : program.nvmeBytes;
  std::string place = info.tier == Tier::Arena
                          ? std::string("the arena")
                          : std::string("the ") + tierName(info.tier) + " tier";
  if (info.offset % dtypeBytes(info.dtype) != 0 || info.offset > space ||
      info.bytes > space - info.offset)
    fail(origin, where + " [" + std::to_string(info.offset) + ", +" +
                     std::to_string(info.bytes) + ") lies outside " + place +
                     " of " + std::to_string(space) + " bytes");
  // A tier moves whole blocks (O_DIRECT), and holds only the offloaded
  // optimizer state and slices of it.
  if (info.tier != Tier::Arena) {
    if (info.offset % kTierBlock != 0)
      fail(origin, where + " starts at byte " + std::to_string(info.offset) +
                       " of " + place + ", not at a whole " +
                       std::to_string(kTierBlock) + "-byte block");
    bool shard = info.role == Role::Param && buffer->flat_axes() &&
                 buffer->flat_axes()->size() > 0;
    if (info.role != Role::Moment1 && info.role != Role::Moment2 &&
        info.role != Role::Temporary && !shard)
      fail(origin, where + " ('" + info.name + "') is a " +
                       (info.role == Role::Param ? std::string("parameter "
                                                               "but no ZeRO-3 "
                                                               "shard")
                                                 : roleName(info.role)) +
                       " in " + place +
                       "; only moments and ZeRO-3 parameter shards (and "
                       "slices of them) are offloaded");
  }
  if (buffer->sharding()) {
    for (const ptp::DimSharding *dim : *buffer->sharding()) {
      std::vector<uint32_t> axes;
      if (dim && dim->axes())
        axes.assign(dim->axes()->begin(), dim->axes()->end());
      info.sharding.push_back(std::move(axes));
    }
    // Every dimension whole is the same as no sharding.
    if (std::all_of(info.sharding.begin(), info.sharding.end(),
                    [](const auto &axes) { return axes.empty(); }))
      info.sharding.clear();
  }
  if (buffer->flat_axes() && buffer->flat_axes()->size() > 0) {
    info.flatAxes.assign(buffer->flat_axes()->begin(),
                         buffer->flat_axes()->end());
    info.flatShape = readLongs(buffer->flat_shape());
  }
  return info;
}

/// Decodes function `function` of stream `index` and checks each
/// instruction's fields (the kernel's arity, the buffers it names).
Function readFunction(const ptp::Function *function, Program &program,
                      const std::string &origin, size_t index) {
  Function decodedFunction;
  if (function->name())
    decodedFunction.name = function->name()->str();
  if (!function->instructions())
    fail(origin, "function '" + decodedFunction.name +
                     "' has no instruction list");
  for (const ptp::Instruction *instruction : *function->instructions()) {
    std::string where =
        decodedFunction.name + " instruction #" +
        std::to_string(decodedFunction.instructions.size());
    Instruction decoded;
    if (instruction->args())
      decoded.args.assign(instruction->args()->begin(),
                          instruction->args()->end());
    decoded.ints = readLongs(instruction->ints());
    if (instruction->floats())
      decoded.floats.assign(instruction->floats()->begin(),
                            instruction->floats()->end());
    if ((instruction->collective() != nullptr) +
            (instruction->transfer() != nullptr) +
            (instruction->wait() != nullptr) +
            (instruction->tier_copy() != nullptr) >
        1)
      fail(origin, where + " is more than one of a collective, a transfer, "
                           "a wait and a tier copy");
    if (const ptp::Wait *wait = instruction->wait()) {
      // Which collective it completes is checked with the whole function
      // (check::checkStartedCollectives).
      if (!decoded.args.empty() || !decoded.ints.empty() ||
          !decoded.floats.empty())
        fail(origin, where + " (wait) has buffers or parameters; a wait "
                             "takes none");
      decoded.waitFor = wait->collective();
      decodedFunction.instructions.push_back(std::move(decoded));
      continue;
    }
    if (const ptp::Collective *collective = instruction->collective()) {
      decoded.collective =
          readCollective(*collective, decoded, program, origin, where);
      decodedFunction.instructions.push_back(std::move(decoded));
      continue;
    }
    if (const ptp::TierCopy *copy = instruction->tier_copy()) {
      decoded.tierCopy = readTierCopy(*copy, decoded, program, origin, where);
      decodedFunction.instructions.push_back(std::move(decoded));
      continue;
    }
    // Kernels, collectives and transfers run on the arena alone.
    checkInArena(decoded, program, origin, where);
    if (const ptp::Transfer *transfer = instruction->transfer()) {
      decoded.transfer =
          readTransfer(*transfer, decoded, program, origin, where, index);
      decodedFunction.instructions.push_back(std::move(decoded));
      continue;
    }
    const KernelInfo *info = lookupKernel(instruction->kernel());
    if (!info)
      fail(origin, where + " names unknown kernel " +
                       std::to_string(instruction->kernel()));
    decoded.kernel = info->id;
    std::string kernel(info->name);
    if (decoded.args.size() != size_t(info->inputs + info->outputs))
      fail(origin, where + " (" + kernel + ") has " +
                       std::to_string(decoded.args.size()) +
                       " arguments, the kernel takes " +
                       std::to_string(info->inputs + info->outputs));
    if (decoded.ints.size() != size_t(info->ints) ||
        decoded.floats.size() != size_t(info->floats))
      fail(origin, where + " (" + kernel +
                       ") has the wrong number of parameters");
    for (uint32_t arg : decoded.args)
      if (arg >= program.buffers.size())
        fail(origin, where + " (" + kernel + ") refers to buffer #" +
                         std::to_string(arg) + " of " +
                         std::to_string(program.buffers.size()));
    decodedFunction.instructions.push_back(std::move(decoded));
  }
  if (const ptp::MicrobatchLoop *loop = function->loop()) {
    MicrobatchLoop decoded;
    decoded.begin = loop->begin();
    decoded.end = loop->end();
    decoded.count = loop->count();
    decoded.stride = loop->stride();
    decoded.first = loop->first();
    if (loop->slices())
      decoded.slices.assign(loop->slices()->begin(), loop->slices()->end());
    decodedFunction.loop = std::move(decoded);
  }
  if (const ptp::ActionWalk *walk = function->walk()) {
    decodedFunction.walk = decodeActionWalk(*walk);
    expandRepeatedSlots(decodedFunction, program, origin);
  }
  check::checkStartedCollectives(decodedFunction, program, origin);
  check::checkMicrobatchLoop(decodedFunction, program, origin);
  checkActionWalk(decodedFunction, program, origin);
  if (decodedFunction.walk)
    expandActionWalk(decodedFunction);
  return decodedFunction;
}

/// A padded vocabulary (--dist-pad-vocab): the state of the tables it
/// names is [padded_vocab, ...], of which the first `vocab` rows are real.
/// Adds the tables this stream holds to `paddedSeen`.
void readPaddedTables(Program &program, const std::string &origin,
                      std::set<std::string> &paddedSeen) {
  if (program.model.contains("padded_params")) {
    const nlohmann::json &padded = program.model["padded_params"];
    const nlohmann::json &rows = program.model["padded_vocab"];
    const nlohmann::json &vocab = program.model["vocab"];
    if (!padded.is_array() || !rows.is_number_integer() ||
        !vocab.is_number_integer() || vocab.get<int64_t>() < 1 ||
        rows.get<int64_t>() < vocab.get<int64_t>())
      fail(origin, "the model description's padded_params, padded_vocab "
                   "and vocab are not a list of names and two sizes with "
                   "1 <= vocab <= padded_vocab");
    std::set<std::string> tables;
    for (const nlohmann::json &name : padded)
      if (name.is_string())
        tables.insert(name.get<std::string>());
    std::set<std::string> seen;
    for (BufferInfo &buffer : program.buffers) {
      bool state = buffer.role == Role::Param ||
                   buffer.role == Role::Moment1 || buffer.role == Role::Moment2;
      if (!state || !tables.count(buffer.name))
        continue;
      const std::vector<int64_t> &logical = buffer.logicalShape();
      if (logical.empty() || logical[0] != rows.get<int64_t>())
        fail(origin, roleName(buffer.role) + std::string(" '") + buffer.name +
                         "' is a padded vocabulary table but does not have "
                         "padded_vocab = " +
                         std::to_string(rows.get<int64_t>()) + " rows");
      buffer.unpadded = logical;
      buffer.unpadded[0] = vocab.get<int64_t>();
      seen.insert(buffer.name);
    }
    for (const std::string &name : seen)
      paddedSeen.insert(name);
  }
}

/// Decodes and checks stream `index` of the program into program's
/// arenaBytes, buffers and functions (the mesh and the model description
/// are already read); adds the padded tables it holds to `paddedSeen`.
void readStream(Program &program, const ptp::Stream &stream,
                const std::string &origin, size_t index,
                std::set<std::string> &paddedSeen) {
  program.arenaBytes = stream.arena_bytes();
  if (program.arenaBytes == 0 || program.arenaBytes > kMaxArenaBytes)
    fail(origin, "arena size " + std::to_string(program.arenaBytes) +
                     " bytes is out of range");
  if (!stream.buffers() || !stream.functions())
    fail(origin, "program has no buffer or function table");
  // The tiers: whole blocks, and no larger than a machine addresses (a
  // corrupt size must not become an allocation or a file of exabytes).
  program.hostBytes = stream.host_bytes();
  program.nvmeBytes = stream.nvme_bytes();
  for (auto [tier, bytes] : {std::pair<Tier, uint64_t>{Tier::Host,
                                                       program.hostBytes},
                             {Tier::Nvme, program.nvmeBytes}})
    if (bytes % kTierBlock != 0 || bytes > kMaxTierBytes)
      fail(origin, std::string("the ") + tierName(tier) + " tier's " +
                       std::to_string(bytes) +
                       " bytes are not whole " + std::to_string(kTierBlock) +
                       "-byte blocks up to 2^48; the file is corrupt");

  for (const ptp::Buffer *buffer : *stream.buffers())
    program.buffers.push_back(
        readBuffer(buffer, program.buffers.size(), program, origin));
  checkAxisIndexBuffers(program, origin);
  checkShardedBuffers(program, origin);

  for (const ptp::Function *function : *stream.functions()) {
    Function decodedFunction = readFunction(function, program, origin, index);
    if (program.function(decodedFunction.name))
      fail(origin, "function '" + decodedFunction.name + "' appears twice");
    program.functions.push_back(std::move(decodedFunction));
  }
  // The memory planner makes the arena exactly as large as its buffers
  // (aligned; a walk's repeated slot's included, which the functions
  // added). Anything beyond a page of slack is a corrupt size, which must
  // not become a request to allocate and zero up to kMaxArenaBytes.
  uint64_t extent = 0;
  for (const BufferInfo &buffer : program.buffers)
    if (buffer.tier == Tier::Arena)
      extent = std::max(extent, buffer.offset + buffer.bytes);
  if (program.arenaBytes > (extent + kArenaSlack - 1) / kArenaSlack * kArenaSlack)
    fail(origin, "arena size " + std::to_string(program.arenaBytes) +
                     " bytes is larger than its buffers need (" +
                     std::to_string(extent) + " bytes)");
  if (!program.function("train_step"))
    fail(origin, "program has no train_step function");

  readPaddedTables(program, origin, paddedSeen);
}

} // namespace

namespace {

/// The model without what a plan decides (a padded vocabulary): the same
/// for every replica.
nlohmann::json withoutPadding(nlohmann::json model) {
  model.erase("padded_vocab");
  model.erase("padded_params");
  return model;
}

/// NTP: the replicas of `file`, each a whole program parsed (and checked)
/// as one, its rows following the previous replica's.
void readReplicas(Program &program, const ptp::Program &file,
                  const std::string &origin) {
  if (file.streams() && file.streams()->size() > 0)
    fail(origin, "program has both replicas and instruction streams; "
                 "recompile it");
  // The model's batch is one micro-batch; a step takes `microbatches`.
  int64_t batch = program.model.value("batch", int64_t(0)) *
                  program.train.value("microbatches", int64_t(1));
  int64_t next = 0, devices = 0;
  for (size_t i = 0; i < file.replicas()->size(); ++i) {
    const ptp::Replica *entry = file.replicas()->Get(i);
    std::string where = origin + " replica " + std::to_string(i);
    if (!entry || !entry->program() || entry->program()->size() == 0)
      fail(where, "has no program; recompile it");
    if (entry->tp() < 1 || entry->tp() > kMaxDevices)
      fail(where, "tp " + std::to_string(entry->tp()) +
                      " is out of range [1, " + std::to_string(kMaxDevices) +
                      "]");
    ReplicaProgram replica;
    replica.tp = entry->tp();
    replica.batchOffset = entry->batch_offset();
    replica.batchRows = entry->batch_rows();
    // A nested program is a whole program: every check of one applies.
    // Replicas inside a replica are refused before parsing it, so that no
    // file makes the loader recurse deeper than once.
    const uint8_t *bytes = entry->program()->data();
    size_t size = entry->program()->size();
    flatbuffers::Verifier verifier(bytes, size);
    if (size >= 8 && ptp::ProgramBufferHasIdentifier(bytes) &&
        ptp::VerifyProgramBuffer(verifier) &&
        ptp::GetProgram(bytes)->replicas() &&
        ptp::GetProgram(bytes)->replicas()->size() > 0)
      fail(where, "holds replicas itself; recompile it");
    auto nested = std::make_shared<Program>(Program::parse(bytes, size, where));
    if (nested->devices() != replica.tp ||
        (nested->pipelineAxisIndex() >= 0 &&
         nested->mesh[nested->pipelineAxisIndex()].size != 1) ||
        (nested->dataAxisIndex() >= 0 &&
         nested->mesh[nested->dataAxisIndex()].size != 1))
      fail(where, "runs on " + nested->describeMesh() +
                      ", not a tensor-parallel mesh of its tp " +
                      std::to_string(replica.tp) + "; recompile it");
    if (withoutPadding(nested->model) != withoutPadding(program.model))
      fail(where, "is compiled for another model than the program's; "
                  "recompile it");
    const BufferInfo *tokens = nullptr;
    for (const BufferInfo &buffer : nested->buffers)
      if (buffer.role == Role::Tokens)
        tokens = &buffer;
    int64_t rows = tokens ? tokens->logicalShape()[0] : -1;
    if (replica.batchOffset != next || replica.batchRows < 1 ||
        replica.batchRows != rows)
      fail(where, "rows [" + std::to_string(replica.batchOffset) + ", " +
                      std::to_string(replica.batchOffset + replica.batchRows) +
                      ") do not follow the previous replica's (row " +
                      std::to_string(next) + ") or its tokens' " +
                      std::to_string(rows) + " rows; recompile it");
    next += replica.batchRows;
    devices += replica.tp;
    replica.program = std::move(nested);
    program.replicas.push_back(std::move(replica));
  }
  if (next != batch)
    fail(origin, "the replicas' rows sum to " + std::to_string(next) +
                     ", not the step's batch of " + std::to_string(batch) +
                     "; recompile it");
  if (devices > kMaxDevices)
    fail(origin, "the replicas need more than " +
                     std::to_string(kMaxDevices) + " devices");
}

} // namespace

Program Program::load(const std::string &path) {
  std::ifstream file(path, std::ios::binary);
  if (!file)
    fail(path, "cannot open the program file (compile one with "
               "partition-compile)");
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(file)),
                             std::istreambuf_iterator<char>());
  return parse(bytes.data(), bytes.size(), path);
}

Program Program::parse(const uint8_t *data, size_t size,
                       const std::string &origin) {
  if (size < 8 || !ptp::ProgramBufferHasIdentifier(data))
    fail(origin, "not a partition program (no PTP1 identifier); compile one "
                 "with partition-compile");
  flatbuffers::Verifier verifier(data, size);
  if (!ptp::VerifyProgramBuffer(verifier))
    fail(origin, "corrupt or truncated program file (the FlatBuffer does not "
                 "verify); recompile it");
  const ptp::Program *file = ptp::GetProgram(data);
  if (file->schema_version() != ptp::kSchemaVersion)
    fail(origin, "program schema version " +
                     std::to_string(file->schema_version()) +
                     ", but this runtime reads version " +
                     std::to_string(ptp::kSchemaVersion) +
                     "; recompile it with this partition-compile");

  Program program;
  program.mesh = readMesh(*file, origin);
  if (int64_t chunks = file->sequence_chunks(); chunks > 1 || chunks < 0) {
    if (chunks < 0 || chunks % 2 != 0)
      fail(origin, "sequence_chunks = " + std::to_string(chunks) +
                       " is neither 0, 1 nor a positive even count; the file "
                       "is corrupt");
    program.sequenceChunks = chunks;
  }
  for (auto [json, text] :
       {std::pair<nlohmann::json *, const flatbuffers::String *>{
            &program.model, file->model_json()},
        {&program.train, file->train_json()}}) {
    *json = nlohmann::json::parse(text ? text->str() : std::string("{}"),
                                  nullptr, /*allow_exceptions=*/false);
    if (!json->is_object())
      fail(origin, "the program's model or training description is not a "
                   "JSON object");
  }

  if (file->replicas() && file->replicas()->size() > 0) {
    readReplicas(program, *file, origin);
    return program;
  }

  // One stream per pipeline stage.
  int pipeline = program.pipelineAxisIndex();
  int64_t stages = pipeline >= 0 ? program.mesh[pipeline].size : 1;
  if (!file->streams() || file->streams()->size() == 0)
    fail(origin, "program has no instruction stream");
  if (int64_t(file->streams()->size()) != stages)
    fail(origin, "program has " + std::to_string(file->streams()->size()) +
                     " instruction streams, but its " + program.describeMesh() +
                     (pipeline >= 0 ? " has " + std::to_string(stages) +
                                          " pipeline stages ('" +
                                          program.mesh[pipeline].name + "')"
                                    : std::string(" has no pipeline axis")) +
                     "; it needs one stream per stage: recompile it");
  std::set<std::string> paddedSeen;
  for (size_t k = 0; k < file->streams()->size(); ++k) {
    const ptp::Stream *stream = file->streams()->Get(k);
    std::string where =
        stages > 1 ? origin + " stage " + std::to_string(k) : origin;
    if (!stream)
      fail(where, "program has no buffer or function table");
    program.arenaBytes = 0;
    program.buffers.clear();
    program.functions.clear();
    readStream(program, *stream, where, k, paddedSeen);
    program.streams.push_back(Stream{
        program.arenaBytes, std::move(program.buffers),
        std::move(program.functions), program.hostBytes, program.nvmeBytes});
    if (program.nvmeBytes > 0 &&
        (!file->offload_path() || file->offload_path()->size() == 0))
      fail(where, "has an nvme tier but the program names no offload "
                  "path; recompile it");
  }
  if (file->offload_path())
    program.offloadPath = file->offload_path()->str();
  if (program.model.contains("padded_params")) {
    std::set<std::string> tables;
    for (const nlohmann::json &name : program.model["padded_params"])
      if (name.is_string())
        tables.insert(name.get<std::string>());
    if (paddedSeen != tables)
      fail(origin, "the model description's padded_params name tensors the "
                   "program does not hold");
  }
  checkStreamRoles(program, origin);
  checkTransfersMatch(program, origin);
  program.selectStream(0);
  return program;
}

} // namespace partition::runtime
