//===- Passes.td - the passes of the partition compiler ----*- tablegen -*-===//

#ifndef PARTITION_PASSES
#define PARTITION_PASSES

include "mlir/Pass/PassBase.td"

def TrainStepPass : Pass<"xfmr-train-step", "::mlir::ModuleOp"> {
  let summary = "Turn a forward-plus-loss function into a whole training step";
  let description = [{
    Replaces the module's forward function (the one whose arguments carry
    `xfmr.param`) by `@train_step`: reverse-mode automatic differentiation of
    the loss followed by an AdamW update of every parameter. A parameter
    marked `xfmr.routing_bias = <rate>` (DeepSeek-V3's aux-free balancing)
    is state, not trained: no gradient, no moments; after the last
    micro-batch it is updated once by `xfmr.moe_bias_update` from the sum
    of the `xfmr.moe_expert_load` of every `xfmr.moe_route` that takes it.

    Autodiff is generic: each op builds its own backward through the
    `AutodiffOpInterface`; values that do not depend on a parameter get no
    gradient, and a value used several times (a residual stream, the tied
    embedding) sums its gradients. A loss that depends on no parameter (a
    constant, or one computed from the inputs alone) is an error naming the
    loss, since training could never change it. A parameter the loss does
    not depend on is a warning, not an error: its gradient is zero and only
    weight decay moves it, which a deliberately unused weight may want
    (PyTorch DDP errors there only because its reducer waits for every
    gradient).

    With `microbatches=k` the forward function is one micro-batch: the step
    takes k times as many sequences, runs forward and backward on each slice
    in turn (gradient accumulation), and averages losses and gradients
    (Megatron-LM's micro-batch semantics). Each micro-batch adds its loss to
    a running sum after its backward pass, and its gradients to the
    accumulated ones as autodiff produces them: with `microbatch-loop`, the
    code of every middle micro-batch is alike, and `--rt-microbatch-loop`
    keeps one copy of it. AdamW keeps fp32 moments, corrects
    their bias and applies decoupled weight decay to matrices only (not to
    biases, norm gains).

    Input:
    ```mlir
    func.func @forward(%w: tensor<4x4xf32> {xfmr.param = "w"}, ...,
                       %tokens: tensor<2x8xi32> {xfmr.input = "tokens"},
                       %targets: tensor<2x8xi32> {xfmr.input = "targets"})
        -> tensor<f32>
    ```
    Output:
    ```mlir
    func.func @train_step(%w: tensor<4x4xf32> {xfmr.param = "w"}, ...,
                          %m: tensor<4x4xf32> {xfmr.moment1 = "w"}, ...,
                          %v: tensor<4x4xf32> {xfmr.moment2 = "w"}, ...,
                          %step: tensor<i32> {xfmr.input = "step"},
                          %lr: tensor<f32> {xfmr.input = "lr"},
                          %tokens: tensor<2x8xi32> {xfmr.input = "tokens"},
                          %targets: tensor<2x8xi32> {xfmr.input = "targets"})
        -> (tensor<f32> {xfmr.output = "loss"},
            tensor<4x4xf32> {xfmr.param = "w"}, ...,   // updated parameters
            ..., tensor<i32> {xfmr.output = "step"})   // moments, step + 1
    ```
    The learning rate is an argument so that the runtime can follow a
    schedule without recompiling.
  }];
  let dependentDialects = ["::partition::xfmr::XfmrDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect"];
  let options = [
    Option<"optimizer", "optimizer", "std::string", "\"adamw\"",
           "adamw: update the parameters; none: return the gradients "
           "instead (each result tagged xfmr.gradient), for gradient checks">,
    Option<"withEval", "eval", "bool", "false",
           "Also build @eval_step(params, tokens, targets) -> loss: the same "
           "micro-batches' forward passes without gradients, for held-out "
           "evaluation">,
    Option<"withLogits", "logits", "bool", "false",
           "Also build @logits_step(params, tokens) -> logits: the forward "
           "pass up to the logits the loss is computed from, in fp32, one "
           "result per micro-batch in order, for checking a model's outputs "
           "(partition-run --dump-logits); an evaluation entry point (it "
           "carries xfmr.eval_step), whose output buffers the memory plan "
           "keeps for the whole run">,
    Option<"microbatches", "microbatches", "int64_t", "1",
           "Micro-batches accumulated per step (gradient accumulation)">,
    Option<"loop", "microbatch-loop", "bool", "false",
           "Build only the micro-batches the loop needs (without a pipeline "
           "and more than 4 micro-batches: 0, 1, 2 and k-1) and record the "
           "loop in xfmr.train_step and xfmr.eval_step (microbatch_loop = "
           "the body's runs, _stride, _split, _compiled): "
           "--rt-microbatch-loop then runs the body's code for every middle "
           "micro-batch, so that the step's size does not grow with k "
           "(partition-compile sets it unless --unroll-microbatches)">,
    Option<"loopStages", "loop-stages", "int64_t", "1",
           "With microbatch-loop: the pipeline's stages (mesh.pp), whose "
           "schedule the loop follows (a period of pp micro-batches)">,
    Option<"loopChunks", "loop-chunks", "int64_t", "1",
           "With microbatch-loop: the pipeline's virtual stages">,
    Option<"loopSchedule", "loop-schedule", "std::string", "\"1f1b\"",
           "With microbatch-loop: the pipeline's schedule (gpipe does not "
           "loop: it keeps every micro-batch in flight)">,
    Option<"loopWalk", "loop-walk", "bool", "false",
           "With microbatch-loop and a pipeline: build micro-batches 0, 1 "
           "and the last only, for stages that walk their schedule "
           "(--rt-action-walk) instead of looping over its periods">,
    Option<"loopSettle", "loop-settle", "int64_t", "0",
           "With microbatch-loop: the earliest period after the warm-up "
           "that the loop's body may be (0: the first, as the step's sums "
           "start at zero; 1: the second, for plans whose first "
           "micro-batches differ, as ZeRO-3's gather the parameters)">,
    Option<"beta1", "beta1", "double", "0.9", "AdamW first-moment decay">,
    Option<"beta2", "beta2", "double", "0.95", "AdamW second-moment decay">,
    Option<"epsilon", "epsilon", "double", "1e-8", "AdamW denominator term">,
    Option<"weightDecay", "weight-decay", "double", "0.1",
           "Decoupled weight decay, applied to matrix parameters">,
  ];
}

def MixedPrecisionPass : Pass<"xfmr-mixed-precision", "::mlir::ModuleOp"> {
  let summary = "Compute the forward pass in bf16 from fp32 master weights";
  let description = [{
    The plan's `"precision": "bf16"` (partition-compile runs this pass
    before `--xfmr-train-step` when the plan asks for it). In the forward
    function (the one with `xfmr.param` arguments), every use of a
    parameter reads an `xfmr.cast` of it to bf16, and every floating-point
    result of rank one or more (activations, logits) becomes bf16; scalar
    results (the loss) stay f32. The kernels load bf16 and compute in fp32.

    Autodiff then makes the backward pass bf16 too, and the backward of each
    cast is a cast back: parameter gradients reach AdamW (and the
    data-parallel all-reduce, and micro-batch accumulation) in fp32, next to
    the fp32 master weights and moments, as PyTorch autocast with fp32
    parameters does. One cast per use, not per parameter, so that a tied
    weight's two gradients are summed in fp32. A token embedding's table is
    the exception: the lookup reads fp32 rows and casts them (the same
    values as rows of a cast table, without casting the whole table), so
    its gradient is scattered in fp32, as autocast leaves embeddings fp32.

    Input:
    ```mlir
    func.func @forward(%w: tensor<16x8xf32> {xfmr.param = "w"}, ...) {
      %y = xfmr.linear %x, %w : (tensor<2x4x8xf32>, tensor<16x8xf32>)
          -> tensor<2x4x16xf32>
    ```
    Output:
    ```mlir
      %w16 = xfmr.cast %w : (tensor<16x8xf32>) -> tensor<16x8xbf16>
      %y = xfmr.linear %x, %w16 : (tensor<2x4x8xbf16>, tensor<16x8xbf16>)
          -> tensor<2x4x16xbf16>
    ```
    A module already in bf16 is an error (the pass runs once).
  }];
  let dependentDialects = ["::partition::xfmr::XfmrDialect"];
}

