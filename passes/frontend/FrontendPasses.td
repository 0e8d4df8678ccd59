//===- FrontendPasses.td - the training step's passes ------*- tablegen -*-===//
//
// Included by passes/Passes.td: the passes that build the training step
// from a forward pass (--xfmr-train-step, --xfmr-mixed-precision,
// --xfmr-explicit-positions) and report on it (--xfmr-stats).
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_FRONTEND_PASSES
#define PARTITION_FRONTEND_PASSES

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

#endif // PARTITION_FRONTEND_PASSES
