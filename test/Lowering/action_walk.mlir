// RUN: partition-opt %s --rt-action-walk | FileCheck %s

// --rt-action-walk on a marked step that records no walk (too few
// micro-batches to walk: fewer than 3): it keeps every micro-batch's code
// and loses the marks. test/e2e/ranks/action-walk.test forms walks from
// compiled pipelines (1F1B, ZB-H1, interleaved) and trains them.

// CHECK-LABEL: func.func @two_microbatches
// CHECK-NOT:     rt.action_mark
// CHECK:         rt.kernel "gelu"
// CHECK-NEXT:    rt.kernel "gelu"
// CHECK-NEXT:    return
module attributes {dist.pipeline = {schedule = "1f1b", stages = 1 : i64, microbatches = 2 : i64, virtual_stages = 1 : i64}} {
  func.func @two_microbatches(%x: memref<4xf32>, %y: memref<4xf32>) attributes {dist.pipeline_stage = 0 : i64, xfmr.train_step = {microbatches = 2 : i64}} {
    rt.action_mark "F" model_chunk = 0 microbatch = 0
    rt.kernel "gelu" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>)
    rt.action_mark "F" model_chunk = 0 microbatch = 1
    rt.kernel "gelu" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>)
    return
  }
}