def ExplicitPositionsPass : Pass<"xfmr-explicit-positions", "::mlir::ModuleOp"> {
  let summary = "Give every position-dependent op explicit positions";
  let description = [{
    Context parallelism feeds the sequence permuted (the zigzag layout:
    `chunks` N chunks in the order 0, N-1, 1, N-2, ...), so every op whose
    result depends on positions must be told each element's original
    position. In every function holding an `xfmr.attention`,
    `xfmr.attention_grad`, `xfmr.position_embedding` or
    `xfmr.position_embedding_grad` without positions, the pass creates one
    `xfmr.sequence_positions {length = T, chunks = N}` per sequence length T
    at the function's entry and passes it to each such op (as both the
    query and key positions of an attention), and marks the function's
    tokens and targets arguments `xfmr.sequence_chunks = N`: the caller
    must feed them in that order. Ops that already have positions are left
    alone. With `chunks=1` the positions are the natural order and the step
    computes what it did (through the positioned kernels).

    Runs on the training step after autodiff (@train_step, the forward
    functions it calls, @eval_step, @logits_step); partition-compile's
    hidden `--explicit-positions=N` inserts it after `--xfmr-train-step`.

    Input:
    ```mlir
    %o = xfmr.attention %q, %k, %v {num_heads = 4 : i64, num_kv_heads = 4 : i64}
        : (tensor<2x16x64xf32>, tensor<2x16x64xf32>, tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
    ```
    Output (`chunks=4`):
    ```mlir
    %pos = xfmr.sequence_positions {chunks = 4 : i64, length = 16 : i64} : () -> tensor<16xi32>
    %o = xfmr.attention %q, %k, %v positions %pos, %pos {num_heads = 4 : i64, num_kv_heads = 4 : i64}
        : (..., tensor<16xi32>, tensor<16xi32>) -> tensor<2x16x64xf32>
    ```
    Errors: `chunks` below 1 or odd (above 1), or not dividing a sequence
    length.
  }];
  let dependentDialects = ["::partition::xfmr::XfmrDialect"];
  let options = [
    Option<"chunks", "chunks", "int64_t", "1",
           "Chunks of the layout order: 1 (natural order) or 2 x the "
           "context-parallel ranks (zigzag)">,
  ];
}

def StatsPass : Pass<"xfmr-stats", "::mlir::ModuleOp"> {
  let summary = "Print parameter, token and FLOP counts of each model function";
  let description = [{
    For every function with `xfmr.param` arguments, prints to stdout its
    parameter count, the tokens of one step and the FLOPs of one step.

    Example (`partition-gen --preset gpt2-124m -o g.mlir`, then
    `partition-opt g.mlir --xfmr-train-step --xfmr-stats -o /dev/null`):
    ```
    function: train_step
    parameters: 124439808
    tokens_per_step: 8192
    flops_per_step: 6999559372800
    ```
    FLOPs count matmuls only, 2*M*N*K each, attention at full TxT (the
    Megatron-LM / PaLM convention): per token 6 N_matmul + 12 L C T for the
    whole step. On a training step the backward ops are
    counted as they are; on a forward function the step is predicted as
    three times the forward (backward = twice forward), so both agree.
    The IR is left unchanged.
  }];
}

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
    copies after their last use. AdamW then updates the rank's chunk in
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
