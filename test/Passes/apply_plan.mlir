// --dist-apply-plan: plan.json is parsed (every field optional), checked
// against the model and recorded as `dist.mesh @mesh` (all three axes) and
// the module's `dist.plan` dictionary, defaults filled in.

// No plan: the defaults.
// RUN: partition-opt %s --dist-apply-plan | FileCheck %s --check-prefix=CHECK-DEFAULT
// An empty object is the default plan too.
// RUN: partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_empty.json | FileCheck %s --check-prefix=CHECK-DEFAULT
// CHECK-DEFAULT:      module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">} {
// CHECK-DEFAULT-NEXT:   dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 1]
// CHECK-DEFAULT-NEXT:   func.func @forward

// Every field that compiles today given: the round trip.
// RUN: partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_today.json | FileCheck %s --check-prefix=CHECK-FULL
// CHECK-FULL:      module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = true, schedule = "1f1b", microbatches = 4, zero_stage = 0, recompute = none, precision = "bf16">} {
// CHECK-FULL-NEXT:   dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 2]
// CHECK-FULL-NEXT:   func.func @forward

// The recorded plan is valid IR: it parses back and verifies.
// RUN: partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_today.json | partition-opt | FileCheck %s --check-prefix=CHECK-FULL

// Some fields given, the others default.
// RUN: partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_mb2.json | FileCheck %s --check-prefix=CHECK-PARTIAL
// CHECK-PARTIAL:      module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 2, zero_stage = 0, recompute = none, precision = "fp32">} {
// CHECK-PARTIAL-NEXT:   dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 1]

// Fields that ask for their default are accepted: nothing is ignored.
// RUN: partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_defaults.json | FileCheck %s --check-prefix=CHECK-DEFAULT

//===----------------------------------------------------------------------===//
// Errors: each names the field path and the value
//===----------------------------------------------------------------------===//

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_unknown_top.json 2>&1 | FileCheck %s --check-prefix=CHECK-UNKNOWN-TOP
// CHECK-UNKNOWN-TOP: error: {{.*}}plan_unknown_top.json: unknown field 'pipline' (known: mesh, tensor_parallel, pipeline, zero, recompute, precision, replicas, overlap, context_parallel, moe, offload)

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_unknown_nested.json 2>&1 | FileCheck %s --check-prefix=CHECK-UNKNOWN-NESTED
// CHECK-UNKNOWN-NESTED: error: {{.*}}plan_unknown_nested.json: unknown field 'mesh.ep' (known: dp, tp, pp, cp)

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_dp_zero.json 2>&1 | FileCheck %s --check-prefix=CHECK-DP-ZERO
// CHECK-DP-ZERO: error: {{.*}}plan_dp_zero.json: mesh.dp must be a positive integer, got 0

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_tp_string.json 2>&1 | FileCheck %s --check-prefix=CHECK-TP-STRING
// CHECK-TP-STRING: error: {{.*}}plan_tp_string.json: mesh.tp must be a positive integer, got "2"

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_pp_fraction.json 2>&1 | FileCheck %s --check-prefix=CHECK-PP-FRACTION
// CHECK-PP-FRACTION: error: {{.*}}plan_pp_fraction.json: mesh.pp must be a positive integer, got 1.5

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_mesh_array.json 2>&1 | FileCheck %s --check-prefix=CHECK-MESH-ARRAY
// CHECK-MESH-ARRAY: error: {{.*}}plan_mesh_array.json: mesh must be an object, got [2,2,2]

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_zero_4.json 2>&1 | FileCheck %s --check-prefix=CHECK-ZERO
// CHECK-ZERO: error: {{.*}}plan_zero_4.json: zero.stage must be 0, 1, 2 or 3, got 4

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_sp_int.json 2>&1 | FileCheck %s --check-prefix=CHECK-SP-INT
// CHECK-SP-INT: error: {{.*}}plan_sp_int.json: tensor_parallel.sequence_parallel must be true or false, got 1

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_schedule.json 2>&1 | FileCheck %s --check-prefix=CHECK-SCHEDULE
// CHECK-SCHEDULE: error: {{.*}}plan_schedule.json: pipeline.schedule must be one of gpipe, 1f1b, interleaved-1f1b, zero-bubble, got "pipedream"

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_microbatches.json 2>&1 | FileCheck %s --check-prefix=CHECK-MICROBATCHES
// CHECK-MICROBATCHES: error: {{.*}}plan_microbatches.json: pipeline.microbatches must be an integer between 1 and 4096 (micro-batches per step), got -1

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_policy.json 2>&1 | FileCheck %s --check-prefix=CHECK-POLICY
// CHECK-POLICY: error: {{.*}}plan_policy.json: recompute.policy must be one of none, full, selective, budget, got "some"

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_budget_missing.json 2>&1 | FileCheck %s --check-prefix=CHECK-BUDGET-MISSING
// CHECK-BUDGET-MISSING: error: {{.*}}plan_budget_missing.json: recompute.budget_bytes is required with recompute.policy "budget"

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_budget_extra.json 2>&1 | FileCheck %s --check-prefix=CHECK-BUDGET-EXTRA
// CHECK-BUDGET-EXTRA: error: {{.*}}plan_budget_extra.json: recompute.budget_bytes is only meaningful with recompute.policy "budget", got policy "full"

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_precision.json 2>&1 | FileCheck %s --check-prefix=CHECK-PRECISION
// CHECK-PRECISION: error: {{.*}}plan_precision.json: precision must be one of fp32, bf16, got "fp16"

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_invalid.json 2>&1 | FileCheck %s --check-prefix=CHECK-INVALID
// CHECK-INVALID: error: {{.*}}plan_invalid.json: invalid JSON: {{.+}}

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_not_object.json 2>&1 | FileCheck %s --check-prefix=CHECK-NOT-OBJECT
// CHECK-NOT-OBJECT: error: {{.*}}plan_not_object.json: the plan must be a JSON object, got [1,2]

