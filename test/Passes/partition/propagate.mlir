// --dist-propagate: every value's layout, decided from the seeds and the
// ops' sharding rules, recorded in the IR (types stay global).
// RUN: partition-opt %s -split-input-file --dist-seed-layouts --dist-propagate | FileCheck %s
// RUN: partition-opt %s -split-input-file --dist-seed-layouts --dist-propagate="tensor-parallel=false" | FileCheck %s --check-prefix=NO-TP
// RUN: rm -rf %t && mkdir -p %t
// RUN: partition-gen --preset gpt2-tiny -o %t/gpt2.mlir
// RUN: echo '{"mesh": {"dp": 2, "tp": 2}, "tensor_parallel": {"sequence_parallel": true}}' > %t/sp.json
// RUN: partition-opt %t/gpt2.mlir --dist-apply-plan=plan=%t/sp.json --xfmr-mixed-precision --xfmr-train-step=eval=true --dist-seed-layouts --dist-propagate | FileCheck %s --check-prefix=GPT2

// Megatron's MLP: the first linear reads a whole input, so its weight and
// bias are split by output features (column-parallel); the second reads
// features split over tp, so its weight follows (row-parallel) and its
// result is a partial sum; the add consumes it whole (no operand layout
// recorded: replicated).

#plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">
module attributes {dist.plan = #plan} {
  dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 2]
  // CHECK-LABEL: func.func @eval_step
  // CHECK-SAME: {dist.sharding = #dist.sharding<@mesh, {{\[\[}}tp], []]>, xfmr.param = "fc.weight"}
  // CHECK-SAME: {dist.sharding = #dist.sharding<@mesh, {{\[\[}}tp]]>, xfmr.param = "fc.bias"}
  // CHECK-SAME: {dist.sharding = #dist.sharding<@mesh, {{\[\[}}], [tp]]>, xfmr.param = "proj.weight"}
  // CHECK: %[[H:.*]] = xfmr.linear {{.*}} {dist.operand_shardings = [#dist.sharding<@mesh, {{\[\[}}], [], []]>, #dist.sharding<@mesh, {{\[\[}}tp], []]>, #dist.sharding<@mesh, {{\[\[}}tp]]>], dist.sharding = #dist.sharding<@mesh, {{\[\[}}], [], [tp]]>}
  // CHECK: %[[G:.*]] = xfmr.gelu %[[H]] {dist.operand_shardings = [#dist.sharding<@mesh, {{\[\[}}], [], [tp]]>], dist.sharding = #dist.sharding<@mesh, {{\[\[}}], [], [tp]]>}
  // CHECK: %[[Y:.*]] = xfmr.linear %[[G]], {{.*}} dist.sharding = #dist.sharding<@mesh, {{\[\[}}], [], []], partial = [tp]>}
  // CHECK: xfmr.add %{{.*}}, %[[Y]] : (
  // NO-TP-LABEL: func.func @eval_step
  // NO-TP-SAME: (%{{.*}}: tensor<16x8xf32> {xfmr.param = "fc.weight"}
  // NO-TP-NOT: dist.sharding
  func.func @eval_step(%w1: tensor<16x8xf32> {xfmr.param = "fc.weight"},
                       %b1: tensor<16xf32> {xfmr.param = "fc.bias"},
                       %w2: tensor<8x16xf32> {xfmr.param = "proj.weight"},
                       %x: tensor<4x4x8xf32>) -> tensor<4x4x8xf32> attributes {xfmr.eval_step = {}} {
    %h = xfmr.linear %x, %w1, %b1 : (tensor<4x4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x4x16xf32>
    %g = xfmr.gelu %h : (tensor<4x4x16xf32>) -> tensor<4x4x16xf32>
    %y = xfmr.linear %g, %w2 : (tensor<4x4x16xf32>, tensor<8x16xf32>) -> tensor<4x4x8xf32>
    %z = xfmr.add %x, %y : (tensor<4x4x8xf32>, tensor<4x4x8xf32>) -> tensor<4x4x8xf32>
    return %z : tensor<4x4x8xf32>
  }
}

// -----

// An embedding table is split by vocabulary (the rule's weight factor) and
// its lookup is partial; partial sums pass through linear ops (two partial
// terms added stay partial) until a use needs the whole sum.

#plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">
module attributes {dist.plan = #plan} {
  dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 2]
  // CHECK-LABEL: func.func @eval_step
  // CHECK-SAME: {dist.sharding = #dist.sharding<@mesh, {{\[\[}}tp], []]>, xfmr.param = "wte"}
  // CHECK: %[[E:.*]] = xfmr.embedding {{.*}} dist.sharding = #dist.sharding<@mesh, {{\[\[}}], [], []], partial = [tp]>}
  // CHECK: %[[S:.*]] = xfmr.add %[[E]], %[[E]] {dist.operand_shardings = [#dist.sharding<@mesh, {{\[\[}}], [], []], partial = [tp]>, #dist.sharding<@mesh, {{\[\[}}], [], []], partial = [tp]>], dist.sharding = #dist.sharding<@mesh, {{\[\[}}], [], []], partial = [tp]>}
  // CHECK: xfmr.gelu %[[S]] : (
  func.func @eval_step(%wte: tensor<16x8xf32> {xfmr.param = "wte"},
                       %tokens: tensor<4x4xi32> {xfmr.input = "tokens"}) -> tensor<4x4x8xf32> attributes {xfmr.eval_step = {}} {
    %e = xfmr.embedding %tokens, %wte : (tensor<4x4xi32>, tensor<16x8xf32>) -> tensor<4x4x8xf32>
    %s = xfmr.add %e, %e : (tensor<4x4x8xf32>, tensor<4x4x8xf32>) -> tensor<4x4x8xf32>
    %g = xfmr.gelu %s : (tensor<4x4x8xf32>) -> tensor<4x4x8xf32>
    return %g : tensor<4x4x8xf32>
  }
}

// A real step (gpt2-tiny, dp2 x tp2, sequence parallelism, bf16):
// - the bf16 cast of a weight is placed with the weight (c_fc column-parallel);
// - the norms run on sequence blocks (their input consumed as [[dp], [tp], []]);
// - a weight gradient takes its parameter's layout (AdamW updates blocks);
// - the evaluation step reuses the training step's placements.
// GPT2-LABEL: func.func @train_step
// GPT2-SAME: {dist.sharding = #dist.sharding<@mesh, {{\[\[}}tp], []]>, xfmr.layer = 0 : i64, xfmr.param = "h.0.mlp.c_fc.weight"}
// GPT2-SAME: {dist.sharding = #dist.sharding<@mesh, {{\[\[}}], [tp]]>, xfmr.layer = 0 : i64, xfmr.param = "h.0.mlp.c_proj.weight"}
// GPT2-SAME: {dist.sharding = #dist.sharding<@mesh, {{\[\[}}tp], []]>, xfmr.layer = 0 : i64, xfmr.moment1 = "h.0.mlp.c_fc.weight"}
// GPT2: xfmr.layernorm {{.*}} {dist.operand_shardings = [#dist.sharding<@mesh, {{\[\[}}dp], [tp], []]>,
// GPT2: %[[W:.*]] = xfmr.cast %arg14 {dist.operand_shardings = [#dist.sharding<@mesh, {{\[\[}}tp], []]>], dist.sharding = #dist.sharding<@mesh, {{\[\[}}tp], []]>} : (tensor<256x64xf32>) -> tensor<256x64xbf16>
// The cast weight keeps its split; the sequence-split input is gathered
// (Megatron's sequence parallelism), not the weight.
// GPT2: xfmr.linear %{{.*}}, %[[W]], %{{.*}} {dist.operand_shardings = [#dist.sharding<@mesh, {{\[\[}}dp], [], []]>, #dist.sharding<@mesh, {{\[\[}}tp], []]>, #dist.sharding<@mesh, {{\[\[}}tp]]>], dist.sharding = #dist.sharding<@mesh, {{\[\[}}dp], [], [tp]]>}
// GPT2: xfmr.linear_grad_weight {{.*}} dist.sharding = #dist.sharding<@mesh, {{\[\[}}tp], []], partial = [dp]>} : ({{.*}}) -> tensor<256x64xbf16>
// GPT2-LABEL: func.func @eval_step
// GPT2-SAME: {dist.sharding = #dist.sharding<@mesh, {{\[\[}}tp], []]>, xfmr.layer = 0 : i64, xfmr.param = "h.0.mlp.c_fc.weight"}

