//===- Plan.cpp - plan.json: how a model is distributed -------------------===//

#include "passes/plan/Plan.h"

#include "scheduling/Schedule.h"
#include "support/JsonReader.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <limits>
#include <numeric>
#include <set>
#include <vector>

using namespace partition;
using llvm::ArrayRef;
using llvm::FailureOr;
using llvm::LogicalResult;
using llvm::StringRef;
using llvm::Twine;
namespace json = llvm::json;

namespace {

/// A key as messages show it: control characters escaped (a message is one
/// line), long keys cut.
std::string showKey(StringRef key) {
  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::printEscapedString(key.size() > 60 ? key.take_front(57) : key, os);
  if (key.size() > 60)
    os << "...";
  return text;
}

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
               ArrayRef<StringRef> known, StringRef fileName,
               PlanErrorFn emitError, bool &failed)
      : object(object), path(path.str()), fileName(fileName),
        emitError(emitError), failed(failed) {
    for (const auto &[key, value] : object) {
      if (llvm::is_contained(known, StringRef(key)))
        continue;
      error(Twine("unknown field '") + fieldPath(key) + "' (known: " +
            llvm::join(known, ", ") + ")");
    }
  }

  std::string fieldPath(StringRef key) const {
    return path.empty() ? showKey(key) : path + "." + showKey(key);
  }

  void error(const Twine &message) {
    emitError(fileName + ": " + message);
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
  template <typename Out>
  void choice(StringRef key, Out &out, ArrayRef<StringRef> choices) {
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

  /// A non-empty list of positive integers (layer counts).
  void layerCounts(StringRef key, llvm::SmallVector<int64_t> &out) {
    const json::Value *value = get(key);
    if (!value)
      return;
    const json::Array *array = value->getAsArray();
    if (!array || array->empty()) {
      error(fieldPath(key) + " must be a non-empty list of layer counts, "
            "got " + show(*value));
      return;
    }
    for (auto [index, element] : llvm::enumerate(*array)) {
      std::optional<int64_t> count = element.getAsInteger();
      if (!count || *count < 1 || *count > (int64_t(1) << 20)) {
        error(fieldPath(key) + "[" + Twine(index) +
              "] must be a positive layer count, got " + show(element));
        return;
      }
      out.push_back(*count);
    }
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
  StringRef fileName;
  PlanErrorFn emitError;
  bool &failed;
};


/// Deeper nesting than any plan has: refused (by the shared reader's scan)
/// before llvm::json::parse, which recurses once per level.
constexpr size_t kMaxDepth = 16;

/// plan.json's "replicas": a non-empty list of {"tp": t, "batch_share": s}
/// (NTP); mesh.dp and mesh.tp, when given, must agree with it, and are set
/// from it (dp = the replicas, tp = the largest degree).
void readReplicas(const json::Value &value, const json::Object &root,
                  Plan &plan, StringRef fileName, PlanErrorFn emitError,
                  bool &failed) {
  auto error = [&](const Twine &message) {
    emitError(fileName + ": " + message);
    failed = true;
  };
  const json::Array *array = value.getAsArray();
  if (!array || array->empty())
    return error("replicas must be a non-empty list of objects such as "
                 "{\"tp\": 4, \"batch_share\": 2}, got " + show(value));
  int64_t devices = 0, largest = 0;
  for (auto [index, element] : llvm::enumerate(*array)) {
    std::string path = "replicas[" + std::to_string(index) + "]";
    const json::Object *object = element.getAsObject();
    if (!object)
      return error(path + " must be an object such as {\"tp\": 2}, got " +
                   show(element));
    ObjectReader reader(*object, path, {"tp", "batch_share"}, fileName,
                        emitError, failed);
    Plan::Replica replica;
    if (!reader.get("tp"))
      return reader.error(path + ".tp is required (the replica's "
                          "tensor-parallel degree)");
    reader.integer("tp", replica.tp, 1, Plan::kMaxDevices,
                   "a positive integer");
    reader.integer("batch_share", replica.batchShare, 1, int64_t(1) << 20,
                   "a positive integer (parts of the global batch)");
    if (failed)
      return;
    devices += replica.tp;
    largest = std::max(largest, replica.tp);
    plan.replicas.push_back(replica);
  }
  if (devices > Plan::kMaxDevices)
    return error("the replicas' " + Twine(devices) + " devices are more than "
                 "the " + Twine(Plan::kMaxDevices) + " supported");
  int64_t count = static_cast<int64_t>(plan.replicas.size());
  const json::Object *mesh = nullptr;
  if (const json::Value *given = root.get("mesh"))
    mesh = given->getAsObject();
  if (mesh && mesh->get("dp") && plan.mesh.dp != count)
    error("mesh.dp = " + Twine(plan.mesh.dp) + " but replicas lists " +
          Twine(count) + " replicas; give mesh.dp = " + Twine(count) +
          " or leave it out");
  if (mesh && mesh->get("tp") && plan.mesh.tp != largest)
    error("mesh.tp = " + Twine(plan.mesh.tp) + " but the largest degree in "
          "replicas is " + Twine(largest) + "; give mesh.tp = " +
          Twine(largest) + " or leave it out");
  plan.mesh.dp = count;
  plan.mesh.tp = largest;
}

/// "a-b" (inclusive) or "a": the layers of one tensor_parallel.per_layer
/// entry; nullopt when malformed.
std::optional<std::pair<int64_t, int64_t>> parseLayerRange(StringRef text) {
  auto number = [](StringRef digits) -> std::optional<int64_t> {
    int64_t value;
    if (digits.empty() || digits.size() > 7 ||
        !llvm::all_of(digits, llvm::isDigit) ||
        digits.getAsInteger(10, value) ||
        value >= Plan::TensorParallel::kMaxLayer)
      return std::nullopt;
    return value;
  };
  auto [head, tail] = text.split('-');
  std::optional<int64_t> first = number(head);
  std::optional<int64_t> last = text.contains('-') ? number(tail) : first;
  if (!first || !last || *last < *first)
    return std::nullopt;
  return std::make_pair(*first, *last);
}

std::string describeRange(const Plan::TensorParallel::LayerRange &range) {
  return range.first == range.last
             ? "layer " + std::to_string(range.first)
             : "layers " + std::to_string(range.first) + "-" +
                   std::to_string(range.last);
}

/// tensor_parallel.per_layer and tensor_parallel.embedding: each degree
/// divides mesh.tp (parsed before), no layer has two, and the degrees form a
/// chain in which each divides the next larger, so that --dist-apply-plan
/// can lay tp out as axes whose major prefixes are the parts' degrees.
void readPartDegrees(ObjectReader &tp, Plan &plan, StringRef fileName,
                     PlanErrorFn emitError, bool &failed) {
  Plan::TensorParallel &out = plan.tensorParallel;
  auto degree = [&](ObjectReader &reader, int64_t &value) {
    if (!reader.get("tp")) {
      reader.error(reader.fieldPath("tp") +
                   " is required: the tensor-parallel degree of the part");
      return false;
    }
    reader.integer("tp", value, 1, Plan::kMaxDevices, "a positive integer");
    if (value < 1)
      return false;
    if (plan.mesh.tp % value != 0) {
      reader.error(reader.fieldPath("tp") + " = " + Twine(value) +
                   " does not divide mesh.tp = " + Twine(plan.mesh.tp) +
                   "; a part's degree must divide the mesh's tp (the "
                   "largest degree)");
      return false;
    }
    return true;
  };
  if (const json::Value *value = tp.get("per_layer")) {
    const json::Array *array = value->getAsArray();
    if (!array || array->empty()) {
      tp.error(tp.fieldPath("per_layer") +
               " must be a non-empty list of {\"layers\": \"a-b\", "
               "\"tp\": d}, got " + show(*value));
    } else {
      for (auto [index, element] : llvm::enumerate(*array)) {
        std::string path =
            tp.fieldPath("per_layer") + "[" + std::to_string(index) + "]";
        const json::Object *object = element.getAsObject();
        if (!object) {
          tp.error(path + " must be an object {\"layers\": \"a-b\", "
                          "\"tp\": d}, got " + show(element));
          continue;
        }
        ObjectReader entry(*object, path, {"layers", "tp"}, fileName,
                           emitError, failed);
        Plan::TensorParallel::LayerRange range{0, 0, 0};
        bool ok = degree(entry, range.tp);
        const json::Value *layers = entry.get("layers");
        std::optional<StringRef> text =
            layers ? layers->getAsString() : std::nullopt;
        std::optional<std::pair<int64_t, int64_t>> parsed =
            text ? parseLayerRange(*text) : std::nullopt;
        if (!layers) {
          entry.error(entry.fieldPath("layers") +
                      " is required: the layers \"a-b\" (inclusive) or "
                      "\"a\" the degree applies to");
          ok = false;
        } else if (!parsed) {
          entry.error(entry.fieldPath("layers") +
                      " must be \"a-b\" (first to last layer, inclusive, "
                      "a <= b) or \"a\", got " + show(*layers));
          ok = false;
        }
        if (!ok)
          continue;
        range.first = parsed->first;
        range.last = parsed->second;
        for (const auto &[other, earlier] : llvm::enumerate(out.perLayer)) {
          int64_t overlap = std::max(range.first, earlier.first);
          if (overlap > std::min(range.last, earlier.last))
            continue;
          entry.error("tensor_parallel.per_layer: layer " + Twine(overlap) +
                      " is covered twice, by per_layer[" + Twine(other) +
                      "] (" + describeRange(earlier) + ") and per_layer[" +
                      Twine(index) + "] (" + describeRange(range) +
                      "); give each layer one degree");
          ok = false;
          break;
        }
        if (ok)
          out.perLayer.push_back(range);
      }
    }
  }
  if (const json::Object *object = tp.object_("embedding")) {
    ObjectReader embedding(*object, tp.fieldPath("embedding"), {"tp"},
                           fileName, emitError, failed);
    int64_t value = 0;
    if (degree(embedding, value))
      out.embeddingTp = value;
  }
  if (failed)
    return;
  llvm::SmallVector<int64_t> degrees = plan.tensorDegrees();
  for (size_t i = 1; i < degrees.size(); ++i)
    if (degrees[i] % degrees[i - 1] != 0) {
      tp.error("tensor_parallel: the degrees " + Twine(degrees[i - 1]) +
               " and " + Twine(degrees[i]) +
               " do not divide one another; the degrees of per_layer, "
               "embedding and mesh.tp must form a chain in which each "
               "divides the next larger (as 1, 2, 4, 8)");
      return;
    }
}

} // namespace

FailureOr<Plan> partition::parsePlan(StringRef text, StringRef fileName,
                                     PlanErrorFn emitError) {
  auto fail = [&](const Twine &message) {
    emitError(fileName + ": " + message);
    return llvm::failure();
  };
  if (text.trim().empty())
    return fail("the plan is empty; write {} for the default plan, or leave "
                "out the plan");
  // Duplicate keys, depth and numbers beyond a double's range are refused
  // here, by the reader every JSON file of the tools goes through.
  if (std::optional<std::string> problem = jsonreader::scanJson(
          std::string_view(text.data(), text.size()), kMaxDepth))
    return fail(*problem);
  llvm::Expected<json::Value> parsed = json::parse(text);
  if (!parsed)
    return fail("invalid JSON: " + llvm::toString(parsed.takeError()));
  const json::Object *root = parsed->getAsObject();
  if (!root)
    return fail("the plan must be a JSON object, got " + show(*parsed));

  Plan plan;
  bool failed = false;
  ObjectReader top(*root, "",
                   {"mesh", "tensor_parallel", "pipeline", "zero",
                    "recompute", "precision", "replicas"},
                   fileName, emitError, failed);
  auto reader = [&](StringRef key, ArrayRef<StringRef> known)
      -> std::optional<ObjectReader> {
    if (const json::Object *object = top.object_(key))
      return ObjectReader(*object, key, known, fileName, emitError, failed);
    return std::nullopt;
  };
  if (auto mesh = reader("mesh", {"dp", "tp", "pp"})) {
    mesh->positive("dp", plan.mesh.dp);
    mesh->positive("tp", plan.mesh.tp);
    mesh->positive("pp", plan.mesh.pp);
    int64_t devices = 0;
    if (llvm::MulOverflow(plan.mesh.dp, plan.mesh.tp, devices) ||
        llvm::MulOverflow(devices, plan.mesh.pp, devices) ||
        devices > Plan::kMaxDevices)
      mesh->error("the mesh of dp " + Twine(plan.mesh.dp) + " x tp " +
                  Twine(plan.mesh.tp) + " x pp " + Twine(plan.mesh.pp) +
                  " devices is larger than the " + Twine(Plan::kMaxDevices) +
                  " supported");
  }
  if (auto tp = reader("tensor_parallel",
                       {"sequence_parallel", "vocab_multiple", "per_layer",
                        "embedding"})) {
    tp->boolean("sequence_parallel", plan.tensorParallel.sequenceParallel);
    tp->integer("vocab_multiple", plan.tensorParallel.vocabMultiple, 1,
                Plan::TensorParallel::kMaxVocabMultiple,
                "between 1 and 65536");
    plan.tensorParallel.vocabMultipleGiven = tp->get("vocab_multiple");
    readPartDegrees(*tp, plan, fileName, emitError, failed);
  }
  if (auto pipeline = reader("pipeline", {"schedule", "microbatches",
                                          "virtual_stages", "stages"})) {
    pipeline->choice("schedule", plan.pipeline.schedule,
                     {"gpipe", "1f1b", "interleaved-1f1b", "zero-bubble"});
    pipeline->integer("microbatches", plan.pipeline.microbatches, 1,
                      Plan::Pipeline::kMaxMicrobatches,
                      "an integer between 1 and " +
                          std::to_string(Plan::Pipeline::kMaxMicrobatches) +
                          " (micro-batches per step)");
    pipeline->integer("virtual_stages", plan.pipeline.virtualStages, 1,
                      Plan::Pipeline::kMaxVirtualStages,
                      "an integer between 1 and 64");
    pipeline->layerCounts("stages", plan.pipeline.stages);
  }
  if (auto zero = reader("zero", {"stage"}))
    zero->integer("stage", plan.zero.stage, 0, 3, "0, 1, 2 or 3");
  if (auto recompute = reader("recompute", {"policy", "budget_bytes"})) {
    recompute->choice("policy", plan.recompute.policy,
                      {"none", "full", "selective", "budget"});
    bool hasBudget =
        recompute->positive("budget_bytes", plan.recompute.budgetBytes);
    if (plan.recompute.policy == "budget" && !hasBudget)
      recompute->error("recompute.budget_bytes is required with "
                       "recompute.policy \"budget\"");
    else if (plan.recompute.policy != "budget" && hasBudget)
      recompute->error("recompute.budget_bytes is only meaningful with "
                       "recompute.policy \"budget\", got policy \"" +
                       plan.recompute.policy + "\"");
  }
  top.choice("precision", plan.precision, {"fp32", "bf16"});
  if (const json::Value *value = top.get("replicas"))
    readReplicas(*value, *root, plan, fileName, emitError, failed);
  if (failed)
    return llvm::failure();
  return plan;
}

int64_t Plan::devices() const {
  if (replicas.empty())
    return mesh.dp * mesh.tp * mesh.pp;
  int64_t sum = 0;
  for (const Replica &replica : replicas)
    sum += replica.tp;
  return sum;
}

Plan Plan::replicaPlan(size_t index) const {
  Plan plan = *this;
  plan.replicas.clear();
  plan.mesh = Mesh{};
  plan.mesh.tp = replicas[index].tp;
  // Sequence parallelism needs tp > 1: a replica at tp = 1 runs without it
  // (the same numbers; nothing to split).
  if (plan.mesh.tp == 1)
    plan.tensorParallel.sequenceParallel = false;
  return plan;
}

int64_t Plan::batchGranule() const {
  int64_t sum = 0, divisor = 0;
  for (const Replica &replica : replicas) {
    sum += replica.batchShare;
    divisor = std::gcd(divisor, replica.batchShare);
  }
  return replicas.empty() ? 1 : sum / divisor;
}

std::optional<std::pair<int64_t, int64_t>>
Plan::replicaRows(int64_t batch, size_t index) const {
  if (replicas.empty())
    return std::make_pair(int64_t(0), batch);
  if (batch % batchGranule() != 0)
    return std::nullopt;
  int64_t sum = 0, before = 0;
  for (auto [i, replica] : llvm::enumerate(replicas)) {
    if (i < index)
      before += replica.batchShare;
    sum += replica.batchShare;
  }
  return std::make_pair(batch / sum * before,
                        batch / sum * replicas[index].batchShare);
}

llvm::SmallVector<Plan::Axis, 3> Plan::axes() const {
  return {{"dp", "data", mesh.dp},
          {"pp", "pipeline", mesh.pp},
          {"tp", "tensor", mesh.tp}};
}

int64_t Plan::layerTp(int64_t layer) const {
  for (const TensorParallel::LayerRange &range : tensorParallel.perLayer)
    if (range.first <= layer && layer <= range.last)
      return range.tp;
  return mesh.tp;
}

llvm::SmallVector<int64_t> Plan::tensorDegrees() const {
  llvm::SmallVector<int64_t> degrees = {mesh.tp, embeddingTp()};
  for (const TensorParallel::LayerRange &range : tensorParallel.perLayer)
    degrees.push_back(range.tp);
  llvm::sort(degrees);
  degrees.erase(std::unique(degrees.begin(), degrees.end()), degrees.end());
  return degrees;
}

namespace {

/// tensor_parallel.per_layer against the model: every layer covered, none
/// beyond the model, and each part's degree splitting its heads and
/// key-value heads by the rules mesh.tp follows.
void checkPartDegrees(const Plan &plan, const PlanModel &model,
                      llvm::function_ref<void(const Twine &)> error) {
  const auto &perLayer = plan.tensorParallel.perLayer;
  if (auto layers = model.layers; layers && !perLayer.empty()) {
    for (auto [index, range] : llvm::enumerate(perLayer))
      if (range.last >= *layers)
        error("tensor_parallel.per_layer[" + Twine(index) + "] (" +
              describeRange(range) + ") names layers beyond the model's " +
              Twine(*layers) + " (0-" + Twine(*layers - 1) + ")");
    for (int64_t layer = 0; layer < *layers; ++layer)
      if (llvm::none_of(perLayer, [&](const auto &range) {
            return range.first <= layer && layer <= range.last;
          })) {
        error("tensor_parallel.per_layer gives layer " + Twine(layer) +
              " no degree; the entries must cover every layer of the "
              "model (0-" + Twine(*layers - 1) + ") exactly once");
        break;
      }
  }
  for (auto [index, range] : llvm::enumerate(perLayer)) {
    if (range.tp == plan.mesh.tp)
      continue;
    std::string degree = "tensor_parallel.per_layer[" +
                         std::to_string(index) + "].tp = " +
                         std::to_string(range.tp) + " (" +
                         describeRange(range) + ")";
    if (auto heads = model.heads; heads && *heads % range.tp != 0)
      error("heads " + Twine(*heads) + " is not divisible by " + degree);
    if (auto kvHeads = model.kvHeads; kvHeads && *kvHeads % range.tp != 0 &&
                                      range.tp % *kvHeads != 0)
      error("kv_heads " + Twine(*kvHeads) + " is not divisible by " +
            degree + ", nor it by kv_heads; choose a degree that divides "
            "kv_heads or is a multiple of it");
  }
  // With fewer key-value heads than mesh.tp, --dist-apply-plan cuts tp at
  // the key-value heads too: the embedding's degree must chain with them
  // (the layers' degrees do by the rule above).
  if (auto kvHeads = model.kvHeads;
      kvHeads && *kvHeads < plan.mesh.tp && plan.mesh.tp % *kvHeads == 0) {
    int64_t embedding = plan.embeddingTp();
    if (*kvHeads % embedding != 0 && embedding % *kvHeads != 0)
      error("kv_heads " + Twine(*kvHeads) +
            " and tensor_parallel.embedding.tp = " + Twine(embedding) +
            " do not divide one another; with fewer key-value heads than "
            "mesh.tp, every degree must divide kv_heads or be a multiple "
            "of it");
  }
}

} // namespace

LogicalResult partition::checkPlanAgainstModel(const Plan &plan,
                                               const PlanModel &model,
                                               StringRef fileName,
                                               PlanErrorFn emitError) {
  bool failed = false;
  auto error = [&](const Twine &message) {
    emitError(fileName + ": " + message);
    failed = true;
  };
  const Plan::Mesh &mesh = plan.mesh;

  // Replicas: each replica's step is checked as the uniform plan it is
  // compiled with (its degree against the heads, ...), and the shares
  // against the batch.
  if (!plan.replicas.empty()) {
    if (auto batch = model.batch; batch && *batch % plan.batchGranule() != 0) {
      int64_t granule = plan.batchGranule();
      std::string shares;
      for (const Plan::Replica &replica : plan.replicas)
        shares += (shares.empty() ? "" : ":") +
                  std::to_string(replica.batchShare);
      error("replicas: batch_share " + shares + " does not split the batch "
            "of " + Twine(*batch) + " sequences into whole sequences; use a "
            "batch that is a multiple of " + Twine(granule) + " (" +
            Twine(granule) + ", " + Twine(2 * granule) + ", " +
            Twine(3 * granule) + "...) or other shares");
    }
    PlanModel perReplica = model;
    perReplica.batch.reset();
    std::set<int64_t> checked;
    for (size_t index = 0; index < plan.replicas.size(); ++index)
      if (checked.insert(plan.replicas[index].tp).second &&
          llvm::failed(checkPlanAgainstModel(plan.replicaPlan(index), perReplica,
                                       fileName, emitError)))
        failed = true;
    return llvm::failure(failed);
  }

  if (auto batch = model.batch; batch && *batch % mesh.dp != 0)
    error("the batch of " + Twine(*batch) +
          " sequences is not divisible by mesh.dp = " + Twine(mesh.dp));
  if (auto heads = model.heads; heads && *heads % mesh.tp != 0)
    error("heads " + Twine(*heads) + " is not divisible by mesh.tp = " +
          Twine(mesh.tp));
  // Fewer key-value heads than tp ranks works when tp is a multiple of
  // them: each key-value head is replicated on the ranks whose query heads
  // use it (Megatron-LM; --dist-apply-plan lays tp out as two axes).
  if (auto kvHeads = model.kvHeads;
      kvHeads && *kvHeads % mesh.tp != 0 && mesh.tp % *kvHeads != 0)
    error("kv_heads " + Twine(*kvHeads) + " is not divisible by mesh.tp = " +
          Twine(mesh.tp) + ", nor mesh.tp by kv_heads; choose a mesh.tp "
          "that divides kv_heads or is a multiple of it");
  // Vocabulary-parallel embedding and loss split the vocabulary evenly:
  // --dist-pad-vocab pads it (as Megatron-LM does) to a multiple of
  // tp x vocab_multiple, which must leave its ids i32 tokens.
  if (auto vocab = model.vocab; vocab && mesh.tp > 1) {
    int64_t granule = mesh.tp * plan.tensorParallel.vocabMultiple;
    if (paddedVocab(*vocab, granule) > int64_t(INT32_MAX) + 1)
      error("vocab " + Twine(*vocab) + " padded to a multiple of mesh.tp x "
            "tensor_parallel.vocab_multiple = " + Twine(granule) +
            " exceeds the 2^31 ids of i32 tokens");
  }
  checkPartDegrees(plan, model, error);
  if (auto layers = model.layers; layers && *layers < mesh.pp)
    error("layers " + Twine(*layers) + " is fewer than mesh.pp = " +
          Twine(mesh.pp) + " pipeline stages");
  // The schedule's own rules (scheduling/Schedule.cpp names the fields).
  if (auto kind = pipeline::parseScheduleKind(
          plan.pipeline.scheduleOrDefault().str());
      kind && (mesh.pp > 1 || plan.pipeline.virtualStages > 1)) {
    pipeline::ScheduleConfig config;
    config.kind = *kind;
    config.stages = static_cast<int>(std::min<int64_t>(mesh.pp, INT32_MAX));
    config.microbatches =
        static_cast<int>(std::min<int64_t>(plan.pipeline.microbatches, INT32_MAX));
    config.chunks = static_cast<int>(plan.pipeline.virtualStages);
    config.layers = model.layers && *model.layers >= mesh.pp
                        ? static_cast<int>(*model.layers)
                        : 0;
    if (std::optional<std::string> problem = pipeline::validateConfig(config))
      error(*problem);
  }
  if (!plan.pipeline.stages.empty()) {
    int64_t chunks = mesh.pp * plan.pipeline.virtualStages, sum = 0;
    for (int64_t count : plan.pipeline.stages)
      sum += count;
    if (static_cast<int64_t>(plan.pipeline.stages.size()) != chunks)
      error("pipeline.stages has " + Twine(plan.pipeline.stages.size()) +
            " entries but mesh.pp x pipeline.virtual_stages = " +
            Twine(mesh.pp) + " x " + Twine(plan.pipeline.virtualStages) +
            " = " + Twine(chunks) + " chunks need one layer count each");
    else if (auto layers = model.layers; layers && sum != *layers)
      error("pipeline.stages sums to " + Twine(sum) +
            " layers but the model has " + Twine(*layers) +
            "; give each chunk's layer count so that they sum to " +
            Twine(*layers));
  }
  if (plan.tensorParallel.sequenceParallel) {
    if (mesh.tp == 1)
      error("tensor_parallel.sequence_parallel needs mesh.tp > 1, got "
            "mesh.tp = 1");
    else if (auto seqLen = model.seqLen; seqLen && *seqLen % mesh.tp != 0)
      error("tensor_parallel.sequence_parallel: seq_len " + Twine(*seqLen) +
            " is not divisible by mesh.tp = " + Twine(mesh.tp));
  }
  if (mesh.pp > 1 && plan.pipeline.microbatches < mesh.pp)
    error("pipeline.microbatches = " + Twine(plan.pipeline.microbatches) +
          " is fewer than mesh.pp = " + Twine(mesh.pp) +
          " (a pipeline needs at least one micro-batch per stage)");
  return llvm::failure(failed);
}

namespace {

/// A plan field that no pass implements yet.
struct NotImplemented {
  /// The plan.json field, as messages name it.
  const char *field;
  /// The field's value when the plan asks for the missing pass, else
  /// nullopt.
  std::optional<std::string> (*asks)(const Plan &);
  /// The pass that would implement it.
  const char *pass;
  /// What the user can write instead.
  const char *instead;
};

/// The plan fields refused until their pass exists: replicas (NTP, each
/// replica's step a uniform tp step) with a pipeline, ZeRO or per-part
/// degrees. (Per-part tensor-parallel degrees compose with pipelines and
/// ZeRO: docs/nonuniform-tp.md.) A field added before its pass adds its
/// line here (and the pass that implements it removes the line and adds
/// itself to passes/CompileFlow.cpp), so that no field is ever silently
/// ignored.
const std::vector<NotImplemented> kNotImplemented = {
    {"replicas with mesh.pp",
     [](const Plan &plan) -> std::optional<std::string> {
       if (plan.replicas.empty() || plan.mesh.pp == 1)
         return std::nullopt;
       return std::to_string(plan.mesh.pp);
     },
     "pipeline stages inside nonuniform replicas",
     "leave out mesh.pp or the replicas"},
    {"replicas with zero.stage",
     [](const Plan &plan) -> std::optional<std::string> {
       if (plan.replicas.empty() || plan.zero.stage == 0)
         return std::nullopt;
       return std::to_string(plan.zero.stage);
     },
     "ZeRO across replicas of different degrees",
     "use zero.stage 0 or leave out the replicas"},
    {"replicas with tensor_parallel.per_layer (or .embedding)",
     [](const Plan &plan) -> std::optional<std::string> {
       if (plan.replicas.empty() || !plan.hasPartDegrees())
         return std::nullopt;
       return std::string("given");
     },
     "per-part degrees inside nonuniform replicas",
     "leave out tensor_parallel.per_layer / .embedding or the replicas"},
};

} // namespace

LogicalResult partition::checkPlanImplemented(const Plan &plan,
                                              StringRef fileName,
                                              PlanErrorFn emitError) {
  bool failed = false;
  for (const NotImplemented &missing : kNotImplemented)
    if (std::optional<std::string> value = missing.asks(plan)) {
      emitError(fileName + ": " + missing.field + " = " + *value +
                " needs " + missing.pass +
                ", which is not implemented yet; " + missing.instead);
      failed = true;
    }
  return llvm::failure(failed);
}

LogicalResult partition::checkPlanTakesEffect(const Plan &plan,
                                              StringRef fileName,
                                              PlanErrorFn emitError) {
  bool failed = false;
  auto refuse = [&](const Twine &message) {
    emitError(fileName + ": " + message);
    failed = true;
  };
  if (plan.zero.stage > 0 && plan.mesh.dp == 1)
    refuse("zero.stage = " + Twine(plan.zero.stage) +
           " does nothing without data parallelism (mesh.dp = 1: ZeRO "
           "shards the optimizer state over data-parallel replicas); give "
           "mesh.dp > 1 or leave out zero");
  if (plan.pipeline.schedule && plan.mesh.pp == 1 &&
      plan.pipeline.virtualStages == 1)
    refuse("pipeline.schedule \"" + Twine(*plan.pipeline.schedule) +
           "\" does nothing without pipeline parallelism (mesh.pp = 1); "
           "give mesh.pp > 1 or leave out pipeline.schedule");
  if (plan.tensorParallel.vocabMultipleGiven && plan.mesh.tp == 1)
    refuse("tensor_parallel.vocab_multiple = " +
           Twine(plan.tensorParallel.vocabMultiple) +
           " does nothing without tensor parallelism (mesh.tp = 1: the "
           "vocabulary is padded only to split it over tp ranks); give "
           "mesh.tp > 1 or leave out vocab_multiple");
  return llvm::failure(failed);
}
