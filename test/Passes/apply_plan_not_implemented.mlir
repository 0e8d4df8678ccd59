// --dist-apply-plan refuses plan fields whose pass does not exist yet, one
// line per field, so that no field is silently ignored (the list:
// kNotImplemented in passes/Plan.cpp; a pass that lands removes its line
// and the RUN lines here that test it).

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_pp2.json 2>&1 | FileCheck %s --check-prefix=CHECK-PP
// CHECK-PP: error: {{.*}}plan_pp2.json: mesh.pp = 2 needs the pipeline-parallel pass, which is not implemented yet; use pp 1{{$}}
// CHECK-PP-NOT: error

// Without pipeline parallelism a schedule would be ignored.
// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_schedule_gpipe.json 2>&1 | FileCheck %s --check-prefix=CHECK-SCHEDULE
// CHECK-SCHEDULE: error: {{.*}}plan_schedule_gpipe.json: pipeline.schedule = "gpipe" needs the pipeline-parallel pass, which is not implemented yet; leave it out{{$}}

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

// Every refused field is named.
// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_full.json 2>&1 | FileCheck %s --check-prefix=CHECK-ALL
// CHECK-ALL: error: {{.*}}plan_full.json: mesh.pp = 2 needs the pipeline-parallel pass
// CHECK-ALL: error: {{.*}}plan_full.json: pipeline.schedule = "interleaved-1f1b" needs the pipeline-parallel pass
// CHECK-ALL-NOT: zero.stage
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
