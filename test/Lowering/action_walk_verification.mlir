// RUN: partition-opt %s -split-input-file --rt-action-walk -verify-diagnostics

// Errors of --rt-action-walk (lowering/ActionWalkFormation.cpp) on
// hand-made marked steps that record a walk's layout (a step without one
// keeps its micro-batches and loses its marks); test/e2e/ranks/
// action-walk.test forms walks from compiled pipelines and trains them.

module attributes {dist.pipeline = {schedule = "1f1b", stages = 1 : i64, microbatches = 3 : i64, virtual_stages = 1 : i64}} {
  // expected-error @+1 {{--rt-action-walk: @twice: marks F of chunk 0 micro-batch 0 twice}}
  func.func @twice(%x: memref<4xf32>, %y: memref<4xf32>) attributes {dist.pipeline_stage = 0 : i64, xfmr.train_step = {microbatch_loop = 2 : i64, microbatch_loop_compiled = 3 : i64, microbatch_loop_settle = 0 : i64, microbatch_loop_split = 2 : i64, microbatch_loop_stride = 1 : i64, microbatches = 3 : i64}} {
    rt.action_mark "F" model_chunk = 0 microbatch = 0
    rt.kernel "gelu" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>)
    rt.action_mark "F" model_chunk = 0 microbatch = 0
    rt.kernel "gelu" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>)
    return
  }
}

// -----

module attributes {dist.pipeline = {schedule = "1f1b", stages = 1 : i64, microbatches = 3 : i64, virtual_stages = 1 : i64}} {
  // expected-error @+1 {{--rt-action-walk: @two: holds 2 micro-batches of F on chunk 0; a walk needs micro-batches 0, 1 and 2 at least}}
  func.func @two(%x: memref<4xf32>, %y: memref<4xf32>) attributes {dist.pipeline_stage = 0 : i64, xfmr.train_step = {microbatch_loop = 2 : i64, microbatch_loop_compiled = 3 : i64, microbatch_loop_settle = 0 : i64, microbatch_loop_split = 2 : i64, microbatch_loop_stride = 1 : i64, microbatches = 3 : i64}} {
    rt.action_mark "F" model_chunk = 0 microbatch = 0
    rt.kernel "gelu" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>)
    rt.action_mark "F" model_chunk = 0 microbatch = 1
    rt.kernel "gelu" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>)
    return
  }
}

// -----

module attributes {dist.pipeline = {schedule = "1f1b", stages = 1 : i64, microbatches = 4 : i64, virtual_stages = 1 : i64}} {
  // expected-error @+1 {{--rt-action-walk: @differ: micro-batch 1's op #3 (rt.kernel) is not micro-batch 0's (rt.kernel)}}
  func.func @differ(%x: memref<4xf32>, %y: memref<4xf32>) attributes {dist.pipeline_stage = 0 : i64, xfmr.train_step = {microbatch_loop = 2 : i64, microbatch_loop_compiled = 4 : i64, microbatch_loop_settle = 0 : i64, microbatch_loop_split = 3 : i64, microbatch_loop_stride = 1 : i64, microbatches = 4 : i64}} {
    rt.action_mark "F" model_chunk = 0 microbatch = 0
    rt.kernel "gelu" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>)
    rt.action_mark "F" model_chunk = 0 microbatch = 1
    rt.kernel "copy" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>)
    rt.action_mark "F" model_chunk = 0 microbatch = 2
    rt.kernel "copy" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>)
    rt.action_mark "F" model_chunk = 0 microbatch = 3
    rt.kernel "copy" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>)
    return
  }
}

// -----

module attributes {dist.pipeline = {schedule = "1f1b", stages = 1 : i64, microbatches = 4 : i64, virtual_stages = 1 : i64}} {
  // expected-error @+1 {{--rt-action-walk: @length: F of chunk 0 has 2 ops for micro-batch 0 and 3 for micro-batch 1}}
  func.func @length(%x: memref<4xf32>, %y: memref<4xf32>) attributes {dist.pipeline_stage = 0 : i64, xfmr.train_step = {microbatch_loop = 2 : i64, microbatch_loop_compiled = 4 : i64, microbatch_loop_settle = 0 : i64, microbatch_loop_split = 3 : i64, microbatch_loop_stride = 1 : i64, microbatches = 4 : i64}} {
    rt.action_mark "F" model_chunk = 0 microbatch = 0
    rt.kernel "gelu" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>)
    rt.action_mark "F" model_chunk = 0 microbatch = 1
    rt.kernel "gelu" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>)
    rt.kernel "gelu" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>)
    rt.action_mark "F" model_chunk = 0 microbatch = 2
    rt.kernel "gelu" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>)
    rt.action_mark "F" model_chunk = 0 microbatch = 3
    rt.kernel "gelu" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>)
    return
  }
}

// -----

// No dist.pipeline on the module.
// expected-error @+1 {{--rt-action-walk: @lone is no pipeline stage (dist.pipeline_stage, and the module's dist.pipeline)}}
func.func @lone(%x: memref<4xf32>, %y: memref<4xf32>) attributes {xfmr.train_step = {microbatch_loop = 2 : i64, microbatch_loop_compiled = 3 : i64, microbatch_loop_settle = 0 : i64, microbatch_loop_split = 2 : i64, microbatch_loop_stride = 1 : i64, microbatches = 3 : i64}} {
  rt.action_mark "F" model_chunk = 0 microbatch = 0
  rt.kernel "gelu" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>)
  return
}
