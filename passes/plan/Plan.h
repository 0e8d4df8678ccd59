//===- Plan.h - plan.json: how a model is distributed -----------*- C++ -*-===//
//
// The parallelization plan of a training run (plan.json, see docs/design.md,
// "Contracts"): the device mesh, tensor/pipeline/ZeRO options, recompute and
// precision. Every field is optional; parsing rejects empty files, invalid
// JSON, duplicate keys, unknown fields, wrong types and out-of-range values
// with a message that starts with the file's name and names the field path
// and the value; checkPlanAgainstModel rejects plans a model cannot follow
// and checkPlanImplemented the combinations no pass implements yet (today
// ones with nonuniform `replicas`, and parameter offload).
//
// This is the one place plan.json is read. It depends on LLVMSupport and
// nlohmann-json only (not MLIR), so that fuzz/PlanFuzzer.cpp links it
// alone; --dist-apply-plan (ApplyPlan.cpp) turns a Plan into the typed
// #dist.plan attribute that passes read.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_PASSES_PLAN_PLAN_H
#define PARTITION_PASSES_PLAN_PLAN_H

#include "passes/plan/PlanAxisNames.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/LogicalResult.h"

#include <cstdint>
#include <optional>
#include <string>

namespace partition {

struct Plan {
  struct Mesh {
    /// cp: context parallelism, the sequence split over ranks
    /// (docs/context-parallel.md).
    int64_t dp = 1, tp = 1, pp = 1, cp = 1;
  } mesh;
  /// The most devices a mesh may have (dp x cp x tp x pp), far beyond any
  /// cluster, so that no size computed from the mesh overflows.
  static constexpr int64_t kMaxDevices = int64_t(1) << 24;
  struct TensorParallel {
    bool sequenceParallel = false;
    /// Megatron-LM's make-vocab-size-divisible-by: with tp > 1 the
    /// vocabulary is padded to a multiple of tp x vocabMultiple.
    int64_t vocabMultiple = 128;
    /// Whether plan.json gave vocab_multiple (checkPlanTakesEffect).
    bool vocabMultipleGiven = false;
    static constexpr int64_t kMaxVocabMultiple = int64_t(1) << 16;
    /// tensor_parallel.per_layer: a degree for layers [first, last]
    /// (plan.json's "a-b" or "a"); empty: every layer at mesh.tp.
    struct LayerRange {
      int64_t first, last, tp;
      /// "layer 3" or "layers 0-5", for messages.
      std::string describe() const;
    };
    llvm::SmallVector<LayerRange> perLayer;
    /// tensor_parallel.embedding.tp: the degree of the embedding, the final
    /// norm and the LM head (tied weights share it); unset: mesh.tp.
    std::optional<int64_t> embeddingTp;
    /// Layers beyond this are refused (as pipeline.stages' counts).
    static constexpr int64_t kMaxLayer = int64_t(1) << 20;
  } tensorParallel;
  struct Pipeline {
    /// gpipe, 1f1b, interleaved-1f1b or zero-bubble; unset when plan.json
    /// does not name one (then "1f1b").
    std::optional<std::string> schedule;
    int64_t microbatches = 1;
    /// Model chunks per stage (interleaved-1f1b only).
    int64_t virtualStages = 1;
    /// Layers of each chunk in model order (pp x virtual_stages entries);
    /// empty: balanced by cost.
    llvm::SmallVector<int64_t> stages;
    static constexpr int64_t kMaxVirtualStages = 64;
    /// Micro-batches of one step (gradient accumulation, or a pipeline's
    /// schedule): the step's IR and schedule grow with the count, so it is
    /// bounded before any work (plan.json, partition-compile
    /// --microbatches, --xfmr-train-step).
    static constexpr int64_t kMaxMicrobatches = 4096;
    /// The step is unrolled once per micro-batch (until the compiler
    /// loops over them), so its program grows with layers x micro-batches:
    /// about 7 KB of .ptp and 80 KB of compile memory each (gpt2-tiny, 4-16
    /// layers, 8-64 micro-batches). 65536 keeps a program near 0.5 GB;
    /// with pipeline stages the count is per stage's layers, the same total.
    static constexpr int64_t kMaxLayerMicrobatches = 65536;
    llvm::StringRef scheduleOrDefault() const {
      return schedule ? llvm::StringRef(*schedule) : "1f1b";
    }
  } pipeline;
  struct Zero {
    int64_t stage = 0;
  } zero;
  /// How attention crosses the sequence split of mesh.cp > 1.
  struct ContextParallel {
    /// all_gather (Llama 3: keys and values all-gathered, their gradients
    /// reduce-scattered) or ring.
    std::string method = "all_gather";
    /// zigzag: each sequence cut into 2 x cp chunks, rank r holding chunks
    /// r and 2 cp - 1 - r so that causal attention's work is even; none:
    /// rank r holds the r-th contiguous block.
    std::string loadBalance = "zigzag";
    /// Whether plan.json gave the object (refused without cp > 1).
    bool given = false;
    /// The chunks a sequence is cut into and reordered for the layout
    /// (xfmr.sequence_positions): 2 x cp with zigzag (chunk order 0,
    /// 2cp-1, 1, 2cp-2, ...: rank r's block is chunks r and 2cp-1-r), 1
    /// (the natural order: rank r's block is the r-th) without.
    int64_t chunks(int64_t cp) const {
      return loadBalance == "zigzag" ? 2 * cp : 1;
    }
  } contextParallel;
  /// Mixture-of-experts parallelism (docs/moe.md).
  struct Moe {
    /// The ranks each MoE layer's experts are split over, out of the
    /// data-parallel ones (E / EP experts per rank; the tokens reach their
    /// experts by all-to-alls).
    int64_t expertParallel = 1;
    /// The tensor-parallel degree of the experts' FFN; 0: not given (the
    /// model's, mesh.tp: Megatron-LM's default).
    int64_t expertTensorParallel = 0;
  } moe;
  /// Communication hidden behind computation (--rt-overlap-collectives):
  /// on by default.
  struct Overlap {
    /// Start each data-parallel gradient all-reduce as soon as its bucket
    /// is complete and wait for it where the optimizer first reads it
    /// (plans with dp > 1 and no pipeline).
    bool dataParallel = true;
    /// plan.json gave it (refused where it would do nothing).
    bool dataParallelGiven = false;
    /// Start each tensor-parallel collective that has independent work
    /// before its first use (the weight gradient's GEMM after the input
    /// gradient's) and wait for it there (plans with tp > 1 and no
    /// pipeline). Off by default: see docs/performance.md for why.
    bool tensorParallel = false;
    bool tensorParallelGiven = false;
  } overlap;
  struct Recompute {
    /// none, full, selective or budget.
    std::string policy = "none";
    /// Only with policy budget (required there).
    int64_t budgetBytes = 0;
  } recompute;
  /// fp32 or bf16.
  std::string precision = "fp32";
  /// Optimizer state in a tier of its own (docs/offload.md): the AdamW
  /// moments held in host memory or in a file on NVMe and staged through
  /// the arena slice by slice (--rt-offload-optimizer).
  struct Offload {
    /// none, host or nvme.
    std::string optimizer = "none";
    /// none, host or nvme: parameter offload (ZeRO-3), refused until its
    /// pass exists (checkPlanImplemented).
    std::string parameters = "none";
    /// nvme: the directory of the per-rank offload files (partition-run
    /// --offload-path overrides it).
    std::string path;
    /// The most bytes of staging buffers in the arena at once: half for
    /// the slices read ahead (the one being updated included), half for
    /// those being written back, each of both moments.
    int64_t bufferBytes = kDefaultBufferBytes;
    /// Whether plan.json gave the object, path and buffer_bytes
    /// (checkPlanTakesEffect refuses them with optimizer none).
    bool given = false, pathGiven = false, bufferBytesGiven = false;
    /// 64 MiB: slices of 5.3 MiB per moment (gpt2-124m's embedding
    /// table, 154 MB, in 29).
    static constexpr int64_t kDefaultBufferBytes =
        planfile::kOffloadDefaultBufferBytes;
    /// Slices are whole 4096-byte I/O blocks (O_DIRECT's unit). The
    /// smallest buffer holds three slices of both moments (one updated, one
    /// read, one written); a larger one is cut in twelfths, so that three
    /// slices of both moments are read ahead while three are written.
    static constexpr int64_t kSliceAlignment = planfile::kOffloadSliceAlignment;
    static constexpr int64_t kMinBufferBytes = planfile::kOffloadMinBufferBytes;
    static constexpr int64_t kSlicesPerBuffer =
        planfile::kOffloadSlicesPerBuffer;
    /// The bytes of one moment's slice under `bufferBytes`.
    static int64_t sliceBytes(int64_t bufferBytes) {
      return planfile::offloadSliceBytes(bufferBytes);
    }
    bool enabled() const { return optimizer != "none"; }
  } offload;
  /// Nonuniform tensor parallelism across data-parallel replicas (NTP,
  /// docs/nonuniform-tp.md): replica i runs the step at its own tp degree
  /// on ranks numbered replica by replica, on `batchShare` parts of each
  /// global batch. Empty: the uniform mesh.
  struct Replica {
    int64_t tp = 1;
    int64_t batchShare = 1;
  };
  llvm::SmallVector<Replica> replicas;

