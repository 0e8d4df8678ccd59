//===- DataParallelByHand.cpp - a program made data parallel, by hand -----===//

#include "unittests/runtime/DataParallelByHand.h"

namespace partition::testprograms {

using namespace partition::runtime;

namespace {

Instruction allReduce(std::vector<uint32_t> args, std::string label) {
  Instruction instruction;
  instruction.args = std::move(args);
  instruction.collective =
      Collective{CollectiveKind::AllReduce, ReduceKind::Avg, {0}, label};
  return instruction;
}

bool isAdamW(const Instruction &instruction) {
  return !instruction.collective && instruction.kernel == KernelId::AdamW;
}

} // namespace

void makeDataParallel(Program &program, int64_t dp, uint64_t bucketBytes) {
  program.mesh = {{"dp", dp, runtime::AxisRole::Data}, {"pp", 1}, {"tp", 1}};
  uint32_t loss = 0;
  for (size_t i = 0; i < program.buffers.size(); ++i)
    if (program.buffers[i].role == Role::Loss)
      loss = uint32_t(i);
  for (Function &function : program.functions) {
    std::vector<Instruction> out;
    bool reduced = false;
    for (const Instruction &instruction : function.instructions) {
      if (!reduced && isAdamW(instruction)) {
        // Every AdamW's gradient (its input #1), latest first, as DDP's
        // buckets fill in the order backward produces gradients.
        std::vector<uint32_t> grads;
        for (const Instruction &later : function.instructions)
          if (isAdamW(later))
            grads.insert(grads.begin(), later.args[1]);
        std::vector<uint32_t> bucket;
        uint64_t bytes = 0;
        int buckets = 0;
        for (size_t g = 0; g < grads.size(); ++g) {
          bucket.push_back(grads[g]);
          bytes += program.buffers[grads[g]].bytes;
          if (bytes >= bucketBytes || g + 1 == grads.size()) {
            out.push_back(
                allReduce(bucket, "grads bucket " + std::to_string(buckets++)));
            bucket.clear();
            bytes = 0;
          }
        }
        reduced = true;
      }
      out.push_back(instruction);
    }
    out.push_back(allReduce({loss}, "loss"));
    function.instructions = std::move(out);
  }
}

} // namespace partition::testprograms
