//===- Passes.td - the passes of the partition compiler ----*- tablegen -*-===//

#ifndef PARTITION_PASSES
#define PARTITION_PASSES

include "mlir/Pass/PassBase.td"

// The training step and what works on it before partitioning.
include "passes/frontend/FrontendPasses.td"

def ApplyPlanPass : Pass<"dist-apply-plan", "::mlir::ModuleOp"> {
  let summary = "Read plan.json, check it against the model and record it";
  let description = [{
    Reads the parallelization plan (`plan=<path to plan.json>`; without a
    path, the default plan) with passes/plan/Plan.h, checks it against the
    `xfmr.model` configuration of the module's model function (the forward
    function or the training step), and records it: a `dist.mesh @mesh`
    with all three axes (size-1 axes included, so later passes can rely on
    them) at the top of the module, and the whole plan, defaults filled in,
    as the module's typed `dist.plan` (#dist.plan; passes read it with
    `dist::getPlan`), each mesh axis with its role.

    Every plan.json field is optional (defaults: mesh 1x1x1, no sequence
    parallelism, 1 micro-batch, ZeRO stage 0, no recompute, fp32). An empty
    file, invalid JSON, a key given twice, unknown fields, wrong types,
    out-of-range values and plans the model cannot follow are errors on the
    module that start with the file's name and name the field and the
    values, e.g. `p.json: mesh.dp must be a positive integer, got 0` or
    `p.json: the batch of 6 sequences is not divisible by mesh.dp = 4`.
    A plan with `replicas` (nonuniform tensor parallelism, NTP) is compiled
    one replica at a time: `replica=N` records replica N's uniform plan
    (mesh `{tp: its degree}`); without it such a plan is refused.
    Combinations no pass implements yet (today: `replicas` with mesh.pp,
    with ZeRO, or with per-part tensor-parallel degrees) are refused, one
    error each, e.g. `p.json: replicas with zero.stage = 1 needs ZeRO across
    replicas of different degrees, which is not implemented yet; use
    zero.stage 0 or leave out the replicas`.

    The mesh's tp may be laid out as several tensor axes, major first, with
    rank numbering unchanged: cut at the key-value heads when the model has
    fewer than tp (`tp`, `tp_kv_rep`), and at every degree of
    `tensor_parallel.per_layer` / `.embedding` (`tp`, `tp_sub`, ...; the
    degrees are recorded as `layer_tp` and `embedding_tp`), so that each
    part of the model splits over a major prefix (docs/nonuniform-tp.md).

    Input (plan.json `{"mesh": {"dp": 2}, "pipeline": {"microbatches": 2}}`):
    ```mlir
    module {
      func.func @forward(...) -> tensor<f32> attributes {xfmr.model = {...}}
    }
    ```
    Output:
    ```mlir
    module attributes {dist.plan = #dist.plan<mesh = @mesh,
        axes = [dp = data, pp = pipeline, tp = tensor],
        sequence_parallel = false, schedule = "1f1b", microbatches = 2,
        zero_stage = 0, recompute = none, precision = "fp32">} {
      dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]
      func.func @forward(...) -> tensor<f32> attributes {xfmr.model = {...}}
    }
    ```
  }];
  let dependentDialects = ["::partition::dist::DistDialect"];
  let options = [
    Option<"planPath", "plan", "std::string", "\"\"",
           "Path of plan.json (empty: the default plan)">,
    Option<"replica", "replica", "int64_t", "-1",
           "With a plan that lists replicas (NTP): record replica N's "
           "uniform plan (mesh {tp: its degree}); -1: none">,
  ];
}

