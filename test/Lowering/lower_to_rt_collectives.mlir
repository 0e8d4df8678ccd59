// RUN: partition-opt %s --split-input-file --lower-to-rt | FileCheck %s
// The output verifies and is stable under a round trip.
// RUN: partition-opt %s --split-input-file --lower-to-rt | partition-opt --split-input-file --verify-roundtrip > /dev/null

// --lower-to-rt on dist.all_reduce (the gradient buckets and loss average of
// data parallelism): one rt.all_reduce per bucket, in place on each input's
// buffer when nothing else can see that buffer, else on a copy; the module's
// dist.mesh is left as it is.

//===----------------------------------------------------------------------===//
// In place
//===----------------------------------------------------------------------===//

// The gradients of a bucket are fresh allocations that only the all-reduce
// reads: reduced where the kernel wrote them, then copied into the gradient
// outputs like any other returned value. dist.label becomes the label.
// CHECK:       dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]
// CHECK-LABEL: func.func @bucket_in_place
// CHECK-SAME:    (%[[DY:.*]]: memref<2x4x12xf32> {rt.name = "dy", rt.role = "param"}, %[[X:.*]]: memref<2x4x8xf32> {rt.name = "x", rt.role = "param"}, %[[LOSS:.*]]: memref<f32> {rt.role = "loss"},
// CHECK-SAME:     %[[GW:.*]]: memref<12x8xf32> {rt.name = "w", rt.role = "gradient"}, %[[GB:.*]]: memref<12xf32> {rt.name = "b", rt.role = "gradient"})
// CHECK:         %[[DW:.*]] = memref.alloc() : memref<12x8xf32>
// CHECK-NEXT:    %[[DB:.*]] = memref.alloc() : memref<12xf32>
// CHECK-NEXT:    rt.kernel "linear_grad_weight_bias" ins(%[[DY]], %[[X]] : memref<2x4x12xf32>, memref<2x4x8xf32>) outs(%[[DW]], %[[DB]] : memref<12x8xf32>, memref<12xf32>){{$}}
// CHECK-NEXT:    rt.all_reduce %[[DW]], %[[DB]] on @mesh axes [dp] reduce = avg label = "gradient bucket 0" : memref<12x8xf32>, memref<12xf32>{{$}}
// CHECK-NEXT:    rt.kernel "fill" outs(%[[LOSS]] : memref<f32>)
// CHECK-NEXT:    rt.kernel "copy" ins(%[[DW]] : memref<12x8xf32>) outs(%[[GW]] : memref<12x8xf32>){{$}}
// CHECK-NEXT:    rt.kernel "copy" ins(%[[DB]] : memref<12xf32>) outs(%[[GB]] : memref<12xf32>){{$}}
// CHECK-NEXT:    return
dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]
func.func @bucket_in_place(%dy: tensor<2x4x12xf32> {xfmr.param = "dy"}, %x: tensor<2x4x8xf32> {xfmr.param = "x"})
    -> (tensor<f32> {xfmr.output = "loss"}, tensor<12x8xf32> {xfmr.gradient = "w"}, tensor<12xf32> {xfmr.gradient = "b"})
    attributes {xfmr.train_step = {optimizer = "none"}} {
  %dw, %db = xfmr.linear_grad_weight %dy, %x : (tensor<2x4x12xf32>, tensor<2x4x8xf32>) -> (tensor<12x8xf32>, tensor<12xf32>)
  %gw, %gb = dist.all_reduce %dw, %db on @mesh axes [dp] reduce = avg {dist.label = "gradient bucket 0"} : tensor<12x8xf32>, tensor<12xf32>
  %loss = arith.constant dense<0.0> : tensor<f32>
  return %loss, %gw, %gb : tensor<f32>, tensor<12x8xf32>, tensor<12xf32>
}

// -----

