// RUN: partition-opt %s -split-input-file | partition-opt -split-input-file | FileCheck %s
// RUN: partition-opt %s -split-input-file --mlir-print-op-generic | partition-opt -split-input-file | FileCheck %s
// RUN: partition-opt %s -split-input-file --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// Round trip of rt.kernel in each of its forms (with and without inputs, ints
// and floats; in place; on subviews with a contiguous strided layout), in the
// custom and in the generic form, of the discardable rt attributes on
// functions, their arguments and memref.view ops, and of rt.all_reduce
// (buckets, reduction kinds, labels, meshes).

// CHECK-LABEL: func.func @inputs_and_output
// CHECK-SAME:    (%[[X:.*]]: memref<2x4x8xf32>, %[[W:.*]]: memref<16x8xf32>, %[[Y:.*]]: memref<2x4x16xf32>)
func.func @inputs_and_output(%x: memref<2x4x8xf32>, %w: memref<16x8xf32>, %y: memref<2x4x16xf32>) {
  // CHECK: rt.kernel "linear" ins(%[[X]], %[[W]] : memref<2x4x8xf32>, memref<16x8xf32>) outs(%[[Y]] : memref<2x4x16xf32>){{$}}
  rt.kernel "linear" ins(%x, %w : memref<2x4x8xf32>, memref<16x8xf32>) outs(%y : memref<2x4x16xf32>)
  return
}
// GENERIC-LABEL: sym_name = "inputs_and_output"
// GENERIC: "rt.kernel"(%{{.*}}, %{{.*}}, %{{.*}}) <{floats = array<f32>, ints = array<i64>, kernel = "linear", operandSegmentSizes = array<i32: 2, 1>}> : (memref<2x4x8xf32>, memref<16x8xf32>, memref<2x4x16xf32>) -> ()

// -----

// No inputs: `ins` is left out.
// CHECK-LABEL: func.func @no_inputs
// CHECK-SAME:    (%[[X:.*]]: memref<4x8xf32>, %[[S:.*]]: memref<i32>)
func.func @no_inputs(%x: memref<4x8xf32>, %s: memref<i32>) {
  // CHECK: rt.kernel "fill" outs(%[[X]] : memref<4x8xf32>) floats = [1.000000e+00]{{$}}
  rt.kernel "fill" outs(%x : memref<4x8xf32>) floats = [1.0]
  // CHECK: rt.kernel "fill" outs(%[[S]] : memref<i32>) floats = [0.000000e+00]{{$}}
  rt.kernel "fill" outs(%s : memref<i32>) floats = [0.0]
  return
}
// GENERIC-LABEL: sym_name = "no_inputs"
// GENERIC: "rt.kernel"(%{{.*}}) <{floats = array<f32: 1.000000e+00>, ints = array<i64>, kernel = "fill", operandSegmentSizes = array<i32: 0, 1>}> : (memref<4x8xf32>) -> ()

// -----

// ints and floats together (attention: heads, kv_heads, causal; rope theta).
// CHECK-LABEL: func.func @ints_and_floats
// CHECK-SAME:    (%[[Q:.*]]: memref<2x4x8xf32>, %[[K:.*]]: memref<2x4x4xf32>, %[[V:.*]]: memref<2x4x4xf32>, %[[O:.*]]: memref<2x4x8xf32>)
func.func @ints_and_floats(%q: memref<2x4x8xf32>, %k: memref<2x4x4xf32>, %v: memref<2x4x4xf32>, %o: memref<2x4x8xf32>) {
  // CHECK: rt.kernel "attention" ins(%[[Q]], %[[K]], %[[V]] : memref<2x4x8xf32>, memref<2x4x4xf32>, memref<2x4x4xf32>) outs(%[[O]] : memref<2x4x8xf32>) ints = [2, 1, 1] floats = [1.000000e+04]{{$}}
  rt.kernel "attention" ins(%q, %k, %v : memref<2x4x8xf32>, memref<2x4x4xf32>, memref<2x4x4xf32>) outs(%o : memref<2x4x8xf32>) ints = [2, 1, 1] floats = [10000.0]
  return
}
// GENERIC-LABEL: sym_name = "ints_and_floats"
// GENERIC: "rt.kernel"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) <{floats = array<f32: 1.000000e+04>, ints = array<i64: 2, 1, 1>, kernel = "attention", operandSegmentSizes = array<i32: 3, 1>}>

// -----

