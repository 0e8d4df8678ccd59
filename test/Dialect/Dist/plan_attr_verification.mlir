// RUN: partition-opt %s --split-input-file --verify-diagnostics

// expected-error @+1 {{axis 'dp' is listed twice in the plan}}
module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [dp = data, dp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">} {
  dist.mesh @mesh axes = [dp = 2]
}

// -----

// expected-error @+1 {{axes 'dp' and 'tp' both have role data; give each role one axis}}
module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [dp = data, tp = data], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">} {
  dist.mesh @mesh axes = [dp = 2, tp = 2]
}

// -----

// expected-error @+1 {{a plan axis has an empty name}}
module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = ["" = data], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">} {
}

// -----

// expected-error @+1 {{unknown axis role 'pixel' (known: data, tensor, pipeline, context, expert)}}
module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [px = pixel], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">} {
}

// -----

// expected-error @+1 {{schedule must be one of gpipe, 1f1b, interleaved-1f1b, zero-bubble, got "pipedream"}}
module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [], sequence_parallel = false, schedule = "pipedream", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">} {
}

// -----

// expected-error @+1 {{microbatches must be positive, got 0}}
module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [], sequence_parallel = false, schedule = "1f1b", microbatches = 0, zero_stage = 0, recompute = none, precision = "fp32">} {
}

// -----

// expected-error @+1 {{zero_stage must be 0, 1, 2 or 3, got 4}}
module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 4, recompute = none, precision = "fp32">} {
}

// -----

// expected-error @+1 {{recompute = budget needs budget_bytes > 0, got 0}}
module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = budget, precision = "fp32">} {
}

// -----

// expected-error @+1 {{budget_bytes is only meaningful with recompute = budget, got recompute = full}}
module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = full, budget_bytes = 5, precision = "fp32">} {
}

// -----

// expected-error @+1 {{precision must be fp32 or bf16, got "fp16"}}
module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp16">} {
}

// -----

// expected-error @+2 {{expected true or false}}
// expected-error @+1 {{failed to parse Dist_PlanAttr parameter 'sequence_parallel' which is to be a `bool`}}
module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [], sequence_parallel = 1, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">} {
}

// -----

// expected-error @+1 {{struct is missing required parameter: precision}}
module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none>} {
}

// -----

// On the module: the plan's mesh and axes are the module's.

// expected-error @+1 {{'dist.plan': the mesh @mesh is not a dist.mesh of this module}}
module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">} {
}

// -----

// expected-error @+1 {{'dist.plan': axis 'tp' (role tensor) is not an axis of the mesh @mesh}}
module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [dp = data, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">} {
  dist.mesh @mesh axes = [dp = 2]
}

// -----

// expected-error @+1 {{'dist.plan' must be a #dist.plan, but is {zero = {stage = 1 : i64}}}}
module attributes {dist.plan = {zero = {stage = 1 : i64}}} {
}

// -----

// expected-error @+1 {{'dist.plan' belongs on a module, not on 'func.func'}}
func.func @f() attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">} {
  return
}

// -----

// Degrees per part of the model (issue 16): positive per layer; the
// embedding's positive or 0 (all the tensor axes).

// expected-error @+1 {{layer_tp gives layer 1 the degree 0; degrees must be at least 1}}
module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32", layer_tp = [2, 0]>} {
  dist.mesh @mesh axes = [tp = 2]
}

// -----

// expected-error @+1 {{embedding_tp must be at least 1 (or 0: all the tensor axes), got -2}}
module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32", embedding_tp = -2>} {
  dist.mesh @mesh axes = [tp = 2]
}

// -----

// expected-error @+1 {{expert_parallel = 2, but the plan has no expert axis}}
module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [dp = data], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32", expert_parallel = 2>} {
}

// -----

// expected-error @+1 {{expert_parallel = 1, but the plan has an expert axis: give its size}}
module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [dp = data, ep = expert], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">} {
}
