// RUN: partition-opt %s --lower-to-rt --lower-memory-plan | partition-translate --rt-to-program -o %t.ptp
// RUN: %python %S/../tools/Inputs/ptp-collectives.py %t.ptp | FileCheck %s
// RUN: %python %S/../tools/Inputs/ptp-dump.py %S/../.. %t.ptp | FileCheck %s --check-prefix=DUMP

// The tensor-parallel dist ops through the whole lowering: --lower-to-rt,
// --lower-memory-plan and the .ptp writer. The axis index becomes a state
// buffer of role AxisIndex named by its axes; all_slice a slice_block that
// reads it; all_gather and reduce_scatter Collective instructions.

// CHECK:      mesh dp=2 pp=1 tp=2
// CHECK-NEXT: function train_step
// CHECK-NEXT:   #0 all_gather dim 1 axes [2] (tp) buffers [0, [[G:[0-9]+]]] label "gather x"
// CHECK-NEXT:   #1 reduce_scatter dim 0 sum axes [0, 2] (dp, tp) buffers [[[G]], [[S:[0-9]+]]] label "reduce_scatter"

// DUMP:      buffer #0 Param F32 4x8 @0 "x"
// DUMP:      buffer #[[I:[0-9]+]] AxisIndex I32 scalar @{{[0-9]+}} "dp,tp"
// DUMP:      function train_step
// DUMP:        slice_block [0, [[I]], {{[0-9]+}}] ints [0, 4]
dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 2]
func.func @train_step(%x: tensor<4x8xf32> {xfmr.param = "x"})
    -> (tensor<f32> {xfmr.output = "loss"}, tensor<1x16xf32> {xfmr.gradient = "g"}, tensor<1x8xf32> {xfmr.gradient = "s"})
    attributes {xfmr.train_step = {optimizer = "none"}, xfmr.model = {arch = "test"}} {
  %g = dist.all_gather %x on @mesh axes [tp] dim = 1 {dist.label = "gather x"} : tensor<4x8xf32> -> tensor<4x16xf32>
  %r = dist.reduce_scatter %g on @mesh axes [dp, tp] dim = 0 reduce = sum : tensor<4x16xf32> -> tensor<1x16xf32>
  %s = dist.all_slice %x on @mesh axes [dp, tp] dim = 0 : tensor<4x8xf32> -> tensor<1x8xf32>
  %loss = arith.constant dense<0.0> : tensor<f32>
  return %loss, %r, %s : tensor<f32>, tensor<1x16xf32>, tensor<1x8xf32>
}