// Several outputs, floats only.
// CHECK-LABEL: func.func @several_outputs
// CHECK-SAME:    (%[[DY:.*]]: memref<2x4x8xf32>, %[[X:.*]]: memref<2x4x8xf32>, %[[G:.*]]: memref<8xf32>, %[[DX:.*]]: memref<2x4x8xf32>, %[[DG:.*]]: memref<8xf32>, %[[DB:.*]]: memref<8xf32>)
func.func @several_outputs(%dy: memref<2x4x8xf32>, %x: memref<2x4x8xf32>, %g: memref<8xf32>,
                           %dx: memref<2x4x8xf32>, %dg: memref<8xf32>, %db: memref<8xf32>) {
  // CHECK: rt.kernel "layernorm_grad" ins(%[[DY]], %[[X]], %[[G]] : memref<2x4x8xf32>, memref<2x4x8xf32>, memref<8xf32>) outs(%[[DX]], %[[DG]], %[[DB]] : memref<2x4x8xf32>, memref<8xf32>, memref<8xf32>) floats = [1.000000e-05]{{$}}
  rt.kernel "layernorm_grad" ins(%dy, %x, %g : memref<2x4x8xf32>, memref<2x4x8xf32>, memref<8xf32>) outs(%dx, %dg, %db : memref<2x4x8xf32>, memref<8xf32>, memref<8xf32>) floats = [1.0e-05]
  return
}

// -----

// AdamW updates the parameter and both moments in place; add_i32 the step.
// CHECK-LABEL: func.func @in_place
// CHECK-SAME:    (%[[P:.*]]: memref<4x8xf32>, %[[G:.*]]: memref<4x8xf32>, %[[M:.*]]: memref<4x8xf32>, %[[V:.*]]: memref<4x8xf32>, %[[T:.*]]: memref<i32>, %[[LR:.*]]: memref<f32>, %[[ONE:.*]]: memref<i32>)
func.func @in_place(%p: memref<4x8xf32>, %g: memref<4x8xf32>, %m: memref<4x8xf32>, %v: memref<4x8xf32>,
                    %t: memref<i32>, %lr: memref<f32>, %one: memref<i32>) {
  // CHECK: rt.kernel "add_i32" ins(%[[T]], %[[ONE]] : memref<i32>, memref<i32>) outs(%[[T]] : memref<i32>){{$}}
  rt.kernel "add_i32" ins(%t, %one : memref<i32>, memref<i32>) outs(%t : memref<i32>)
  // CHECK: rt.kernel "adamw" ins(%[[P]], %[[G]], %[[M]], %[[V]], %[[T]], %[[LR]] : memref<4x8xf32>, memref<4x8xf32>, memref<4x8xf32>, memref<4x8xf32>, memref<i32>, memref<f32>) outs(%[[P]], %[[M]], %[[V]] : memref<4x8xf32>, memref<4x8xf32>, memref<4x8xf32>) floats = [9.000000e-01, 9.500000e-01, 1.000000e-08, 1.000000e-01]{{$}}
  rt.kernel "adamw" ins(%p, %g, %m, %v, %t, %lr : memref<4x8xf32>, memref<4x8xf32>, memref<4x8xf32>, memref<4x8xf32>, memref<i32>, memref<f32>)
      outs(%p, %m, %v : memref<4x8xf32>, memref<4x8xf32>, memref<4x8xf32>) floats = [0.9, 0.95, 1.0e-08, 0.1]
  // CHECK: rt.kernel "add" ins(%[[G]], %[[M]] : memref<4x8xf32>, memref<4x8xf32>) outs(%[[G]] : memref<4x8xf32>){{$}}
  rt.kernel "add" ins(%g, %m : memref<4x8xf32>, memref<4x8xf32>) outs(%g : memref<4x8xf32>)
  // CHECK: rt.kernel "scale" ins(%[[G]] : memref<4x8xf32>) outs(%[[G]] : memref<4x8xf32>) floats = [5.000000e-01]{{$}}
  rt.kernel "scale" ins(%g : memref<4x8xf32>) outs(%g : memref<4x8xf32>) floats = [0.5]
  return
}

// -----

