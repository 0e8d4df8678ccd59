//===- Passes.td - the passes of the partition compiler ----*- tablegen -*-===//

#ifndef PARTITION_PASSES
#define PARTITION_PASSES

include "mlir/Pass/PassBase.td"

def TrainStepPass : Pass<"xfmr-train-step", "::mlir::ModuleOp"> {
  let summary = "Turn a forward-plus-loss function into a whole training step";
  let description = [{
    Replaces the module's forward function (the one whose arguments carry
    `xfmr.param`) by `@train_step`: reverse-mode automatic differentiation of
    the loss followed by an AdamW update of every parameter.

    Autodiff is generic: each op builds its own backward through the
    `AutodiffOpInterface`; values that do not depend on a parameter get no
    gradient, and a value used several times sums its gradients. A loss
    that depends on no parameter (a constant, or one computed from the
    inputs alone) is an error, since training could never change it; a
    parameter the loss does not depend on is a warning (zero gradient).

    With `microbatches=k` the forward function is one micro-batch: the step
    takes k times as many sequences, runs forward and backward on each slice
    in turn (gradient accumulation), and averages losses and gradients.
    Weight decay applies to matrices only (not to biases, norm gains).

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
    Option<"microbatches", "microbatches", "int64_t", "1",
           "Micro-batches accumulated per step (gradient accumulation)">,
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
    weight's two gradients are summed in fp32.

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

def StatsPass : Pass<"xfmr-stats", "::mlir::ModuleOp"> {
  let summary = "Print parameter, token and FLOP counts of each model function";
  let description = [{
    For every function with `xfmr.param` arguments, prints to stdout:
    ```
    function: train_step
    parameters: 124439808
    tokens_per_step: 8192
    flops_per_step: 6926927413248
    ```
    FLOPs count matmuls only, 2*M*N*K each, attention at full TxT (the
    Megatron-LM / PaLM convention). On a training step the backward ops are
    counted as they are; on a forward function the step is predicted as
    three times the forward (backward = twice forward), so both agree.
    The IR is left unchanged.
  }];
}

def ApplyPlanPass : Pass<"dist-apply-plan", "::mlir::ModuleOp"> {
  let summary = "Read plan.json, check it against the model and record it";
  let description = [{
    Reads the parallelization plan (`plan=<path to plan.json>`; without a
    path, the default plan), checks it against the `xfmr.model`
    configuration of the module's model function (the forward function or
    the training step), and records it: a `dist.mesh @mesh` with all three
    axes (size-1 axes included, so later passes can rely on them) at the top
    of the module, and the whole plan, defaults filled in, as the module's
    `dist.plan` dictionary.

    Every plan.json field is optional (defaults: mesh 1x1x1, no sequence
    parallelism, schedule 1f1b, 1 micro-batch, ZeRO stage 0, no recompute,
    fp32). Unknown fields, wrong types, out-of-range values and plans the
    model cannot follow are errors on the module that name the field and the
    values, e.g.
    `plan.json: mesh.dp must be a positive integer, got 0` or
    `plan.json: the batch of 6 sequences is not divisible by mesh.dp = 4`.

    Input (plan.json `{"mesh": {"dp": 2}, "zero": {"stage": 1}}`):
    ```mlir
    module {
      func.func @forward(...) -> tensor<f32> attributes {xfmr.model = {...}}
    }
    ```
    Output:
    ```mlir
    module attributes {dist.plan = {mesh = {dp = 2 : i64, pp = 1 : i64,
        tp = 1 : i64}, pipeline = {microbatches = 1 : i64,
        schedule = "1f1b"}, precision = "fp32",
        recompute = {policy = "none"},
        tensor_parallel = {sequence_parallel = false},
        zero = {stage = 1 : i64}}} {
      dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]
      func.func @forward(...) -> tensor<f32> attributes {xfmr.model = {...}}
    }
    ```
  }];
  let dependentDialects = ["::partition::dist::DistDialect"];
  let options = [
    Option<"planPath", "plan", "std::string", "\"\"",
           "Path of plan.json (empty: the default plan)">,
  ];
}

def DataParallelPass : Pass<"dist-data-parallel", "::mlir::ModuleOp"> {
  let summary = "Split the training and evaluation steps' batch over the dp axis";
  let description = [{
    SPMD data parallelism over the `dp` axis of the plan's mesh `@mesh`
    (run `--dist-apply-plan` first; with dp = 1 the pass changes nothing).
    Works on `@train_step` and `@eval_step` (after `--xfmr-train-step`):

    - the tokens and targets become the local rows: dp rank r holds rows
      [r B/dp, (r+1) B/dp) of the global batch B, and every activation
      shrinks to the local batch (shapes follow the ops' sharding rules,
      ShardingRuleOpInterface);
    - the loss, a mean over the global batch, becomes each rank's share of a
      sum (the local mean scaled by 1/dp), and the cross-entropy gradient
      likewise;
    - values that sum over the batch (weight gradients, the loss) are
      all-reduced (sum) over dp where first needed in full, in buckets of at
      most `bucket-bytes` (default 25 MiB, as PyTorch DDP), in backward
      order, each right after its last gradient is computed, so that
      communication can overlap the rest of the backward pass. Gradients
      accumulated over micro-batches are reduced once, after the last one.
      The loss has an all_reduce of its own, labelled "loss".

    Errors name the value and sizes, e.g. when a micro-batch's rows do not
    split over dp.

    Input (dp = 2, global batch 4):
    ```mlir
    dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]
    func.func @train_step(..., %tokens: tensor<4x8xi32> {xfmr.input = "tokens"}, ...) {
      ...
      %dw = xfmr.linear_grad_weight %dy, %x : (tensor<4x8x16xf32>, tensor<4x8x32xf32>) -> tensor<16x32xf32>
      %w2, %m2, %v2 = xfmr.adamw %w, %dw, ...
    ```
    Output:
    ```mlir
    func.func @train_step(..., %tokens: tensor<2x8xi32> {xfmr.input = "tokens"}, ...) {
      ...
      %dw = xfmr.linear_grad_weight %dy, %x : (tensor<2x8x16xf32>, tensor<2x8x32xf32>) -> tensor<16x32xf32>
      %sum = dist.all_reduce %dw on @mesh axes [dp] reduce = sum {dist.label = "gradient bucket 0"} : tensor<16x32xf32>
      %w2, %m2, %v2 = xfmr.adamw %w, %sum, ...
    ```
  }];
  let dependentDialects = ["::partition::dist::DistDialect",
                           "::partition::xfmr::XfmrDialect"];
  let options = [
    Option<"bucketBytes", "bucket-bytes", "int64_t", "26214400",
           "Largest gradient bucket all-reduced at once, in bytes">,
  ];
}

def ShardPass : Pass<"dist-shard", "::mlir::ModuleOp"> {
  let summary = "SPMD partitioning over the plan's mesh: data and tensor parallelism";
  let description = [{
    Turns the single-device `@train_step` and `@eval_step` into the program
    each device of the plan's mesh `@mesh` runs (run `--dist-apply-plan` and
    `--xfmr-train-step` first). Everything `--dist-data-parallel` does over
    `dp`, and over `tp` the Megatron-LM layout, derived by propagation from
    the ops' sharding rules, not written per model:

    - each weight's layout is decided at its first use: a linear whose input
      is whole is column-parallel (output features and bias split over tp;
      not when that would split attention heads), one whose input features
      are split is row-parallel (its partial sums are all-reduced where they
      meet the residual stream, and each device adds bias / tp); embedding
      tables are split by vocabulary (vocab-parallel embedding, all-reduce);
      AdamW moments follow their parameter;
    - attention runs on the local heads (heads and key-value heads divided
      by tp; GQA groups stay whole);
    - the LM head's logits stay split by vocabulary: the cross-entropy and
      its gradient become the vocab-parallel forms (all-reduces of a max and
      two sums per token; the logits are never gathered);
    - the backward ops follow the same rules: column-parallel input
      gradients are partial sums all-reduced over tp, weight gradients are
      split like their weights.

    State arguments and results keep local types and carry
    `dist.local_sharding`, which the runtime uses to initialise, save and
    restore whole tensors.

    Input (tp = 2): `%y = xfmr.linear %x, %w : (tensor<4x8x64xf32>,
    tensor<256x64xf32>) -> tensor<4x8x256xf32>` with `%w` a parameter.
    Output: `%w : tensor<128x64xf32> {dist.local_sharding =
    #dist.sharding<@mesh, [[tp], []]>}` and `%y = xfmr.linear %x, %w :
    (tensor<4x8x64xf32>, tensor<128x64xf32>) -> tensor<4x8x128xf32>`.
  }];
  let dependentDialects = ["::partition::dist::DistDialect",
                           "::partition::xfmr::XfmrDialect"];
  let options = [
    Option<"bucketBytes", "bucket-bytes", "int64_t", "26214400",
           "Largest data-parallel gradient bucket all-reduced at once, in "
           "bytes">,
  ];
}

def TestShardingRulesPass : Pass<"xfmr-test-sharding-rules", "::mlir::ModuleOp"> {
  let summary = "Print every op's sharding rule (for tests)";
  let description = [{
    For each op with a sharding rule, prints one line: the factors with
    their sizes (`(opaque)`: must stay whole; `(op)`: the op splits it
    itself), each operand's and result's dimensions as factors (`_`: no
    factor), the factors each result sums over, a mean's factors and the
    value it scales, tied factors and whether partial sums pass through:
    ```
    xfmr.linear: f0=2 f1=8 f2=16 f3=32 | [f0, f1, f2] [f3, f2] -> [f0, f1, f3]{sum f2}
    ```
    The IR is left unchanged.
  }];
}

#endif // PARTITION_PASSES