// The reduced gradient feeds AdamW from the buffer it was reduced in.
// CHECK-LABEL: func.func @reduced_gradient_to_adamw
// CHECK-SAME:    (%[[P:.*]]: memref<4x8xf32> {rt.name = "w", rt.role = "param"}, %[[M:.*]]: memref<4x8xf32> {rt.name = "w", rt.role = "moment1"}, %[[V:.*]]: memref<4x8xf32> {rt.name = "w", rt.role = "moment2"},
// CHECK-SAME:     %[[T:.*]]: memref<i32> {rt.role = "step"}, %[[LR:.*]]: memref<f32> {rt.role = "lr"}, %[[DY:.*]]: memref<2x4x4xf32> {rt.name = "dy", rt.role = "param"}, %[[X:.*]]: memref<2x4x8xf32> {rt.name = "x", rt.role = "param"}, %{{.*}}: memref<f32> {rt.role = "loss"})
// CHECK:         %[[G:.*]] = memref.alloc() : memref<4x8xf32>
// CHECK-NEXT:    rt.kernel "linear_grad_weight" ins(%[[DY]], %[[X]] : memref<2x4x4xf32>, memref<2x4x8xf32>) outs(%[[G]] : memref<4x8xf32>){{$}}
// CHECK-NEXT:    rt.all_reduce %[[G]] on @mesh axes [dp] reduce = avg label = "gradient bucket 3" : memref<4x8xf32>{{$}}
// CHECK:         rt.kernel "adamw" ins(%[[P]], %[[G]], %[[M]], %[[V]], %[[T]], %[[LR]] : {{.*}}) outs(%[[P]], %[[M]], %[[V]] :
// CHECK-NOT:     rt.kernel "copy"
// CHECK:         return
dist.mesh @mesh axes = [dp = 4]
func.func @reduced_gradient_to_adamw(%p: tensor<4x8xf32> {xfmr.param = "w"}, %m: tensor<4x8xf32> {xfmr.moment1 = "w"}, %v: tensor<4x8xf32> {xfmr.moment2 = "w"},
                                     %t: tensor<i32> {xfmr.input = "step"}, %lr: tensor<f32> {xfmr.input = "lr"},
                                     %dy: tensor<2x4x4xf32> {xfmr.param = "dy"}, %x: tensor<2x4x8xf32> {xfmr.param = "x"})
    -> (tensor<f32> {xfmr.output = "loss"}, tensor<4x8xf32> {xfmr.param = "w"}, tensor<4x8xf32> {xfmr.moment1 = "w"},
        tensor<4x8xf32> {xfmr.moment2 = "w"}) attributes {xfmr.train_step = {optimizer = "adamw"}} {
  %g = xfmr.linear_grad_weight %dy, %x : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<4x8xf32>
  %gr = dist.all_reduce %g on @mesh axes [dp] reduce = avg {dist.label = "gradient bucket 3"} : tensor<4x8xf32>
  %p1, %m1, %v1 = xfmr.adamw %p, %gr, %m, %v, %t, %lr : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<i32>, tensor<f32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>)
  %loss = arith.constant dense<0.0> : tensor<f32>
  return %loss, %p1, %m1, %v1 : tensor<f32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// The loss average: without dist.label the label is "all_reduce"; the
// reduced loss is copied into the loss output at the end.
// CHECK-LABEL: func.func @loss_average
// CHECK-SAME:    (%{{.*}}: memref<4xf32> {rt.name = "w", rt.role = "param"}, %[[LOSS:.*]]: memref<f32> {rt.role = "loss"})
// CHECK:         %[[L:.*]] = memref.alloc() : memref<f32>
// CHECK-NEXT:    rt.kernel "fill" outs(%[[L]] : memref<f32>) floats = [2.500000e+00]{{$}}
// CHECK-NEXT:    rt.all_reduce %[[L]] on @mesh axes [dp] reduce = avg label = "all_reduce" : memref<f32>{{$}}
// CHECK-NEXT:    rt.kernel "copy" ins(%[[L]] : memref<f32>) outs(%[[LOSS]] : memref<f32>){{$}}
// CHECK-NEXT:    return
dist.mesh @mesh axes = [dp = 2]
func.func @loss_average(%w: tensor<4xf32> {xfmr.param = "w"}) -> (tensor<f32> {xfmr.output = "loss"})
    attributes {xfmr.eval_step = {}} {
  %local = arith.constant dense<2.5> : tensor<f32>
  %loss = dist.all_reduce %local on @mesh axes [dp] reduce = avg : tensor<f32>
  return %loss : tensor<f32>
}