// Subviews with a contiguous layout (a static offset, or a leading unit
// dimension) are kernel operands.
// CHECK-LABEL: func.func @subview_operands
// CHECK-SAME:    (%[[TOK:.*]]: memref<4x3xi32>, %[[WTE:.*]]: memref<16x8xf32>, %[[OUT:.*]]: memref<2x3x8xf32>, %[[BIG:.*]]: memref<4x6x8xf32>, %[[Y:.*]]: memref<1x3x8xf32>)
func.func @subview_operands(%tokens: memref<4x3xi32>, %wte: memref<16x8xf32>, %out: memref<2x3x8xf32>, %big: memref<4x6x8xf32>, %y: memref<1x3x8xf32>) {
  // CHECK: %[[S:.*]] = memref.subview %[[TOK]][2, 0] [2, 3] [1, 1] : memref<4x3xi32> to memref<2x3xi32, strided<[3, 1], offset: 6>>
  %s = memref.subview %tokens[2, 0] [2, 3] [1, 1] : memref<4x3xi32> to memref<2x3xi32, strided<[3, 1], offset: 6>>
  // CHECK: rt.kernel "embedding" ins(%[[S]], %[[WTE]] : memref<2x3xi32, strided<[3, 1], offset: 6>>, memref<16x8xf32>) outs(%[[OUT]] : memref<2x3x8xf32>){{$}}
  rt.kernel "embedding" ins(%s, %wte : memref<2x3xi32, strided<[3, 1], offset: 6>>, memref<16x8xf32>) outs(%out : memref<2x3x8xf32>)
  // CHECK: %[[ROW:.*]] = memref.subview %[[BIG]][1, 0, 0] [1, 3, 8] [1, 1, 1] : memref<4x6x8xf32> to memref<1x3x8xf32, strided<[48, 8, 1], offset: 48>>
  %row = memref.subview %big[1, 0, 0] [1, 3, 8] [1, 1, 1] : memref<4x6x8xf32> to memref<1x3x8xf32, strided<[48, 8, 1], offset: 48>>
  // CHECK: rt.kernel "gelu" ins(%[[ROW]] : memref<1x3x8xf32, strided<[48, 8, 1], offset: 48>>) outs(%[[Y]] : memref<1x3x8xf32>){{$}}
  rt.kernel "gelu" ins(%row : memref<1x3x8xf32, strided<[48, 8, 1], offset: 48>>) outs(%y : memref<1x3x8xf32>)
  // In place on a subview.
  // CHECK: rt.kernel "scale" ins(%[[ROW]] : memref<1x3x8xf32, strided<[48, 8, 1], offset: 48>>) outs(%[[ROW]] : memref<1x3x8xf32, strided<[48, 8, 1], offset: 48>>) floats = [2.000000e+00]{{$}}
  rt.kernel "scale" ins(%row : memref<1x3x8xf32, strided<[48, 8, 1], offset: 48>>) outs(%row : memref<1x3x8xf32, strided<[48, 8, 1], offset: 48>>) floats = [2.0]
  return
}

// -----

// The discardable attributes: rt.role / rt.name on arguments and views,
// rt.arena_bytes on a planned function.
// CHECK-LABEL: func.func @attributes
// CHECK-SAME:    (%{{.*}}: memref<4x8xf32> {rt.name = "h.0.attn.q.weight", rt.role = "param"}, %{{.*}}: memref<i32> {rt.role = "step"}, %{{.*}}: memref<f32> {rt.role = "lr"},
// CHECK-SAME:     %{{.*}}: memref<2x3xi32> {rt.role = "tokens"}, %{{.*}}: memref<2x3xi32> {rt.role = "targets"}, %{{.*}}: memref<f32> {rt.role = "loss"},
// CHECK-SAME:     %{{.*}}: memref<4x8xf32> {rt.name = "w", rt.role = "moment1"}, %{{.*}}: memref<4x8xf32> {rt.name = "w", rt.role = "moment2"}, %{{.*}}: memref<4x8xf32> {rt.name = "w", rt.role = "gradient"})
func.func @attributes(%w: memref<4x8xf32> {rt.role = "param", rt.name = "h.0.attn.q.weight"}, %step: memref<i32> {rt.role = "step"},
                      %lr: memref<f32> {rt.role = "lr"}, %tok: memref<2x3xi32> {rt.role = "tokens"},
                      %tgt: memref<2x3xi32> {rt.role = "targets"}, %loss: memref<f32> {rt.role = "loss"},
                      %m: memref<4x8xf32> {rt.role = "moment1", rt.name = "w"}, %v: memref<4x8xf32> {rt.role = "moment2", rt.name = "w"},
                      %g: memref<4x8xf32> {rt.role = "gradient", rt.name = "w"}) {
  return
}

// -----

// CHECK-LABEL: func.func @planned
// CHECK-SAME:    (%[[ARENA:.*]]: memref<256xi8>) attributes {rt.arena_bytes = 256 : i64}
func.func @planned(%arena: memref<256xi8>) attributes {rt.arena_bytes = 256 : i64} {
  %c0 = arith.constant 0 : index
  %c128 = arith.constant 128 : index
  // CHECK: %[[W:.*]] = memref.view %[[ARENA]][%{{.*}}][] {rt.name = "w", rt.role = "param"} : memref<256xi8> to memref<4x8xf32>
  %w = memref.view %arena[%c0][] {rt.role = "param", rt.name = "w"} : memref<256xi8> to memref<4x8xf32>
  // CHECK: %[[T:.*]] = memref.view %[[ARENA]][%{{.*}}][] : memref<256xi8> to memref<4x8xf32>
  %t = memref.view %arena[%c128][] : memref<256xi8> to memref<4x8xf32>
  // CHECK: rt.kernel "copy" ins(%[[W]] : memref<4x8xf32>) outs(%[[T]] : memref<4x8xf32>)
  rt.kernel "copy" ins(%w : memref<4x8xf32>) outs(%t : memref<4x8xf32>)
  return
}

