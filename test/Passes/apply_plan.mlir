// --dist-apply-plan: plan.json is parsed (every field optional), checked
// against the model and recorded as `dist.mesh @mesh` (all three axes) and
// the module's `dist.plan` dictionary, defaults filled in.

// No plan: the defaults.
// RUN: partition-opt %s --dist-apply-plan | FileCheck %s --check-prefix=CHECK-DEFAULT
// An empty object is the default plan too.
// RUN: partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_empty.json | FileCheck %s --check-prefix=CHECK-DEFAULT
// CHECK-DEFAULT:      module attributes {dist.plan = {mesh = {dp = 1 : i64, pp = 1 : i64, tp = 1 : i64}, pipeline = {microbatches = 1 : i64, schedule = "1f1b"}, precision = "fp32", recompute = {policy = "none"}, tensor_parallel = {sequence_parallel = false}, zero = {stage = 0 : i64}}} {
// CHECK-DEFAULT-NEXT:   dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 1]
// CHECK-DEFAULT-NEXT:   func.func @forward

// Every field given: the round trip.
// RUN: partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_full.json | FileCheck %s --check-prefix=CHECK-FULL
// CHECK-FULL:      module attributes {dist.plan = {mesh = {dp = 2 : i64, pp = 2 : i64, tp = 2 : i64}, pipeline = {microbatches = 4 : i64, schedule = "interleaved-1f1b"}, precision = "bf16", recompute = {budget_bytes = 1073741824 : i64, policy = "budget"}, tensor_parallel = {sequence_parallel = true}, zero = {stage = 1 : i64}}} {
// CHECK-FULL-NEXT:   dist.mesh @mesh axes = [dp = 2, pp = 2, tp = 2]
// CHECK-FULL-NEXT:   func.func @forward

// The recorded plan is valid IR: it parses back and verifies.
// RUN: partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_full.json | partition-opt | FileCheck %s --check-prefix=CHECK-FULL

// Some fields given, the others default.
// RUN: partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_partial.json | FileCheck %s --check-prefix=CHECK-PARTIAL
// CHECK-PARTIAL:      module attributes {dist.plan = {mesh = {dp = 1 : i64, pp = 1 : i64, tp = 1 : i64}, pipeline = {microbatches = 1 : i64, schedule = "1f1b"}, precision = "fp32", recompute = {policy = "none"}, tensor_parallel = {sequence_parallel = false}, zero = {stage = 2 : i64}}} {
// CHECK-PARTIAL-NEXT:   dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 1]

// A 2x2x2 mesh with 2 micro-batches fits this model.
// RUN: partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_ok.json | FileCheck %s --check-prefix=CHECK-OK
// CHECK-OK: dist.mesh @mesh axes = [dp = 2, pp = 2, tp = 2]