// -----

// Expert parallelism below dp (docs/moe.md): tokens split over [dp, ep] by
// batch meet experts split over ep. The expert GEMM splits the batch over
// dp, the major part of its split whose minor part ep the experts took
// from the same buffer, so the buffer is one all_to_all over ep away
// (rather than whole along the batch: gathered from the other replicas).
// The combine is the converse: the gates propose the batch over [dp, ep]
// as urgently as the experts' output proposes dp, and the output splits
// its experts over the rest, ep: the batch takes [dp, ep] and the output
// moves back by the reverse all_to_all. (Split results are returned as
// blocks only for state, gradients and logits: the output is named so.)

#plan = #dist.plan<mesh = @mesh, axes = [dp = data, ep = expert, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32", expert_parallel = 2>
module attributes {dist.plan = #plan} {
  dist.mesh @mesh axes = [dp = 2, ep = 2, pp = 1, tp = 1]
  // CHECK-LABEL: func.func @eval_step
  // CHECK: %[[H:.*]] = xfmr.expert_linear {{.*}} {dist.operand_shardings = [#dist.sharding<@mesh, {{\[\[}}dp], [ep], [], []]>, #dist.sharding<@mesh, {{\[\[}}ep], [], []]>, #dist.sharding<@mesh, {{\[\[}}dp], [ep]]>], dist.sharding = #dist.sharding<@mesh, {{\[\[}}dp], [ep], [], []]>
  // CHECK: xfmr.moe_combine %[[H]], {{.*}} {dist.operand_shardings = [#dist.sharding<@mesh, {{\[\[}}dp, ep], [], [], []]>, #dist.sharding<@mesh, {{\[\[}}dp, ep], [], []]>, #dist.sharding<@mesh, {{\[\[}}dp, ep], [], []]>, #dist.sharding<@mesh, {{\[\[}}dp, ep], [], []]>], dist.sharding = #dist.sharding<@mesh, {{\[\[}}dp, ep], [], []]>}
  // Annotated layouts, not the weight policy's: the same without it.
  // NO-TP-LABEL: func.func @eval_step
  // NO-TP: xfmr.expert_linear {{.*}} {dist.operand_shardings = [#dist.sharding<@mesh, {{\[\[}}dp], [ep], [], []]>
  // NO-TP: xfmr.moe_combine {{.*}} {dist.operand_shardings = [#dist.sharding<@mesh, {{\[\[}}dp, ep], [], [], []]>
  func.func @eval_step(%w: tensor<4x16x16xf32> {dist.sharding = #dist.sharding<@mesh, [[ep], [], []]>, xfmr.param = "experts.w2"},
                       %xe: tensor<4x4x8x16xf32> {dist.sharding = #dist.sharding<@mesh, [[dp, ep], [], [], []]>},
                       %counts: tensor<4x4xi32> {dist.sharding = #dist.sharding<@mesh, [[dp, ep], []]>},
                       %gates: tensor<4x8x2xf32> {dist.sharding = #dist.sharding<@mesh, [[dp, ep], [], []]>},
                       %experts: tensor<4x8x2xi32> {dist.sharding = #dist.sharding<@mesh, [[dp, ep], [], []]>},
                       %slots: tensor<4x8x2xi32> {dist.sharding = #dist.sharding<@mesh, [[dp, ep], [], []]>}) -> (tensor<4x8x16xf32> {xfmr.output = "logits"}) attributes {xfmr.eval_step = {}} {
    %h = xfmr.expert_linear %xe, %w, %counts {routed_rows = 64 : i64} : (tensor<4x4x8x16xf32>, tensor<4x16x16xf32>, tensor<4x4xi32>) -> tensor<4x4x8x16xf32>
    %y = xfmr.moe_combine %h, %gates, %experts, %slots : (tensor<4x4x8x16xf32>, tensor<4x8x2xf32>, tensor<4x8x2xi32>, tensor<4x8x2xi32>) -> tensor<4x8x16xf32>
    return %y : tensor<4x8x16xf32>
  }
}
