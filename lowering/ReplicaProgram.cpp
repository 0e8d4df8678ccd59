//===- ReplicaProgram.cpp - one .ptp holding every NTP replica ------------===//

#include "lowering/ReplicaProgram.h"

#include "passes/plan/Plan.h"
#include "runtime/program/ProgramFormat.h"

#include <algorithm>

namespace partition {

std::string writeReplicaProgram(llvm::ArrayRef<ReplicaPart> replicas,
                                llvm::raw_ostream &os) {
  if (replicas.empty())
    return "no replicas";
  for (const ReplicaPart &replica : replicas) {
    flatbuffers::Verifier verifier(
        reinterpret_cast<const uint8_t *>(replica.program.data()),
        replica.program.size());
    if (!ptp::VerifyProgramBuffer(verifier))
      return "a replica's program does not verify";
  }
  const ptp::Program *first = ptp::GetProgram(replicas.front().program.data());
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<flatbuffers::Offset<ptp::Replica>> entries;
  int64_t largest = 0;
  for (const ReplicaPart &replica : replicas) {
    auto bytes = fbb.CreateVector(
        reinterpret_cast<const uint8_t *>(replica.program.data()),
        replica.program.size());
    entries.push_back(ptp::CreateReplica(fbb, replica.tp, replica.batchOffset,
                                         replica.batchRows, bytes));
    largest = std::max(largest, replica.tp);
  }
  // The model as the first replica records it; the others differ at most
  // in their padded vocabulary (the loader checks).
  std::string model = first->model_json() ? first->model_json()->str() : "{}";
  std::string train = first->train_json() ? first->train_json()->str() : "{}";
  std::vector<flatbuffers::Offset<ptp::MeshAxis>> mesh = {
      ptp::CreateMeshAxisDirect(fbb, Plan::kDataAxis.data(),
                                int64_t(replicas.size()), ptp::AxisRole::Data),
      ptp::CreateMeshAxisDirect(fbb, Plan::kTensorAxis.data(), largest,
                                ptp::AxisRole::Tensor)};
  auto program = ptp::CreateProgramDirect(fbb, ptp::kSchemaVersion,
                                          model.c_str(), train.c_str(), &mesh,
                                          /*streams=*/nullptr, &entries);
  ptp::FinishProgramBuffer(fbb, program);
  os.write(reinterpret_cast<const char *>(fbb.GetBufferPointer()),
           fbb.GetSize());
  return "";
}

} // namespace partition
