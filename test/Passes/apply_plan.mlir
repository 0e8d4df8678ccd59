// --dist-apply-plan: plan.json is parsed (every field optional), checked
// against the model and recorded as `dist.mesh @mesh` (all three axes) and
// the module's `dist.plan` dictionary, defaults filled in.

// No plan: the defaults.
// RUN: partition-opt %s --dist-apply-plan | FileCheck %s --check-prefix=DEFAULT
// An empty object is the default plan too.
// RUN: partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_empty.json | FileCheck %s --check-prefix=DEFAULT
// DEFAULT:      module attributes {dist.plan = {mesh = {dp = 1 : i64, pp = 1 : i64, tp = 1 : i64}, pipeline = {microbatches = 1 : i64, schedule = "1f1b"}, precision = "fp32", recompute = {policy = "none"}, tensor_parallel = {sequence_parallel = false}, zero = {stage = 0 : i64}}} {
// DEFAULT-NEXT:   dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 1]
// DEFAULT-NEXT:   func.func @forward

// Every field given: the round trip.
// RUN: partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_full.json | FileCheck %s --check-prefix=FULL
// FULL:      module attributes {dist.plan = {mesh = {dp = 2 : i64, pp = 2 : i64, tp = 2 : i64}, pipeline = {microbatches = 4 : i64, schedule = "interleaved-1f1b"}, precision = "bf16", recompute = {budget_bytes = 1073741824 : i64, policy = "budget"}, tensor_parallel = {sequence_parallel = true}, zero = {stage = 1 : i64}}} {
// FULL-NEXT:   dist.mesh @mesh axes = [dp = 2, pp = 2, tp = 2]
// FULL-NEXT:   func.func @forward

// The recorded plan is valid IR: it parses back and verifies.
// RUN: partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_full.json | partition-opt | FileCheck %s --check-prefix=FULL

// Some fields given, the others default.
// RUN: partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_partial.json | FileCheck %s --check-prefix=PARTIAL
// PARTIAL:      module attributes {dist.plan = {mesh = {dp = 1 : i64, pp = 1 : i64, tp = 1 : i64}, pipeline = {microbatches = 1 : i64, schedule = "1f1b"}, precision = "fp32", recompute = {policy = "none"}, tensor_parallel = {sequence_parallel = false}, zero = {stage = 2 : i64}}} {
// PARTIAL-NEXT:   dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 1]

// A 2x2x2 mesh with 2 micro-batches fits this model.
// RUN: partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_ok.json | FileCheck %s --check-prefix=OK
// OK: dist.mesh @mesh axes = [dp = 2, pp = 2, tp = 2]

//===----------------------------------------------------------------------===//
// Errors: each names the field path and the value
//===----------------------------------------------------------------------===//

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_unknown_top.json 2>&1 | FileCheck %s --check-prefix=UNKNOWN-TOP
// UNKNOWN-TOP: error: plan.json: unknown field 'pipline' (known: mesh, tensor_parallel, pipeline, zero, recompute, precision)

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_unknown_nested.json 2>&1 | FileCheck %s --check-prefix=UNKNOWN-NESTED
// UNKNOWN-NESTED: error: plan.json: unknown field 'mesh.ep' (known: dp, tp, pp)

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_dp_zero.json 2>&1 | FileCheck %s --check-prefix=DP-ZERO
// DP-ZERO: error: plan.json: mesh.dp must be a positive integer, got 0

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_tp_string.json 2>&1 | FileCheck %s --check-prefix=TP-STRING
// TP-STRING: error: plan.json: mesh.tp must be a positive integer, got "2"

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_pp_fraction.json 2>&1 | FileCheck %s --check-prefix=PP-FRACTION
// PP-FRACTION: error: plan.json: mesh.pp must be a positive integer, got 1.5

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_mesh_array.json 2>&1 | FileCheck %s --check-prefix=MESH-ARRAY
// MESH-ARRAY: error: plan.json: mesh must be an object, got [2,2,2]

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_zero_4.json 2>&1 | FileCheck %s --check-prefix=ZERO
// ZERO: error: plan.json: zero.stage must be 0, 1, 2 or 3, got 4

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_sp_int.json 2>&1 | FileCheck %s --check-prefix=SP-INT
// SP-INT: error: plan.json: tensor_parallel.sequence_parallel must be true or false, got 1

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_schedule.json 2>&1 | FileCheck %s --check-prefix=SCHEDULE
// SCHEDULE: error: plan.json: pipeline.schedule must be one of gpipe, 1f1b, interleaved-1f1b, zero-bubble, got "pipedream"

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_microbatches.json 2>&1 | FileCheck %s --check-prefix=MICROBATCHES
// MICROBATCHES: error: plan.json: pipeline.microbatches must be a positive integer, got -1

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_policy.json 2>&1 | FileCheck %s --check-prefix=POLICY
// POLICY: error: plan.json: recompute.policy must be one of none, full, selective, budget, got "some"

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_budget_missing.json 2>&1 | FileCheck %s --check-prefix=BUDGET-MISSING
// BUDGET-MISSING: error: plan.json: recompute.budget_bytes is required with recompute.policy "budget"

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_budget_extra.json 2>&1 | FileCheck %s --check-prefix=BUDGET-EXTRA
// BUDGET-EXTRA: error: plan.json: recompute.budget_bytes is only meaningful with recompute.policy "budget", got policy "full"

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_precision.json 2>&1 | FileCheck %s --check-prefix=PRECISION
// PRECISION: error: plan.json: precision must be one of fp32, bf16, got "fp16"

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_invalid.json 2>&1 | FileCheck %s --check-prefix=INVALID
// INVALID: error: plan.json: invalid JSON: {{.+}}

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_not_object.json 2>&1 | FileCheck %s --check-prefix=NOT-OBJECT
// NOT-OBJECT: error: plan.json: the plan must be a JSON object, got [1,2]

// Every error is reported, not only the first.
// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_many.json 2>&1 | FileCheck %s --check-prefix=MANY
// MANY: error: plan.json: mesh.dp must be a positive integer, got 0
// MANY: error: plan.json: mesh.tp must be a positive integer, got -2
// MANY: error: plan.json: zero.stage must be 0, 1, 2 or 3, got 4

// RUN: not partition-opt %s --dist-apply-plan=plan=%t.does-not-exist.json 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: error: plan.json: cannot read the plan '{{.*}}does-not-exist.json': {{.+}}

// A plan is applied once.
// RUN: not partition-opt %s --dist-apply-plan --dist-apply-plan 2>&1 | FileCheck %s --check-prefix=TWICE
// TWICE: error: plan.json: the module already has a plan ('dist.plan' or a symbol @mesh); apply a plan once

// A forward function of 8 sequences of 16 tokens, 4 heads (2 key/value
// heads), 4 layers, a vocabulary of 256.
func.func @forward(%tokens: tensor<8x16xi32> {xfmr.input = "tokens"}) -> tensor<8x16xi32>
    attributes {xfmr.model = {arch = "llama", batch = 8 : i64, heads = 4 : i64, kv_heads = 2 : i64, layers = 4 : i64, vocab = 256 : i64, seq_len = 16 : i64}} {
  return %tokens : tensor<8x16xi32>
}
