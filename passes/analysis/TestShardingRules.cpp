//===- TestShardingRules.cpp - print every op's sharding rule -------------===//
//
// --xfmr-test-sharding-rules prints, for each op with a sharding rule, its
// factors and how operands and results map onto them, so lit tests can
// check each op's rule (test/Dialect/Xfmr/sharding_rules.mlir):
//
//   xfmr.linear: factors d0=2 d1=8 k=16 n=32 ... (see the format below)
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/Xfmr/XfmrOps.h"

#include "llvm/Support/raw_ostream.h"

namespace partition {
#define GEN_PASS_DEF_TESTSHARDINGRULESPASS
#include "passes/Passes.h.inc"
} // namespace partition

using namespace mlir;
using namespace partition::xfmr;

namespace partition {
namespace {

/// f<i> names factor i; its size, then `opaque`, `op` (partitioned by the
/// op) or `summed` (some result lacks it).
void printRule(Operation *op, const ShardingRule &rule, raw_ostream &os) {
  auto name = [](int factor) {
    return factor == ShardingRule::kNoFactor ? std::string("_")
                                             : "f" + std::to_string(factor);
  };
  auto dims = [&](ArrayRef<int> factors) {
    std::string text = "[";
    for (auto [i, factor] : llvm::enumerate(factors))
      text += (i ? ", " : "") + name(factor);
    return text + "]";
  };
  os << op->getName() << ":";
  for (auto [index, factor] : llvm::enumerate(rule.getFactors())) {
    os << " f" << index << "=" << factor.size;
    if (factor.partitionedByOp)
      os << "(op)";
    else if (factor.opaque)
      os << "(opaque)";
  }
  os << " |";
  for (unsigned i = 0; i < rule.getNumOperands(); ++i)
    os << " " << dims(rule.getOperand(i));
  os << " ->";
  for (unsigned r = 0; r < rule.getNumResults(); ++r) {
    os << " " << dims(rule.getResult(r));
    SmallVector<std::string> summed;
    for (unsigned factor = 0; factor < rule.getFactors().size(); ++factor)
      if (rule.isSummedOver(factor, r) && !rule.getFactors()[factor].opaque)
        summed.push_back(name(factor));
    if (!summed.empty())
      os << "{sum " << llvm::join(summed, " ") << "}";
  }
  if (!rule.getMeanFactors().empty()) {
    os << " | mean";
    for (int factor : rule.getMeanFactors())
      os << " " << name(factor);
    auto scaled = *rule.getMeanScaled();
    os << " scales " << (scaled.isResult ? "result " : "operand ")
       << scaled.index;
  }
  for (unsigned factor = 0; factor < rule.getFactors().size(); ++factor)
    for (int tied : rule.tiedGroup(factor))
      if (static_cast<int>(factor) < tied)
        os << " | tied " << name(factor) << " " << name(tied);
  if (rule.linear)
    os << " | linear";
  os << "\n";
}

struct TestShardingRulesPass
    : impl::TestShardingRulesPassBase<TestShardingRulesPass> {
  void runOnOperation() override {
    getOperation()->walk([&](ShardingRuleOpInterface ruled) {
      printRule(ruled, ruled.getShardingRule(), llvm::outs());
    });
    markAllAnalysesPreserved();
  }
};

} // namespace
} // namespace partition
