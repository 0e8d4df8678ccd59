// RUN: partition-opt %s --xfmr-train-step --lower-to-rt | FileCheck %s
// RUN: partition-opt %s --xfmr-train-step="optimizer=none" --lower-to-rt | FileCheck %s --check-prefix=NONE
// RUN: partition-opt %s --xfmr-train-step="eval=true" --lower-to-rt | FileCheck %s --check-prefix=EVAL
// RUN: partition-opt %s --xfmr-train-step="microbatches=2" --lower-to-rt | FileCheck %s --check-prefix=MB2
// RUN: partition-opt %s --xfmr-train-step="eval=true microbatches=2" --lower-to-rt | partition-opt --verify-roundtrip > /dev/null

// --lower-to-rt on what --xfmr-train-step builds from a small forward pass
// (embedding, gelu, linear with a bias, loss): the whole step, the gradient
// outputs of optimizer=none, the eval step, and micro-batch slices.

// The parameters, moments and step are updated in place; the loss gets a
// new argument.
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME:    %[[WTE:arg0]]: memref<16x8xf32> {rt.name = "wte", rt.role = "param"}, %[[W:arg1]]: memref<4x8xf32> {rt.name = "w", rt.role = "param"}, %[[B:arg2]]: memref<4xf32> {rt.name = "b", rt.role = "param"},
// CHECK-SAME:    %[[M1WTE:arg3]]: memref<16x8xf32> {rt.name = "wte", rt.role = "moment1"}, %[[M1W:arg4]]: memref<4x8xf32> {rt.name = "w", rt.role = "moment1"}, %[[M1B:arg5]]: memref<4xf32> {rt.name = "b", rt.role = "moment1"},
// CHECK-SAME:    %[[M2WTE:arg6]]: memref<16x8xf32> {rt.name = "wte", rt.role = "moment2"}, %[[M2W:arg7]]: memref<4x8xf32> {rt.name = "w", rt.role = "moment2"}, %[[M2B:arg8]]: memref<4xf32> {rt.name = "b", rt.role = "moment2"},
// CHECK-SAME:    %[[STEP:arg9]]: memref<i32> {rt.role = "step"}, %[[LR:arg10]]: memref<f32> {rt.role = "lr"},
// CHECK-SAME:    %[[TOK:arg11]]: memref<2x3xi32> {rt.role = "tokens"}, %[[TGT:arg12]]: memref<2x3xi32> {rt.role = "targets"}, %[[LOSS:arg13]]: memref<f32> {rt.role = "loss"})
// CHECK-SAME:    attributes {xfmr.train_step = {{{.*}}optimizer = "adamw"
// CHECK-NOT:     tensor
// CHECK:         %[[SEED:.*]] = memref.alloc() : memref<f32>
// CHECK-NEXT:    rt.kernel "fill" outs(%[[SEED]] : memref<f32>) floats = [1.000000e+00]
// CHECK:         rt.kernel "embedding" ins(%[[TOK]], %[[WTE]] : memref<2x3xi32>, memref<16x8xf32>) outs(%[[X:.*]] : memref<2x3x8xf32>)
// CHECK:         rt.kernel "gelu" ins(%[[X]] : memref<2x3x8xf32>) outs(%[[H:.*]] : memref<2x3x8xf32>)
// CHECK:         rt.kernel "linear_bias" ins(%[[H]], %[[W]], %[[B]] : memref<2x3x8xf32>, memref<4x8xf32>, memref<4xf32>) outs(%[[Y:.*]] : memref<2x3x4xf32>)
// CHECK-NEXT:    rt.kernel "softmax_cross_entropy" ins(%[[Y]], %[[TGT]] : memref<2x3x4xf32>, memref<2x3xi32>) outs(%[[LOSS]] : memref<f32>)
// CHECK:         rt.kernel "softmax_cross_entropy_grad" ins(%[[SEED]], %[[Y]], %[[TGT]] : {{.*}}) outs(%[[DY:.*]] : memref<2x3x4xf32>)
// CHECK:         rt.kernel "linear_grad_input" ins(%[[DY]], %[[W]] : {{.*}}) outs(%[[DH:.*]] : memref<2x3x8xf32>)
// CHECK:         rt.kernel "linear_grad_weight_bias" ins(%[[DY]], %[[H]] : {{.*}}) outs(%[[DW:.*]], %[[DB:.*]] : memref<4x8xf32>, memref<4xf32>)
// CHECK:         rt.kernel "gelu_grad" ins(%[[DH]], %[[X]] : {{.*}}) outs(%[[DX:.*]] : memref<2x3x8xf32>)
// CHECK:         rt.kernel "embedding_grad" ins(%[[DX]], %[[TOK]] : {{.*}}) outs(%[[DWTE:.*]] : memref<16x8xf32>)
// CHECK:         rt.kernel "add_i32" ins(%[[STEP]], %{{.*}} : memref<i32>, memref<i32>) outs(%[[STEP]] : memref<i32>)
// CHECK-NEXT:    rt.kernel "adamw" ins(%[[WTE]], %[[DWTE]], %[[M1WTE]], %[[M2WTE]], %[[STEP]], %[[LR]] : {{.*}}) outs(%[[WTE]], %[[M1WTE]], %[[M2WTE]] : {{.*}}) floats = [9.000000e-01, 9.500000e-01, 1.000000e-08, 1.000000e-01]
// CHECK-NEXT:    rt.kernel "adamw" ins(%[[W]], %[[DW]], %[[M1W]], %[[M2W]], %[[STEP]], %[[LR]] : {{.*}}) outs(%[[W]], %[[M1W]], %[[M2W]] : {{.*}}) floats = [9.000000e-01, 9.500000e-01, 1.000000e-08, 1.000000e-01]
// CHECK-NEXT:    rt.kernel "adamw" ins(%[[B]], %[[DB]], %[[M1B]], %[[M2B]], %[[STEP]], %[[LR]] : {{.*}}) outs(%[[B]], %[[M1B]], %[[M2B]] : {{.*}}) floats = [9.000000e-01, 9.500000e-01, 1.000000e-08, 0.000000e+00]
// CHECK-NEXT:    return{{$}}
// CHECK-NOT:     rt.kernel "copy"
// CHECK-NOT:     func.func @eval_step

