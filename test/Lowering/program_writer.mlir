// RUN: rm -rf %t && mkdir -p %t
// RUN: partition-translate --rt-to-program %s -o %t/program.ptp
// RUN: %python %S/../tools/Inputs/ptp-dump.py %S/../.. %t/program.ptp | FileCheck %s

// partition-translate --rt-to-program (lowering/ProgramWriter.cpp) on a
// hand-written planned module: buffers in order of first appearance, state
// shared between functions by role and name, views of views at the right
// offsets, kernels by row of the kernel table, the model description as
// JSON, and the train step first whatever the module order.

// CHECK:      identifier PTP1
// CHECK-NEXT: schema_version 16
// CHECK-NEXT: arena_bytes 1024
// Buffers of @train_step (it comes first although it is second below).
// CHECK-NEXT: buffer #0 Param F32 4x8 @0 "w"
// CHECK-NEXT: buffer #1 Tokens I32 4x2x3 @128
// CHECK-NEXT: buffer #2 Loss F32 scalar @256
// A view of the tokens at row 2 (12 elements in), then a view of that view
// one row further (6 more): offsets in bytes from the arena's start.
// CHECK-NEXT: buffer #3 Temporary I32 2x2x3 @176
// CHECK-NEXT: buffer #4 Temporary I32 2x3 @200
// CHECK-NEXT: buffer #5 Temporary F32 2x3x8 @512
// CHECK-NEXT: buffer #6 Temporary F32 4x8 @704
// CHECK-NEXT: buffer #7 Temporary F32 2x3x8 @832
// Buffers of @eval_step: only its temporary is new.
// CHECK-NEXT: buffer #8 Temporary F32 2x3x8 @320
// CHECK-NEXT: function train_step
// CHECK-NEXT:   embedding [4, 0, 5]
// CHECK-NEXT:   position_embedding_grad [5, 6]
// CHECK-NEXT:   attention [5, 5, 5, 7] ints [2, 1, 0] floats [0.5]
// CHECK-NEXT:   scale [2, 2] floats [-3]
// CHECK-NEXT: function eval_step
// CHECK-NEXT:   embedding [1, 0, 8]
// CHECK-NEXT:   fill [2] floats [0]
// Booleans are JSON booleans, not -1.
// CHECK-NEXT: model {"arch":"test","layers":2,"rope":0.5,"tied_embedding":true,"untied":false}
// CHECK-NEXT: train {"microbatches":1,"optimizer":"adamw"}

module {
  func.func @eval_step(%arena: memref<1024xi8>) attributes {rt.arena_bytes = 1024 : i64, xfmr.eval_step = {microbatches = 1 : i64}} {
    %c0 = arith.constant 0 : index
    %c128 = arith.constant 128 : index
    %c256 = arith.constant 256 : index
    %c320 = arith.constant 320 : index
    %tok = memref.view %arena[%c128][] {rt.role = "tokens"} : memref<1024xi8> to memref<4x2x3xi32>
    %w = memref.view %arena[%c0][] {rt.role = "param", rt.name = "w"} : memref<1024xi8> to memref<4x8xf32>
    %loss = memref.view %arena[%c256][] {rt.role = "loss"} : memref<1024xi8> to memref<f32>
    %x = memref.view %arena[%c320][] : memref<1024xi8> to memref<2x3x8xf32>
    rt.kernel "embedding" ins(%tok, %w : memref<4x2x3xi32>, memref<4x8xf32>) outs(%x : memref<2x3x8xf32>)
    rt.kernel "fill" outs(%loss : memref<f32>) floats = [0.0]
    return
  }
  func.func @train_step(%arena: memref<1024xi8>) attributes {
      rt.arena_bytes = 1024 : i64,
      xfmr.model = {arch = "test", layers = 2 : i64, rope = 0.5 : f32, tied_embedding = true, untied = false},
      xfmr.train_step = {microbatches = 1 : i64, optimizer = "adamw"}} {
    %c0 = arith.constant 0 : index
    %c128 = arith.constant 128 : index
    %c256 = arith.constant 256 : index
    %c512 = arith.constant 512 : index
    %c704 = arith.constant 704 : index
    %w = memref.view %arena[%c0][] {rt.role = "param", rt.name = "w"} : memref<1024xi8> to memref<4x8xf32>
    %tok = memref.view %arena[%c128][] {rt.role = "tokens"} : memref<1024xi8> to memref<4x2x3xi32>
    %loss = memref.view %arena[%c256][] {rt.role = "loss"} : memref<1024xi8> to memref<f32>
    %half = memref.subview %tok[2, 0, 0] [2, 2, 3] [1, 1, 1] : memref<4x2x3xi32> to memref<2x2x3xi32, strided<[6, 3, 1], offset: 12>>
    %row = memref.subview %half[1, 0, 0] [1, 2, 3] [1, 1, 1] : memref<2x2x3xi32, strided<[6, 3, 1], offset: 12>> to memref<2x3xi32, strided<[3, 1], offset: 18>>
    %x = memref.view %arena[%c512][] : memref<1024xi8> to memref<2x3x8xf32>
    rt.kernel "embedding" ins(%row, %w : memref<2x3xi32, strided<[3, 1], offset: 18>>, memref<4x8xf32>) outs(%x : memref<2x3x8xf32>)
    %g = memref.view %arena[%c704][] : memref<1024xi8> to memref<4x8xf32>
    rt.kernel "position_embedding_grad" ins(%x : memref<2x3x8xf32>) outs(%g : memref<4x8xf32>)
    %c832 = arith.constant 832 : index
    %o = memref.view %arena[%c832][] : memref<1024xi8> to memref<2x3x8xf32>
    rt.kernel "attention" ins(%x, %x, %x : memref<2x3x8xf32>, memref<2x3x8xf32>, memref<2x3x8xf32>) outs(%o : memref<2x3x8xf32>) ints = [2, 1, 0] floats = [0.5]
    rt.kernel "scale" ins(%loss : memref<f32>) outs(%loss : memref<f32>) floats = [-3.0]
    return
  }
}
