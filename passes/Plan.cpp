//===- Plan.cpp - plan.json: how a model is distributed -------------------===//

#include "passes/Plan.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace partition;
namespace json = llvm::json;

namespace {

/// The value as plan.json wrote it, for messages: 0, "x", true, {...}.
std::string show(const json::Value &value) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << value;
  if (text.size() > 60)
    text = text.substr(0, 57) + "...";
  return text;
}

/// Reads the fields of one JSON object, `path` being its place in plan.json
/// ("" for the top level, "mesh" ...); errors are counted in `failed`.
class ObjectReader {
public:
  ObjectReader(const json::Object &object, StringRef path,
               ArrayRef<StringRef> known, PlanErrorFn emitError, bool &failed)
      : object(object), path(path.str()), emitError(emitError),
        failed(failed) {
    for (const auto &[key, value] : object) {
      if (llvm::is_contained(known, StringRef(key)))
        continue;
      error(Twine("unknown field '") + fieldPath(key) + "' (known: " +
            llvm::join(known, ", ") + ")");
    }
  }

  std::string fieldPath(StringRef key) const {
    return path.empty() ? key.str() : path + "." + key.str();
  }

  void error(const Twine &message) {
    emitError("plan.json: " + message);
    failed = true;
  }

  const json::Value *get(StringRef key) const { return object.get(key); }

  /// An integer field in [min, max]; `expected` says what is accepted.
  void integer(StringRef key, int64_t &out, int64_t min, int64_t max,
               StringRef expected) {
    const json::Value *value = get(key);
    if (!value)
      return;
    std::optional<int64_t> number = value->getAsInteger();
    if (!number || *number < min || *number > max) {
      error(fieldPath(key) + " must be " + expected + ", got " + show(*value));
      return;
    }
    out = *number;
  }

  /// A positive integer field.
  bool positive(StringRef key, int64_t &out) {
    if (!get(key))
      return false;
    integer(key, out, 1, std::numeric_limits<int64_t>::max(),
            "a positive integer");
    return true;
  }

  void boolean(StringRef key, bool &out) {
    const json::Value *value = get(key);
    if (!value)
      return;
    std::optional<bool> flag = value->getAsBoolean();
    if (!flag) {
      error(fieldPath(key) + " must be true or false, got " + show(*value));
      return;
    }
    out = *flag;
  }

  /// A string field, one of `choices`.
  void choice(StringRef key, std::string &out, ArrayRef<StringRef> choices) {
    const json::Value *value = get(key);
    if (!value)
      return;
    std::optional<StringRef> text = value->getAsString();
    if (!text || !llvm::is_contained(choices, *text)) {
      error(fieldPath(key) + " must be one of " + llvm::join(choices, ", ") +
            ", got " + show(*value));
      return;
    }
    out = text->str();
  }

  /// A nested object field, or null when absent or not an object (an
  /// error then).
  const json::Object *object_(StringRef key) {
    const json::Value *value = get(key);
    if (!value)
      return nullptr;
    const json::Object *nested = value->getAsObject();
    if (!nested)
      error(fieldPath(key) + " must be an object, got " + show(*value));
    return nested;
  }

private:
  const json::Object &object;
  std::string path;
  PlanErrorFn emitError;
  bool &failed;
};

} // namespace

FailureOr<Plan> partition::parsePlan(StringRef text, PlanErrorFn emitError) {
  Plan plan;
  if (text.trim().empty())
    return plan;
  llvm::Expected<json::Value> parsed = json::parse(text);
  if (!parsed) {
    emitError("plan.json: invalid JSON: " +
              llvm::toString(parsed.takeError()));
    return failure();
  }
  const json::Object *root = parsed->getAsObject();
  if (!root) {
    emitError("plan.json: the plan must be a JSON object, got " +
              show(*parsed));
    return failure();
  }

  bool failed = false;
  ObjectReader top(*root, "",
                   {"mesh", "tensor_parallel", "pipeline", "zero",
                    "recompute", "precision"},
                   emitError, failed);
  if (const json::Object *mesh = top.object_("mesh")) {
    ObjectReader reader(*mesh, "mesh", {"dp", "tp", "pp"}, emitError, failed);
    reader.positive("dp", plan.mesh.dp);
    reader.positive("tp", plan.mesh.tp);
    reader.positive("pp", plan.mesh.pp);
  }
  if (const json::Object *tp = top.object_("tensor_parallel")) {
    ObjectReader reader(*tp, "tensor_parallel", {"sequence_parallel"},
                        emitError, failed);
    reader.boolean("sequence_parallel", plan.tensorParallel.sequenceParallel);
  }
  if (const json::Object *pipeline = top.object_("pipeline")) {
    ObjectReader reader(*pipeline, "pipeline", {"schedule", "microbatches"},
                        emitError, failed);
    reader.choice("schedule", plan.pipeline.schedule,
                  {"gpipe", "1f1b", "interleaved-1f1b", "zero-bubble"});
    reader.positive("microbatches", plan.pipeline.microbatches);
  }
  if (const json::Object *zero = top.object_("zero")) {
    ObjectReader reader(*zero, "zero", {"stage"}, emitError, failed);
    reader.integer("stage", plan.zero.stage, 0, 3, "0, 1, 2 or 3");
  }
  if (const json::Object *recompute = top.object_("recompute")) {
    ObjectReader reader(*recompute, "recompute", {"policy", "budget_bytes"},
                        emitError, failed);
    reader.choice("policy", plan.recompute.policy,
                  {"none", "full", "selective", "budget"});
    bool hasBudget = reader.positive("budget_bytes", plan.recompute.budgetBytes);
    if (plan.recompute.policy == "budget" && !hasBudget)
      reader.error("recompute.budget_bytes is required with recompute.policy "
                   "\"budget\"");
    else if (plan.recompute.policy != "budget" && hasBudget)
      reader.error("recompute.budget_bytes is only meaningful with "
                   "recompute.policy \"budget\", got policy \"" +
                   plan.recompute.policy + "\"");
  }
  top.choice("precision", plan.precision, {"fp32", "bf16"});
  if (failed)
    return failure();
  return plan;
}

