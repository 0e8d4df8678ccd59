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

  /// A non-empty string field (a path).
  bool text(StringRef key, std::string &out, StringRef expected) {
    const json::Value *value = get(key);
    if (!value)
      return false;
    std::optional<StringRef> text = value->getAsString();
    if (!text || text->empty()) {
      error(fieldPath(key) + " must be " + expected + ", got " + show(*value));
      return false;
    }
    out = text->str();
    return true;
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
  if (mesh && mesh->get(Plan::kDataAxis) && plan.mesh.dp != count)
    error("mesh.dp = " + Twine(plan.mesh.dp) + " but replicas lists " +
          Twine(count) + " replicas; give mesh.dp = " + Twine(count) +
          " or leave it out");
  if (mesh && mesh->get(Plan::kTensorAxis) && plan.mesh.tp != largest)
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
                      "] (" + earlier.describe() + ") and per_layer[" +
                      Twine(index) + "] (" + range.describe() +
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

/// plan.json's "offload": the tiers asked for, the NVMe files' directory
/// (required with "nvme") and the staging buffer, at least one 4096-byte
/// block per slice of each moment.
void readOffload(ObjectReader &reader, Plan::Offload &offload) {
  offload.given = true;
  reader.choice("optimizer", offload.optimizer, {"none", "host", "nvme"});
  reader.choice("parameters", offload.parameters, {"none", "host", "nvme"});
  offload.pathGiven =
      reader.text("path", offload.path,
                  "a directory (a non-empty string: where each rank's "
                  "offload file goes)");
  offload.bufferBytesGiven = reader.get("buffer_bytes");
  reader.integer("buffer_bytes", offload.bufferBytes,
                 Plan::Offload::kMinBufferBytes,
                 std::numeric_limits<int64_t>::max(),
                 "at least " + std::to_string(Plan::Offload::kMinBufferBytes) +
                     " (three slices of both moments staged at once, each "
                     "at least one 4096-byte I/O block)");
  if (offload.optimizer != "nvme" && offload.parameters == "nvme" &&
      !reader.get("path"))
    reader.error("offload.path is required with offload.parameters "
                 "\"nvme\": the directory of each rank's offload file "
                 "(partition-run --offload-path overrides it)");
  else if (offload.optimizer == "nvme" && !reader.get("path"))
    reader.error("offload.path is required with offload.optimizer \"nvme\": "
                 "the directory of each rank's offload file "
                 "(partition-run --offload-path overrides it)");
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
                    "recompute", "precision", "replicas", "overlap",
                    "context_parallel", "moe", "offload"},
                   fileName, emitError, failed);
  auto reader = [&](StringRef key, ArrayRef<StringRef> known)
      -> std::optional<ObjectReader> {
    if (const json::Object *object = top.object_(key))
      return ObjectReader(*object, key, known, fileName, emitError, failed);
    return std::nullopt;
  };
  if (auto mesh = reader("mesh", {Plan::kDataAxis, Plan::kTensorAxis,
                                  Plan::kPipelineAxis, Plan::kContextAxis})) {
    mesh->positive(Plan::kDataAxis, plan.mesh.dp);
    mesh->positive(Plan::kTensorAxis, plan.mesh.tp);
    mesh->positive(Plan::kPipelineAxis, plan.mesh.pp);
    mesh->positive(Plan::kContextAxis, plan.mesh.cp);
    int64_t devices = 0;
    if (llvm::MulOverflow(plan.mesh.dp, plan.mesh.tp, devices) ||
        llvm::MulOverflow(devices, plan.mesh.pp, devices) ||
        llvm::MulOverflow(devices, plan.mesh.cp, devices) ||
        devices > Plan::kMaxDevices)
      mesh->error("the mesh of dp " + Twine(plan.mesh.dp) +
                  (plan.mesh.cp > 1 ? " x cp " + Twine(plan.mesh.cp) : "") +
                  " x tp " + Twine(plan.mesh.tp) +
                  " x pp " + Twine(plan.mesh.pp) +
                  " devices is larger than the " + Twine(Plan::kMaxDevices) +
                  " supported");
  }
  if (auto context = reader("context_parallel", {"method", "load_balance"})) {
    plan.contextParallel.given = true;
    context->choice("method", plan.contextParallel.method,
                    {"all_gather", "ring"});
    context->choice("load_balance", plan.contextParallel.loadBalance,
                    {"zigzag", "none"});
  }
  if (auto moe = reader("moe", {"expert_parallel", "expert_tensor_parallel"})) {
    moe->integer("expert_parallel", plan.moe.expertParallel, 1,
                 Plan::kMaxDevices, "a positive integer (the ranks the "
                                    "experts are split over)");
    moe->integer("expert_tensor_parallel", plan.moe.expertTensorParallel, 1,
                 Plan::kMaxDevices, "a positive integer");
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
  if (auto overlap = reader("overlap", {"data_parallel", "tensor_parallel"})) {
    overlap->boolean("data_parallel", plan.overlap.dataParallel);
    plan.overlap.dataParallelGiven = overlap->get("data_parallel");
    overlap->boolean("tensor_parallel", plan.overlap.tensorParallel);
    plan.overlap.tensorParallelGiven = overlap->get("tensor_parallel");
  }
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
  if (auto offload = reader("offload", {"optimizer", "parameters", "path",
                                        "buffer_bytes"}))
    readOffload(*offload, plan.offload);
  top.choice("precision", plan.precision, {"fp32", "bf16"});
  if (const json::Value *value = top.get("replicas"))
    readReplicas(*value, *root, plan, fileName, emitError, failed);
  if (failed)
    return llvm::failure();
  return plan;
}

int64_t Plan::devices() const {
  if (replicas.empty())
    return mesh.dp * mesh.cp * mesh.tp * mesh.pp;
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

llvm::SmallVector<Plan::Axis, 4> Plan::axes() const {
  // Expert parallelism cuts the data-parallel ranks in two: dp / EP
  // replicas of ep = EP ranks that split the experts, ep varying faster
  // (an expert group's ranks are neighbours), ranks numbered as without
  // the cut.
  int64_t ep = moe.expertParallel;
  bool experts = ep > 1 && mesh.dp % ep == 0;
  llvm::SmallVector<Axis, 4> axes = {
      {kDataAxis, AxisRole::Data, experts ? mesh.dp / ep : mesh.dp}};
  if (experts)
    axes.push_back({kExpertAxis, AxisRole::Expert, ep});
  axes.push_back({kPipelineAxis, AxisRole::Pipeline, mesh.pp});
  if (mesh.cp > 1)
    axes.push_back({kContextAxis, AxisRole::Context, mesh.cp});
  axes.push_back({kTensorAxis, AxisRole::Tensor, mesh.tp});
  return axes;
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

std::string Plan::TensorParallel::LayerRange::describe() const {
  return first == last ? "layer " + std::to_string(first)
                       : "layers " + std::to_string(first) + "-" +
                             std::to_string(last);
}