  /// Ranks the plan runs on: the replicas' degrees summed, else the mesh's
  /// product.
  int64_t devices() const;
  /// The uniform plan replica `index`'s step is compiled with: mesh
  /// {tp: its degree}, the tensor-parallel, recompute and precision fields
  /// kept, no replicas.
  Plan replicaPlan(size_t index) const;
  /// Replica `index`'s rows of a global batch of `batch` sequences: (first
  /// row, rows). nullopt when the shares do not split it into whole
  /// sequences.
  std::optional<std::pair<int64_t, int64_t>> replicaRows(int64_t batch,
                                                         size_t index) const;
  /// The smallest batch the shares split into whole sequences (their sum
  /// over their gcd); 1 without replicas.
  int64_t batchGranule() const;

  /// What a mesh axis splits: dist::AxisRole without MLIR (this header
  /// links without it); ApplyPlan.cpp converts (toAxisRole).
  enum class AxisRole { Data, Tensor, Pipeline, Context, Expert };
  /// The names of the mesh's axes: plan.json's fields under "mesh"
  /// (spelled once, in PlanAxisNames.h). Everyone else looks axes up by
  /// role or uses these.
  static constexpr llvm::StringLiteral kDataAxis = planfile::kDataAxis;
  static constexpr llvm::StringLiteral kTensorAxis = planfile::kTensorAxis;
  static constexpr llvm::StringLiteral kPipelineAxis =
      planfile::kPipelineAxis;
  static constexpr llvm::StringLiteral kContextAxis = planfile::kContextAxis;
  static constexpr llvm::StringLiteral kExpertAxis = planfile::kExpertAxis;
  /// A mesh axis: its name (plan.json's field under "mesh"), its role and
  /// its size.
  struct Axis {
    llvm::StringRef name;
    AxisRole role;
    int64_t size;
  };
  /// The mesh's axes in mesh order (dp, pp, cp, tp), size-1 axes included
  /// but cp, which is there only when cp > 1 (so plans without context
  /// parallelism keep their mesh). tp varies fastest, then cp: as
  /// Megatron-LM numbers ranks, the ranks of a context group are one
  /// tensor group apart.
  llvm::SmallVector<Axis, 4> axes() const;

