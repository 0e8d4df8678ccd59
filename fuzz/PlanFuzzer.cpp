//===- PlanFuzzer.cpp - the plan.json reader on arbitrary bytes -----------===//
//
// A libFuzzer target: parsePlan, then checkPlanAgainstModel (on a fixed
// model: batch 8, 4 heads, 2 key/value heads, 4 layers, vocabulary 256,
// 16 tokens) and checkPlanImplemented -- what --dist-apply-plan does with
// a plan file before it touches the IR (passes/plan/ApplyPlan.cpp). Any input
// may be rejected; a rejection must say why in one line that starts with
// the file's name. A crash, a sanitizer report, a rejection without a
// message, a message on success, or an accepted plan outside the ranges
// the #dist.plan verifier allows, is a bug.
//
// Plan.cpp depends on LLVMSupport and nlohmann-json only, not MLIR, so both
// builds (fuzz/CMakeLists.txt) compile it into the target, instrumented.
//
//===----------------------------------------------------------------------===//

#include "passes/plan/Plan.h"

#include "llvm/ADT/STLExtras.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

using namespace partition;

namespace {

constexpr llvm::StringLiteral kFile = "fuzz.json";

[[noreturn]] void bug(const char *what, const std::string &detail) {
  std::fprintf(stderr, "PlanFuzzer: %s: %s\n", what, detail.c_str());
  std::abort();
}

/// The ranges parsePlan promises (and #dist.plan's verifier checks).
void checkPlan(const Plan &plan) {
  if (plan.mesh.dp < 1 || plan.mesh.tp < 1 || plan.mesh.pp < 1)
    bug("accepted a mesh axis below 1", "");
  if (plan.mesh.dp * plan.mesh.tp > Plan::kMaxDevices / plan.mesh.pp)
    bug("accepted a mesh larger than kMaxDevices", "");
  if (plan.pipeline.microbatches < 1 ||
      plan.pipeline.microbatches > Plan::Pipeline::kMaxMicrobatches)
    bug("accepted microbatches outside [1, kMaxMicrobatches]", "");
  // Per-part tensor-parallel degrees: each divides mesh.tp, ranges are
  // ordered and disjoint, and the degrees form a divisibility chain.
  const auto &perLayer = plan.tensorParallel.perLayer;
  for (size_t i = 0; i < perLayer.size(); ++i) {
    if (perLayer[i].tp < 1 || plan.mesh.tp % perLayer[i].tp != 0)
      bug("accepted a per_layer degree that does not divide mesh.tp", "");
    if (perLayer[i].first < 0 || perLayer[i].last < perLayer[i].first)
      bug("accepted a per_layer range out of order", "");
    for (size_t j = 0; j < i; ++j)
      if (perLayer[i].first <= perLayer[j].last &&
          perLayer[j].first <= perLayer[i].last)
        bug("accepted a layer covered twice", "");
  }
  if (plan.embeddingTp() < 1 || plan.mesh.tp % plan.embeddingTp() != 0)
    bug("accepted an embedding degree that does not divide mesh.tp", "");
  llvm::SmallVector<int64_t> degrees = plan.tensorDegrees();
  for (size_t i = 1; i < degrees.size(); ++i)
    if (degrees[i] % degrees[i - 1] != 0)
      bug("accepted degrees that are not a chain", "");
  if (plan.zero.stage < 0 || plan.zero.stage > 3)
    bug("accepted a ZeRO stage outside 0..3", "");
  if (!llvm::is_contained({"none", "full", "selective", "budget"},
                          plan.recompute.policy))
    bug("accepted a recompute policy", plan.recompute.policy);
  if ((plan.recompute.policy == "budget") != (plan.recompute.budgetBytes > 0))
    bug("budget_bytes and the policy disagree", plan.recompute.policy);
  if (!llvm::is_contained({"fp32", "bf16"}, plan.precision))
    bug("accepted a precision", plan.precision);
  if (!llvm::is_contained(
          {"gpipe", "1f1b", "interleaved-1f1b", "zero-bubble"},
          plan.pipeline.scheduleOrDefault()))
    bug("accepted a schedule", plan.pipeline.scheduleOrDefault().str());
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  size_t messages = 0;
  auto onError = [&](const llvm::Twine &message) {
    std::string line = message.str();
    if (!llvm::StringRef(line).starts_with(kFile.str() + ": "))
      bug("a message that does not name the file", line);
    if (line.find('\n') != std::string::npos ||
        line.find('\r') != std::string::npos)
      bug("a message of more than one line", line);
    ++messages;
  };

  llvm::FailureOr<Plan> plan = parsePlan(text, kFile, onError);
  if (llvm::failed(plan)) {
    if (messages == 0)
      bug("a plan rejected without a message", "");
    return 0;
  }
  if (messages != 0)
    bug("a plan accepted with a message", "");
  checkPlan(*plan);

  PlanModel model;
  model.batch = 8;
  model.heads = 4;
  model.kvHeads = 2;
  model.layers = 4;
  model.vocab = 256;
  model.seqLen = 16;
  size_t before = messages;
  if (llvm::failed(checkPlanAgainstModel(*plan, model, kFile, onError)) &&
      messages == before)
    bug("a plan the model cannot follow, without a message", "");
  before = messages;
  if (llvm::failed(checkPlanImplemented(*plan, kFile, onError)) &&
      messages == before)
    bug("a plan refused without a message", "");
  before = messages;
  if (llvm::failed(checkPlanTakesEffect(*plan, kFile, onError)) &&
      messages == before)
    bug("an inert field refused without a message", "");
  return 0;
}
