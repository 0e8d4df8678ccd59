// RUN: partition-opt %s --split-input-file | FileCheck %s
// The printed form parses back to the same attribute.
// RUN: partition-opt %s --split-input-file | partition-opt --split-input-file | FileCheck %s

// #dist.plan: the typed plan --dist-apply-plan records; every field
// printed, budget_bytes only with recompute = budget.

// CHECK-LABEL: module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = true, schedule = "1f1b", microbatches = 4, zero_stage = 0, recompute = none, precision = "bf16">}
// CHECK:       dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 2]
module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = true, schedule = "1f1b", microbatches = 4, zero_stage = 0, recompute = none, precision = "bf16">} {
  dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 2]
}

// -----

// The struct's fields in any order; axes with other names and roles in any
// order (a mesh may have more axes than the plan gives roles).
// CHECK-LABEL: module attributes {dist.plan = #dist.plan<mesh = @m, axes = [model = tensor, batch = data], sequence_parallel = false, schedule = "zero-bubble", microbatches = 8, zero_stage = 3, recompute = budget, budget_bytes = 1073741824, precision = "fp32">}
module attributes {dist.plan = #dist.plan<mesh = @m, axes = [model = tensor, batch = data], precision = "fp32", zero_stage = 3, microbatches = 8, recompute = budget, budget_bytes = 1073741824, schedule = "zero-bubble", sequence_parallel = false>} {
  dist.mesh @m axes = [batch = 4, model = 2, expert = 2]
}

// -----

// Tensor parallelism over two axes, the first major (fewer key-value heads
// than tp: --dist-apply-plan's tp and tp_kv_rep); every other role has one
// axis (plan_attr_verification.mlir).
// CHECK-LABEL: module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor, tp_kv_rep = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">}
module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor, tp_kv_rep = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">} {
  dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 2, tp_kv_rep = 2]
}

// -----

// A plan axis alone.
// CHECK-LABEL: func.func @axis() attributes {axis = #dist.axis<"tp", tensor>}
func.func @axis() attributes {axis = #dist.axis<"tp", tensor>} {
  return
}