//===----------------------------------------------------------------------===//
// On a copy
//===----------------------------------------------------------------------===//

// -----

// The input is read after the all-reduce: reduce a copy, keep the original.
// CHECK-LABEL: func.func @input_read_later
// CHECK-SAME:    (%[[W:.*]]: memref<8xf32> {rt.name = "w", rt.role = "param"}, %{{.*}}: memref<f32> {rt.role = "loss"})
// CHECK:         %[[G:.*]] = memref.alloc() : memref<8xf32>
// CHECK-NEXT:    rt.kernel "gelu" ins(%[[W]] : memref<8xf32>) outs(%[[G]] : memref<8xf32>){{$}}
// CHECK-NEXT:    %[[C:.*]] = memref.alloc() : memref<8xf32>
// CHECK-NEXT:    rt.kernel "copy" ins(%[[G]] : memref<8xf32>) outs(%[[C]] : memref<8xf32>){{$}}
// CHECK-NEXT:    rt.all_reduce %[[C]] on @mesh axes [tp] reduce = sum label = "all_reduce" : memref<8xf32>{{$}}
// CHECK-NEXT:    %[[S:.*]] = memref.alloc() : memref<8xf32>
// CHECK-NEXT:    rt.kernel "add" ins(%[[G]], %[[C]] : memref<8xf32>, memref<8xf32>) outs(%[[S]] : memref<8xf32>){{$}}
dist.mesh @mesh axes = [dp = 2, tp = 2]
func.func @input_read_later(%w: tensor<8xf32> {xfmr.param = "w"}) -> (tensor<f32> {xfmr.output = "loss"})
    attributes {xfmr.train_step = {}} {
  %g = xfmr.gelu %w : (tensor<8xf32>) -> tensor<8xf32>
  %r = dist.all_reduce %g on @mesh axes [tp] reduce = sum : tensor<8xf32>
  %s = xfmr.add %g, %r : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %loss = arith.constant dense<0.0> : tensor<f32>
  return %loss : tensor<f32>
}

// -----