//===----------------------------------------------------------------------===//
// Errors: each names the field path and the value
//===----------------------------------------------------------------------===//

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_unknown_top.json 2>&1 | FileCheck %s --check-prefix=CHECK-UNKNOWN-TOP
// CHECK-UNKNOWN-TOP: error: plan.json: unknown field 'pipline' (known: mesh, tensor_parallel, pipeline, zero, recompute, precision)

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_unknown_nested.json 2>&1 | FileCheck %s --check-prefix=CHECK-UNKNOWN-NESTED
// CHECK-UNKNOWN-NESTED: error: plan.json: unknown field 'mesh.ep' (known: dp, tp, pp)

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_dp_zero.json 2>&1 | FileCheck %s --check-prefix=CHECK-DP-ZERO
// CHECK-DP-ZERO: error: plan.json: mesh.dp must be a positive integer, got 0

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_tp_string.json 2>&1 | FileCheck %s --check-prefix=CHECK-TP-STRING
// CHECK-TP-STRING: error: plan.json: mesh.tp must be a positive integer, got "2"

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_pp_fraction.json 2>&1 | FileCheck %s --check-prefix=CHECK-PP-FRACTION
// CHECK-PP-FRACTION: error: plan.json: mesh.pp must be a positive integer, got 1.5

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_mesh_array.json 2>&1 | FileCheck %s --check-prefix=CHECK-MESH-ARRAY
// CHECK-MESH-ARRAY: error: plan.json: mesh must be an object, got [2,2,2]

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_zero_4.json 2>&1 | FileCheck %s --check-prefix=CHECK-ZERO
// CHECK-ZERO: error: plan.json: zero.stage must be 0, 1, 2 or 3, got 4

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_sp_int.json 2>&1 | FileCheck %s --check-prefix=CHECK-SP-INT
// CHECK-SP-INT: error: plan.json: tensor_parallel.sequence_parallel must be true or false, got 1

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_schedule.json 2>&1 | FileCheck %s --check-prefix=CHECK-SCHEDULE
// CHECK-SCHEDULE: error: plan.json: pipeline.schedule must be one of gpipe, 1f1b, interleaved-1f1b, zero-bubble, got "pipedream"

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_microbatches.json 2>&1 | FileCheck %s --check-prefix=CHECK-MICROBATCHES
// CHECK-MICROBATCHES: error: plan.json: pipeline.microbatches must be a positive integer, got -1

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_policy.json 2>&1 | FileCheck %s --check-prefix=CHECK-POLICY
// CHECK-POLICY: error: plan.json: recompute.policy must be one of none, full, selective, budget, got "some"

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_budget_missing.json 2>&1 | FileCheck %s --check-prefix=CHECK-BUDGET-MISSING
// CHECK-BUDGET-MISSING: error: plan.json: recompute.budget_bytes is required with recompute.policy "budget"

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_budget_extra.json 2>&1 | FileCheck %s --check-prefix=CHECK-BUDGET-EXTRA
// CHECK-BUDGET-EXTRA: error: plan.json: recompute.budget_bytes is only meaningful with recompute.policy "budget", got policy "full"

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_precision.json 2>&1 | FileCheck %s --check-prefix=CHECK-PRECISION
// CHECK-PRECISION: error: plan.json: precision must be one of fp32, bf16, got "fp16"

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_invalid.json 2>&1 | FileCheck %s --check-prefix=CHECK-INVALID
// CHECK-INVALID: error: plan.json: invalid JSON: {{.+}}

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_not_object.json 2>&1 | FileCheck %s --check-prefix=CHECK-NOT-OBJECT
// CHECK-NOT-OBJECT: error: plan.json: the plan must be a JSON object, got [1,2]

// Every error is reported, not only the first.
// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_many.json 2>&1 | FileCheck %s --check-prefix=CHECK-MANY
// CHECK-MANY: error: plan.json: mesh.dp must be a positive integer, got 0
// CHECK-MANY: error: plan.json: mesh.tp must be a positive integer, got -2
// CHECK-MANY: error: plan.json: zero.stage must be 0, 1, 2 or 3, got 4

// RUN: not partition-opt %s --dist-apply-plan=plan=%t.does-not-exist.json 2>&1 | FileCheck %s --check-prefix=CHECK-MISSING
// CHECK-MISSING: error: plan.json: cannot read the plan '{{.*}}does-not-exist.json': {{.+}}

// A plan is applied once.
// RUN: not partition-opt %s --dist-apply-plan --dist-apply-plan 2>&1 | FileCheck %s --check-prefix=CHECK-TWICE
// CHECK-TWICE: error: plan.json: the module already has a plan ('dist.plan' or a symbol @mesh); apply a plan once

// A forward function of 8 sequences of 16 tokens, 4 heads (2 key/value
// heads), 4 layers, a vocabulary of 256.
func.func @forward(%tokens: tensor<8x16xi32> {xfmr.input = "tokens"}) -> tensor<8x16xi32>
    attributes {xfmr.model = {arch = "llama", batch = 8 : i64, heads = 4 : i64, kv_heads = 2 : i64, layers = 4 : i64, vocab = 256 : i64, seq_len = 16 : i64}} {
  return %tokens : tensor<8x16xi32>
}
