// RUN: rm -rf %t && mkdir -p %t
// RUN: partition-translate --rt-to-program %s -o %t/program.ptp
// RUN: %python %S/../tools/Inputs/ptp-collectives.py %t/program.ptp | FileCheck %s
// RUN: %python %S/../tools/Inputs/ptp-dump.py %S/../.. %t/program.ptp | FileCheck %s --check-prefix=DUMP

// A mesh without collectives is still the program's mesh.
// RUN: sed -e '/rt.all_reduce/d' %s | partition-translate --rt-to-program -o %t/no-collectives.ptp
// RUN: %python %S/../tools/Inputs/ptp-collectives.py %t/no-collectives.ptp | FileCheck %s --check-prefix=NONE
// A module without a mesh gives a program without one (one device).
// RUN: partition-translate --rt-to-program %S/program_writer.mlir -o %t/one-device.ptp
// RUN: %python %S/../tools/Inputs/ptp-collectives.py %t/one-device.ptp | FileCheck %s --check-prefix=ONE

// partition-translate --rt-to-program on a hand-written planned module with a
// dist.mesh and rt.all_reduce ops: Program.mesh lists the mesh's axes in
// order, each all-reduce is an instruction with a Collective (its reduction,
// its axes as increasing indices into the mesh, its label) whose args are its
// buffers.

// CHECK:      mesh dp=2 pp=1 tp=2
// CHECK-NEXT: function train_step
// Axes [tp, dp] are the set {dp, tp}: indices 0 and 2, increasing.
// CHECK-NEXT:   #1 all_reduce sum axes [0, 2] (dp, tp) buffers [1, 0] label "gradient bucket 0"
// CHECK-NEXT:   #2 all_reduce max axes [2] (tp) buffers [2] label "max"
// CHECK-NEXT: function eval_step
// The eval step's loss is the train step's buffer #2.
// CHECK-NEXT:   #0 all_reduce avg axes [0] (dp) buffers [2] label "loss"

// The rest of the program is as before: buffers, kernels, model.
// DUMP:      schema_version 16
// DUMP-NEXT: arena_bytes 256
// DUMP-NEXT: buffer #0 Param F32 4x8 @0 "w"
// DUMP-NEXT: buffer #1 Gradient F32 4x8 @128 "w"
// DUMP-NEXT: buffer #2 Loss F32 scalar @192
// DUMP-NEXT: function train_step
// DUMP-NEXT:   gelu [0, 1]
// DUMP:      function eval_step
// DUMP:      model {"arch":"test"}

// NONE:      mesh dp=2 pp=1 tp=2
// NONE-NEXT: function train_step
// NONE-NEXT: function eval_step
// NONE-NOT:  all_reduce

// ONE:      mesh none
// ONE-NOT:  all_reduce

module {
  dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 2]
  func.func @train_step(%arena: memref<256xi8>) attributes {rt.arena_bytes = 256 : i64, xfmr.model = {arch = "test"}, xfmr.train_step = {}} {
    %c0 = arith.constant 0 : index
    %c128 = arith.constant 128 : index
    %c192 = arith.constant 192 : index
    %w = memref.view %arena[%c0][] {rt.role = "param", rt.name = "w"} : memref<256xi8> to memref<4x8xf32>
    %g = memref.view %arena[%c128][] {rt.role = "gradient", rt.name = "w"} : memref<256xi8> to memref<4x8xf32>
    %loss = memref.view %arena[%c192][] {rt.role = "loss"} : memref<256xi8> to memref<f32>
    rt.kernel "gelu" ins(%w : memref<4x8xf32>) outs(%g : memref<4x8xf32>)
    rt.all_reduce %g, %w on @mesh axes [tp, dp] reduce = sum label = "gradient bucket 0" : memref<4x8xf32>, memref<4x8xf32>
    rt.all_reduce %loss on @mesh axes [tp] reduce = max label = "max" : memref<f32>
    return
  }
  func.func @eval_step(%arena: memref<256xi8>) attributes {rt.arena_bytes = 256 : i64, xfmr.eval_step = {}} {
    %c192 = arith.constant 192 : index
    %loss = memref.view %arena[%c192][] {rt.role = "loss"} : memref<256xi8> to memref<f32>
    rt.all_reduce %loss on @mesh axes [dp] reduce = avg label = "loss" : memref<f32>
    return
  }
}
