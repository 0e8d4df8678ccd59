// RUN: partition-opt %s -split-input-file --rt-fold-sliced-updates | FileCheck %s
// RUN: partition-opt %s -split-input-file --rt-fold-sliced-updates | partition-opt -split-input-file | FileCheck %s

// --rt-fold-sliced-updates: an AdamW that is the only reader of a parameter
// chunk sliced into a row of its own reads block `index` of the parameter
// itself (adamw_block); the slice, its view and the unused row go.

!w = memref<4x5xf32>
!flat = memref<20xf32>
!row = memref<1x13xf32>
!slotw = memref<10xf32, strided<[1]>>
!slotb = memref<3xf32, strided<[1], offset: 10>>
!c = memref<10xf32>
!cb = memref<3xf32>

// CHECK-LABEL: func.func @whole_chunks
// CHECK-NOT:   memref.alloc() : memref<1x13xf32>
// CHECK-NOT:   slice_block
// CHECK:       %[[FLAT:.+]] = memref.collapse_shape %[[W:[^ ]+]] {{\[\[}}0, 1]] : memref<4x5xf32> into memref<20xf32>
// CHECK:       rt.kernel "adamw_block" ins(%[[FLAT]], %[[I:[^,]+]], %[[G:[^,]+]], %[[M:[^,]+]], %[[V:[^,]+]], %[[T:[^,]+]], %[[LR:[^ ]+]] : memref<20xf32>, memref<i32>, memref<10xf32>, memref<10xf32>, memref<10xf32>, memref<i32>, memref<f32>) outs(%[[NEW:[^,]+]], %[[M]], %[[V]] : memref<10xf32>, memref<10xf32>, memref<10xf32>) ints = [2] floats = [{{.*}}]
// CHECK:       rt.kernel "adamw_block" ins(%[[B:[^,]+]], %[[I]], {{.*}} : memref<6xf32>, memref<i32>, {{.*}}) ints = [2]
// CHECK-NOT:   slice_block
// CHECK:       return
func.func @whole_chunks(%w: !w, %b: memref<6xf32>, %i: memref<i32>, %g: !c, %m: !c, %v: !c,
                        %gb: !cb, %mb: !cb, %vb: !cb, %t: memref<i32>, %lr: memref<f32>) {
  %row = memref.alloc() : !row
  %flat = memref.collapse_shape %w [[0, 1]] : !w into !flat
  %slotw = memref.subview %row[0, 0] [1, 10] [1, 1] : !row to !slotw
  rt.kernel "slice_block" ins(%flat, %i : !flat, memref<i32>) outs(%slotw : !slotw) ints = [0, 2]
  %slotb = memref.subview %row[0, 10] [1, 3] [1, 1] : !row to !slotb
  rt.kernel "slice_block" ins(%b, %i : memref<6xf32>, memref<i32>) outs(%slotb : !slotb) ints = [0, 2]
  %pw = memref.subview %row[0, 0] [1, 10] [1, 1] : !row to !slotw
  %pb = memref.subview %row[0, 10] [1, 3] [1, 1] : !row to !slotb
  %new = memref.alloc() : !c
  rt.kernel "adamw" ins(%pw, %g, %m, %v, %t, %lr : !slotw, !c, !c, !c, memref<i32>, memref<f32>) outs(%new, %m, %v : !c, !c, !c) floats = [0.9, 0.95, 1.0e-08, 0.1]
  %newb = memref.alloc() : !cb
  rt.kernel "adamw" ins(%pb, %gb, %mb, %vb, %t, %lr : !slotb, !cb, !cb, !cb, memref<i32>, memref<f32>) outs(%newb, %mb, %vb : !cb, !cb, !cb) floats = [0.9, 0.95, 1.0e-08, 0.0]
  return
}

// -----

!w = memref<4x5xf32>
!flat = memref<20xf32>
!slot = memref<10xf32>

// A chunk something else reads too (here a copy) stays sliced.
// CHECK-LABEL: func.func @chunk_read_twice
// CHECK:       rt.kernel "slice_block"
// CHECK:       rt.kernel "adamw" ins
// CHECK:       rt.kernel "copy"
func.func @chunk_read_twice(%w: !w, %i: memref<i32>, %g: !slot, %m: !slot, %v: !slot,
                            %t: memref<i32>, %lr: memref<f32>, %out: !slot) {
  %flat = memref.collapse_shape %w [[0, 1]] : !w into !flat
  %slot = memref.alloc() : !slot
  rt.kernel "slice_block" ins(%flat, %i : !flat, memref<i32>) outs(%slot : !slot) ints = [0, 2]
  %new = memref.alloc() : !slot
  rt.kernel "adamw" ins(%slot, %g, %m, %v, %t, %lr : !slot, !slot, !slot, !slot, memref<i32>, memref<f32>) outs(%new, %m, %v : !slot, !slot, !slot) floats = [0.9, 0.95, 1.0e-08, 0.1]
  rt.kernel "copy" ins(%slot : !slot) outs(%out : !slot)
  return
}