// Without an optimizer: no moments, no step; every gradient is written
// straight into an argument of its own.
// NONE-LABEL: func.func @train_step(
// NONE-SAME:    %[[WTE:arg0]]: memref<16x8xf32> {rt.name = "wte", rt.role = "param"}, %[[W:arg1]]: memref<4x8xf32> {rt.name = "w", rt.role = "param"}, %[[B:arg2]]: memref<4xf32> {rt.name = "b", rt.role = "param"},
// NONE-SAME:    %[[TOK:arg3]]: memref<2x3xi32> {rt.role = "tokens"}, %[[TGT:arg4]]: memref<2x3xi32> {rt.role = "targets"}, %[[LOSS:arg5]]: memref<f32> {rt.role = "loss"},
// NONE-SAME:    %[[GWTE:arg6]]: memref<16x8xf32> {rt.name = "wte", rt.role = "gradient"}, %[[GW:arg7]]: memref<4x8xf32> {rt.name = "w", rt.role = "gradient"}, %[[GB:arg8]]: memref<4xf32> {rt.name = "b", rt.role = "gradient"})
// NONE-SAME:    optimizer = "none"
// NONE:         rt.kernel "softmax_cross_entropy" ins({{.*}}) outs(%[[LOSS]] : memref<f32>)
// NONE:         rt.kernel "linear_grad_weight_bias" ins({{.*}}) outs(%[[GW]], %[[GB]] : memref<4x8xf32>, memref<4xf32>)
// NONE:         rt.kernel "embedding_grad" ins({{.*}}, %[[TOK]] : {{.*}}) outs(%[[GWTE]] : memref<16x8xf32>)
// NONE-NEXT:    return
// NONE-NOT:     adamw
// NONE-NOT:     add_i32
// NONE-NOT:     copy

