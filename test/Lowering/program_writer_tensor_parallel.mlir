// RUN: rm -rf %t && mkdir -p %t
// RUN: partition-translate --rt-to-program %s -o %t/program.ptp
// RUN: %python %S/../tools/Inputs/ptp-collectives.py %t/program.ptp | FileCheck %s
// RUN: %python %S/../tools/Inputs/ptp-dump.py %S/../.. %t/program.ptp | FileCheck %s --check-prefix=DUMP

// partition-translate --rt-to-program on a planned module with an
// axis_index buffer, rt.all_gather, rt.reduce_scatter and slice_block: the
// buffer has role AxisIndex and the axes as its name; each collective is an
// instruction with a Collective of its kind, dim and label (an all_gather's
// reduction is unused) whose args are [input, output].

// CHECK:      mesh dp=2 pp=1 tp=2
// CHECK-NEXT: function train_step
// CHECK-NEXT:   #0 all_gather dim 1 axes [2] (tp) buffers [0, 3] label "gather"
// CHECK-NEXT:   #1 reduce_scatter dim 0 avg axes [0, 2] (dp, tp) buffers [3, 4] label "scatter"

// DUMP:      buffer #0 Param F32 4x8 @0 "w"
// DUMP-NEXT: buffer #1 AxisIndex I32 scalar @128 "dp,tp"
// DUMP-NEXT: buffer #2 Loss F32 scalar @132
// DUMP-NEXT: buffer #3 Temporary F32 4x16 @192
// DUMP-NEXT: buffer #4 Temporary F32 1x16 @448
// DUMP-NEXT: buffer #5 Temporary F32 4x2 @512
// DUMP-NEXT: function train_step
// Collectives have kernel 0 (ptp-collectives.py prints what they are).
// DUMP-NEXT:   {{[a-z_]+}} [0, 3]{{$}}
// DUMP-NEXT:   {{[a-z_]+}} [3, 4]{{$}}
// DUMP-NEXT:   slice_block [0, 1, 5] ints [1, 4]

module {
  dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 2]
  func.func @train_step(%arena: memref<576xi8>) attributes {rt.arena_bytes = 576 : i64, xfmr.model = {arch = "test"}, xfmr.train_step = {}} {
    %c0 = arith.constant 0 : index
    %c128 = arith.constant 128 : index
    %c132 = arith.constant 132 : index
    %c192 = arith.constant 192 : index
    %c448 = arith.constant 448 : index
    %c512 = arith.constant 512 : index
    %w = memref.view %arena[%c0][] {rt.role = "param", rt.name = "w"} : memref<576xi8> to memref<4x8xf32>
    %i = memref.view %arena[%c128][] {rt.role = "axis_index", rt.name = "dp,tp"} : memref<576xi8> to memref<i32>
    %loss = memref.view %arena[%c132][] {rt.role = "loss"} : memref<576xi8> to memref<f32>
    %g = memref.view %arena[%c192][] : memref<576xi8> to memref<4x16xf32>
    rt.all_gather %w, %g on @mesh axes [tp] dim = 1 label = "gather" : memref<4x8xf32>, memref<4x16xf32>
    %s = memref.view %arena[%c448][] : memref<576xi8> to memref<1x16xf32>
    rt.reduce_scatter %g, %s on @mesh axes [dp, tp] dim = 0 reduce = avg label = "scatter" : memref<4x16xf32>, memref<1x16xf32>
    %y = memref.view %arena[%c512][] : memref<576xi8> to memref<4x2xf32>
    rt.kernel "slice_block" ins(%w, %i : memref<4x8xf32>, memref<i32>) outs(%y : memref<4x2xf32>) ints = [1, 4]
    return
  }
}