// An empty file is not the default plan (leaving out the plan is).
// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_empty_file.json 2>&1 | FileCheck %s --check-prefix=CHECK-EMPTY-FILE
// CHECK-EMPTY-FILE: error: {{.*}}plan_empty_file.json: the plan is empty; write {} for the default plan, or leave out the plan
// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_whitespace.json 2>&1 | FileCheck %s --check-prefix=CHECK-WHITESPACE
// CHECK-WHITESPACE: error: {{.*}}plan_whitespace.json: the plan is empty; write {} for the default plan, or leave out the plan

// A key given twice is an error (a JSON reader would keep the last),
// at any level.
// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_duplicate_top.json 2>&1 | FileCheck %s --check-prefix=CHECK-DUPLICATE-TOP
// CHECK-DUPLICATE-TOP: error: {{.*}}plan_duplicate_top.json: the key 'mesh' is given twice; give each key once
// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_duplicate_nested.json 2>&1 | FileCheck %s --check-prefix=CHECK-DUPLICATE-NESTED
// CHECK-DUPLICATE-NESTED: error: {{.*}}plan_duplicate_nested.json: the key 'mesh.dp' is given twice; give each key once
// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_duplicate_deep.json 2>&1 | FileCheck %s --check-prefix=CHECK-DUPLICATE-DEEP
// CHECK-DUPLICATE-DEEP: error: {{.*}}plan_duplicate_deep.json: the key 'mesh[1].x' is given twice; give each key once

// Nesting no plan has is refused before it is read (the reader recurses).
// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_deep.json 2>&1 | FileCheck %s --check-prefix=CHECK-DEEP
// CHECK-DEEP: error: {{.*}}plan_deep.json: 'mesh[0][0][0][0][0][0][0][0][0][0][0][0][0][0][0]' is nested more than 16 levels deep

// No size computed from the mesh may overflow: at most 2^24 devices.
// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_mesh_huge.json 2>&1 | FileCheck %s --check-prefix=CHECK-HUGE
// CHECK-HUGE: error: {{.*}}plan_mesh_huge.json: the mesh of dp 4611686018427387904 x tp 4 x pp 1 devices is larger than the 16777216 supported

// A message is one line: control characters in keys are escaped.
// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_key_newline.json 2>&1 | FileCheck %s --check-prefix=CHECK-KEY-NEWLINE
// CHECK-KEY-NEWLINE: error: {{.*}}plan_key_newline.json: unknown field 'mesh.d\0Ap' (known: dp, tp, pp, cp){{$}}

// Every error is reported, not only the first.
// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_many.json 2>&1 | FileCheck %s --check-prefix=CHECK-MANY
// CHECK-MANY: error: {{.*}}plan_many.json: mesh.dp must be a positive integer, got 0
// CHECK-MANY: error: {{.*}}plan_many.json: mesh.tp must be a positive integer, got -2
// CHECK-MANY: error: {{.*}}plan_many.json: zero.stage must be 0, 1, 2 or 3, got 4

// RUN: not partition-opt %s --dist-apply-plan=plan=%t.does-not-exist.json 2>&1 | FileCheck %s --check-prefix=CHECK-MISSING
// CHECK-MISSING: error: {{.*}}does-not-exist.json: cannot read the plan: {{.+}}

// A plan is applied once.
// RUN: not partition-opt %s --dist-apply-plan --dist-apply-plan 2>&1 | FileCheck %s --check-prefix=CHECK-TWICE
// CHECK-TWICE: error: plan.json: the module already has a plan ('dist.plan' or a symbol @mesh); apply a plan once

// A forward function of 8 sequences of 16 tokens, 4 heads (2 key/value
// heads), 4 layers, a vocabulary of 256.
func.func @forward(%tokens: tensor<8x16xi32> {xfmr.input = "tokens"}) -> tensor<8x16xi32>
    attributes {xfmr.model = {arch = "llama", batch = 8 : i64, heads = 4 : i64, kv_heads = 2 : i64, layers = 4 : i64, vocab = 256 : i64, seq_len = 16 : i64}} {
  return %tokens : tensor<8x16xi32>
}
