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

// -----

module attributes {dist.pipeline = {schedule = "1f1b", stages = 1 : i64, microbatches = 3 : i64, virtual_stages = 1 : i64}} {
  // expected-error @+1 {{--rt-action-walk: @only_update: marks its update but no action before it}}
  func.func @only_update(%x: memref<4xf32>, %y: memref<4xf32>) attributes {dist.pipeline_stage = 0 : i64, xfmr.train_step = {microbatch_loop = 2 : i64, microbatch_loop_compiled = 3 : i64, microbatch_loop_settle = 0 : i64, microbatch_loop_split = 2 : i64, microbatch_loop_stride = 1 : i64, microbatches = 3 : i64}} {
    rt.action_mark "update" model_chunk = 0 microbatch = 0
    rt.kernel "gelu" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>)
    return
  }
}

// -----

module attributes {dist.pipeline = {schedule = "1f1b", stages = 1 : i64, microbatches = 3 : i64, virtual_stages = 1 : i64}} {
  // expected-error @+1 {{--rt-action-walk: @after_update: marks an action after its update (op #4); the update follows every action}}
  func.func @after_update(%x: memref<4xf32>, %y: memref<4xf32>) attributes {dist.pipeline_stage = 0 : i64, xfmr.train_step = {microbatch_loop = 2 : i64, microbatch_loop_compiled = 3 : i64, microbatch_loop_settle = 0 : i64, microbatch_loop_split = 2 : i64, microbatch_loop_stride = 1 : i64, microbatches = 3 : i64}} {
    rt.action_mark "F" model_chunk = 0 microbatch = 0
    rt.kernel "gelu" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>)
    rt.action_mark "update" model_chunk = 0 microbatch = 0
    rt.kernel "gelu" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>)
    rt.action_mark "F" model_chunk = 0 microbatch = 1
    return
  }
}

// -----

// Micro-batch 1 reads another argument where micro-batch 0 reads %x.
module attributes {dist.pipeline = {schedule = "1f1b", stages = 1 : i64, microbatches = 3 : i64, virtual_stages = 1 : i64}} {
  // expected-error @+1 {{--rt-action-walk: @other_input: micro-batch 0's op #1 (rt.kernel) reads a buffer the next micro-batch's does not read in its place}}
  func.func @other_input(%x: memref<4xf32>, %z: memref<4xf32>, %y: memref<4xf32>) attributes {dist.pipeline_stage = 0 : i64, xfmr.train_step = {microbatch_loop = 2 : i64, microbatch_loop_compiled = 3 : i64, microbatch_loop_settle = 0 : i64, microbatch_loop_split = 2 : i64, microbatch_loop_stride = 1 : i64, microbatches = 3 : i64}} {
    rt.action_mark "F" model_chunk = 0 microbatch = 0
    rt.kernel "gelu" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>)
    rt.action_mark "F" model_chunk = 0 microbatch = 1
    rt.kernel "gelu" ins(%z : memref<4xf32>) outs(%y : memref<4xf32>)
    rt.action_mark "F" model_chunk = 0 microbatch = 2
    rt.kernel "gelu" ins(%z : memref<4xf32>) outs(%y : memref<4xf32>)
    return
  }
}

// -----

// 1F1B's schedule has backward actions, which the step does not hold.
module attributes {dist.pipeline = {schedule = "1f1b", stages = 1 : i64, microbatches = 3 : i64, virtual_stages = 1 : i64}} {
  // expected-error @+1 {{--rt-action-walk: @forwards_only: the plan's schedule runs B of model chunk 0, which the step does not hold}}
  func.func @forwards_only(%x: memref<4xf32>, %y: memref<4xf32>) attributes {dist.pipeline_stage = 0 : i64, xfmr.train_step = {microbatch_loop = 2 : i64, microbatch_loop_compiled = 3 : i64, microbatch_loop_settle = 0 : i64, microbatch_loop_split = 2 : i64, microbatch_loop_stride = 1 : i64, microbatches = 3 : i64}} {
    rt.action_mark "F" model_chunk = 0 microbatch = 0
    rt.kernel "gelu" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>)
    rt.action_mark "F" model_chunk = 0 microbatch = 1
    rt.kernel "gelu" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>)
    rt.action_mark "F" model_chunk = 0 microbatch = 2
    rt.kernel "gelu" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>)
    return
  }
}