// The eval step is lowered as well: the forward pass into its loss argument.
// EVAL-LABEL: func.func @train_step(
// EVAL:         rt.kernel "adamw"
// EVAL-LABEL: func.func @eval_step(
// EVAL-SAME:    %[[WTE:arg0]]: memref<16x8xf32> {rt.name = "wte", rt.role = "param"}, %[[W:arg1]]: memref<4x8xf32> {rt.name = "w", rt.role = "param"}, %[[B:arg2]]: memref<4xf32> {rt.name = "b", rt.role = "param"},
// EVAL-SAME:    %[[TOK:arg3]]: memref<2x3xi32> {rt.role = "tokens"}, %[[TGT:arg4]]: memref<2x3xi32> {rt.role = "targets"}, %[[LOSS:arg5]]: memref<f32> {rt.role = "loss"})
// EVAL-SAME:    attributes {xfmr.eval_step = {microbatches = 1 : i64}}
// EVAL:         rt.kernel "embedding" ins(%[[TOK]], %[[WTE]] :
// EVAL:         rt.kernel "gelu"
// EVAL:         rt.kernel "linear_bias" ins(%{{.*}}, %[[W]], %[[B]] :
// EVAL-NEXT:    rt.kernel "softmax_cross_entropy" ins(%{{.*}}, %[[TGT]] : {{.*}}) outs(%[[LOSS]] : memref<f32>)
// EVAL-NEXT:    return
// EVAL-NOT:     _grad

// Micro-batches read views of the token buffers; per-micro-batch losses
// and gradients are temporaries, and only their mean is written to the
// loss argument.
// MB2-LABEL: func.func @train_step(
// MB2-SAME:    %[[TOK:arg11]]: memref<4x3xi32> {rt.role = "tokens"}, %[[TGT:arg12]]: memref<4x3xi32> {rt.role = "targets"}, %[[LOSS:arg13]]: memref<f32> {rt.role = "loss"})
// MB2:         %[[T0:.*]] = memref.subview %[[TOK]][0, 0] [2, 3] [1, 1] : memref<4x3xi32> to memref<2x3xi32, strided<[3, 1]>>
// MB2:         rt.kernel "embedding" ins(%[[T0]], %{{.*}} : memref<2x3xi32, strided<[3, 1]>>, memref<16x8xf32>)
// MB2:         rt.kernel "softmax_cross_entropy" ins({{.*}}) outs(%[[L0:.*]] : memref<f32>)
// MB2:         %[[T1:.*]] = memref.subview %[[TOK]][2, 0] [2, 3] [1, 1] : memref<4x3xi32> to memref<2x3xi32, strided<[3, 1], offset: 6>>
// MB2:         %[[G1:.*]] = memref.subview %[[TGT]][2, 0] [2, 3] [1, 1] : memref<4x3xi32> to memref<2x3xi32, strided<[3, 1], offset: 6>>
// MB2:         rt.kernel "embedding" ins(%[[T1]], %{{.*}} : memref<2x3xi32, strided<[3, 1], offset: 6>>, memref<16x8xf32>)
// MB2:         rt.kernel "softmax_cross_entropy" ins(%{{.*}}, %[[G1]] : memref<2x3x4xf32>, memref<2x3xi32, strided<[3, 1], offset: 6>>) outs(%[[L1:.*]] : memref<f32>)
// MB2:         rt.kernel "add" ins(%[[L0]], %[[L1]] : memref<f32>, memref<f32>) outs(%[[SUM:.*]] : memref<f32>)
// MB2-NEXT:    rt.kernel "scale" ins(%[[SUM]] : memref<f32>) outs(%[[LOSS]] : memref<f32>) floats = [5.000000e-01]
// MB2-NOT:     rt.kernel "copy"

func.func @forward(%wte: tensor<16x8xf32> {xfmr.param = "wte"},
                   %w: tensor<4x8xf32> {xfmr.param = "w"}, %b: tensor<4xf32> {xfmr.param = "b"},
                   %tokens: tensor<2x3xi32> {xfmr.input = "tokens"},
                   %targets: tensor<2x3xi32> {xfmr.input = "targets"}) -> tensor<f32> {
  %x = xfmr.embedding %tokens, %wte : (tensor<2x3xi32>, tensor<16x8xf32>) -> tensor<2x3x8xf32>
  %h = xfmr.gelu %x : (tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %y = xfmr.linear %h, %w, %b : (tensor<2x3x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  %loss = xfmr.softmax_cross_entropy %y, %targets : (tensor<2x3x4xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
