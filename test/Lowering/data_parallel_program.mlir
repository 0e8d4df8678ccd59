// RUN: rm -rf %t && mkdir -p %t
// RUN: partition-opt %s --lower-to-rt --lower-memory-plan="report=true" -o %t/planned.mlir > %t/report.txt
// RUN: FileCheck %s --check-prefix=CHECK-REPORT < %t/report.txt
// RUN: FileCheck %s --check-prefix=CHECK-PLANNED < %t/planned.mlir
// RUN: partition-translate --rt-to-program %t/planned.mlir -o %t/program.ptp
// RUN: %python %S/../tools/Inputs/ptp-dump.py %S/../.. %t/program.ptp > %t/program.txt
// RUN: %python %S/../tools/Inputs/ptp-collectives.py %t/program.ptp >> %t/program.txt
// RUN: FileCheck %s --check-prefix=CHECK-PROGRAM < %t/program.txt

// A hand-written data-parallel training step (what the data-parallel pass
// makes of a step after --xfmr-train-step: gradients averaged over dp in
// buckets, and the loss averaged for reporting) through the whole back end:
// --lower-to-rt, --lower-memory-plan with the report, and the .ptp writer.

// Bytes reduced per step: bucket 0 (w 4x8 and b 4: 144 bytes), bucket 1
// (wte 16x8: 512 bytes) and the loss (4 bytes); over two ranks a ring
// all-reduce sends as many bytes as it reduces.
// CHECK-REPORT:      memory: gradients 656{{$}}
// CHECK-REPORT:      memory: arena_peak {{[0-9]+$}}
// CHECK-REPORT-NEXT: memory: arena_peak = parameters 656 + {{.*}} + gradients 656 + activations 0 + {{.*}}{{$}}
// CHECK-REPORT-NEXT: communication: train_step sends 660 bytes per rank per step (3 all-reduce buckets, 660 bytes reduced over dp=2){{$}}
// CHECK-REPORT-NEXT: communication: eval_step sends 4 bytes per rank per step (1 all-reduce bucket, 4 bytes reduced over dp=2){{$}}

// The mesh survives; each bucket is reduced in place where its gradients
// were computed, and AdamW reads the reduced buffers.
// CHECK-PLANNED:      dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]
// CHECK-PLANNED-LABEL: func.func @train_step
// CHECK-PLANNED:      rt.kernel "linear_grad_weight_bias" ins({{.*}}) outs(%[[DW:.*]], %[[DB:.*]] : memref<4x8xf32>, memref<4xf32>)
// CHECK-PLANNED:      rt.kernel "embedding_grad" ins({{.*}}) outs(%[[DWTE:.*]] : memref<16x8xf32>)
// CHECK-PLANNED-NEXT: rt.all_reduce %[[DW]], %[[DB]] on @mesh axes [dp] reduce = avg label = "gradient bucket 0" : memref<4x8xf32>, memref<4xf32>
// CHECK-PLANNED-NEXT: rt.all_reduce %[[DWTE]] on @mesh axes [dp] reduce = avg label = "gradient bucket 1" : memref<16x8xf32>
// CHECK-PLANNED:      rt.kernel "adamw" ins(%{{[a-z0-9_]+}}, %[[DWTE]],
// CHECK-PLANNED:      rt.kernel "adamw" ins(%{{[a-z0-9_]+}}, %[[DW]],
// CHECK-PLANNED:      rt.kernel "adamw" ins(%{{[a-z0-9_]+}}, %[[DB]],
// CHECK-PLANNED:      rt.all_reduce %[[LOSS:.*]] on @mesh axes [dp] reduce = avg label = "loss" : memref<f32>
// CHECK-PLANNED-NEXT: rt.kernel "copy" ins(%[[LOSS]] : memref<f32>)
// CHECK-PLANNED-LABEL: func.func @eval_step
// CHECK-PLANNED:      rt.all_reduce %{{.*}} on @mesh axes [dp] reduce = avg label = "eval loss" : memref<f32>
// CHECK-PLANNED-NOT:  memref.alloc

// CHECK-PROGRAM:      schema_version 16
// CHECK-PROGRAM:      buffer #[[WTE:[0-9]+]] Param F32 16x8 @0 "wte"
// CHECK-PROGRAM:      buffer #[[DW:[0-9]+]] Temporary F32 4x8
// CHECK-PROGRAM-NEXT: buffer #[[DB:[0-9]+]] Temporary F32 4 @
// CHECK-PROGRAM:      buffer #[[DWTE:[0-9]+]] Temporary F32 16x8
// CHECK-PROGRAM:      function train_step
// CHECK-PROGRAM:        linear_grad_weight_bias [{{[0-9]+}}, {{[0-9]+}}, [[DW]], [[DB]]]
// CHECK-PROGRAM:        adamw [[[WTE]], [[DWTE]], {{.*}}]
// CHECK-PROGRAM:      function eval_step
// CHECK-PROGRAM:      mesh dp=2 pp=1 tp=1
// CHECK-PROGRAM-NEXT: function train_step
// CHECK-PROGRAM-NEXT:   #5 all_reduce avg axes [0] (dp) buffers [[[DW]], [[DB]]] label "gradient bucket 0"
// CHECK-PROGRAM-NEXT:   #6 all_reduce avg axes [0] (dp) buffers [[[DWTE]]] label "gradient bucket 1"
// CHECK-PROGRAM-NEXT:   #13 all_reduce avg axes [0] (dp) buffers [{{[0-9]+}}] label "loss"
// CHECK-PROGRAM-NEXT: function eval_step
// CHECK-PROGRAM-NEXT:   #3 all_reduce avg axes [0] (dp) buffers [{{[0-9]+}}] label "eval loss"

dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]

func.func @train_step(%wte: tensor<16x8xf32> {xfmr.param = "wte"}, %w: tensor<4x8xf32> {xfmr.param = "w"}, %b: tensor<4xf32> {xfmr.param = "b"},
                      %mwte: tensor<16x8xf32> {xfmr.moment1 = "wte"}, %mw: tensor<4x8xf32> {xfmr.moment1 = "w"}, %mb: tensor<4xf32> {xfmr.moment1 = "b"},
                      %vwte: tensor<16x8xf32> {xfmr.moment2 = "wte"}, %vw: tensor<4x8xf32> {xfmr.moment2 = "w"}, %vb: tensor<4xf32> {xfmr.moment2 = "b"},
                      %t: tensor<i32> {xfmr.input = "step"}, %lr: tensor<f32> {xfmr.input = "lr"}, %tokens: tensor<2x3xi32> {xfmr.input = "tokens"})
    -> (tensor<f32> {xfmr.output = "loss"},
        tensor<16x8xf32> {xfmr.param = "wte"}, tensor<4x8xf32> {xfmr.param = "w"}, tensor<4xf32> {xfmr.param = "b"},
        tensor<16x8xf32> {xfmr.moment1 = "wte"}, tensor<4x8xf32> {xfmr.moment1 = "w"}, tensor<4xf32> {xfmr.moment1 = "b"},
        tensor<16x8xf32> {xfmr.moment2 = "wte"}, tensor<4x8xf32> {xfmr.moment2 = "w"}, tensor<4xf32> {xfmr.moment2 = "b"},
        tensor<i32> {xfmr.output = "step"})
    attributes {xfmr.model = {arch = "test", hidden = 8 : i64}, xfmr.train_step = {microbatches = 1 : i64, optimizer = "adamw"}} {
  %x = xfmr.embedding %tokens, %wte : (tensor<2x3xi32>, tensor<16x8xf32>) -> tensor<2x3x8xf32>
  %y = xfmr.linear %x, %w, %b : (tensor<2x3x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  %dw, %db = xfmr.linear_grad_weight %y, %x : (tensor<2x3x4xf32>, tensor<2x3x8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>)
  %dx = xfmr.linear_grad_input %y, %w : (tensor<2x3x4xf32>, tensor<4x8xf32>) -> tensor<2x3x8xf32>
  %dwte = xfmr.embedding_grad %dx, %tokens : (tensor<2x3x8xf32>, tensor<2x3xi32>) -> tensor<16x8xf32>
  %gw, %gb = dist.all_reduce %dw, %db on @mesh axes [dp] reduce = avg {dist.label = "gradient bucket 0"} : tensor<4x8xf32>, tensor<4xf32>
  %gwte = dist.all_reduce %dwte on @mesh axes [dp] reduce = avg {dist.label = "gradient bucket 1"} : tensor<16x8xf32>
  %one = arith.constant dense<1> : tensor<i32>
  %next = arith.addi %t, %one : tensor<i32>
  %wte1, %mwte1, %vwte1 = xfmr.adamw %wte, %gwte, %mwte, %vwte, %next, %lr : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<i32>, tensor<f32>) -> (tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>)
  %w1, %mw1, %vw1 = xfmr.adamw %w, %gw, %mw, %vw, %next, %lr : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<i32>, tensor<f32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>)
  %b1, %mb1, %vb1 = xfmr.adamw %b, %gb, %mb, %vb, %next, %lr : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<i32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  %local = arith.constant dense<0.5> : tensor<f32>
  %loss = dist.all_reduce %local on @mesh axes [dp] reduce = avg {dist.label = "loss"} : tensor<f32>
  return %loss, %wte1, %w1, %b1, %mwte1, %mw1, %mb1, %vwte1, %vw1, %vb1, %next
      : tensor<f32>, tensor<16x8xf32>, tensor<4x8xf32>, tensor<4xf32>, tensor<16x8xf32>, tensor<4x8xf32>, tensor<4xf32>,
        tensor<16x8xf32>, tensor<4x8xf32>, tensor<4xf32>, tensor<i32>
}

func.func @eval_step(%wte: tensor<16x8xf32> {xfmr.param = "wte"}, %w: tensor<4x8xf32> {xfmr.param = "w"}, %b: tensor<4xf32> {xfmr.param = "b"},
                     %tokens: tensor<2x3xi32> {xfmr.input = "tokens"})
    -> (tensor<f32> {xfmr.output = "loss"}) attributes {xfmr.eval_step = {microbatches = 1 : i64}} {
  %x = xfmr.embedding %tokens, %wte : (tensor<2x3xi32>, tensor<16x8xf32>) -> tensor<2x3x8xf32>
  %y = xfmr.linear %x, %w, %b : (tensor<2x3x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  %local = arith.constant dense<0.25> : tensor<f32>
  %loss = dist.all_reduce %local on @mesh axes [dp] reduce = avg {dist.label = "eval loss"} : tensor<f32>
  return %loss : tensor<f32>
}
