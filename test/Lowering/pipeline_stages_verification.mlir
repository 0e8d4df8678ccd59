// RUN: partition-opt %s -split-input-file --lower-memory-plan -verify-diagnostics

// Every error of the grouping of step functions into pipeline stages
// (lowering/PipelineStages.cpp), which --lower-memory-plan and the program
// writer share, and of the dist dialect's check of the attribute.

func.func @train_step_stage0(%x: memref<4xf32> {rt.role = "param", rt.name = "x"}) attributes {dist.pipeline_stage = 0 : i64} {
  rt.kernel "fill" outs(%x : memref<4xf32>) floats = [0.0]
  return
}
// expected-error @+1 {{has no dist.pipeline_stage, but @train_step_stage0 has: every step function of a pipelined module belongs to a stage}}
func.func @eval_step(%x: memref<4xf32> {rt.role = "param", rt.name = "x"}) {
  rt.kernel "fill" outs(%x : memref<4xf32>) floats = [0.0]
  return
}

// -----

// expected-error @+1 {{'dist.pipeline_stage' must be a non-negative i64, but is -1 : i64}}
func.func @train_step_stage0(%x: memref<4xf32> {rt.role = "param", rt.name = "x"}) attributes {dist.pipeline_stage = -1 : i64} {
  rt.kernel "fill" outs(%x : memref<4xf32>) floats = [0.0]
  return
}

// -----

// expected-error @+1 {{'dist.pipeline_stage' must be a non-negative i64, but is "0"}}
func.func @train_step_stage0(%x: memref<4xf32> {rt.role = "param", rt.name = "x"}) attributes {dist.pipeline_stage = "0"} {
  rt.kernel "fill" outs(%x : memref<4xf32>) floats = [0.0]
  return
}

// -----

func.func @train_step_stage0(%x: memref<4xf32> {rt.role = "param", rt.name = "x"}) attributes {dist.pipeline_stage = 0 : i64} {
  rt.kernel "fill" outs(%x : memref<4xf32>) floats = [0.0]
  return
}
// expected-error @+1 {{is pipeline stage 2, but the module has only 2 step functions: the stages must be 0..1 at most}}
func.func @train_step_stage2(%x: memref<4xf32> {rt.role = "param", rt.name = "x"}) attributes {dist.pipeline_stage = 2 : i64} {
  rt.kernel "fill" outs(%x : memref<4xf32>) floats = [0.0]
  return
}

// -----

// expected-error @+1 {{pipeline stage 0 has no step function, but a later stage has: stages must be 0..1}}
module {
  func.func @train_step_stage1(%x: memref<4xf32> {rt.role = "param", rt.name = "x"}) attributes {dist.pipeline_stage = 1 : i64} {
    rt.kernel "fill" outs(%x : memref<4xf32>) floats = [0.0]
    return
  }
  func.func @eval_step_stage1(%x: memref<4xf32> {rt.role = "param", rt.name = "x"}) attributes {dist.pipeline_stage = 1 : i64} {
    rt.kernel "fill" outs(%x : memref<4xf32>) floats = [0.0]
    return
  }
}

// -----

// expected-error @+1 {{the module has 1 pipeline stage, but its mesh @mesh has pp = 2: one stage per coordinate of the pipeline axis}}
module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [pp = pipeline], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">} {
  dist.mesh @mesh axes = [pp = 2]
  func.func @train_step_stage0(%x: memref<4xf32> {rt.role = "param", rt.name = "x"}) attributes {dist.pipeline_stage = 0 : i64} {
    rt.kernel "fill" outs(%x : memref<4xf32>) floats = [0.0]
    return
  }
}