// -----

// After the actions, a read of the last micro-batch's own value (computed
// from its rows, not a sum): the walk keeps micro-batch 1's code only.
module attributes {dist.pipeline = {schedule = "1f1b", stages = 1 : i64, microbatches = 3 : i64, virtual_stages = 1 : i64}} {
  // expected-error @+1 {{--rt-action-walk: @reads_last: op #13 (rt.kernel) reads micro-batch 2's op #10 (memref.alloc), which the walk does not keep}}
  func.func @reads_last(%in: memref<3x4xf32> {rt.role = "tokens"}, %y: memref<1x4xf32>) attributes {dist.pipeline_stage = 0 : i64, xfmr.eval_step = {microbatch_loop = 2 : i64, microbatch_loop_compiled = 3 : i64, microbatch_loop_settle = 0 : i64, microbatch_loop_split = 2 : i64, microbatch_loop_stride = 1 : i64, microbatches = 3 : i64}} {
    rt.action_mark "F" model_chunk = 0 microbatch = 0
    %r0 = memref.subview %in[0, 0] [1, 4] [1, 1] : memref<3x4xf32> to memref<1x4xf32, strided<[4, 1]>>
    %a = memref.alloc() : memref<1x4xf32>
    rt.kernel "gelu" ins(%r0 : memref<1x4xf32, strided<[4, 1]>>) outs(%a : memref<1x4xf32>)
    rt.action_mark "F" model_chunk = 0 microbatch = 1
    %r1 = memref.subview %in[1, 0] [1, 4] [1, 1] : memref<3x4xf32> to memref<1x4xf32, strided<[4, 1], offset: 4>>
    %b = memref.alloc() : memref<1x4xf32>
    rt.kernel "gelu" ins(%r1 : memref<1x4xf32, strided<[4, 1], offset: 4>>) outs(%b : memref<1x4xf32>)
    rt.action_mark "F" model_chunk = 0 microbatch = 2
    %r2 = memref.subview %in[2, 0] [1, 4] [1, 1] : memref<3x4xf32> to memref<1x4xf32, strided<[4, 1], offset: 8>>
    %c = memref.alloc() : memref<1x4xf32>
    rt.kernel "gelu" ins(%r2 : memref<1x4xf32, strided<[4, 1], offset: 8>>) outs(%c : memref<1x4xf32>)
    rt.action_mark "update" model_chunk = 0 microbatch = 0
    rt.kernel "gelu" ins(%c : memref<1x4xf32>) outs(%y : memref<1x4xf32>)
    return
  }
}

// -----

module attributes {dist.pipeline = {schedule = "2f2b", stages = 1 : i64, microbatches = 3 : i64, virtual_stages = 1 : i64}} {
  // expected-error @+1 {{--rt-action-walk: @unknown_schedule: the module's dist.pipeline needs a known schedule (gpipe, 1f1b, interleaved-1f1b, zero-bubble), stages and virtual_stages of at least 1 and microbatches, and the stage must be one of its stages}}
  func.func @unknown_schedule(%x: memref<4xf32>, %y: memref<4xf32>) attributes {dist.pipeline_stage = 0 : i64, xfmr.train_step = {microbatch_loop = 2 : i64, microbatch_loop_compiled = 3 : i64, microbatch_loop_settle = 0 : i64, microbatch_loop_split = 2 : i64, microbatch_loop_stride = 1 : i64, microbatches = 3 : i64}} {
    rt.action_mark "F" model_chunk = 0 microbatch = 0
    rt.kernel "gelu" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>)
    return
  }
}

// -----

