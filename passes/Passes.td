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
    gradient, and a value used several times sums its gradients.

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

#endif // PARTITION_PASSES