LogicalResult partition::checkPlanAgainstModel(const Plan &plan,
                                               DictionaryAttr model,
                                               PlanErrorFn emitError) {
  bool failed = false;
  auto error = [&](const Twine &message) {
    emitError("plan.json: " + message);
    failed = true;
  };
  // A field of the model configuration, when present.
  auto field = [&](StringRef name) -> std::optional<int64_t> {
    if (!model)
      return std::nullopt;
    if (auto value = model.getAs<IntegerAttr>(name))
      return value.getInt();
    return std::nullopt;
  };
  const Plan::Mesh &mesh = plan.mesh;

  if (auto batch = field("batch"); batch && *batch % mesh.dp != 0)
    error("the batch of " + Twine(*batch) +
          " sequences is not divisible by mesh.dp = " + Twine(mesh.dp));
  if (auto heads = field("heads"); heads && *heads % mesh.tp != 0)
    error("heads " + Twine(*heads) + " is not divisible by mesh.tp = " +
          Twine(mesh.tp));
  if (auto kvHeads = field("kv_heads"); kvHeads && *kvHeads % mesh.tp != 0)
    error("kv_heads " + Twine(*kvHeads) + " is not divisible by mesh.tp = " +
          Twine(mesh.tp));
  // Vocabulary-parallel embedding and loss split the vocabulary evenly;
  // padding the vocabulary (as Megatron-LM does) is not implemented.
  if (auto vocab = field("vocab"); vocab && *vocab % mesh.tp != 0)
    error("vocab " + Twine(*vocab) + " is not divisible by mesh.tp = " +
          Twine(mesh.tp));
  if (auto layers = field("layers"); layers && *layers < mesh.pp)
    error("layers " + Twine(*layers) + " is fewer than mesh.pp = " +
          Twine(mesh.pp) + " pipeline stages");
  if (plan.tensorParallel.sequenceParallel) {
    if (mesh.tp == 1)
      error("tensor_parallel.sequence_parallel needs mesh.tp > 1, got "
            "mesh.tp = 1");
    else if (auto seqLen = field("seq_len"); seqLen && *seqLen % mesh.tp != 0)
      error("tensor_parallel.sequence_parallel: seq_len " + Twine(*seqLen) +
            " is not divisible by mesh.tp = " + Twine(mesh.tp));
  }
  if (mesh.pp > 1 && plan.pipeline.microbatches < mesh.pp)
    error("pipeline.microbatches = " + Twine(plan.pipeline.microbatches) +
          " is fewer than mesh.pp = " + Twine(mesh.pp) +
          " (a pipeline needs at least one micro-batch per stage)");
  return failure(failed);
}

DictionaryAttr Plan::toAttr(MLIRContext *context) const {
  Builder b(context);
  auto i64 = [&](int64_t value) { return b.getI64IntegerAttr(value); };
  SmallVector<NamedAttribute> recomputeFields = {
      b.getNamedAttr("policy", b.getStringAttr(recompute.policy))};
  if (recompute.policy == "budget")
    recomputeFields.push_back(
        b.getNamedAttr("budget_bytes", i64(recompute.budgetBytes)));
  return b.getDictionaryAttr({
      b.getNamedAttr("mesh", b.getDictionaryAttr({
                                 b.getNamedAttr("dp", i64(mesh.dp)),
                                 b.getNamedAttr("tp", i64(mesh.tp)),
                                 b.getNamedAttr("pp", i64(mesh.pp)),
                             })),
      b.getNamedAttr("tensor_parallel",
                     b.getDictionaryAttr({b.getNamedAttr(
                         "sequence_parallel",
                         b.getBoolAttr(tensorParallel.sequenceParallel))})),
      b.getNamedAttr("pipeline",
                     b.getDictionaryAttr({
                         b.getNamedAttr("schedule",
                                        b.getStringAttr(pipeline.schedule)),
                         b.getNamedAttr("microbatches",
                                        i64(pipeline.microbatches)),
                     })),
      b.getNamedAttr("zero", b.getDictionaryAttr({b.getNamedAttr(
                                 "stage", i64(zero.stage))})),
      b.getNamedAttr("recompute", b.getDictionaryAttr(recomputeFields)),
      b.getNamedAttr("precision", b.getStringAttr(precision)),
  });
}