  /// Whether parts of the model have their own tensor-parallel degree
  /// (tensor_parallel.per_layer or .embedding).
  bool hasPartDegrees() const {
    return !tensorParallel.perLayer.empty() || tensorParallel.embeddingTp;
  }
  /// The tensor-parallel degree of layer `layer` (mesh.tp where per_layer
  /// gives none) and of the embedding / LM head.
  int64_t layerTp(int64_t layer) const;
  int64_t embeddingTp() const {
    return tensorParallel.embeddingTp.value_or(mesh.tp);
  }
  /// Every degree a part of the model has, mesh.tp included, ascending and
  /// without repeats (parsePlan checked that each divides the next).
  llvm::SmallVector<int64_t> tensorDegrees() const;
};

/// `vocab` rounded up to a multiple of `granule` (tp x vocab_multiple):
/// the rows of a vocabulary-parallel embedding table and LM head, as
/// Megatron-LM pads them so that they split evenly.
inline int64_t paddedVocab(int64_t vocab, int64_t granule) {
  return (vocab + granule - 1) / granule * granule;
}

/// Reports one error; the message starts with the plan's file name.
using PlanErrorFn = llvm::function_ref<void(const llvm::Twine &)>;

/// Parses plan.json text; `fileName` (as the user gave it) starts every
/// message. An empty or whitespace-only text is an error (leave out the
/// plan for the default plan), and so is a key given twice in one object.
llvm::FailureOr<Plan> parsePlan(llvm::StringRef json, llvm::StringRef fileName,
                                PlanErrorFn emitError);

/// What checkPlanAgainstModel needs to know of a model (its `xfmr.model`
/// configuration); absent fields are not checked.
struct PlanModel {
  std::optional<int64_t> batch, heads, kvHeads, layers, vocab, seqLen;
  /// The experts of each MoE layer; 0 or absent: a dense model.
  std::optional<int64_t> experts;
  /// A MoE model whose experts have a capacity (they drop tokens).
  bool expertCapacity = false;
  /// A MoE model with DeepSeek-V3's routing bias (load_balance aux-free).
  bool routingBias = false;
};

/// Checks that the model can follow the plan; every problem is reported
/// (not only the first).
llvm::LogicalResult checkPlanAgainstModel(const Plan &plan,
                                          const PlanModel &model,
                                          llvm::StringRef fileName,
                                          PlanErrorFn emitError);

/// Refuses the plan fields whose pass does not exist yet (pp > 1, ZeRO,
/// recomputation, a pipeline schedule), one message per field, so that no
/// field is silently ignored. The list lives in Plan.cpp
/// (kNotImplemented): a pass that implements a field removes its line.
llvm::LogicalResult checkPlanImplemented(const Plan &plan,
                                         llvm::StringRef fileName,
                                         PlanErrorFn emitError);

/// Refuses fields that would do nothing on the plan's mesh (the README
/// promises that no field is ignored): zero.stage > 0 without data
/// parallelism, pipeline.schedule without pipeline parallelism, and
/// tensor_parallel.vocab_multiple without tensor parallelism. One message
/// per field. Only for the plan a step is compiled with (--dist-apply-plan):
/// partition-plan --plan reads partial plans whose mesh it searches.
llvm::LogicalResult checkPlanTakesEffect(const Plan &plan,
                                         llvm::StringRef fileName,
                                         PlanErrorFn emitError);

} // namespace partition

#endif // PARTITION_PASSES_PLAN_PLAN_H