// -----

!w = memref<4x5xf32>
!flat = memref<20xf32>
!slot = memref<10xf32>

// The parameter written between the slice and AdamW: AdamW must read the
// sliced values, so the slice stays.
// CHECK-LABEL: func.func @parameter_written_between
// CHECK:       rt.kernel "slice_block"
// CHECK:       rt.kernel "fill"
// CHECK:       rt.kernel "adamw" ins
func.func @parameter_written_between(%w: !w, %i: memref<i32>, %g: !slot, %m: !slot, %v: !slot,
                                     %t: memref<i32>, %lr: memref<f32>) {
  %flat = memref.collapse_shape %w [[0, 1]] : !w into !flat
  %slot = memref.alloc() : !slot
  rt.kernel "slice_block" ins(%flat, %i : !flat, memref<i32>) outs(%slot : !slot) ints = [0, 2]
  rt.kernel "fill" outs(%w : !w) floats = [0.0]
  %new = memref.alloc() : !slot
  rt.kernel "adamw" ins(%slot, %g, %m, %v, %t, %lr : !slot, !slot, !slot, !slot, memref<i32>, memref<f32>) outs(%new, %m, %v : !slot, !slot, !slot) floats = [0.9, 0.95, 1.0e-08, 0.1]
  return
}

// -----

!w = memref<4x6xf32>
!slot = memref<4x3xf32>

// A block along another dimension is not a contiguous chunk of the
// parameter: it stays sliced.
// CHECK-LABEL: func.func @column_block
// CHECK:       rt.kernel "slice_block"
// CHECK:       rt.kernel "adamw" ins
func.func @column_block(%w: !w, %i: memref<i32>, %g: !slot, %m: !slot, %v: !slot,
                        %t: memref<i32>, %lr: memref<f32>) {
  %slot = memref.alloc() : !slot
  rt.kernel "slice_block" ins(%w, %i : !w, memref<i32>) outs(%slot : !slot) ints = [1, 2]
  %new = memref.alloc() : !slot
  rt.kernel "adamw" ins(%slot, %g, %m, %v, %t, %lr : !slot, !slot, !slot, !slot, memref<i32>, memref<f32>) outs(%new, %m, %v : !slot, !slot, !slot) floats = [0.9, 0.95, 1.0e-08, 0.1]
  return
}

// -----

!rows = memref<8x4xi32>
!mb = memref<4x4xi32, strided<[4, 1]>>
!w = memref<4x5xf32>
!flat = memref<20xf32>
!slot = memref<10xf32>

// A slice in the micro-batch loop and its AdamW after it stay apart.
// CHECK-LABEL: func.func @across_the_loop
// CHECK:       rt.microbatch_loop_begin
// CHECK-NEXT:  rt.kernel "slice_block"
// CHECK-NEXT:  rt.microbatch_loop_end
// CHECK:       rt.kernel "adamw" ins
func.func @across_the_loop(%w: !w {rt.role = "param", rt.name = "w"}, %tokens: !rows {rt.role = "tokens"},
                           %i: memref<i32>, %g: !slot, %m: !slot, %v: !slot,
                           %t: memref<i32>, %lr: memref<f32>) {
  %t0 = memref.subview %tokens[0, 0] [4, 4] [1, 1] : !rows to !mb
  %flat = memref.collapse_shape %w [[0, 1]] : !w into !flat
  %slot = memref.alloc() : !slot
  rt.microbatch_loop_begin count = 2 slices(%t0 : !mb)
  rt.kernel "slice_block" ins(%flat, %i : !flat, memref<i32>) outs(%slot : !slot) ints = [0, 2]
  rt.microbatch_loop_end live(%slot : !slot)
  %new = memref.alloc() : !slot
  rt.kernel "adamw" ins(%slot, %g, %m, %v, %t, %lr : !slot, !slot, !slot, !slot, memref<i32>, memref<f32>) outs(%new, %m, %v : !slot, !slot, !slot) floats = [0.9, 0.95, 1.0e-08, 0.1]
  return
}