// -----

// A planned function with an empty arena (nothing to place).
// CHECK-LABEL: func.func @empty_arena
// CHECK-SAME:    attributes {rt.arena_bytes = 0 : i64}
func.func @empty_arena() attributes {rt.arena_bytes = 0 : i64} {
  return
}

// -----

// rt.all_reduce: a bucket of two buffers with a label, on the module's mesh.
// CHECK:       dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]
// CHECK-LABEL: func.func @all_reduce_bucket
// CHECK-SAME:    (%[[W:.*]]: memref<64x64xf32>, %[[B:.*]]: memref<64xf32>)
// CHECK:         rt.all_reduce %[[W]], %[[B]] on @mesh axes [dp] reduce = avg label = "gradient bucket 0" : memref<64x64xf32>, memref<64xf32>{{$}}
dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]
func.func @all_reduce_bucket(%w: memref<64x64xf32>, %b: memref<64xf32>) {
  rt.all_reduce %w, %b on @mesh axes [dp] reduce = avg label = "gradient bucket 0" : memref<64x64xf32>, memref<64xf32>
  return
}
// GENERIC-LABEL: sym_name = "all_reduce_bucket"
// GENERIC: "rt.all_reduce"(%{{.*}}, %{{.*}}) <{axes = ["dp"], label = "gradient bucket 0", mesh = @mesh, reduce = #dist.reduce<avg>}> : (memref<64x64xf32>, memref<64xf32>) -> ()

// -----

// One scalar buffer, every reduction kind, several axes in any order.
// CHECK-LABEL: func.func @all_reduce_kinds
// CHECK-SAME:    (%[[L:.*]]: memref<f32>, %[[X:.*]]: memref<2x3xf32>)
// CHECK:         rt.all_reduce %[[L]] on @m axes [dp] reduce = sum label = "loss" : memref<f32>{{$}}
// CHECK-NEXT:    rt.all_reduce %[[X]] on @m axes [tp, dp] reduce = max label = "all_reduce" : memref<2x3xf32>{{$}}
// CHECK-NEXT:    rt.all_reduce %[[X]], %[[L]] on @m axes [dp, pp, tp] reduce = avg label = "with \22quotes\22" : memref<2x3xf32>, memref<f32>{{$}}
dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
func.func @all_reduce_kinds(%loss: memref<f32>, %x: memref<2x3xf32>) {
  rt.all_reduce %loss on @m axes [dp] reduce = sum label = "loss" : memref<f32>
  rt.all_reduce %x on @m axes [tp, dp] reduce = max label = "all_reduce" : memref<2x3xf32>
  rt.all_reduce %x, %loss on @m axes [dp, pp, tp] reduce = avg label = "with \"quotes\"" : memref<2x3xf32>, memref<f32>
  return
}
// GENERIC-LABEL: sym_name = "all_reduce_kinds"
// GENERIC: "rt.all_reduce"(%{{.*}}) <{axes = ["dp"], label = "loss", mesh = @m, reduce = #dist.reduce<sum>}> : (memref<f32>) -> ()
// GENERIC: "rt.all_reduce"(%{{.*}}) <{axes = ["tp", "dp"], label = "all_reduce", mesh = @m, reduce = #dist.reduce<max>}> : (memref<2x3xf32>) -> ()

// -----

// Views of the arena are buffers too.
// CHECK-LABEL: func.func @all_reduce_views
// CHECK:         %[[G:.*]] = memref.view
// CHECK:         rt.all_reduce %[[G]] on @m axes [dp] reduce = avg label = "gradient bucket 1" : memref<4x8xf32>{{$}}
dist.mesh @m axes = [dp = 4]
func.func @all_reduce_views(%arena: memref<256xi8>) attributes {rt.arena_bytes = 256 : i64} {
  %c128 = arith.constant 128 : index
  %g = memref.view %arena[%c128][] : memref<256xi8> to memref<4x8xf32>
  rt.all_reduce %g on @m axes [dp] reduce = avg label = "gradient bucket 1" : memref<4x8xf32>
  return
}
