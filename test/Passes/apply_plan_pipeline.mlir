// Plan errors of pipeline parallelism (issue 12, point 8): each names the
// plan field and the numbers. The model below has 4 layers.

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_pp_interleaved_mb3.json 2>&1 | FileCheck %s --check-prefix=CHECK-MB
// CHECK-MB: error: {{.*}}plan_pp_interleaved_mb3.json: pipeline.microbatches = 3 is not divisible by mesh.pp = 2: interleaved-1f1b runs the micro-batches in groups of pp; use 2 or 4{{$}}

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_pp_chunks.json 2>&1 | FileCheck %s --check-prefix=CHECK-CHUNKS
// CHECK-CHUNKS: error: {{.*}}plan_pp_chunks.json: mesh.pp x pipeline.virtual_stages = 2 x 4 = 8 chunks, more than the model's 4 layers: every chunk needs at least one layer{{$}}

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_pp_stages_sum.json 2>&1 | FileCheck %s --check-prefix=CHECK-SUM
// CHECK-SUM: error: {{.*}}plan_pp_stages_sum.json: pipeline.stages sums to 3 layers but the model has 4; give each chunk's layer count so that they sum to 4{{$}}

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_pp_stages_count.json 2>&1 | FileCheck %s --check-prefix=CHECK-COUNT
// CHECK-COUNT: error: {{.*}}plan_pp_stages_count.json: pipeline.stages has 3 entries but mesh.pp x pipeline.virtual_stages = 2 x 1 = 2 chunks need one layer count each{{$}}

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_pp_stages_zero.json 2>&1 | FileCheck %s --check-prefix=CHECK-ZERO
// CHECK-ZERO: error: {{.*}}plan_pp_stages_zero.json: pipeline.stages[1] must be a positive layer count, got 0{{$}}

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_pp_virtual_1f1b.json 2>&1 | FileCheck %s --check-prefix=CHECK-VIRTUAL
// CHECK-VIRTUAL: error: {{.*}}plan_pp_virtual_1f1b.json: pipeline.virtual_stages = 2 needs pipeline.schedule = "interleaved-1f1b", not "1f1b"; drop virtual_stages or change the schedule{{$}}

// pp larger than the layers: test/Passes/apply_plan_model.mlir (CHECK-PP).

// A plan that follows every rule is recorded.
// RUN: partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_pp_ok.json | FileCheck %s --check-prefix=CHECK-OK
// CHECK-OK: schedule = "interleaved-1f1b", microbatches = 4
// CHECK-OK: dist.mesh @mesh axes = [dp = 1, pp = 2, tp = 1]

func.func @forward(%tokens: tensor<8x16xi32> {xfmr.input = "tokens"}) -> tensor<8x16xi32>
    attributes {xfmr.model = {arch = "gpt2", batch = 8 : i64, heads = 4 : i64, layers = 4 : i64, vocab = 256 : i64, seq_len = 16 : i64}} {
  return %tokens : tensor<8x16xi32>
}
