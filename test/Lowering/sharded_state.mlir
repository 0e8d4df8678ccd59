// RUN: rm -rf %t && mkdir -p %t
// RUN: partition-opt %s --lower-to-rt | FileCheck %s --check-prefix=CHECK-RT
// RUN: partition-opt %s --lower-to-rt --lower-memory-plan | FileCheck %s --check-prefix=CHECK-PLAN
// RUN: partition-opt %s --lower-to-rt --lower-memory-plan | partition-translate --rt-to-program -o %t/sharded.ptp
// RUN: %python %S/../tools/Inputs/ptp-dump.py %S/../.. %t/sharded.ptp | FileCheck %s --check-prefix=CHECK-DUMP
// Needs the dist dialect to accept dist.local_sharding on memref arguments
// and views (lowered state); remove this line once it does.

// dist.local_sharding on the step's state travels to the program: lowered,
// it is an argument attribute beside rt.role and rt.name; planned, it is on
// the state's view; written, Buffer.sharding lists per dimension the
// indices into the mesh of the axes that dimension is split over. The
// eval step shares the train step's (sharded) parameter buffer.

// CHECK-RT-LABEL: func.func @train_step
// CHECK-RT-SAME:    memref<2x8xf32> {dist.local_sharding = #dist.sharding<@mesh, {{\[\[}}tp], []]>, rt.name = "w", rt.role = "param"}
// CHECK-RT-SAME:    memref<2x8xf32> {dist.local_sharding = #dist.sharding<@mesh, {{\[\[}}tp], []]>, rt.name = "w", rt.role = "moment1"}
// CHECK-RT-SAME:    memref<8x2xf32> {dist.local_sharding = #dist.sharding<@mesh, {{\[\[}}], [dp, tp]]>, rt.name = "u", rt.role = "param"}
// CHECK-RT-SAME:    memref<4xf32> {rt.name = "b", rt.role = "param"}

// CHECK-PLAN-LABEL: func.func @train_step
// CHECK-PLAN: memref.view {{.*}} {dist.local_sharding = #dist.sharding<@mesh, {{\[\[}}tp], []]>, rt.name = "w", rt.role = "param"}

// CHECK-DUMP: buffer #0 Param F32 2x8 @0 "w" sharding {{\[\[}}2], []]
// CHECK-DUMP-NEXT: buffer #1 Moment1 F32 2x8 @64 "w" sharding {{\[\[}}2], []]
// CHECK-DUMP-NEXT: buffer #2 Moment2 F32 2x8 @128 "w" sharding {{\[\[}}2], []]
// CHECK-DUMP-NEXT: buffer #3 Param F32 8x2 @192 "u" sharding {{\[\[}}], [0, 2]]
// CHECK-DUMP-NEXT: buffer #4 Param F32 4 @256 "b"{{$}}
// CHECK-DUMP: function eval_step
// CHECK-DUMP-NEXT: scale [0, {{[0-9]+}}]

dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 2]
func.func @train_step(
    %w: tensor<2x8xf32> {xfmr.param = "w", dist.local_sharding = #dist.sharding<@mesh, [[tp], []]>},
    %m: tensor<2x8xf32> {xfmr.moment1 = "w", dist.local_sharding = #dist.sharding<@mesh, [[tp], []]>},
    %v: tensor<2x8xf32> {xfmr.moment2 = "w", dist.local_sharding = #dist.sharding<@mesh, [[tp], []]>},
    %u: tensor<8x2xf32> {xfmr.param = "u", dist.local_sharding = #dist.sharding<@mesh, [[], [dp, tp]]>},
    %b: tensor<4xf32> {xfmr.param = "b"},
    %t: tensor<i32> {xfmr.input = "step"}, %lr: tensor<f32> {xfmr.input = "lr"})
    -> (tensor<f32> {xfmr.output = "loss"},
        tensor<2x8xf32> {xfmr.param = "w", dist.local_sharding = #dist.sharding<@mesh, [[tp], []]>},
        tensor<2x8xf32> {xfmr.moment1 = "w", dist.local_sharding = #dist.sharding<@mesh, [[tp], []]>},
        tensor<2x8xf32> {xfmr.moment2 = "w", dist.local_sharding = #dist.sharding<@mesh, [[tp], []]>})
    attributes {xfmr.train_step = {optimizer = "adamw"}, xfmr.model = {arch = "test"}} {
  %g = xfmr.scale %w {factor = 0.5 : f32} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %p1, %m1, %v1 = xfmr.adamw %w, %g, %m, %v, %t, %lr : (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<i32>, tensor<f32>) -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>)
  %loss = arith.constant dense<0.0> : tensor<f32>
  return %loss, %p1, %m1, %v1 : tensor<f32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>
}
func.func @eval_step(
    %w: tensor<2x8xf32> {xfmr.param = "w", dist.local_sharding = #dist.sharding<@mesh, [[tp], []]>})
    -> (tensor<f32> {xfmr.output = "loss"}) attributes {xfmr.eval_step = {}} {
  %s = xfmr.scale %w {factor = 2.0 : f32} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %loss = arith.constant dense<0.0> : tensor<f32>
  return %loss : tensor<f32>
}
