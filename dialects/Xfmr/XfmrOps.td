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
    /// On a parameter argument: its update rate. The parameter is a routing
    /// bias (DeepSeek-V3's auxiliary-loss-free balancing): model state that
    /// the step does not train (no gradient, no moments, no decay) but
    /// moves once per step by xfmr.moe_bias_update at this rate, from the
    /// load of the routes that take it (docs/design.md, "State").
    static constexpr ::llvm::StringLiteral kRoutingBiasAttrName =
        "xfmr.routing_bias";
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

include "dialects/Xfmr/XfmrAttentionOps.td"
include "dialects/Xfmr/XfmrMoeOps.td"

#endif // PARTITION_XFMR_OPS
