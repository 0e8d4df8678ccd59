// --dist-apply-plan refuses plan fields whose pass does not exist yet, one
// line per field, so that no field is silently ignored (the list:
// kNotImplemented in passes/plan/Plan.cpp, which now holds only combinations
// with nonuniform `replicas`; a pass that lands removes its line, and the RUN
// lines here check that each formerly refused field now applies).

// --dist-pipeline implements mesh.pp and pipeline.schedule
// (test/Passes/pipeline/ has their tests).
// RUN: partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_schedule_gpipe.json | FileCheck %s --check-prefix=CHECK-SCHEDULE
// CHECK-SCHEDULE: schedule = "gpipe"

// --dist-zero implements every ZeRO stage.
// RUN: partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_zero3.json | FileCheck %s --check-prefix=CHECK-ZERO
// CHECK-ZERO: zero_stage = 3
// RUN: partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_partial.json | FileCheck %s --check-prefix=CHECK-ZERO2
// CHECK-ZERO2: zero_stage = 2

// --dist-recompute implements every policy, budget included.
// RUN: partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_recompute_budget.json | FileCheck %s --check-prefix=CHECK-RECOMPUTE
// CHECK-RECOMPUTE: recompute = budget, budget_bytes = 1000000
// RUN: partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_recompute.json | FileCheck %s --check-prefix=CHECK-SELECTIVE
// CHECK-SELECTIVE: recompute = selective

// Every field has its pass now: a plan that asks for all of them applies.
// RUN: partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_full.json 2>&1 | FileCheck %s --check-prefix=CHECK-ALL
// CHECK-ALL-NOT: error
// CHECK-ALL: dist.plan = #dist.plan<{{.*}}schedule = "interleaved-1f1b"{{.*}}zero_stage = 1{{.*}}recompute = budget

// pipeline.microbatches without pipeline parallelism is gradient
// accumulation (--xfmr-train-step), and the defaults ask for nothing.
// RUN: partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_mb2.json | FileCheck %s --check-prefix=CHECK-MB2
// CHECK-MB2: microbatches = 2
// RUN: partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_defaults.json | FileCheck %s --check-prefix=CHECK-DEFAULTS
// CHECK-DEFAULTS: dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 1]

func.func @forward(%tokens: tensor<8x16xi32> {xfmr.input = "tokens"}) -> tensor<8x16xi32>
    attributes {xfmr.model = {arch = "llama", batch = 8 : i64, heads = 4 : i64, kv_heads = 2 : i64, layers = 4 : i64, vocab = 256 : i64, seq_len = 16 : i64}} {
  return %tokens : tensor<8x16xi32>
}
