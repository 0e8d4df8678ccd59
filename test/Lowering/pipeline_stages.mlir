// RUN: partition-opt %s --lower-to-rt | FileCheck %s --check-prefix=CHECK-RT
// RUN: partition-opt %s --lower-to-rt --lower-memory-plan=report=true | FileCheck %s --check-prefix=CHECK-PLAN
// RUN: partition-opt %s --lower-to-rt --lower-memory-plan | partition-translate --rt-to-program -o %t.ptp
// RUN: %python %S/../tools/Inputs/ptp-dump.py %S/../.. %t.ptp | FileCheck %s --check-prefix=CHECK-PROGRAM

// Two pipeline stages (dist.pipeline_stage), as --dist-pipeline leaves
// them: dist.send / dist.recv become rt.send / rt.recv with their labels
// (a peer names an unlabelled one); only the last stage has a loss; each
// stage gets an arena of its own, shared by its functions.

module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [pp = pipeline], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">} {
  dist.mesh @mesh axes = [pp = 2]

  // CHECK-RT-LABEL: func.func @train_step_stage0(
  // CHECK-RT-SAME:    %[[W:arg0]]: memref<8x8xf32> {rt.name = "w", rt.role = "param"}
  // CHECK-RT-SAME:    %[[TOK:arg2]]: memref<2x4xi32> {rt.role = "tokens"}
  // CHECK-RT-SAME:    attributes {dist.pipeline_stage = 0 : i64
  // CHECK-RT:         rt.kernel "embedding" ins(%[[TOK]], %[[W]] : {{.*}}) outs(%[[X:.*]] : memref<2x4x8xf32>)
  // CHECK-RT-NEXT:    rt.send %[[X]] to @mesh [pp = 1] label = "F stage0->1" : memref<2x4x8xf32>
  // CHECK-RT-NEXT:    %[[G:.*]] = memref.alloc() : memref<2x4x8xf32>
  // CHECK-RT-NEXT:    rt.recv %[[G]] from @mesh [pp = 1] label = "recv from pp=1" : memref<2x4x8xf32>
  // CHECK-RT-NEXT:    rt.kernel "embedding_grad" ins(%[[G]], %[[TOK]] : {{.*}})
  // CHECK-RT:         return
  func.func @train_step_stage0(%w: tensor<8x8xf32> {xfmr.param = "w"},
                               %lr: tensor<f32> {xfmr.input = "lr"},
                               %tokens: tensor<2x4xi32> {xfmr.input = "tokens"})
      -> (tensor<8x8xf32> {xfmr.gradient = "w"})
      attributes {dist.pipeline_stage = 0 : i64,
                  xfmr.model = {arch = "gpt2", layers = 1 : i64, vocab = 8 : i64},
                  xfmr.train_step = {microbatches = 1 : i64, optimizer = "none"}} {
    %x = xfmr.embedding %tokens, %w : (tensor<2x4xi32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    dist.send %x to @mesh [pp = 1] label "F stage0->1" : tensor<2x4x8xf32>
    %g = dist.recv from @mesh [pp = 1] : tensor<2x4x8xf32>
    %dw = xfmr.embedding_grad %g, %tokens : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<8x8xf32>
    return %dw : tensor<8x8xf32>
  }

  // CHECK-RT-LABEL: func.func @train_step_stage1(
  // CHECK-RT-SAME:    %[[TGT:arg0]]: memref<2x4xi32> {rt.role = "targets"}, %[[LOSS:arg1]]: memref<f32> {rt.role = "loss"})
  // CHECK-RT-SAME:    attributes {dist.pipeline_stage = 1 : i64
  // CHECK-RT:         %[[X:.*]] = memref.alloc() : memref<2x4x8xf32>
  // CHECK-RT-NEXT:    rt.recv %[[X]] from @mesh [pp = 0] label = "F stage0->1" : memref<2x4x8xf32>
  // CHECK-RT:         rt.kernel "softmax_cross_entropy" ins(%[[X]], %[[TGT]] : {{.*}}) outs(%[[LOSS]] : memref<f32>)
  // CHECK-RT:         rt.kernel "softmax_cross_entropy_grad"{{.*}} outs(%[[G:.*]] : memref<2x4x8xf32>)
  // CHECK-RT-NEXT:    rt.send %[[G]] to @mesh [pp = 0] label = "send to pp=0" : memref<2x4x8xf32>
  func.func @train_step_stage1(%targets: tensor<2x4xi32> {xfmr.input = "targets"})
      -> (tensor<f32> {xfmr.output = "loss"})
      attributes {dist.pipeline_stage = 1 : i64,
                  xfmr.train_step = {microbatches = 1 : i64, optimizer = "none"}} {
    %seed = arith.constant dense<1.000000e+00> : tensor<f32>
    %x = dist.recv from @mesh [pp = 0] label "F stage0->1" : tensor<2x4x8xf32>
    %loss = xfmr.softmax_cross_entropy %x, %targets : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
    %g = xfmr.softmax_cross_entropy_grad %seed, %x, %targets : (tensor<f32>, tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
    dist.send %g to @mesh [pp = 0] : tensor<2x4x8xf32>
    return %loss : tensor<f32>
  }
}

// Each stage has its own arena, planned and reported on its own; the
// received buffer is a temporary that the receive defines, and the sends
// count as communication.
// CHECK-PLAN:      memory: stage 0 parameters 256
// CHECK-PLAN:      memory: stage 0 arena_peak [[A0:[0-9]+]]
// CHECK-PLAN:      communication: train_step_stage0 sends 256 bytes per rank per step (1 send, 256 bytes sent to pp=1)
// CHECK-PLAN:      memory: stage 1 parameters 0
// CHECK-PLAN:      memory: stage 1 arena_peak [[A1:[0-9]+]]
// CHECK-PLAN:      communication: train_step_stage1 sends 256 bytes per rank per step (1 send, 256 bytes sent to pp=0)
// CHECK-PLAN-LABEL: func.func @train_step_stage0(
// CHECK-PLAN-SAME:    %{{.*}}: memref<[[A0]]xi8>) attributes {dist.pipeline_stage = 0 : i64, rt.arena_bytes = [[A0]] : i64
// CHECK-PLAN:         rt.recv %{{.*}} from @mesh [pp = 1]
// CHECK-PLAN-LABEL: func.func @train_step_stage1(
// CHECK-PLAN-SAME:    %{{.*}}: memref<[[A1]]xi8>) attributes {dist.pipeline_stage = 1 : i64, rt.arena_bytes = [[A1]] : i64

// The program (schema 6) holds a stream per stage; each stage's step is its
// stream's train_step. A send's buffer is free right after it (sends are
// eager): stage 0 receives into the bytes it has just sent from.
// CHECK-PROGRAM:      schema_version 16
// CHECK-PROGRAM-NEXT: stream 0
// CHECK-PROGRAM-NEXT: arena_bytes {{[0-9]+}}
// CHECK-PROGRAM:      buffer #4 Temporary F32 2x4x8 @[[SENT:[0-9]+]]
// CHECK-PROGRAM-NEXT: buffer #5 Temporary F32 2x4x8 @[[SENT]]
// CHECK-PROGRAM-NEXT: function train_step
// CHECK-PROGRAM-NEXT:   embedding [2, 0, 4]
// CHECK-PROGRAM-NEXT:   send [4] axis 0 peer 1 label "F stage0->1"
// CHECK-PROGRAM-NEXT:   recv [5] axis 0 peer 1 label "recv from pp=1"
// CHECK-PROGRAM-NEXT:   embedding_grad [5, 2, 3]
// CHECK-PROGRAM-NEXT: stream 1
// CHECK-PROGRAM-NEXT: arena_bytes {{[0-9]+}}
// CHECK-PROGRAM:      function train_step
// CHECK-PROGRAM:        recv [3] axis 0 peer 0 label "F stage0->1"
// CHECK-PROGRAM:        send [4] axis 0 peer 0 label "send to pp=0"
// CHECK-PROGRAM-NEXT: model