def ReplicaBatchPass : Pass<"dist-replica-batch", "::mlir::ModuleOp"> {
  let summary = "Give the forward function one NTP replica's rows of the batch";
  let description = [{
    With a plan that lists `replicas` (nonuniform tensor parallelism),
    replica N trains on its `batch_share` of each global batch of B
    sequences: rows [offset, offset + B_N). This pass runs on the forward
    function before `--xfmr-train-step` and rewrites it for B_N rows: the
    tokens and targets become [B_N, T] and every value computed from them
    gets B_N as its first dimension (each op is rebuilt with the new result
    types and verified). The `xfmr.model` configuration keeps the global
    batch B (a checkpoint's model is the same under every plan), and the
    loss stays the mean over the replica's own tokens: the runtime weights
    it by B_N / B. Nothing changes when B_N = B.

    Errors: a plan without replicas, `replica` out of range, or shares that
    do not split B into whole sequences (the message names the batch sizes
    that would).

    Input (plan replicas `[{"tp": 2, "batch_share": 2}, {"tp": 1} ]`,
    replica=1, B = 6):
    ```mlir
    func.func @forward(..., %tokens: tensor<6x64xi32>, %targets: tensor<6x64xi32>) -> tensor<f32>
      %0 = xfmr.embedding %tokens, %wte : (tensor<6x64xi32>, tensor<256x64xf32>) -> tensor<6x64x64xf32>
    ```
    Output:
    ```mlir
    func.func @forward(..., %tokens: tensor<2x64xi32>, %targets: tensor<2x64xi32>) -> tensor<f32>
      %0 = xfmr.embedding %tokens, %wte : (tensor<2x64xi32>, tensor<256x64xf32>) -> tensor<2x64x64xf32>
    ```
  }];
  let options = [
    Option<"planPath", "plan", "std::string", "\"\"",
           "Path of plan.json (it lists the replicas)">,
    Option<"replica", "replica", "int64_t", "0",
           "The replica whose rows the forward function gets">,
  ];
}

def PadVocabPass : Pass<"dist-pad-vocab", "::mlir::ModuleOp"> {
  let summary = "Pad the vocabulary to a multiple of tp x vocab_multiple, as Megatron-LM does";
  let description = [{
    Runs after `--dist-apply-plan`, on the forward function, when the plan's
    tensor axis has size tp > 1: the vocabulary-parallel embedding, LM head
    and loss split the vocabulary V evenly over it, so V is padded to Vp,
    the next multiple of tp x vocab_multiple (plan.json's
    `tensor_parallel.vocab_multiple`, Megatron-LM's
    make-vocab-size-divisible-by, default 128). The parameters that hold
    one row per id (the embedding tables and the bias-less LM head whose
    logits feed `xfmr.softmax_cross_entropy`) become [Vp, C], the logits
    [B, T, Vp], and the loss gets `vocab = V`: the padding logits are left
    out of the softmax and get a gradient of exactly zero, so the padding
    rows (zero at initialisation) stay zero and the loss and every gradient
    are those of the unpadded model. The model configuration records
    `padded_vocab = Vp` and `padded_params` (their names) for the runtime,
    which initialises and checkpoints those tensors at their V logical rows.

    Input (tp = 2, vocab_multiple = 128):
    ```mlir
    func.func @forward(%wte: tensor<250x16xf32> {xfmr.param = "wte"}, ...)
      %logits = xfmr.linear %x, %wte : (...) -> tensor<2x8x250xf32>
      %loss = xfmr.softmax_cross_entropy %logits, %targets : ...
    ```
    Output:
    ```mlir
    func.func @forward(%wte: tensor<256x16xf32> {xfmr.param = "wte"}, ...)
      %logits = xfmr.linear %x, %wte : (...) -> tensor<2x8x256xf32>
      %loss = xfmr.softmax_cross_entropy %logits, %targets {vocab = 250 : i64} : ...
    ```
    Errors: a vocabulary-sized parameter used by an op other than an
    embedding or the LM head, an LM head with a bias, logits that do not
    come from a parameter's linear.
  }];
  let dependentDialects = ["::partition::dist::DistDialect"];
}

// --- The partitioner, in phases (passes/partition/) ------------------------
//
// --dist-seed-layouts, --dist-propagate, --dist-partition and
// --dist-bucket-gradients, in this order, turn the single-device steps into
// the program every device of the plan's mesh runs; --dist-shard runs all
// four (the pipeline partition-compile uses), --dist-data-parallel the same
// without tensor parallelism.

def SeedLayoutsPass : Pass<"dist-seed-layouts", "::mlir::ModuleOp"> {
  let summary = "Seed the partitioner: split the batch inputs over the plan's data axis";
  let description = [{
    The first phase of the partitioner (run `--dist-apply-plan` and
    `--xfmr-train-step` first). Every input of `@train_step` and
    `@eval_step` with a batch dimension (an `xfmr.input` argument of rank one
    or more: the tokens and targets) is annotated `dist.sharding` split on
    dimension 0 over the axis whose role is `data`, so that data-parallel
    rank r holds rows [r B/dp, (r+1) B/dp). Arguments the user already
    annotated keep their annotation (annotations win); they must name the
    plan's mesh and be whole or split, never partial.

    Input (dp = 2):
    ```mlir
    func.func @train_step(..., %tokens: tensor<4x8xi32> {xfmr.input = "tokens"}, ...)
    ```
    Output:
    ```mlir
    func.func @train_step(..., %tokens: tensor<4x8xi32> {dist.sharding = #dist.sharding<@mesh, [[dp], []]>, xfmr.input = "tokens"}, ...)
    ```
  }];
  let dependentDialects = ["::partition::dist::DistDialect"];
  let options = [
    Option<"dataParallel", "data-parallel", "bool", "true",
           "Split the batch over the data axis">,
  ];
}

def PropagatePass : Pass<"dist-propagate", "::mlir::ModuleOp"> {
  let summary = "Decide and record the layout of every value over the mesh";
  let description = [{
    The second phase: from the seeds and the ops' sharding rules
    (ShardingRuleOpInterface) alone, decides how every value of the steps
    is laid out, in program order, and records it; types stay global.

    - Parameters are placed at their first use: as annotated; else by the
      tensor-parallel policy (Megatron-LM's layout, read from the rules:
      a weight whose factors another operand splits over the tensor axis
      follows it (row-parallel), else the rule's preferred weight factor is
      split: a linear's output features (column-parallel), an embedding's
      vocabulary (vocab-parallel)); else as the op's factors give. Moments
      follow their parameter; `@eval_step` reuses `@train_step`'s choices.
    - A factor is split like the operand dimensions that map to it; placed
      state wins over activations, kept factors over summed ones; an
      operand that disagrees is consumed resharded.
    - A result summing over a split factor is partial over its axes.
      Partial sums pass through linear ops (add, scale, cast); other uses
      consume the whole sum, or with sequence parallelism sequence blocks.

    Recorded: `dist.sharding` on arguments (the seeds among them) and per
    result on ops, and `dist.operand_shardings` (one sharding per operand)
    on ops that consume an operand other than replicated. Errors name the
    value and sizes.

    Input (tp = 2, after the seeds):
    ```mlir
    %y = xfmr.linear %x, %w : (tensor<4x8x64xf32>, tensor<256x64xf32>) -> tensor<4x8x256xf32>
    ```
    Output:
    ```mlir
    %w: tensor<256x64xf32> {dist.sharding = #dist.sharding<@mesh, [[tp], []]>, xfmr.param = "fc.weight"}
    %y = xfmr.linear %x, %w {dist.operand_shardings = [#dist.sharding<@mesh, [[], [], []]>, #dist.sharding<@mesh, [[tp], []]>],
                             dist.sharding = #dist.sharding<@mesh, [[], [], [tp]]>} : ...
    ```
  }];
  let dependentDialects = ["::partition::dist::DistDialect",
                           "::partition::xfmr::XfmrDialect"];
  let options = [
    Option<"tensorParallel", "tensor-parallel", "bool", "true",
           "Place unplaced weights over the tensor axis in Megatron-LM's "
           "layout (off: weights stay whole unless annotated)">,
  ];
}

def PartitionPass : Pass<"dist-partition", "::mlir::ModuleOp"> {
  let summary = "Give every value its local type and insert the resharding collectives";
  let description = [{
    The third phase: makes the layouts `--dist-propagate` recorded real.
    Values take their local types; where an op consumes an operand in a
    layout other than the one it was made in, collectives convert it: a
    partial sum is all-reduced right after it is made (reduce-scattered
    along the sequence with sequence parallelism; a sum over the data axis
    alone gets an all_reduce labelled "data-parallel sum (to bucket)" for
    `--dist-bucket-gradients`); split dimensions are all-gathered and
    sliced, every gather before any slice. Ops whose local computation
    differs adapt themselves (`partitionLocally`: attention heads,
    row-parallel bias, vocab-parallel embedding and cross-entropy); a mean
    over split factors (the loss) becomes each device's share of a sum.
    State and token arguments (and state results) get
    `dist.local_sharding`; the recorded layouts are dropped.

    Input (the output of `--dist-propagate`, tp = 2):
    ```mlir
    %w: tensor<256x64xf32> {dist.sharding = #dist.sharding<@mesh, [[tp], []]>, xfmr.param = "fc.weight"}
    %y = xfmr.linear %x, %w {dist.operand_shardings = [#dist.sharding<@mesh, [[], [], []]>, #dist.sharding<@mesh, [[tp], []]>],
                             dist.sharding = #dist.sharding<@mesh, [[], [], [tp]]>} : ...
    ```
    Output (each device's block):
    ```mlir
    %w: tensor<128x64xf32> {dist.local_sharding = #dist.sharding<@mesh, [[tp], []]>, xfmr.param = "fc.weight"}
    %y = xfmr.linear %x, %w : (tensor<4x8x64xf32>, tensor<128x64xf32>) -> tensor<4x8x128xf32>
    ```
  }];
  let dependentDialects = ["::partition::dist::DistDialect",
                           "::partition::xfmr::XfmrDialect"];
}

def BucketGradientsPass : Pass<"dist-bucket-gradients", "::mlir::ModuleOp"> {
  let summary = "Group the data-parallel gradient reductions into buckets";
  let description = [{
    The last phase: the one-value all_reduces over the data axis that
    `--dist-partition` labelled "data-parallel sum (to bucket)" become
    buckets of at most `bucket-bytes` (default 25 MiB, as PyTorch DDP), in
    backward order, each placed right after its last gradient is computed
    so that communication can overlap the rest of the backward pass; a
    bucket closes before a gradient it cannot wait for. Gradients
    accumulated over micro-batches are reduced once. The loss has an
    all_reduce of its own, labelled "loss".

    Input:
    ```mlir
    %dw = xfmr.linear_grad_weight %dy, %x : ... -> tensor<16x32xf32>
    %s0 = dist.all_reduce %dw on @mesh axes [dp] reduce = sum {dist.label = "data-parallel sum (to bucket)"} : tensor<16x32xf32>
    %db = ...
    %s1 = dist.all_reduce %db on @mesh axes [dp] reduce = sum {dist.label = "data-parallel sum (to bucket)"} : tensor<16xf32>
    ```
    Output:
    ```mlir
    %s:2 = dist.all_reduce %dw, %db on @mesh axes [dp] reduce = sum {dist.label = "gradient bucket 0"} : tensor<16x32xf32>, tensor<16xf32>
    ```
  }];
  let dependentDialects = ["::partition::dist::DistDialect"];
  let options = [
    Option<"bucketBytes", "bucket-bytes", "int64_t", "26214400",
           "Largest gradient bucket all-reduced at once, in bytes">,
  ];
}

def ZeroPass : Pass<"dist-zero", "::mlir::ModuleOp"> {
  let summary = "Shard AdamW state, gradients and parameters over the data-parallel ranks (ZeRO stages 1-3)";
  let description = [{
    ZeRO (Rajbhandari et al.) as Megatron-LM's distributed optimizer does
    it, on every function that carries `xfmr.train_step` (so that it works
    per pipeline stage too), after partitioning and bucketing. The stage
    is the plan's `zero.stage` (the `stage` option overrides it); nothing
    changes at stage 0 or without a data-parallel axis.

    Each gradient reduction over the data axis that feeds AdamW (a
    "gradient bucket", or a one-gradient sum over the data axis and others,
    as sequence parallelism makes for norm weights) becomes:
    - a `dist.flat_pack` of its gradients into a bucket [dp, C]: every
      tensor flattened, zero-padded to a multiple of dp and cut into dp
      chunks, row r holding chunk r of each (so no size is refused);
    - a `dist.reduce_scatter` of the bucket over the data axis: rank r
      gets row r, its chunk of every gradient (the other axes of a mixed
      sum are all-reduced first);
    - AdamW on the chunk: the moments are state of one chunk each
      (`dist.flat_shard` on the argument and result: 1/dp of every
      tensor per rank), the parameter's chunk cut out of the replicated
      parameter (`dist.flat_pack` + `dist.all_slice`);
    - a `dist.all_gather` of the updated chunks, unpacked into the whole
      parameters.
    Per rank and step the traffic is that of the all-reduce it replaces,
    2 Psi (dp - 1) / dp bytes for Psi bytes of gradients.

    "dp" is each parameter's group: the data-parallel axes (data, expert
    and context) it is not split over. Expert parallelism's experts are
    split over the expert axis, so their state is sharded over the data
    axis alone (Megatron-LM's expert-data-parallel group: the ranks that
    hold the same experts), in buckets of their own; the other parameters'
    over all of them. A parameter whose group is one rank (experts when
    moe.expert_parallel = mesh.dp) keeps its state whole.

    Stage 2 compiles to the same program: every bucket is reduce-scattered
    right after its last gradient is produced and only the chunk is kept,
    since the memory plan frees each whole gradient after its bucket's
    pack (stage 1 keeps nothing more: buffers are planned by liveness).
    With micro-batches gradients are accumulated whole, then
    reduce-scattered once per step (Megatron's choice): the traffic stays
    2 Psi (dp - 1) / dp per step instead of growing with the micro-batch
    count, at the price of whole accumulated gradients during the
    micro-batches.

    Stage 3 also shards the parameters (`dist.flat_shard` on them, in the
    evaluation step too): each layer's parameters (`xfmr.layer`; every
    other parameter a group of its own; a layer's experts apart from its
    other parameters, over their own group) are all-gathered into whole
    tensors before each run of forward uses and again before each run of
    backward uses, each gather issued where the gather before it is first
    used (prefetch, one layer ahead); the memory plan frees the whole
    copies after their last use. On a pipeline stage whose actions are
    marked for an action walk (`rt.action_mark`), each action gathers
    what it reads and prefetches only within itself: the walk runs one
    copy of each kind of action for every micro-batch. AdamW then updates the rank's chunk in
    place of the final all-gather: 3 Psi (dp - 1) / dp bytes per rank (less
    the backward gathers of parameters the backward does not read).

    Input (dp = 2):
    ```mlir
    %g:2 = dist.all_reduce %dw, %db on @mesh axes [dp] reduce = sum {dist.label = "gradient bucket 0"} : tensor<3x5xf32>, tensor<5xf32>
    %w2, %mw2, %vw2 = xfmr.adamw %w, %g#0, %mw, %vw, %t, %lr : ...
    ```
    Output:
    ```mlir
    %b = dist.flat_pack %dw, %db : tensor<3x5xf32>, tensor<5xf32> -> tensor<2x11xf32>
    %s = dist.reduce_scatter %b on @mesh axes [dp] dim = 0 reduce = sum : tensor<2x11xf32> -> tensor<1x11xf32>
    %gw, %gb = dist.flat_unpack %s : tensor<1x11xf32> -> tensor<8xf32>, tensor<3xf32>
    ...
    %w2s, %mw2, %vw2 = xfmr.adamw %ws, %gw, %mw, %vw, %t, %lr : (tensor<8xf32>, ...)
    %p = dist.flat_pack %w2s, %b2s : tensor<8xf32>, tensor<3xf32> -> tensor<1x11xf32>
    %a = dist.all_gather %p on @mesh axes [dp] dim = 0 : tensor<1x11xf32> -> tensor<2x11xf32>
    %w2, %b2 = dist.flat_unpack %a : tensor<2x11xf32> -> tensor<3x5xf32>, tensor<5xf32>
    ```
  }];
  let dependentDialects = ["::partition::dist::DistDialect"];
  let options = [
    Option<"stage", "stage", "int64_t", "-1",
           "ZeRO stage 0-3 (default -1: the plan's zero.stage)">,
  ];
}

def RecomputePass : Pass<"dist-recompute", "::mlir::ModuleOp"> {
  let summary = "Recompute forward values in the backward pass instead of keeping them";
  let description = [{
    Activation recomputation on the training step, after autodiff and
    partitioning (so it composes with dp, tp, SP, micro-batches and bf16).
    The forward values that backward ops read are kept alive from the
    forward pass to the backward; the policy (the pass's `policy` option,
    else the plan's `recompute`, else none) recomputes some of them
    instead: each backward use reads a clone of the forward ops that
    computed the value, rebuilt from the nearest kept values right before
    its first backward use. Clones carry `dist.recomputed`.

    - `none`: nothing changes.
    - `selective`: keep the outputs of matmuls, attention and the
      reductions that complete them; recompute the cheap work between them
      (norms, GELU / SwiGLU, residual sums inside a layer, casts, gathers).
    - `full`: per transformer layer keep only the layer's input (the
      residual stream; with SP its sequence-split form) and rebuild the
      layer's forward, collectives included, in its backward.
    - `budget` (with `budget-bytes`, else the plan's
      `recompute.budget_bytes`): the least extra compute whose arena peak
      (everything --lower-memory-plan places, measured by running
      --lower-to-rt and --lower-memory-plan on a copy) fits the budget: the
      Pareto frontier of kept bytes against rebuilt FLOPs
      (scheduling/Budget.h), walked cheapest first with the real
      peak, skipping what a lower bound rules out. A budget
      below what `full` needs is an error naming that peak; one that fits
      `none` recomputes nothing. With `report`, prints the choice and the
      kept bytes per layer.

    The results are bit-identical to `none`. Collectives in recomputed work
    are cloned in program order, the same on every rank.

    Input (`policy=full`):
    ```mlir
    %h = xfmr.layernorm %x, %g, %b : ...        // %x: the layer's input
    %y = xfmr.linear %h, %w, %c : ...
    ...
    %dx = xfmr.linear_grad_input %dy, %w : ...
    %dw, %dc = xfmr.linear_grad_weight %dy, %h : ...
    ```
    Output:
    ```mlir
    %h = xfmr.layernorm %x, %g, %b : ...
    %y = xfmr.linear %h, %w, %c : ...
    ...
    %dx = xfmr.linear_grad_input %dy, %w : ...
    %h2 = xfmr.layernorm %x, %g, %b {dist.recomputed} : ...
    %dw, %dc = xfmr.linear_grad_weight %dy, %h2 : ...
    ```
  }];
  // The budget policy lowers and plans copies of the module (dynamic
  // pipelines), whose dialects must be loaded before it runs.
  let dependentDialects = ["::partition::dist::DistDialect",
                           "::partition::xfmr::XfmrDialect",
                           "::partition::rt::RtDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::arith::ArithDialect"];
  let options = [
    Option<"policy", "policy", "std::string", "\"\"",
           "none, selective, full or budget (default: the plan's recompute "
           "policy, none without a plan)">,
    Option<"budgetBytes", "budget-bytes", "int64_t", "0",
           "budget: the most bytes the arena may take per rank (default: the "
           "plan's recompute.budget_bytes)">,
    Option<"report", "report", "bool", "false",
           "budget: print the arena peak chosen and the bytes each layer "
           "keeps">,
    Option<"exhaustiveCheck", "exhaustive-check", "bool", "false",
           "budget, for tests: also measure every frontier point and fail if "
           "a cheaper one fits or a lower bound exceeds a real peak">,
    Option<"measurePipeline", "measure-pipeline", "std::string", "\"\"",
           "budget: the passes that follow this one up to the memory plan, "
           "as a textual pipeline, run on each measured copy (default: "
           "builtin.module(lower-to-rt,lower-memory-plan); partition-compile "
           "puts --dist-pipeline and what follows it first with pp > 1: the "
           "peak is then the largest stage's arena)">,
  ];
}

def TestShardingRulesPass : Pass<"xfmr-test-sharding-rules", "::mlir::ModuleOp"> {
  let summary = "Print every op's sharding rule (for tests)";
  let description = [{
    For each op with a sharding rule, prints one line: the factors with
    their sizes (`(opaque)`: must stay whole; `(op)`: the op splits it
    itself), each operand's and result's dimensions as factors (`_`: no
    factor), the factors each result sums over, a mean's factors and the
    value it scales, tied factors and whether partial sums pass through.

    Input:
    ```mlir
    %y = xfmr.linear %x, %w : (tensor<2x8x16xf32>, tensor<32x16xf32>) -> tensor<2x8x32xf32>
    ```
    Output (stdout):
    ```
    xfmr.linear: f0=2 f1=8 f2=16 f3=32 | [f0, f1, f2] [f3, f2] -> [f0, f1, f3]{sum f2}
    ```
    The IR is left unchanged.
  }];
}

// --- Pipeline parallelism (passes/pipeline/) --------------------------------

def DistPipelinePass : Pass<"dist-pipeline", "::mlir::ModuleOp"> {
  let summary = "Cut the training step into pipeline stages, in the schedule's order";
  let description = [{
    Pipeline parallelism over the mesh axis whose role is `pipeline` (size
    p), after `--xfmr-train-step` with `microbatches=m` and after
    `--dist-partition` (types are local; any tensor-parallel collectives
    stay inside their stage) and `--dist-recompute`, before
    `--dist-bucket-gradients` (so that each stage buckets its own
    gradients). Replaces `@train_step` / `@eval_step` by
    `@train_step_stage<k>` / `@eval_step_stage<k>` for k in 0..p-1, each
    with `dist.pipeline_stage = k` and the step's attributes.

    Every op gets a model chunk, a micro-batch and a phase from the IR
    alone: the chunk from the `xfmr.layer` of the parameters it reads (else
    from its operands; the embedding belongs to the first chunk, the final
    norm, LM head and loss to the last), the micro-batch from the
    `tensor.extract_slice` of tokens / targets it depends on, the phase
    from the loss-gradient seed (forward F before it; backward after it,
    split into B, the input gradients, and W, the ops whose results only
    feed parameter gradients, accumulation and the optimizer). The layers
    are cut into p x v chunks (v = `virtual-stages`) at the least largest
    chunk cost (matmul FLOPs plus bytes written), unless `stages` gives the
    layer count of each chunk; chunk c runs on stage c mod p.

    Each stage's function runs the actions of `scheduling/Schedule.h`
    for that stage in order (F(mb, chunk), B, W), then the optimizer of the
    parameters it holds. A value another stage uses is sent right after it
    is made (`dist.send ... {label = "F mb1 activations stage0->1"}`) and
    received before its first use; receives from one peer follow that
    peer's send order. A parameter used on several stages (GPT-2's tied
    `wte`) is held by each: each sums its own gradient contributions, the
    partial sums are exchanged and added in stage order, so every copy gets
    the same update. The eval step runs forwards only.

    Input (p = 2, 2 layers, `microbatches=2`):
    ```mlir
    func.func @train_step(%wte: ... {xfmr.param = "wte"}, ...,
        %h0: ... {xfmr.layer = 0 : i64, xfmr.param = "h.0.ln_1.weight"}, ...)
    ```
    Output:
    ```mlir
    func.func @train_step_stage0(%wte: ..., %h0: ..., ..., %step, %lr, %tokens)
        -> (... params, moments, step) attributes {dist.pipeline_stage = 0 : i64, ...} {
      ...
      dist.send %x to @mesh [pp = 1] {label = "F mb0 activations stage0->1"} : tensor<4x64x64xf32>
      ...
      %g = dist.recv from @mesh [pp = 1] {label = "B mb0 gradients stage1->0"} : tensor<4x64x64xf32>
    ```
    The module records `dist.pipeline`: the schedule, micro-batches, chunks,
    each chunk's layers and its F / B / W costs, for the memory report and
    the schedule picture. Errors (numbers the schedule does not allow,
    `stages` that do not sum to the layers, a step that cannot be cut) name
    the field and the numbers.
  }];
  let dependentDialects = ["::partition::dist::DistDialect",
                           "::partition::rt::RtDialect",
                           "::partition::xfmr::XfmrDialect"];
  let options = [
    Option<"schedule", "schedule", "std::string", "\"\"",
           "gpipe, 1f1b, interleaved-1f1b or zero-bubble (default: the "
           "plan's)">,
    Option<"virtualStages", "virtual-stages", "int64_t", "1",
           "Chunks per stage (interleaved-1f1b)">,
    ListOption<"stageLayers", "stages", "int64_t",
               "Layers of each chunk, in model order (default: balanced by "
               "cost)">,
    Option<"markActions", "mark-actions", "bool", "false",
           "Put an rt.action_mark before each action's ops in the stage "
           "functions (its phase, model chunk and micro-batch) and one "
           "before the optimizer's, for the pass that forms the stage's "
           "action walk (--rt-action-walk); the step must be built for a "
           "walk (--xfmr-train-step's loop-walk)">,
  ];
}

#endif // PARTITION_PASSES