// An argument holds state the next step reads, and a view aliases its
// source: both are copied first. So is a value listed twice in one bucket,
// once per listing, so that the bucket has no buffer twice.
// CHECK-LABEL: func.func @not_overwritable
// CHECK-SAME:    (%[[W:.*]]: memref<4x8xf32> {rt.name = "w", rt.role = "param"}, %{{.*}}: memref<f32> {rt.role = "loss"})
// CHECK:         %[[ROW:.*]] = memref.subview %[[W]][1, 0] [1, 8] [1, 1]
// CHECK-NEXT:    %[[G:.*]] = memref.alloc() : memref<4x8xf32>
// CHECK-NEXT:    rt.kernel "gelu" ins(%[[W]] : memref<4x8xf32>) outs(%[[G]] : memref<4x8xf32>){{$}}
// CHECK-NEXT:    %[[CW:.*]] = memref.alloc() : memref<4x8xf32>
// CHECK-NEXT:    rt.kernel "copy" ins(%[[W]] : memref<4x8xf32>) outs(%[[CW]] : memref<4x8xf32>){{$}}
// CHECK-NEXT:    %[[CROW:.*]] = memref.alloc() : memref<8xf32>
// CHECK-NEXT:    rt.kernel "copy" ins(%[[ROW]] : memref<8xf32, strided<[1], offset: 8>>) outs(%[[CROW]] : memref<8xf32>){{$}}
// CHECK-NEXT:    %[[CG1:.*]] = memref.alloc() : memref<4x8xf32>
// CHECK-NEXT:    rt.kernel "copy" ins(%[[G]] : memref<4x8xf32>) outs(%[[CG1]] : memref<4x8xf32>){{$}}
// CHECK-NEXT:    %[[CG2:.*]] = memref.alloc() : memref<4x8xf32>
// CHECK-NEXT:    rt.kernel "copy" ins(%[[G]] : memref<4x8xf32>) outs(%[[CG2]] : memref<4x8xf32>){{$}}
// CHECK-NEXT:    rt.all_reduce %[[CW]], %[[CROW]], %[[CG1]], %[[CG2]] on @mesh axes [dp] reduce = max label = "four" : memref<4x8xf32>, memref<8xf32>, memref<4x8xf32>, memref<4x8xf32>{{$}}
dist.mesh @mesh axes = [dp = 2]
func.func @not_overwritable(%w: tensor<4x8xf32> {xfmr.param = "w"}) -> (tensor<f32> {xfmr.output = "loss"})
    attributes {xfmr.train_step = {}} {
  %row = tensor.extract_slice %w[1, 0] [1, 8] [1, 1] : tensor<4x8xf32> to tensor<8xf32>
  %g = xfmr.gelu %w : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %a, %b, %c, %d = dist.all_reduce %w, %row, %g, %g on @mesh axes [dp] reduce = max {dist.label = "four"} : tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
  %loss = arith.constant dense<0.0> : tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A returned input is read by the return: the all-reduce takes a copy, and
// the returned gradient is the unreduced one.
// CHECK-LABEL: func.func @input_also_returned
// CHECK-SAME:    (%[[DY:.*]]: memref<2x4x4xf32> {rt.name = "dy", rt.role = "param"}, %[[X:.*]]: memref<2x4x8xf32> {rt.name = "x", rt.role = "param"}, %[[LOSS:.*]]: memref<f32> {rt.role = "loss"}, %[[GW:.*]]: memref<4x8xf32> {rt.name = "w", rt.role = "gradient"})
// CHECK:         rt.kernel "linear_grad_weight" ins(%[[DY]], %[[X]] : memref<2x4x4xf32>, memref<2x4x8xf32>) outs(%[[GW]] : memref<4x8xf32>){{$}}
// CHECK-NEXT:    %[[C:.*]] = memref.alloc() : memref<4x8xf32>
// CHECK-NEXT:    rt.kernel "copy" ins(%[[GW]] : memref<4x8xf32>) outs(%[[C]] : memref<4x8xf32>){{$}}
// CHECK-NEXT:    rt.all_reduce %[[C]] on @mesh axes [dp] reduce = sum label = "all_reduce" : memref<4x8xf32>{{$}}
// CHECK-NEXT:    rt.kernel "fill" outs(%[[LOSS]] : memref<f32>)
// CHECK-NEXT:    return
dist.mesh @mesh axes = [dp = 2]
func.func @input_also_returned(%dy: tensor<2x4x4xf32> {xfmr.param = "dy"}, %x: tensor<2x4x8xf32> {xfmr.param = "x"})
    -> (tensor<f32> {xfmr.output = "loss"}, tensor<4x8xf32> {xfmr.gradient = "w"}) attributes {xfmr.train_step = {optimizer = "none"}} {
  %g = xfmr.linear_grad_weight %dy, %x : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<4x8xf32>
  %r = dist.all_reduce %g on @mesh axes [dp] reduce = sum : tensor<4x8xf32>
  %loss = arith.constant dense<0.0> : tensor<f32>
  return %loss, %g : tensor<f32>, tensor<4x8xf32>
}
