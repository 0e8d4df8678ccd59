//===- SerializeProgram.cpp - a decoded Program back to .ptp bytes --------===//

#include "unittests/runtime/SerializeProgram.h"

#include "runtime/program/ProgramFormat.h"

#include <algorithm>

namespace partition::testprograms {

namespace {

flatbuffers::Offset<ptp::Stream>
serializeStream(flatbuffers::FlatBufferBuilder &fbb, uint64_t arenaBytes,
                const std::vector<runtime::BufferInfo> &bufferInfos,
                const std::vector<runtime::Function> &functionList,
                uint64_t hostBytes, uint64_t nvmeBytes) {
  std::vector<flatbuffers::Offset<ptp::Buffer>> buffers;
  for (const runtime::BufferInfo &buffer : bufferInfos) {
    std::vector<flatbuffers::Offset<ptp::DimSharding>> sharding;
    for (const std::vector<uint32_t> &dim : buffer.sharding) {
      std::vector<uint8_t> axes(dim.begin(), dim.end());
      sharding.push_back(ptp::CreateDimShardingDirect(fbb, &axes));
    }
    std::vector<uint8_t> flatAxes(buffer.flatAxes.begin(),
                                  buffer.flatAxes.end());
    buffers.push_back(ptp::CreateBufferDirect(
        fbb, static_cast<ptp::Role>(buffer.role), buffer.name.c_str(),
        static_cast<ptp::DType>(buffer.dtype), &buffer.shape, buffer.offset,
        buffer.sharding.empty() ? nullptr : &sharding,
        buffer.flat() ? &flatAxes : nullptr,
        buffer.flat() ? &buffer.flatShape : nullptr,
        static_cast<ptp::Tier>(buffer.tier)));
  }
  std::vector<flatbuffers::Offset<ptp::Function>> functions;
  for (const runtime::Function &function : functionList) {
    std::vector<flatbuffers::Offset<ptp::Instruction>> instructions;
    // A loaded walk's slot copies are the loader's, not the file's.
    for (size_t index = 0; index < function.writtenSize(); ++index) {
      const runtime::Instruction &instruction = function.instructions[index];
      flatbuffers::Offset<ptp::Collective> collective = 0;
      if (instruction.collective) {
        std::vector<uint8_t> axes(instruction.collective->axes.begin(),
                                  instruction.collective->axes.end());
        collective = ptp::CreateCollectiveDirect(
            fbb, static_cast<ptp::CollectiveKind>(instruction.collective->kind),
            static_cast<ptp::ReduceKind>(instruction.collective->reduce), &axes,
            instruction.collective->label.c_str(),
            instruction.collective->dim, instruction.collective->started,
            instruction.collective->concatDim,
            instruction.collective->rowsDim);
      }
      flatbuffers::Offset<ptp::Transfer> transfer = 0;
      if (instruction.transfer)
        transfer = ptp::CreateTransferDirect(
            fbb,
            instruction.transfer->send ? ptp::TransferKind::Send
                                       : ptp::TransferKind::Recv,
            static_cast<uint8_t>(instruction.transfer->axis),
            instruction.transfer->peer, instruction.transfer->label.c_str());
      flatbuffers::Offset<ptp::Wait> wait = 0;
      if (instruction.waitFor)
        wait = ptp::CreateWait(fbb, *instruction.waitFor);
      flatbuffers::Offset<ptp::TierCopy> tierCopy = 0;
      if (instruction.tierCopy)
        tierCopy = ptp::CreateTierCopyDirect(
            fbb,
            instruction.tierCopy->write ? ptp::TierCopyKind::Write
                                        : ptp::TierCopyKind::Read,
            instruction.tierCopy->label.c_str(),
            instruction.tierCopy->started);
      bool kernel = instruction.isKernel();
      instructions.push_back(ptp::CreateInstructionDirect(
          fbb, kernel ? static_cast<uint16_t>(instruction.kernel) : 0,
          &instruction.args, &instruction.ints, &instruction.floats,
          collective, transfer, wait, tierCopy));
    }
    flatbuffers::Offset<ptp::MicrobatchLoop> loop = 0;
    if (function.loop)
      loop = ptp::CreateMicrobatchLoopDirect(
          fbb, static_cast<uint32_t>(function.loop->begin),
          static_cast<uint32_t>(function.loop->end), function.loop->count,
          &function.loop->slices, function.loop->stride);
    flatbuffers::Offset<ptp::ActionWalk> walk = 0;
    if (function.walk) {
      std::vector<flatbuffers::Offset<ptp::ActionRegion>> regions;
      for (const runtime::ActionRegion &region : function.walk->regions)
        regions.push_back(ptp::CreateActionRegionDirect(
            fbb, static_cast<uint32_t>(region.begin),
            static_cast<uint32_t>(region.end), region.name.c_str(),
            &region.rows, &region.rowsSources));
      std::vector<flatbuffers::Offset<ptp::ActionSlot>> slots;
      for (const runtime::ActionSlot &slot : function.walk->slots)
        slots.push_back(ptp::CreateActionSlotDirect(
            fbb, &slot.templates, &slot.copies, slot.repeat,
            slot.repeat ? &slot.strides : nullptr));
      std::vector<ptp::WalkAction> actions;
      for (const runtime::WalkAction &action : function.walk->actions)
        actions.emplace_back(action.region, action.slot, action.microbatch);
      walk = ptp::CreateActionWalkDirect(fbb, &regions, &slots, &actions);
    }
    functions.push_back(ptp::CreateFunctionDirect(fbb, function.name.c_str(),
                                                  &instructions, loop, walk));
  }
  return ptp::CreateStreamDirect(fbb, arenaBytes, &buffers, &functions,
                                 hostBytes, nvmeBytes);
}

} // namespace

std::string serializeProgram(const runtime::Program &program,
                             uint32_t version) {
  flatbuffers::FlatBufferBuilder fbb;
  // NTP: each replica's program nested as its own bytes, no streams.
  if (!program.replicas.empty()) {
    std::vector<flatbuffers::Offset<ptp::Replica>> replicas;
    for (const runtime::ReplicaProgram &replica : program.replicas) {
      std::string bytes = serializeProgram(*replica.program, version);
      auto nested = fbb.CreateVector(
          reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size());
      replicas.push_back(ptp::CreateReplica(fbb, replica.tp,
                                            replica.batchOffset,
                                            replica.batchRows, nested));
    }
    std::vector<flatbuffers::Offset<ptp::MeshAxis>> mesh;
    for (const runtime::MeshAxis &axis : program.mesh)
      mesh.push_back(ptp::CreateMeshAxisDirect(
          fbb, axis.name.c_str(), axis.size,
          static_cast<ptp::AxisRole>(axis.role)));
    std::string model = program.model.dump(), train = program.train.dump();
    auto root = ptp::CreateProgramDirect(
        fbb, version, model.c_str(), train.c_str(),
        program.mesh.empty() ? nullptr : &mesh,
        /*streams=*/nullptr, &replicas);
    ptp::FinishProgramBuffer(fbb, root);
    return std::string(reinterpret_cast<const char *>(fbb.GetBufferPointer()),
                       fbb.GetSize());
  }
  // The selected stream as its fields hold it now (a test may have changed
  // them), the others as loaded.
  std::vector<flatbuffers::Offset<ptp::Stream>> streams;
  size_t count = std::max<size_t>(program.streams.size(), 1);
  for (size_t k = 0; k < count; ++k)
    streams.push_back(
        k == program.stream || program.streams.empty()
            ? serializeStream(fbb, program.arenaBytes, program.buffers,
                              program.functions, program.hostBytes,
                              program.nvmeBytes)
            : serializeStream(fbb, program.streams[k].arenaBytes,
                              program.streams[k].buffers,
                              program.streams[k].functions,
                              program.streams[k].hostBytes,
                              program.streams[k].nvmeBytes));
  std::vector<flatbuffers::Offset<ptp::MeshAxis>> mesh;
  for (const runtime::MeshAxis &axis : program.mesh)
    mesh.push_back(ptp::CreateMeshAxisDirect(
        fbb, axis.name.c_str(), axis.size,
        static_cast<ptp::AxisRole>(axis.role)));
  std::string model = program.model.dump(), train = program.train.dump();
  auto root = ptp::CreateProgramDirect(
      fbb, version, model.c_str(), train.c_str(),
      program.mesh.empty() ? nullptr : &mesh, &streams, /*replicas=*/nullptr,
      program.sequenceChunks > 1 ? program.sequenceChunks : 0,
      program.offloadPath.empty() ? nullptr : program.offloadPath.c_str());
  ptp::FinishProgramBuffer(fbb, root);
  return std::string(reinterpret_cast<const char *>(fbb.GetBufferPointer()),
                     fbb.GetSize());
}

uint32_t addArenaBuffer(runtime::Program &program, const char *name,
                        runtime::DType dtype, std::vector<int64_t> shape,
                        runtime::Role role) {
  runtime::BufferInfo buffer;
  buffer.role = role;
  buffer.name = name;
  buffer.dtype = dtype;
  buffer.shape = std::move(shape);
  buffer.elements = 1;
  for (int64_t dim : buffer.shape)
    buffer.elements *= dim;
  buffer.bytes = uint64_t(buffer.elements) * runtime::dtypeBytes(dtype);
  buffer.offset = program.arenaBytes;
  program.arenaBytes += buffer.bytes;
  program.buffers.push_back(buffer);
  return uint32_t(program.buffers.size() - 1);
}

runtime::Program minimalProgram() {
  using runtime::DType;
  using runtime::Role;
  runtime::Program program;
  addArenaBuffer(program, "a", DType::F32, {4});
  addArenaBuffer(program, "b", DType::F32, {2, 3});
  addArenaBuffer(program, "c", DType::F32, {5});
  addArenaBuffer(program, "tokens", DType::I32, {1, 2}, Role::Tokens);
  addArenaBuffer(program, "targets", DType::I32, {1, 2}, Role::Targets);
  addArenaBuffer(program, "loss", DType::F32, {}, Role::Loss);
  program.functions.push_back({"train_step", {}});
  program.model = nlohmann::json::object();
  program.train = nlohmann::json::object();
  return program;
}

} // namespace partition::testprograms