// A sum whose start is a value hoisting made one for several micro-batches
// (the last micro-batch scales %w as micro-batch 0 did, whose scale every
// micro-batch reads): written in place, it would change what they read.
module attributes {dist.pipeline = {schedule = "1f1b", stages = 1 : i64, microbatches = 3 : i64, virtual_stages = 1 : i64}} {
  // expected-error @+1 {{--rt-action-walk: @shared_start: a sum the actions carry ('memref<1x4xf32>') starts in a value that several micro-batches read; it needs a buffer of its own}}
  func.func @shared_start(%in: memref<3x4xf32> {rt.role = "tokens"}, %w: memref<1x4xf32>, %y: memref<1x4xf32>) attributes {dist.pipeline_stage = 0 : i64, xfmr.eval_step = {microbatch_loop = 2 : i64, microbatch_loop_compiled = 3 : i64, microbatch_loop_settle = 0 : i64, microbatch_loop_split = 2 : i64, microbatch_loop_stride = 1 : i64, microbatches = 3 : i64}} {
    rt.action_mark "F" model_chunk = 0 microbatch = 0
    %s = memref.alloc() : memref<1x4xf32>
    rt.kernel "scale" ins(%w : memref<1x4xf32>) outs(%s : memref<1x4xf32>) floats = [2.0]
    %r0 = memref.subview %in[0, 0] [1, 4] [1, 1] : memref<3x4xf32> to memref<1x4xf32, strided<[4, 1]>>
    %g0 = memref.alloc() : memref<1x4xf32>
    rt.kernel "gelu" ins(%r0 : memref<1x4xf32, strided<[4, 1]>>) outs(%g0 : memref<1x4xf32>)
    %p0 = memref.alloc() : memref<1x4xf32>
    rt.kernel "add" ins(%s, %g0 : memref<1x4xf32>, memref<1x4xf32>) outs(%p0 : memref<1x4xf32>)
    %q0 = memref.alloc() : memref<1x4xf32>
    rt.kernel "gelu" ins(%s : memref<1x4xf32>) outs(%q0 : memref<1x4xf32>)
    rt.action_mark "F" model_chunk = 0 microbatch = 1
    %r1 = memref.subview %in[1, 0] [1, 4] [1, 1] : memref<3x4xf32> to memref<1x4xf32, strided<[4, 1], offset: 4>>
    %g1 = memref.alloc() : memref<1x4xf32>
    rt.kernel "gelu" ins(%r1 : memref<1x4xf32, strided<[4, 1], offset: 4>>) outs(%g1 : memref<1x4xf32>)
    %p1 = memref.alloc() : memref<1x4xf32>
    rt.kernel "add" ins(%p0, %g1 : memref<1x4xf32>, memref<1x4xf32>) outs(%p1 : memref<1x4xf32>)
    %q1 = memref.alloc() : memref<1x4xf32>
    rt.kernel "gelu" ins(%s : memref<1x4xf32>) outs(%q1 : memref<1x4xf32>)
    rt.action_mark "F" model_chunk = 0 microbatch = 2
    %r2 = memref.subview %in[2, 0] [1, 4] [1, 1] : memref<3x4xf32> to memref<1x4xf32, strided<[4, 1], offset: 8>>
    %g2 = memref.alloc() : memref<1x4xf32>
    rt.kernel "gelu" ins(%r2 : memref<1x4xf32, strided<[4, 1], offset: 8>>) outs(%g2 : memref<1x4xf32>)
    %p2 = memref.alloc() : memref<1x4xf32>
    rt.kernel "add" ins(%p1, %g2 : memref<1x4xf32>, memref<1x4xf32>) outs(%p2 : memref<1x4xf32>)
    %s2 = memref.alloc() : memref<1x4xf32>
    rt.kernel "scale" ins(%w : memref<1x4xf32>) outs(%s2 : memref<1x4xf32>) floats = [2.0]
    %q2 = memref.alloc() : memref<1x4xf32>
    rt.kernel "gelu" ins(%s2 : memref<1x4xf32>) outs(%q2 : memref<1x4xf32>)
    rt.action_mark "update" model_chunk = 0 microbatch = 0
    rt.kernel "add" ins(%p2, %q2 : memref<1x4xf32>, memref<1x4xf32>) outs(%y : memref<1x4xf32>)
    return
  }
}
