//===- XfmrOps.td - the transformer model dialect ----------*- tablegen -*-===//
//
// Ops of a transformer training step on builtin tensors. Activations are
// [batch, seq, features]; token ids are [batch, seq] of i32; linear weights
// are [out_features, in_features] (the PyTorch layout, so a tied LM head is
// the token embedding table itself). Attention takes its heads packed in the
// feature dimension, so the graph needs no reshapes and a tensor-parallel
// shard only changes the head counts.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_XFMR_OPS
#define PARTITION_XFMR_OPS

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "dialects/Xfmr/XfmrInterfaces.td"

def Xfmr_Dialect : Dialect {
  let name = "xfmr";
  let summary = "Transformer model graph: forward, backward and optimizer ops";
  let description = [{
    The model level of the partition compiler: a transformer's forward pass,
    its loss, the backward op of every forward op and the AdamW update, all
    on builtin ranked tensors. Passes differentiate, shard and lower it.

    Conventions: activations are `[batch, seq, features]`, token ids
    `[batch, seq]` of `i32`, linear weights `[out_features, in_features]`
    (PyTorch's layout, so a tied LM head is the token embedding table).
    Attention takes its heads packed in the feature dimension, so the graph
    needs no reshapes and a tensor-parallel shard only changes the head
    counts. Linear's backward is split in two (`linear_grad_input`,
    `linear_grad_weight`) so that zero-bubble pipeline schedules can delay
    weight gradients. Every op has a sharding rule
    (`ShardingRuleOpInterface`) and, if differentiable, its backward
    (`AutodiffOpInterface`); the `vocab_parallel_*` ops have no backward:
    the partitioner emits them after autodiff.

    Discardable attributes, written by partition-gen and the passes, read by
    later passes and the runtime, and verified by the dialect:
    - `xfmr.param` (argument or result): the parameter's name, after the
      reference implementations (`wte`, `h.3.attn.q.weight`,
      `layers.0.attention.wq.weight`);
    - `xfmr.moment1`, `xfmr.moment2` (optimizer-state arguments and
      results): the parameter they belong to;
    - `xfmr.gradient` (a result of a step built without optimizer): the
      gradient of the named parameter;
    - `xfmr.layer` (a parameter or moment argument): the transformer layer,
      from 0, it belongs to (absent for embeddings, final norm, LM head), so
      no pass reads a layer from a name;
    - `xfmr.input` (`tokens`, `targets`, `step`, `lr`) and `xfmr.output`
      (`loss`, `step`);
    - `xfmr.model` (function): the model configuration; `xfmr.train_step`
      and `xfmr.eval_step`: the step's hyper-parameters.

    Example (partition-gen's forward function, abridged):
    ```mlir
    func.func @forward(%wte: tensor<256x64xf32> {xfmr.param = "wte"}, ...,
        %ln1: tensor<64xf32> {xfmr.layer = 0 : i64, xfmr.param = "h.0.ln_1.weight"}, ...,
        %tokens: tensor<4x64xi32> {xfmr.input = "tokens"},
        %targets: tensor<4x64xi32> {xfmr.input = "targets"}) -> tensor<f32>
        attributes {xfmr.model = {arch = "gpt2", layers = 2 : i64, ...}} {
      %x = xfmr.embedding %tokens, %wte : (tensor<4x64xi32>, tensor<256x64xf32>) -> tensor<4x64x64xf32>
      ...
    }
    ```
  }];
  let cppNamespace = "::partition::xfmr";
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect"];
  let extraClassDeclaration = [{
    // Discardable attributes that tie a function's arguments and results to
    // the model: partition-gen writes them, the passes and the runtime read
    // them, and the dialect verifies them.

    /// On an argument or result: the parameter's name, e.g. "h.0.attn.q.weight".
    static constexpr ::llvm::StringLiteral kParamAttrName = "xfmr.param";
    /// On optimizer-state arguments and results: the parameter they belong to.
    static constexpr ::llvm::StringLiteral kMoment1AttrName = "xfmr.moment1";
    static constexpr ::llvm::StringLiteral kMoment2AttrName = "xfmr.moment2";
    /// On a result of a step built without optimizer: the gradient of the
    /// named parameter.
    static constexpr ::llvm::StringLiteral kGradientAttrName = "xfmr.gradient";
    /// On a parameter or moment argument: the transformer layer (from 0) it
    /// belongs to; absent outside the layers (embeddings, final norm, LM
    /// head). partition-gen writes it, so that no pass reads the layer from
    /// a parameter's name.
    static constexpr ::llvm::StringLiteral kLayerAttrName = "xfmr.layer";
    /// On an argument: "tokens", "targets", "step" or "lr".
    static constexpr ::llvm::StringLiteral kInputAttrName = "xfmr.input";
    /// On a tokens or targets argument: the number of chunks of the
    /// layout order its sequence is fed in (xfmr.sequence_positions; set
    /// by --xfmr-explicit-positions).
    static constexpr ::llvm::StringLiteral kSequenceChunksAttrName =
        "xfmr.sequence_chunks";
    /// On an attention or attention_grad op (a unit attribute, set by
    /// --dist-seed-layouts for context_parallel.method "ring"): its query
    /// and key sequences are the op's own factors, and a split over the
    /// context axis becomes the ring (dialects/Xfmr/ContextRing.h).
    static constexpr ::llvm::StringLiteral kContextRingAttrName =
        "xfmr.context_ring";
    /// On a result: "loss" or "step".
    static constexpr ::llvm::StringLiteral kOutputAttrName = "xfmr.output";
    /// On a function: the model configuration (a dictionary).
    static constexpr ::llvm::StringLiteral kModelAttrName = "xfmr.model";
    /// On a training-step function: its hyper-parameters (a dictionary).
    static constexpr ::llvm::StringLiteral kTrainStepAttrName = "xfmr.train_step";
    /// On an evaluation-step function: its micro-batch count (a dictionary).
    static constexpr ::llvm::StringLiteral kEvalStepAttrName = "xfmr.eval_step";
  }];
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
}

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

def Xfmr_FloatTensor : RankedTensorOf<[AnyFloat]>;
def Xfmr_TokenTensor : 2DTensorOf<[I32]>;
def Xfmr_ScalarF32 : 0DTensorOf<[F32]>;
def Xfmr_ScalarI32 : 0DTensorOf<[I32]>;
def Xfmr_PositionsTensor : 1DTensorOf<[I32]>;

//===----------------------------------------------------------------------===//
// Base classes
//===----------------------------------------------------------------------===//

// Every op has a sharding rule (dialects/Xfmr/XfmrSharding.cpp); ops listing
// "partitionLocally" in `sharding` also adapt themselves to sharded factors.
// Every op lowers to one runtime kernel (dialects/Xfmr/XfmrKernels.cpp).
class Xfmr_Op<string mnemonic, list<Trait> traits = [],
              list<string> sharding = []>
    : Op<Xfmr_Dialect, mnemonic, !listconcat(traits, [Pure,
        DeclareOpInterfaceMethods<ShardingRuleOpInterface, sharding>,
        DeclareOpInterfaceMethods<RuntimeKernelOpInterface>])> {
  let assemblyFormat = [{
    operands attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

// A forward op: differentiable.
class Xfmr_ForwardOp<string mnemonic, list<Trait> traits = [],
                     list<string> sharding = []>
    : Xfmr_Op<mnemonic, !listconcat(traits, [
        DeclareOpInterfaceMethods<AutodiffOpInterface>]), sharding>;

// A backward op: emitted by autodiff.
class Xfmr_BackwardOp<string mnemonic, list<Trait> traits = [],
                      list<string> sharding = []>
    : Xfmr_Op<mnemonic, traits, sharding>;

// The ops that adapt themselves to sharded factors.
defvar Xfmr_PartitionsLocally = ["partitionLocally"];

// Ops that multiply matrices report their FLOPs; the others count as zero.
defvar Xfmr_Matmul = DeclareOpInterfaceMethods<MatmulFlopsOpInterface>;

//===----------------------------------------------------------------------===//
// Embeddings
//===----------------------------------------------------------------------===//

def Xfmr_EmbeddingOp : Xfmr_ForwardOp<"embedding", [], Xfmr_PartitionsLocally> {
  let summary = "token embedding lookup";
  let description = [{
    Gathers row `tokens[b, t]` of `table` for every position:
    `result[b, t, :] = table[tokens[b, t], :]`.

    Example:
    ```mlir
    %x = xfmr.embedding %tokens, %wte
        : (tensor<4x64xi32>, tensor<256x64xf32>) -> tensor<4x64x64xf32>
    ```

    Constraints:
    - `tokens` is [B, T], `table` is [V, C] and the result is [B, T, C];
    - the result has the table's element type.
  }];
  let arguments = (ins Xfmr_TokenTensor:$tokens, Xfmr_FloatTensor:$table);
  let results = (outs Xfmr_FloatTensor:$result);
}

def Xfmr_EmbeddingGradOp
    : Xfmr_BackwardOp<"embedding_grad", [], Xfmr_PartitionsLocally> {
  let summary = "gradient of the embedding table (scatter-add)";
  let description = [{
    `result[v, :] = sum of grad[b, t, :] over all (b, t) with tokens[b, t] = v`.

    Example:
    ```mlir
    %dwte = xfmr.embedding_grad %dx, %tokens
        : (tensor<4x64x64xf32>, tensor<4x64xi32>) -> tensor<256x64xf32>
    ```

    Constraints:
    - `grad` is [B, T, C], `tokens` is [B, T] and the result is [V, C];
    - the result has the gradient's element type.
  }];
  let arguments = (ins Xfmr_FloatTensor:$grad, Xfmr_TokenTensor:$tokens);
  let results = (outs Xfmr_FloatTensor:$result);
}

def Xfmr_PositionEmbeddingOp
    : Xfmr_ForwardOp<"position_embedding", [], Xfmr_PartitionsLocally> {
  let summary = "adds a learned position embedding";
  let description = [{
    `result[b, t, :] = input[b, t, :] + table[t, :]` for a table of P >= T
    positions.

    Example:
    ```mlir
    %h = xfmr.position_embedding %x, %wpe
        : (tensor<4x64x64xf32>, tensor<64x64xf32>) -> tensor<4x64x64xf32>
    ```

    With `positions` (a [T] i32 vector; a permuted sequence, see
    `xfmr.sequence_positions`), element t takes the row of its original
    position: `result[b, t, :] = input[b, t, :] + table[positions[t], :]`.

    ```mlir
    %p = xfmr.position_embedding %x, %wpe positions %pos
        : (tensor<4x64x64xf32>, tensor<64x64xf32>, tensor<64xi32>) -> tensor<4x64x64xf32>
    ```

    Constraints:
    - `input` and the result are [B, T, C] of one type;
    - `table` is [P, C] with P >= T, of the input's element type;
    - `positions`, when present, is [T] (its values must lie in [0, P):
      checked by the kernel).
  }];
  let arguments = (ins Xfmr_FloatTensor:$input, Xfmr_FloatTensor:$table,
                       Optional<Xfmr_PositionsTensor>:$positions);
  let results = (outs Xfmr_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $table (`positions` $positions^)? attr-dict `:`
    functional-type(operands, results)
  }];
}

def Xfmr_PositionEmbeddingGradOp : Xfmr_BackwardOp<"position_embedding_grad"> {
  let summary = "gradient of the position table (sum over the batch)";
  let description = [{
    `result[t, :] = sum over b of grad[b, t, :]` for t < T, and zero for the
    positions T <= t < P that the step did not use.

    Example:
    ```mlir
    %dwpe = xfmr.position_embedding_grad %dh
        : (tensor<4x64x64xf32>) -> tensor<64x64xf32>
    ```

    With `positions` (the forward's), `result[p, :]` sums `grad[b, t, :]`
    over b and the t with `positions[t] = p`; the rows no t names are zero.

    ```mlir
    %dp = xfmr.position_embedding_grad %dh positions %pos
        : (tensor<4x64x64xf32>, tensor<64xi32>) -> tensor<64x64xf32>
    ```

    Constraints:
    - `grad` is [B, T, C] and the result is [P, C] with P >= T, of one
      element type;
    - `positions`, when present, is [T].
  }];
  let arguments = (ins Xfmr_FloatTensor:$grad,
                       Optional<Xfmr_PositionsTensor>:$positions);
  let results = (outs Xfmr_FloatTensor:$result);
  let assemblyFormat = [{
    $grad (`positions` $positions^)? attr-dict `:`
    functional-type(operands, results)
  }];
}

def Xfmr_SequencePositionsOp
    : Xfmr_Op<"sequence_positions", [], Xfmr_PartitionsLocally> {
  let summary = "the original position of each element of a sequence in "
                "layout order";
  let description = [{
    The positions that make a permuted sequence explicit (context
    parallelism, --xfmr-explicit-positions): element i of the result is the
    original position of the sequence's element i in the order the caller
    feeds it. With `chunks` = 1 that is 0..T-1 (natural order). With an
    even `chunks` N, the sequence is cut into N chunks of T/N and the layout
    order is chunk 0, chunk N-1, chunk 1, chunk N-2, ...: layout block j
    holds chunk j/2 for even j and chunk N-1-j/2 for odd j, so each of the
    N/2 context-parallel ranks holds one early and one late chunk (the
    causal load balance of Llama 3's context parallelism, "zigzag").

    Example:
    ```mlir
    // 0 1 | 14 15 | 2 3 | 12 13 | 4 5 | 10 11 | 6 7 | 8 9
    %pos = xfmr.sequence_positions {length = 16 : i64, chunks = 8 : i64}
        : () -> tensor<16xi32>
    ```

    Constraints:
    - `length` T is positive and the result is [T] i32;
    - `chunks` is 1, or even and divides T.
  }];
  let arguments = (ins I64Attr:$length, I64Attr:$chunks);
  let results = (outs Xfmr_PositionsTensor:$result);
}

//===----------------------------------------------------------------------===//
// Normalisation
//===----------------------------------------------------------------------===//

def Xfmr_LayerNormOp : Xfmr_ForwardOp<"layernorm"> {
  let summary = "layer normalisation over the last dimension";
  let description = [{
    `result = (input - mean) / sqrt(var + epsilon) * gamma + beta`, with the
    mean and the (biased) variance taken over the last dimension.

    Example:
    ```mlir
    %y = xfmr.layernorm %x, %g, %b {epsilon = 1.0e-05 : f32}
        : (tensor<4x64x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<4x64x64xf32>
    ```

    Constraints:
    - `input` and the result have one type, [..., C];
    - `gamma` and `beta` are [C] of the input's element type;
    - `epsilon` is positive.
  }];
  let arguments = (ins Xfmr_FloatTensor:$input, Xfmr_FloatTensor:$gamma,
                       Xfmr_FloatTensor:$beta,
                       DefaultValuedAttr<F32Attr, "1.0e-5">:$epsilon);
  let results = (outs Xfmr_FloatTensor:$result);
}

def Xfmr_LayerNormGradOp : Xfmr_BackwardOp<"layernorm_grad"> {
  let summary = "backward of layernorm: input, gamma and beta gradients";
  let description = [{
    Recomputes the statistics of `input` and returns the gradients of the
    input, of gamma and of beta.

    Example:
    ```mlir
    %dx, %dg, %db = xfmr.layernorm_grad %dy, %x, %g {epsilon = 1.0e-05 : f32}
        : (tensor<4x64x64xf32>, tensor<4x64x64xf32>, tensor<64xf32>)
        -> (tensor<4x64x64xf32>, tensor<64xf32>, tensor<64xf32>)
    ```

    Constraints:
    - `grad`, `input` and `input_grad` have one type, [..., C];
    - `gamma`, `gamma_grad` and `beta_grad` are [C] of that element type;
    - `epsilon` is positive.
  }];
  let arguments = (ins Xfmr_FloatTensor:$grad, Xfmr_FloatTensor:$input,
                       Xfmr_FloatTensor:$gamma,
                       DefaultValuedAttr<F32Attr, "1.0e-5">:$epsilon);
  let results = (outs Xfmr_FloatTensor:$input_grad,
                      Xfmr_FloatTensor:$gamma_grad,
                      Xfmr_FloatTensor:$beta_grad);
}

def Xfmr_RMSNormOp : Xfmr_ForwardOp<"rmsnorm"> {
  let summary = "root-mean-square normalisation over the last dimension";
  let description = [{
    `result = input / sqrt(mean(input^2) + epsilon) * gamma`, the mean taken
    over the last dimension (Llama's norm: no centring, no bias).

    Example:
    ```mlir
    %y = xfmr.rmsnorm %x, %g {epsilon = 1.0e-05 : f32}
        : (tensor<4x64x64xf32>, tensor<64xf32>) -> tensor<4x64x64xf32>
    ```

    Constraints:
    - `input` and the result have one type, [..., C];
    - `gamma` is [C] of the input's element type;
    - `epsilon` is positive.
  }];
  let arguments = (ins Xfmr_FloatTensor:$input, Xfmr_FloatTensor:$gamma,
                       DefaultValuedAttr<F32Attr, "1.0e-5">:$epsilon);
  let results = (outs Xfmr_FloatTensor:$result);
}

def Xfmr_RMSNormGradOp : Xfmr_BackwardOp<"rmsnorm_grad"> {
  let summary = "backward of rmsnorm: input and gamma gradients";
  let description = [{
    Example:
    ```mlir
    %dx, %dg = xfmr.rmsnorm_grad %dy, %x, %g {epsilon = 1.0e-05 : f32}
        : (tensor<4x64x64xf32>, tensor<4x64x64xf32>, tensor<64xf32>)
        -> (tensor<4x64x64xf32>, tensor<64xf32>)
    ```

    Constraints:
    - `grad`, `input` and `input_grad` have one type, [..., C];
    - `gamma` and `gamma_grad` are [C] of that element type;
    - `epsilon` is positive.
  }];
  let arguments = (ins Xfmr_FloatTensor:$grad, Xfmr_FloatTensor:$input,
                       Xfmr_FloatTensor:$gamma,
                       DefaultValuedAttr<F32Attr, "1.0e-5">:$epsilon);
  let results = (outs Xfmr_FloatTensor:$input_grad,
                      Xfmr_FloatTensor:$gamma_grad);
}

//===----------------------------------------------------------------------===//
// Linear layers
//===----------------------------------------------------------------------===//

def Xfmr_LinearOp
    : Xfmr_ForwardOp<"linear", [Xfmr_Matmul], Xfmr_PartitionsLocally> {
  let summary = "affine map over the last dimension: x W^T + b";
  let description = [{
    `result[..., n] = sum_k input[..., k] * weight[n, k] + bias[n]`; the bias
    is optional. The weight is [out_features, in_features].

    Example:
    ```mlir
    %y = xfmr.linear %x, %w, %b
        : (tensor<4x64x64xf32>, tensor<256x64xf32>, tensor<256xf32>) -> tensor<4x64x256xf32>
    ```

    Constraints:
    - `input` is [..., K], `weight` is [N, K], `bias` (if any) is [N];
    - the result is [..., N] with the input's leading dimensions;
    - all share one element type.
  }];
  let arguments = (ins Xfmr_FloatTensor:$input, Xfmr_FloatTensor:$weight,
                       Optional<Xfmr_FloatTensor>:$bias);
  let results = (outs Xfmr_FloatTensor:$result);
}

def Xfmr_LinearGradInputOp : Xfmr_BackwardOp<"linear_grad_input", [Xfmr_Matmul]> {
  let summary = "input gradient of linear: dY W";
  let description = [{
    The half of linear's backward that the next (earlier) layer waits for.
    Split from the weight gradient so that zero-bubble pipeline schedules can
    delay the weight gradient.

    Example:
    ```mlir
    %dx = xfmr.linear_grad_input %dy, %w
        : (tensor<4x64x256xf32>, tensor<256x64xf32>) -> tensor<4x64x64xf32>
    ```

    Constraints:
    - `grad` is [..., N], `weight` is [N, K], the result is [..., K];
    - all share one element type.
  }];
  let arguments = (ins Xfmr_FloatTensor:$grad, Xfmr_FloatTensor:$weight);
  let results = (outs Xfmr_FloatTensor:$result);
}

def Xfmr_LinearGradWeightOp : Xfmr_BackwardOp<"linear_grad_weight", [Xfmr_Matmul]> {
  let summary = "weight (and bias) gradient of linear: dY^T X";
  let description = [{
    `weight_grad[n, k] = sum over leading positions of grad[..., n] * input[..., k]`
    and, when a second result is present, `bias_grad[n] = sum of grad[..., n]`.

    Example:
    ```mlir
    %dw, %db = xfmr.linear_grad_weight %dy, %x
        : (tensor<4x64x256xf32>, tensor<4x64x64xf32>) -> (tensor<256x64xf32>, tensor<256xf32>)
    ```

    Constraints:
    - `grad` is [..., N] and `input` is [..., K] with the same leading
      dimensions;
    - `weight_grad` is [N, K] and `bias_grad` (if present) is [N];
    - all share one element type.
  }];
  let arguments = (ins Xfmr_FloatTensor:$grad, Xfmr_FloatTensor:$input);
  let results = (outs Xfmr_FloatTensor:$weight_grad,
                      Optional<Xfmr_FloatTensor>:$bias_grad);
}

//===----------------------------------------------------------------------===//
// Activations and elementwise ops
//===----------------------------------------------------------------------===//

def Xfmr_GeluOp : Xfmr_ForwardOp<"gelu"> {
  let summary = "GELU activation, tanh approximation";
  let description = [{
    `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`, as in GPT-2.

    Example:
    ```mlir
    %y = xfmr.gelu %x : (tensor<4x64x256xf32>) -> tensor<4x64x256xf32>
    ```

    Constraints:
    - the input and the result have one type.
  }];
  let arguments = (ins Xfmr_FloatTensor:$input);
  let results = (outs Xfmr_FloatTensor:$result);
}

def Xfmr_GeluGradOp : Xfmr_BackwardOp<"gelu_grad"> {
  let summary = "backward of gelu";
  let description = [{
    Example:
    ```mlir
    %dx = xfmr.gelu_grad %dy, %x
        : (tensor<4x64x256xf32>, tensor<4x64x256xf32>) -> tensor<4x64x256xf32>
    ```

    Constraints:
    - `grad`, `input` and the result have one type.
  }];
  let arguments = (ins Xfmr_FloatTensor:$grad, Xfmr_FloatTensor:$input);
  let results = (outs Xfmr_FloatTensor:$result);
}

def Xfmr_SwigluOp : Xfmr_ForwardOp<"swiglu"> {
  let summary = "SwiGLU gate: silu(gate) * up";
  let description = [{
    `gate * sigmoid(gate) * up`, the gated unit of Llama's feed-forward block.

    Example:
    ```mlir
    %h = xfmr.swiglu %g, %u
        : (tensor<4x64x176xf32>, tensor<4x64x176xf32>) -> tensor<4x64x176xf32>
    ```

    Constraints:
    - `gate`, `up` and the result have one type.
  }];
  let arguments = (ins Xfmr_FloatTensor:$gate, Xfmr_FloatTensor:$up);
  let results = (outs Xfmr_FloatTensor:$result);
}

def Xfmr_SwigluGradOp : Xfmr_BackwardOp<"swiglu_grad"> {
  let summary = "backward of swiglu: gate and up gradients";
  let description = [{
    Example:
    ```mlir
    %dg, %du = xfmr.swiglu_grad %dh, %g, %u
        : (tensor<4x64x176xf32>, tensor<4x64x176xf32>, tensor<4x64x176xf32>)
        -> (tensor<4x64x176xf32>, tensor<4x64x176xf32>)
    ```

    Constraints:
    - every operand and result has one type.
  }];
  let arguments = (ins Xfmr_FloatTensor:$grad, Xfmr_FloatTensor:$gate,
                       Xfmr_FloatTensor:$up);
  let results = (outs Xfmr_FloatTensor:$gate_grad, Xfmr_FloatTensor:$up_grad);
}

def Xfmr_CastOp : Xfmr_ForwardOp<"cast"> {
  let summary = "converts a tensor's element type (mixed precision)";
  let description = [{
    `result = input` in the result's element type; narrowing rounds to
    nearest, ties to even. `--xfmr-mixed-precision` casts each fp32
    parameter to bf16 at every use; the backward of a cast is the cast
    back, which makes the parameters' gradients fp32 again for the optimizer.

    Example:
    ```mlir
    %w16 = xfmr.cast %w : (tensor<256x64xf32>) -> tensor<256x64xbf16>
    ```

    Constraints:
    - the input and the result have one shape;
    - their element types differ (a cast to the same type is a no-op).
  }];
  let arguments = (ins Xfmr_FloatTensor:$input);
  let results = (outs Xfmr_FloatTensor:$result);
}

def Xfmr_AddOp : Xfmr_ForwardOp<"add", [Commutative]> {
  let summary = "elementwise sum (residual connections, gradient fan-in)";
  let description = [{
    Its backward passes the result's gradient to both operands unchanged, so
    it needs no backward op of its own.

    Example:
    ```mlir
    %r = xfmr.add %x, %y
        : (tensor<4x64x64xf32>, tensor<4x64x64xf32>) -> tensor<4x64x64xf32>
    ```

    Constraints:
    - `lhs`, `rhs` and the result have one type.
  }];
  let arguments = (ins Xfmr_FloatTensor:$lhs, Xfmr_FloatTensor:$rhs);
  let results = (outs Xfmr_FloatTensor:$result);
}

def Xfmr_ScaleOp : Xfmr_ForwardOp<"scale"> {
  let summary = "multiplies a tensor by a constant";
  let description = [{
    `result = input * factor`. Averages losses and gradients over
    microbatches. Its backward is a scale by the same factor.

    Example:
    ```mlir
    %m = xfmr.scale %sum {factor = 2.500000e-01 : f32}
        : (tensor<f32>) -> tensor<f32>
    ```

    Constraints:
    - the input and the result have one type;
    - `factor` is finite.
  }];
  let arguments = (ins Xfmr_FloatTensor:$input, F32Attr:$factor);
  let results = (outs Xfmr_FloatTensor:$result);
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

def Xfmr_AttentionOp
    : Xfmr_ForwardOp<"attention", [Xfmr_Matmul, AttrSizedOperandSegments],
                     Xfmr_PartitionsLocally> {
  let summary = "multi-head scaled dot-product attention (causal, GQA, RoPE, "
                "sliding window)";
  let description = [{
    Heads are packed in the feature dimension: `query` is [B, T, H*D], `key`
    and `value` are [B, T, Hkv*D]. Query head h reads key/value head
    h / (H / Hkv) (grouped-query attention; Hkv = H is multi-head attention).
    With `rope_theta`, rotary position embedding is applied to the query and
    the key first, pairing feature i with i + D/2 within each head, at
    frequency theta^(-2i/D). Scores are scaled by 1/sqrt(D) and, when
    `causal`, position t sees positions s <= t only.

    `rope_scaling` rescales the rotary frequencies as transformers'
    rope_type of that name, with `rope_scaling_factors`:
    - `"linear"`, `[factor]`: every frequency divided by the factor;
    - `"llama3"`, `[factor, low_freq_factor, high_freq_factor,
      original_context]` (Llama 3.1 / 3.2): a frequency whose wavelength
      2 pi / f exceeds original_context / low_freq_factor is divided by the
      factor, one below original_context / high_freq_factor is kept, and
      between them f ((1 - s) / factor + s) with
      s = (original_context / wavelength - low_freq_factor) /
      (high_freq_factor - low_freq_factor);
    - `"yarn"`, `[factor, beta_fast, beta_slow, original_context]`: pair i
      keeps its frequency below a ramp and is divided by the factor above
      it, f ((1 - r) + r / factor) with r = clamp((i - low) / (high - low),
      0, 1), low = floor(c(beta_fast)), high = ceil(c(beta_slow)) (clamped
      to [0, D - 1]) and c(b) = D ln(original_context / (2 pi b)) /
      (2 ln theta); cos and sin are multiplied by 0.1 ln(factor) + 1 (for
      a factor above 1), so the scores by its square (transformers'
      _compute_yarn_parameters, truncate = true, attention_factor
      derived from the factor).

    `sliding_window` W (Mistral) narrows the causal mask to the last W
    positions: position t sees positions s with t - W < s <= t, itself
    included (transformers' sliding_window convention). A window of at
    least the sequence length masks nothing more than causality.

    With `query_positions` and `key_positions` (both or neither; [Tq] and
    [Tk] i32 vectors) the positions are explicit instead of the indices: a
    permuted sequence (context parallelism's zigzag layout,
    `xfmr.sequence_positions`) or local queries against all-gathered keys,
    so Tq may differ from Tk. Query t sees key s iff not `causal` or
    kp[s] <= qp[t] (with `sliding_window` W also kp[s] > qp[t] - W), and
    RoPE rotates query t at angle qp[t] * freq and key s at kp[s] * freq.
    A query that sees no key gets zeros.

    Example:
    ```mlir
    %o = xfmr.attention %q, %k, %v {num_heads = 4 : i64, num_kv_heads = 2 : i64,
                                    rope_theta = 1.0e+04 : f32}
        : (tensor<4x64x64xf32>, tensor<4x64x32xf32>, tensor<4x64x32xf32>) -> tensor<4x64x64xf32>
    %s = xfmr.attention %q, %k, %v {num_heads = 4 : i64, num_kv_heads = 2 : i64,
                                    rope_theta = 5.0e+05 : f32, rope_scaling = "llama3",
                                    rope_scaling_factors = array<f64: 32.0, 1.0, 4.0, 8192.0>}
        : (tensor<4x64x64xf32>, tensor<4x64x32xf32>, tensor<4x64x32xf32>) -> tensor<4x64x64xf32>
    %w = xfmr.attention %q, %k, %v {num_heads = 4 : i64, num_kv_heads = 2 : i64,
                                    rope_theta = 1.0e+04 : f32, sliding_window = 16 : i64}
        : (tensor<4x64x64xf32>, tensor<4x64x32xf32>, tensor<4x64x32xf32>) -> tensor<4x64x64xf32>
    %l = xfmr.attention %q, %k, %v positions %qp, %kp {num_heads = 4 : i64, num_kv_heads = 2 : i64}
        : (tensor<4x16x64xf32>, tensor<4x64x32xf32>, tensor<4x64x32xf32>,
           tensor<16xi32>, tensor<64xi32>) -> tensor<4x16x64xf32>
    ```

    Constraints:
    - `num_heads` and `num_kv_heads` are positive and `num_kv_heads` divides
      `num_heads`;
    - `query` and the result are [B, T, H*D] of one type;
    - `key` and `value` are [B, T, Hkv*D] of that element type (with
      positions, [B, Tk, Hkv*D]);
    - `query_positions` and `key_positions` come together, [Tq] and [Tk];
    - with `rope_theta`, it is positive and D is even;
    - `rope_scaling` and `rope_scaling_factors` come together and with
      `rope_theta`; the scaling is `linear` (one factor), `llama3` or
      `yarn` (four); the factor is positive and, for `llama3`, 0 <
      low_freq_factor < high_freq_factor and original_context is a positive
      integer; for `yarn`, the factor is at least 1, 0 < beta_slow <
      beta_fast, original_context is a positive integer and rope_theta
      exceeds 1.
    - `sliding_window` is positive and only on a `causal` attention.
  }];
  let arguments = (ins Xfmr_FloatTensor:$query, Xfmr_FloatTensor:$key,
                       Xfmr_FloatTensor:$value,
                       Optional<Xfmr_PositionsTensor>:$query_positions,
                       Optional<Xfmr_PositionsTensor>:$key_positions,
                       I64Attr:$num_heads, I64Attr:$num_kv_heads,
                       DefaultValuedAttr<BoolAttr, "true">:$causal,
                       OptionalAttr<F32Attr>:$rope_theta,
                       OptionalAttr<StrAttr>:$rope_scaling,
                       OptionalAttr<DenseF64ArrayAttr>:$rope_scaling_factors,
                       OptionalAttr<I64Attr>:$sliding_window);
  let results = (outs Xfmr_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value
    (`positions` $query_positions^ `,` $key_positions)? attr-dict `:`
    functional-type(operands, results)
  }];
  let extraClassDeclaration = [{
    /// Head dimension D.
    int64_t getHeadDim();
  }];
}

def Xfmr_AttentionGradOp
    : Xfmr_BackwardOp<"attention_grad", [Xfmr_Matmul, AttrSizedOperandSegments],
                      Xfmr_PartitionsLocally> {
  let summary = "backward of attention: query, key and value gradients";
  let description = [{
    Recomputes the attention probabilities from `query` and `key` and returns
    the gradients of the three inputs as the forward op received them: with
    `rope_theta` (and `rope_scaling`), the query and key gradients are with
    respect to the query and key before rotation. With `sliding_window`, the
    probabilities are the forward's windowed ones: a key outside a query's
    window gets no gradient from it.

    Example:
    ```mlir
    %dq, %dk, %dv = xfmr.attention_grad %do, %q, %k, %v {num_heads = 4 : i64, num_kv_heads = 4 : i64}
        : (tensor<4x64x64xf32>, tensor<4x64x64xf32>, tensor<4x64x64xf32>, tensor<4x64x64xf32>)
        -> (tensor<4x64x64xf32>, tensor<4x64x64xf32>, tensor<4x64x64xf32>)
    %wq, %wk, %wv = xfmr.attention_grad %do, %q, %k, %v {num_heads = 4 : i64, num_kv_heads = 4 : i64,
                                                       sliding_window = 16 : i64}
        : (tensor<4x64x64xf32>, tensor<4x64x64xf32>, tensor<4x64x64xf32>, tensor<4x64x64xf32>)
        -> (tensor<4x64x64xf32>, tensor<4x64x64xf32>, tensor<4x64x64xf32>)
    ```

    With the forward's `query_positions` and `key_positions`, the
    probabilities are those of the positioned forward:
    ```mlir
    %pq, %pk, %pv = xfmr.attention_grad %do, %q, %k, %v positions %qp, %kp
        {num_heads = 4 : i64, num_kv_heads = 4 : i64}
        : (tensor<4x16x64xf32>, tensor<4x16x64xf32>, tensor<4x64x64xf32>, tensor<4x64x64xf32>,
           tensor<16xi32>, tensor<64xi32>)
        -> (tensor<4x16x64xf32>, tensor<4x64x64xf32>, tensor<4x64x64xf32>)
    ```

    Constraints: those of `xfmr.attention`, with `grad` and `query_grad`
    typed like the query and `key_grad`, `value_grad` like the key.
  }];
  let arguments = (ins Xfmr_FloatTensor:$grad, Xfmr_FloatTensor:$query,
                       Xfmr_FloatTensor:$key, Xfmr_FloatTensor:$value,
                       Optional<Xfmr_PositionsTensor>:$query_positions,
                       Optional<Xfmr_PositionsTensor>:$key_positions,
                       I64Attr:$num_heads, I64Attr:$num_kv_heads,
                       DefaultValuedAttr<BoolAttr, "true">:$causal,
                       OptionalAttr<F32Attr>:$rope_theta,
                       OptionalAttr<StrAttr>:$rope_scaling,
                       OptionalAttr<DenseF64ArrayAttr>:$rope_scaling_factors,
                       OptionalAttr<I64Attr>:$sliding_window);
  let results = (outs Xfmr_FloatTensor:$query_grad,
                      Xfmr_FloatTensor:$key_grad,
                      Xfmr_FloatTensor:$value_grad);
  let assemblyFormat = [{
    $grad `,` $query `,` $key `,` $value
    (`positions` $query_positions^ `,` $key_positions)? attr-dict `:`
    functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// Loss
//===----------------------------------------------------------------------===//

def Xfmr_SoftmaxCrossEntropyOp
    : Xfmr_ForwardOp<"softmax_cross_entropy", [], Xfmr_PartitionsLocally> {
  let summary = "mean softmax cross-entropy of next-token logits";
  let description = [{
    `-mean over (b, t) of log softmax(logits[b, t, :])[targets[b, t]]`.

    Example:
    ```mlir
    %loss = xfmr.softmax_cross_entropy %logits, %targets
        : (tensor<4x64x256xf32>, tensor<4x64xi32>) -> tensor<f32>
    ```

    With `vocab` (set by --dist-pad-vocab when it pads the vocabulary to
    split it evenly over the tensor axis), the logits of ids at or beyond
    `vocab` are padding: the softmax runs over the first `vocab` only.

    Constraints:
    - `logits` is [B, T, V] and `targets` is [B, T];
    - the result is a rank-0 f32 tensor;
    - `vocab`, when set, is in [1, V].
  }];
  let arguments = (ins Xfmr_FloatTensor:$logits, Xfmr_TokenTensor:$targets,
                       OptionalAttr<I64Attr>:$vocab);
  let results = (outs Xfmr_ScalarF32:$loss);
}

def Xfmr_SoftmaxCrossEntropyGradOp
    : Xfmr_BackwardOp<"softmax_cross_entropy_grad", [], Xfmr_PartitionsLocally> {
  let summary = "gradient of the mean cross-entropy with respect to the logits";
  let description = [{
    `result[b, t, :] = loss_grad * (softmax(logits[b, t, :]) - onehot(targets[b, t])) / (B*T)`.

    Example:
    ```mlir
    %dlogits = xfmr.softmax_cross_entropy_grad %dloss, %logits, %targets
        : (tensor<f32>, tensor<4x64x256xf32>, tensor<4x64xi32>) -> tensor<4x64x256xf32>
    ```

    With `vocab` (the forward op's), the padding ids at or beyond it get a
    gradient of exactly zero.

    Constraints:
    - `loss_grad` is a rank-0 f32 tensor;
    - `logits` and the result have one type, [B, T, V]; `targets` is [B, T];
    - `vocab`, when set, is in [1, V].
  }];
  let arguments = (ins Xfmr_ScalarF32:$loss_grad, Xfmr_FloatTensor:$logits,
                       Xfmr_TokenTensor:$targets,
                       OptionalAttr<I64Attr>:$vocab);
  let results = (outs Xfmr_FloatTensor:$result);
}

//===----------------------------------------------------------------------===//
// Optimizer
//===----------------------------------------------------------------------===//

def Xfmr_AdamWOp : Xfmr_Op<"adamw"> {
  let summary = "one AdamW step with bias correction and decoupled decay";
  let description = [{
    With t = `step` (the 1-based number of this update) and lr = `lr`:
    ```
    m' = beta1 m + (1 - beta1) g
    v' = beta2 v + (1 - beta2) g^2
    p' = p - lr (m' / (1 - beta1^t)) / (sqrt(v' / (1 - beta2^t)) + epsilon)
           - lr weight_decay p
    ```
    The moments are fp32 whatever the parameter's type. The learning rate is
    an operand, not an attribute, so a schedule can change it every step.

    Example:
    ```mlir
    %p2, %m2, %v2 = xfmr.adamw %p, %g, %m, %v, %t, %lr
        {beta1 = 0.9 : f32, beta2 = 0.95 : f32, epsilon = 1.0e-08 : f32, weight_decay = 0.1 : f32}
        : (tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>, tensor<i32>, tensor<f32>)
        -> (tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>)
    ```

    Constraints:
    - `param`, `grad`, both moments and their updates have one shape;
    - `grad` and `new_param` have the parameter's type; moments are f32;
    - `step` is a rank-0 i32 tensor and `lr` a rank-0 f32 tensor;
    - 0 <= beta1, beta2 < 1, epsilon > 0 and weight_decay >= 0.
  }];
  let arguments = (ins Xfmr_FloatTensor:$param, Xfmr_FloatTensor:$grad,
                       Xfmr_FloatTensor:$moment1, Xfmr_FloatTensor:$moment2,
                       Xfmr_ScalarI32:$step, Xfmr_ScalarF32:$lr,
                       DefaultValuedAttr<F32Attr, "0.9">:$beta1,
                       DefaultValuedAttr<F32Attr, "0.999">:$beta2,
                       DefaultValuedAttr<F32Attr, "1.0e-8">:$epsilon,
                       DefaultValuedAttr<F32Attr, "0.0">:$weight_decay);
  let results = (outs Xfmr_FloatTensor:$new_param,
                      Xfmr_FloatTensor:$new_moment1,
                      Xfmr_FloatTensor:$new_moment2);
}

//===----------------------------------------------------------------------===//
// Vocabulary-parallel embedding and loss (Megatron-LM's tensor parallelism)
//===----------------------------------------------------------------------===//

// With the vocabulary split over `tp` ranks, rank s holds rows
// [s*Vl, (s+1)*Vl) of the embedding table / LM head (Vl = V / tp) and the
// last dimension of its logits is local, [B, T, Vl]; `shard` is s (from
// dist.axis_index). The tensor-parallel pass emits these ops after autodiff
// with dist.all_reduce between them, so they have no backward of their own,
// and the cross-entropy never gathers the logits. With a padded vocabulary
// (--dist-pad-vocab), max, sum_exp and the gradient take the shard and the
// logical `vocab`, and leave the padding ids out:
//   max = all_reduce(max, vocab_parallel_max(logits))
//   target = all_reduce(sum, vocab_parallel_target_logit(logits, targets, s))
//   sum_exp = all_reduce(sum, vocab_parallel_sum_exp(logits, max))
//   loss = vocab_parallel_loss(max, sum_exp, target)

def Xfmr_VocabParallelEmbeddingOp : Xfmr_Op<"vocab_parallel_embedding"> {
  let summary = "token embedding lookup in one shard of the vocabulary";
  let description = [{
    With Vl the table's rows and `l = tokens[b, t] - shard * Vl`:
    `result[b, t, :] = table[l, :]` when `0 <= l < Vl`, else zeros. The sum
    of the results of all shards (an all_reduce over the vocabulary's mesh
    axes) is the lookup in the whole table.

    Example:
    ```mlir
    %x = xfmr.vocab_parallel_embedding %tokens, %wte, %shard
        : (tensor<4x64xi32>, tensor<128x64xf32>, tensor<i32>) -> tensor<4x64x64xf32>
    ```

    Constraints:
    - `tokens` is [B, T], `table` is [Vl, C] and the result is [B, T, C];
    - the result has the table's element type;
    - `shard` is a rank-0 i32 tensor.
  }];
  let arguments = (ins Xfmr_TokenTensor:$tokens, Xfmr_FloatTensor:$table,
                       Xfmr_ScalarI32:$shard);
  let results = (outs Xfmr_FloatTensor:$result);
}

def Xfmr_VocabParallelEmbeddingGradOp
    : Xfmr_Op<"vocab_parallel_embedding_grad"> {
  let summary = "gradient of one shard of the embedding table (scatter-add)";
  let description = [{
    With Vl the result's rows: `result[l, :] = sum of grad[b, t, :] over all
    (b, t) with tokens[b, t] - shard * Vl = l`, for 0 <= l < Vl; rows whose
    token falls in no (b, t) are zero.

    Example:
    ```mlir
    %dwte = xfmr.vocab_parallel_embedding_grad %dx, %tokens, %shard
        : (tensor<4x64x64xf32>, tensor<4x64xi32>, tensor<i32>) -> tensor<128x64xf32>
    ```

    Constraints:
    - `grad` is [B, T, C], `tokens` is [B, T] and the result is [Vl, C];
    - the result has the gradient's element type;
    - `shard` is a rank-0 i32 tensor.
  }];
  let arguments = (ins Xfmr_FloatTensor:$grad, Xfmr_TokenTensor:$tokens,
                       Xfmr_ScalarI32:$shard);
  let results = (outs Xfmr_FloatTensor:$result);
}

def Xfmr_VocabParallelMaxOp : Xfmr_Op<"vocab_parallel_max"> {
  let summary = "maximum logit of each position in one shard of the vocabulary";
  let description = [{
    `result[b, t] = max over v < Vl of logits[b, t, v]`. The maximum over
    all shards (an all_reduce max) is the row maximum that the other
    vocabulary-parallel loss ops subtract before exponentiating.

    Example:
    ```mlir
    %max = xfmr.vocab_parallel_max %logits
        : (tensor<4x64x128xf32>) -> tensor<4x64xf32>
    ```

    With `shard` and `vocab` (a padded vocabulary), only the columns whose
    global id `shard * Vl + v` is below `vocab` count (-inf when none does).

    Constraints:
    - `logits` is [B, T, Vl] and the result is [B, T] of its element type;
    - `shard` (a rank-0 i32 tensor) and `vocab` (>= 1) are both set or
      both absent.
  }];
  let arguments = (ins Xfmr_FloatTensor:$logits,
                       Optional<Xfmr_ScalarI32>:$shard,
                       OptionalAttr<I64Attr>:$vocab);
  let results = (outs Xfmr_FloatTensor:$result);
}

def Xfmr_VocabParallelTargetLogitOp
    : Xfmr_Op<"vocab_parallel_target_logit"> {
  let summary = "the target's logit, where this shard holds the target";
  let description = [{
    With `l = targets[b, t] - shard * Vl`: `result[b, t] = logits[b, t, l]`
    when `0 <= l < Vl`, else 0. Exactly one shard holds each target, so the
    sum over all shards is the target's logit.

    Example:
    ```mlir
    %target = xfmr.vocab_parallel_target_logit %logits, %targets, %shard
        : (tensor<4x64x128xf32>, tensor<4x64xi32>, tensor<i32>) -> tensor<4x64xf32>
    ```

    Constraints:
    - `logits` is [B, T, Vl] and `targets` is [B, T];
    - the result is [B, T] of the logits' element type;
    - `shard` is a rank-0 i32 tensor.
  }];
  let arguments = (ins Xfmr_FloatTensor:$logits, Xfmr_TokenTensor:$targets,
                       Xfmr_ScalarI32:$shard);
  let results = (outs Xfmr_FloatTensor:$result);
}

def Xfmr_VocabParallelSumExpOp : Xfmr_Op<"vocab_parallel_sum_exp"> {
  let summary = "softmax normaliser of one shard of the vocabulary";
  let description = [{
    `result[b, t] = sum over v < Vl of exp(logits[b, t, v] - max[b, t])`.
    With `max` the maximum over all shards, every term is at most 1 and the
    sum over all shards is the softmax's normaliser.

    Example:
    ```mlir
    %sum_exp = xfmr.vocab_parallel_sum_exp %logits, %max
        : (tensor<4x64x128xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
    ```

    With `shard` and `vocab` (a padded vocabulary), only the columns whose
    global id `shard * Vl + v` is below `vocab` count.

    Constraints:
    - `logits` is [B, T, Vl];
    - `max` and the result are [B, T] of the logits' element type;
    - `shard` (a rank-0 i32 tensor) and `vocab` (>= 1) are both set or
      both absent.
  }];
  let arguments = (ins Xfmr_FloatTensor:$logits, Xfmr_FloatTensor:$max,
                       Optional<Xfmr_ScalarI32>:$shard,
                       OptionalAttr<I64Attr>:$vocab);
  let results = (outs Xfmr_FloatTensor:$result);
}

def Xfmr_VocabParallelLossOp : Xfmr_Op<"vocab_parallel_loss"> {
  let summary = "mean cross-entropy from the all-reduced softmax statistics";
  let description = [{
    `loss = mean over (b, t) of log(sum_exp[b, t]) + max[b, t] - target_logit[b, t]`,
    which is `-log softmax(logits[b, t, :])[targets[b, t]]` when the inputs
    are the all-reduced statistics of every shard, so every rank computes
    the same loss as `xfmr.softmax_cross_entropy` on the whole logits.

    Example:
    ```mlir
    %loss = xfmr.vocab_parallel_loss %max, %sum_exp, %target
        : (tensor<4x64xf32>, tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<f32>
    ```

    Constraints:
    - `max`, `sum_exp` and `target_logit` have one type, [B, T];
    - the result is a rank-0 f32 tensor.
  }];
  let arguments = (ins Xfmr_FloatTensor:$max, Xfmr_FloatTensor:$sum_exp,
                       Xfmr_FloatTensor:$target_logit);
  let results = (outs Xfmr_ScalarF32:$loss);
}

def Xfmr_VocabParallelCrossEntropyGradOp
    : Xfmr_Op<"vocab_parallel_cross_entropy_grad"> {
  let summary = "gradient of the mean cross-entropy for one shard of the logits";
  let description = [{
    With `l = targets[b, t] - shard * Vl`:
    `result[b, t, v] = loss_grad * (exp(logits[b, t, v] - max[b, t]) / sum_exp[b, t] - (v == l ? 1 : 0)) / (B*T)`,
    the shard's slice of `xfmr.softmax_cross_entropy_grad` when `max` and
    `sum_exp` are the all-reduced statistics of every shard.

    Example:
    ```mlir
    %dlogits = xfmr.vocab_parallel_cross_entropy_grad %dloss, %logits, %targets, %shard, %max, %sum_exp
        : (tensor<f32>, tensor<4x64x128xf32>, tensor<4x64xi32>, tensor<i32>, tensor<4x64xf32>, tensor<4x64xf32>)
        -> tensor<4x64x128xf32>
    ```

    Constraints:
    - `loss_grad` is a rank-0 f32 tensor and `shard` a rank-0 i32 tensor;
    - `logits` and the result have one type, [B, T, Vl]; `targets` is
      [B, T];
    - `max` and `sum_exp` are [B, T] of the logits' element type;
    - `vocab`, when set (a padded vocabulary), is at least 1: the columns
      whose global id is at or beyond it get a gradient of exactly zero.
  }];
  let arguments = (ins Xfmr_ScalarF32:$loss_grad, Xfmr_FloatTensor:$logits,
                       Xfmr_TokenTensor:$targets, Xfmr_ScalarI32:$shard,
                       Xfmr_FloatTensor:$max, Xfmr_FloatTensor:$sum_exp,
                       OptionalAttr<I64Attr>:$vocab);
  let results = (outs Xfmr_FloatTensor:$result);
}

//===----------------------------------------------------------------------===//
// Ring attention (context parallelism)
//===----------------------------------------------------------------------===//
//
// With the sequence split over cp ranks, ring attention keeps each rank's
// queries and passes the key/value blocks around the ring: each block's
// partial attention is merged into the running one by its log-sum-exp
// (flash attention's online softmax), and the backward runs per block from
// the final output and log-sum-exp. The partitioner emits these ops after
// autodiff (like the vocab_parallel_* ops), so they have no backward. With
// the zigzag layout a rank's positions are not contiguous: every op takes
// the original position of each query and key explicitly.

def Xfmr_Positions : 1DTensorOf<[I32]>;

def Xfmr_AttentionBlockOp
    : Xfmr_Op<"attention_block", [Xfmr_Matmul], Xfmr_PartitionsLocally> {
  let summary = "attention of the queries over one block of keys, with its "
                "log-sum-exp";
  let description = [{
    Softmax attention of `query` [B, Tq, H*D] over the Tk keys and values of
    this block only (`key`, `value` [B, Tk, Hkv*D]), at the original
    positions `query_positions` [Tq] and `key_positions` [Tk]: query t sees
    key s iff not `causal` or key_positions[s] <= query_positions[t], and,
    with `sliding_window` W, also key_positions[s] > query_positions[t] - W.
    RoPE (with `rope_theta`, and `rope_scaling`) rotates query t by the angle
    query_positions[t] x frequency and key s by key_positions[s] x
    frequency. Heads, GQA, the score scale 1/sqrt(D) and the RoPE attributes
    are those of `xfmr.attention`.

    `lse` [B, H, Tq] (f32) is log sum_s exp(score[t, s]) over the visible
    keys, so that `xfmr.attention_merge` combines the partial attentions of
    disjoint key blocks exactly. A query that sees no key of this block gets
    a zero output and an lse of exactly -inf. With all the keys in one block
    at positions 0..T-1 the output is `xfmr.attention`'s.

    Example:
    ```mlir
    %o, %lse = xfmr.attention_block %q, %k, %v, %qpos, %kpos
        {num_heads = 4 : i64, num_kv_heads = 2 : i64, rope_theta = 1.0e+04 : f32}
        : (tensor<4x32x64xf32>, tensor<4x16x32xf32>, tensor<4x16x32xf32>,
           tensor<32xi32>, tensor<16xi32>) -> (tensor<4x32x64xf32>, tensor<4x4x32xf32>)
    ```

    Constraints: the attributes' of `xfmr.attention`; `query` and `out` are
    [B, Tq, H*D] of one type; `key` and `value` are [B, Tk, Hkv*D] of its
    element type; `query_positions` is [Tq] and `key_positions` [Tk] of i32;
    `lse` is [B, H, Tq] of f32.
  }];
  let arguments = (ins Xfmr_FloatTensor:$query, Xfmr_FloatTensor:$key,
                       Xfmr_FloatTensor:$value,
                       Xfmr_Positions:$query_positions,
                       Xfmr_Positions:$key_positions,
                       I64Attr:$num_heads, I64Attr:$num_kv_heads,
                       DefaultValuedAttr<BoolAttr, "true">:$causal,
                       OptionalAttr<F32Attr>:$rope_theta,
                       OptionalAttr<StrAttr>:$rope_scaling,
                       OptionalAttr<DenseF64ArrayAttr>:$rope_scaling_factors,
                       OptionalAttr<I64Attr>:$sliding_window);
  let results = (outs Xfmr_FloatTensor:$out, Xfmr_FloatTensor:$lse);
}

def Xfmr_AttentionMergeOp : Xfmr_Op<"attention_merge"> {
  let summary = "combines two partial attentions over disjoint key sets";
  let description = [{
    With heads packed in the features (head h is features [h*D, (h+1)*D) of
    `out_a`, `out_b` [B, T, H*D]) and `lse_a`, `lse_b` [B, H, T]:
    `lse = logaddexp(lse_a, lse_b)` and
    `out[b, t, h*D + d] = out_a[...] exp(lse_a[b, h, t] - lse) +
    out_b[...] exp(lse_b[b, h, t] - lse)`: the attention over the union of
    the two key sets, exactly. Where both lse are -inf (no visible key in
    either), the output is 0 and the lse -inf.

    Example:
    ```mlir
    %o, %lse = xfmr.attention_merge %oa, %la, %ob, %lb
        : (tensor<4x32x64xf32>, tensor<4x4x32xf32>, tensor<4x32x64xf32>,
           tensor<4x4x32xf32>) -> (tensor<4x32x64xf32>, tensor<4x4x32xf32>)
    ```

    Constraints:
    - `out_a`, `out_b` and `out` have one type, [B, T, C];
    - `lse_a`, `lse_b` and `lse` are [B, H, T] of f32, with H dividing C.
  }];
  let arguments = (ins Xfmr_FloatTensor:$out_a, Xfmr_FloatTensor:$lse_a,
                       Xfmr_FloatTensor:$out_b, Xfmr_FloatTensor:$lse_b);
  let results = (outs Xfmr_FloatTensor:$out, Xfmr_FloatTensor:$lse);
}

def Xfmr_AttentionBlockGradOp
    : Xfmr_Op<"attention_block_grad", [Xfmr_Matmul], Xfmr_PartitionsLocally> {
  let summary = "flash-attention backward of one key block";
  let description = [{
    The gradients of one block of `xfmr.attention_block` given the FINAL
    `out` and `lse` of the whole attention (over every block): with
    p = exp(score - lse) for the visible keys (0 for the others) and
    D_t = sum_d grad[t, d] out[t, d] per head, dS = p (grad v^T - D),
    `query_grad` = scale dS k, `key_grad` = scale dS^T q and
    `value_grad` = p^T grad, the query and key gradients taken back through
    RoPE's rotation (so with respect to the un-rotated inputs, as
    `xfmr.attention_grad`) and the key and value gradients summed over the
    query heads of each GQA group. Summed over all blocks, `query_grad` is
    `xfmr.attention_grad`'s; the key and value gradients of each block are
    its rows of `xfmr.attention_grad`'s.

    Example:
    ```mlir
    %dq, %dk, %dv = xfmr.attention_block_grad %do, %q, %k, %v, %qpos, %kpos, %o, %lse
        {num_heads = 4 : i64, num_kv_heads = 2 : i64}
        : (tensor<4x32x64xf32>, tensor<4x32x64xf32>, tensor<4x16x32xf32>,
           tensor<4x16x32xf32>, tensor<32xi32>, tensor<16xi32>,
           tensor<4x32x64xf32>, tensor<4x4x32xf32>)
        -> (tensor<4x32x64xf32>, tensor<4x16x32xf32>, tensor<4x16x32xf32>)
    ```

    Constraints: those of `xfmr.attention_block`, with `grad`, `out` and
    `query_grad` typed like the query, `key_grad` and `value_grad` like the
    key, and `lse` [B, H, Tq] of f32.
  }];
  let arguments = (ins Xfmr_FloatTensor:$grad, Xfmr_FloatTensor:$query,
                       Xfmr_FloatTensor:$key, Xfmr_FloatTensor:$value,
                       Xfmr_Positions:$query_positions,
                       Xfmr_Positions:$key_positions,
                       Xfmr_FloatTensor:$out, Xfmr_FloatTensor:$lse,
                       I64Attr:$num_heads, I64Attr:$num_kv_heads,
                       DefaultValuedAttr<BoolAttr, "true">:$causal,
                       OptionalAttr<F32Attr>:$rope_theta,
                       OptionalAttr<StrAttr>:$rope_scaling,
                       OptionalAttr<DenseF64ArrayAttr>:$rope_scaling_factors,
                       OptionalAttr<I64Attr>:$sliding_window);
  let results = (outs Xfmr_FloatTensor:$query_grad,
                      Xfmr_FloatTensor:$key_grad,
                      Xfmr_FloatTensor:$value_grad);
}

#endif // PARTITION_XFMR_OPS
