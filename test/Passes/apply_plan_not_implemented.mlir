// --dist-apply-plan refuses plan fields whose pass does not exist yet, one
// line per field, so that no field is silently ignored (the list:
// kNotImplemented in passes/Plan.cpp; a pass that lands removes its line
// and the RUN lines here that test it).

// --dist-pipeline implements mesh.pp and pipeline.schedule
// (test/Passes/pipeline/ has their tests).
// RUN: partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_schedule_gpipe.json | FileCheck %s --check-prefix=CHECK-SCHEDULE
// CHECK-SCHEDULE: schedule = "gpipe"

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_partial.json 2>&1 | FileCheck %s --check-prefix=CHECK-ZERO
// CHECK-ZERO: error: {{.*}}plan_partial.json: zero.stage = 2 needs the ZeRO pass, which is not implemented yet; use stage 0{{$}}

// --dist-recompute implements every policy, budget included.
// RUN: partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_recompute_budget.json | FileCheck %s --check-prefix=CHECK-RECOMPUTE
// CHECK-RECOMPUTE: recompute = budget, budget_bytes = 1000000
// RUN: partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_recompute.json | FileCheck %s --check-prefix=CHECK-SELECTIVE
// CHECK-SELECTIVE: recompute = selective

// Every refused field is named.
// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_full.json 2>&1 | FileCheck %s --check-prefix=CHECK-ALL
// CHECK-ALL-NOT: needs the pipeline-parallel pass
// CHECK-ALL: error: {{.*}}plan_full.json: zero.stage = 1 needs the ZeRO pass
// CHECK-ALL-NOT: recompute.policy

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
