// RUN: partition-opt %s --xfmr-train-step --split-input-file | FileCheck %s
// RUN: partition-opt %s --xfmr-train-step="microbatches=2" --split-input-file | FileCheck %s --check-prefix=MB2
// RUN: partition-opt %s --xfmr-train-step="microbatches=8 microbatch-loop=true eval=true" --split-input-file | FileCheck %s --check-prefix=LOOP
// RUN: partition-opt %s --xfmr-train-step="microbatches=3 microbatch-loop=true" --split-input-file | FileCheck %s --check-prefix=LOOP4
// RUN: partition-opt %s --xfmr-train-step="microbatches=8 microbatch-loop=true loop-settle=1" --split-input-file | FileCheck %s --check-prefix=SETTLE
// RUN: partition-opt %s --xfmr-train-step="beta1=0.8 beta2=0.99 epsilon=1e-6 weight-decay=0.01" --split-input-file | FileCheck %s --check-prefix=OPT

// One linear layer with a bias on an input that depends on no parameter (a
// constant embedding table): the weight and bias gradients come from one
// linear_grad_weight, and no linear_grad_input or embedding_grad is emitted.

// CHECK-LABEL: func.func @train_step(
// CHECK-SAME:    %[[W:[a-z0-9_]+]]: tensor<4x8xf32> {xfmr.param = "w"}, %[[B:[a-z0-9_]+]]: tensor<4xf32> {xfmr.param = "b"},
// CHECK-SAME:    %[[M1W:[a-z0-9_]+]]: tensor<4x8xf32> {xfmr.moment1 = "w"}, %[[M1B:[a-z0-9_]+]]: tensor<4xf32> {xfmr.moment1 = "b"},
// CHECK-SAME:    %[[M2W:[a-z0-9_]+]]: tensor<4x8xf32> {xfmr.moment2 = "w"}, %[[M2B:[a-z0-9_]+]]: tensor<4xf32> {xfmr.moment2 = "b"},
// CHECK-SAME:    %[[STEP:[a-z0-9_]+]]: tensor<i32> {xfmr.input = "step"}, %[[LR:[a-z0-9_]+]]: tensor<f32> {xfmr.input = "lr"},
// CHECK-SAME:    %[[TOK:[a-z0-9_]+]]: tensor<2x3xi32> {xfmr.input = "tokens"}, %[[TGT:[a-z0-9_]+]]: tensor<2x3xi32> {xfmr.input = "targets"})
// CHECK-NOT:   tensor.extract_slice
// CHECK:       %[[SEED:[a-z0-9_]+]] = arith.constant dense<1.000000e+00> : tensor<f32>
// CHECK:       %[[TABLE:[a-z0-9_]+]] = arith.constant dense<1.000000e+00> : tensor<16x8xf32>
// CHECK:       %[[X:[a-z0-9_]+]] = xfmr.embedding %[[TOK]], %[[TABLE]]
// CHECK:       %[[Y:[a-z0-9_]+]] = xfmr.linear %[[X]], %[[W]], %[[B]]
// CHECK:       %[[LOSS:[a-z0-9_]+]] = xfmr.softmax_cross_entropy %[[Y]], %[[TGT]]
// CHECK:       %[[DY:[a-z0-9_]+]] = xfmr.softmax_cross_entropy_grad %[[SEED]], %[[Y]], %[[TGT]]
// CHECK-NOT:   xfmr.linear_grad_input
// CHECK:       %[[DW:[a-z0-9_]+]], %[[DB:[a-z0-9_]+]] = xfmr.linear_grad_weight %[[DY]], %[[X]] : (tensor<2x3x4xf32>, tensor<2x3x8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>)
// CHECK-NOT:   xfmr.linear_grad_input
// CHECK-NOT:   xfmr.embedding_grad
// CHECK-NOT:   xfmr.scale
// CHECK:       %[[ONE:[a-z0-9_]+]] = arith.constant dense<1> : tensor<i32>
// CHECK:       %[[NEXT:[a-z0-9_]+]] = arith.addi %[[STEP]], %[[ONE]] : tensor<i32>
// CHECK:       %[[PW:[a-z0-9_]+]], %[[MW:[a-z0-9_]+]], %[[VW:[a-z0-9_]+]] = xfmr.adamw %[[W]], %[[DW]], %[[M1W]], %[[M2W]], %[[NEXT]], %[[LR]] {beta2 = 0.949999988 : f32, weight_decay = 1.000000e-01 : f32}
// Weight decay 0 (the default, hence not printed) on a 1-D parameter.
// CHECK:       %[[PB:[a-z0-9_]+]], %[[MB:[a-z0-9_]+]], %[[VB:[a-z0-9_]+]] = xfmr.adamw %[[B]], %[[DB]], %[[M1B]], %[[M2B]], %[[NEXT]], %[[LR]] {beta2 = 0.949999988 : f32} :
// CHECK:       return %[[LOSS]], %[[PW]], %[[PB]], %[[MW]], %[[MB]], %[[VW]], %[[VB]], %[[NEXT]] :

// The AdamW hyper-parameters come from the pass options; 1-D parameters are
// never decayed.
// OPT-LABEL: func.func @train_step(
// OPT-SAME:    xfmr.train_step = {beta1 = 8.000000e-01 : f32, beta2 = 9.900000e-01 : f32, epsilon = 9.99999997E-7 : f32, microbatches = 1 : i64, optimizer = "adamw", weight_decay = 0.00999999977 : f32}
// OPT:         xfmr.adamw {{.*}} {beta1 = 8.000000e-01 : f32, beta2 = 9.900000e-01 : f32, epsilon = 9.99999997E-7 : f32, weight_decay = 0.00999999977 : f32} : (tensor<4x8xf32>,
// OPT:         xfmr.adamw {{.*}} {beta1 = 8.000000e-01 : f32, beta2 = 9.900000e-01 : f32, epsilon = 9.99999997E-7 : f32} : (tensor<4xf32>,

// Under the micro-batch loop, 8 micro-batches take 8 times the sequences
// but build micro-batches 0, 1 and 7 only (rows 0, 2 and 14). Every sum
// starts at a zero constant, so micro-batch 0 adds its loss to the running
// sum as the others do (and its gradients to the accumulated ones); the
// step and the evaluation step record the loop's 7 runs. With 3
// micro-batches there is nothing to loop over: every one is built.
// LOOP-LABEL: func.func @train_step(
// LOOP-SAME:    tensor<16x3xi32> {xfmr.input = "tokens"}
// LOOP-SAME:    microbatch_loop = 7 : i64, microbatch_loop_compiled = 3 : i64, microbatch_loop_settle = 0 : i64, microbatch_loop_split = 2 : i64, microbatch_loop_stride = 1 : i64, microbatches = 8 : i64
// LOOP:         %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : tensor<f32>
// LOOP:         arith.constant dense<0.000000e+00> : tensor<4x8xf32>
// LOOP:         tensor.extract_slice %{{.*}}[0, 0] [2, 3]
// LOOP:         %[[L0:.*]] = xfmr.softmax_cross_entropy
// LOOP:         xfmr.softmax_cross_entropy_grad
// LOOP:         %[[S0:.*]] = xfmr.add %[[ZERO]], %[[L0]] : (tensor<f32>, tensor<f32>)
// LOOP:         tensor.extract_slice %{{.*}}[2, 0] [2, 3]
// LOOP:         %[[L1:.*]] = xfmr.softmax_cross_entropy
// LOOP:         xfmr.add %[[S0]], %[[L1]] : (tensor<f32>, tensor<f32>)
// LOOP:         tensor.extract_slice %{{.*}}[14, 0] [2, 3]
// LOOP-NEXT:    tensor.extract_slice %{{.*}}[14, 0] [2, 3]
// LOOP-NOT:     tensor.extract_slice
// LOOP:         xfmr.scale %{{.*}} {factor = 1.250000e-01 : f32}
// LOOP-LABEL: func.func @eval_step(
// LOOP-SAME:    microbatch_loop = 7 : i64, microbatch_loop_compiled = 3 : i64, microbatch_loop_settle = 0 : i64, microbatch_loop_split = 2 : i64, microbatch_loop_stride = 1 : i64, microbatches = 8 : i64
// With loop-settle=1 (ZeRO-3's first micro-batch differs) the loop's body
// is micro-batch 1: micro-batches 0, 1, 2 and 7 are built.
// SETTLE-LABEL: func.func @train_step(
// SETTLE-SAME:  microbatch_loop = 6 : i64, microbatch_loop_compiled = 4 : i64, microbatch_loop_settle = 1 : i64, microbatch_loop_split = 3 : i64
// SETTLE:       tensor.extract_slice %{{.*}}[0, 0] [2, 3]
// SETTLE:       tensor.extract_slice %{{.*}}[2, 0] [2, 3]
// SETTLE:       tensor.extract_slice %{{.*}}[4, 0] [2, 3]
// SETTLE:       tensor.extract_slice %{{.*}}[14, 0] [2, 3]
// SETTLE:       xfmr.scale %{{.*}} {factor = 1.250000e-01 : f32}
// LOOP4-LABEL: func.func @train_step(
// LOOP4-NOT:    microbatch_loop
// LOOP4-SAME:   microbatches = 3 : i64
// LOOP4-COUNT-3: xfmr.softmax_cross_entropy_grad

// With two micro-batches the step takes twice the sequences.
// MB2-LABEL: func.func @train_step(
// MB2-SAME:    tensor<4x3xi32> {xfmr.input = "tokens"}, %{{.*}}: tensor<4x3xi32> {xfmr.input = "targets"})
// MB2-SAME:    microbatches = 2 : i64

func.func @single_linear(%w: tensor<4x8xf32> {xfmr.param = "w"},
                         %b: tensor<4xf32> {xfmr.param = "b"},
                         %tokens: tensor<2x3xi32> {xfmr.input = "tokens"},
                         %targets: tensor<2x3xi32> {xfmr.input = "targets"})
    -> tensor<f32> {
  %table = arith.constant dense<1.0> : tensor<16x8xf32>
  %x = xfmr.embedding %tokens, %table : (tensor<2x3xi32>, tensor<16x8xf32>) -> tensor<2x3x8xf32>
  %y = xfmr.linear %x, %w, %b : (tensor<2x3x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  %loss = xfmr.softmax_cross_entropy %y, %targets : (tensor<2x3x4xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A tied embedding / LM head: the table is used twice, so its gradient is
// the sum (xfmr.add) of the LM head's weight gradient and the embedding
// gradient.

// CHECK-LABEL: func.func @train_step(
// CHECK-SAME:    %[[WTE:[a-z0-9_]+]]: tensor<16x8xf32> {xfmr.param = "wte"}
// CHECK-SAME:    %[[TOK:[a-z0-9_]+]]: tensor<2x3xi32> {xfmr.input = "tokens"}, %[[TGT:[a-z0-9_]+]]: tensor<2x3xi32> {xfmr.input = "targets"})
// CHECK:       %[[SEED:[a-z0-9_]+]] = arith.constant dense<1.000000e+00> : tensor<f32>
// CHECK:       %[[X:[a-z0-9_]+]] = xfmr.embedding %[[TOK]], %[[WTE]]
// CHECK:       %[[LOGITS:[a-z0-9_]+]] = xfmr.linear %[[X]], %[[WTE]] :
// CHECK:       %[[DLOGITS:[a-z0-9_]+]] = xfmr.softmax_cross_entropy_grad %[[SEED]], %[[LOGITS]], %[[TGT]]
// CHECK:       %[[DX:[a-z0-9_]+]] = xfmr.linear_grad_input %[[DLOGITS]], %[[WTE]] : (tensor<2x3x16xf32>, tensor<16x8xf32>) -> tensor<2x3x8xf32>
// CHECK:       %[[DHEAD:[a-z0-9_]+]] = xfmr.linear_grad_weight %[[DLOGITS]], %[[X]] : (tensor<2x3x16xf32>, tensor<2x3x8xf32>) -> tensor<16x8xf32>
// CHECK:       %[[DEMB:[a-z0-9_]+]] = xfmr.embedding_grad %[[DX]], %[[TOK]] : (tensor<2x3x8xf32>, tensor<2x3xi32>) -> tensor<16x8xf32>
// CHECK:       %[[DWTE:[a-z0-9_]+]] = xfmr.add %[[DHEAD]], %[[DEMB]] : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
// CHECK:       xfmr.adamw %[[WTE]], %[[DWTE]],

// Two micro-batches: tokens and targets are sliced at batch offsets 0 and 2,
// the seed is 1/2, the parameter gradients of both micro-batches are summed
// with xfmr.add, and the mean loss is (loss0 + loss1) * 0.5.
// MB2-LABEL: func.func @train_step(
// MB2-SAME:    %[[WTE:[a-z0-9_]+]]: tensor<16x8xf32> {xfmr.param = "wte"}
// MB2-SAME:    %[[TOK:[a-z0-9_]+]]: tensor<4x3xi32> {xfmr.input = "tokens"}, %[[TGT:[a-z0-9_]+]]: tensor<4x3xi32> {xfmr.input = "targets"})
// MB2-SAME:    microbatches = 2 : i64
// MB2:         %[[SEED:[a-z0-9_]+]] = arith.constant dense<5.000000e-01> : tensor<f32>
// MB2:         %[[TOK0:[a-z0-9_]+]] = tensor.extract_slice %[[TOK]][0, 0] [2, 3] [1, 1] : tensor<4x3xi32> to tensor<2x3xi32>
// MB2:         %[[TGT0:[a-z0-9_]+]] = tensor.extract_slice %[[TGT]][0, 0] [2, 3] [1, 1] : tensor<4x3xi32> to tensor<2x3xi32>
// MB2:         %[[X0:[a-z0-9_]+]] = xfmr.embedding %[[TOK0]], %[[WTE]]
// MB2:         %[[LOSS0:[a-z0-9_]+]] = xfmr.softmax_cross_entropy %{{.+}}, %[[TGT0]]
// MB2:         xfmr.softmax_cross_entropy_grad %[[SEED]], %{{.+}}, %[[TGT0]]
// MB2:         %[[DHEAD0:[a-z0-9_]+]] = xfmr.linear_grad_weight
// MB2:         %[[DEMB0:[a-z0-9_]+]] = xfmr.embedding_grad %{{.+}}, %[[TOK0]]
// MB2:         %[[SUM0:[a-z0-9_]+]] = xfmr.add %[[DHEAD0]], %[[DEMB0]]
// MB2:         %[[TOK1:[a-z0-9_]+]] = tensor.extract_slice %[[TOK]][2, 0] [2, 3] [1, 1] : tensor<4x3xi32> to tensor<2x3xi32>
// MB2:         %[[TGT1:[a-z0-9_]+]] = tensor.extract_slice %[[TGT]][2, 0] [2, 3] [1, 1] : tensor<4x3xi32> to tensor<2x3xi32>
// MB2:         %[[X1:[a-z0-9_]+]] = xfmr.embedding %[[TOK1]], %[[WTE]]
// MB2:         %[[LOSS1:[a-z0-9_]+]] = xfmr.softmax_cross_entropy %{{.+}}, %[[TGT1]]
// MB2:         xfmr.softmax_cross_entropy_grad %[[SEED]], %{{.+}}, %[[TGT1]]
// MB2:         %[[DHEAD1:[a-z0-9_]+]] = xfmr.linear_grad_weight
// MB2:         %[[SUM1:[a-z0-9_]+]] = xfmr.add %[[SUM0]], %[[DHEAD1]]
// MB2:         %[[DEMB1:[a-z0-9_]+]] = xfmr.embedding_grad %{{.+}}, %[[TOK1]]
// MB2:         %[[DWTE:[a-z0-9_]+]] = xfmr.add %[[SUM1]], %[[DEMB1]]
// MB2-NOT:     tensor.extract_slice
// MB2:         %[[LOSSES:[a-z0-9_]+]] = xfmr.add %[[LOSS0]], %[[LOSS1]] : (tensor<f32>, tensor<f32>) -> tensor<f32>
// MB2:         %[[MEAN:[a-z0-9_]+]] = xfmr.scale %[[LOSSES]] {factor = 5.000000e-01 : f32} : (tensor<f32>) -> tensor<f32>
// MB2:         %[[NEW:[a-z0-9_]+]], %[[M:[a-z0-9_]+]], %[[V:[a-z0-9_]+]] = xfmr.adamw %[[WTE]], %[[DWTE]],
// MB2:         return %[[MEAN]], %[[NEW]], %[[M]], %[[V]], %{{.+}} :

func.func @tied(%wte: tensor<16x8xf32> {xfmr.param = "wte"},
                %tokens: tensor<2x3xi32> {xfmr.input = "tokens"},
                %targets: tensor<2x3xi32> {xfmr.input = "targets"}) -> tensor<f32> {
  %x = xfmr.embedding %tokens, %wte : (tensor<2x3xi32>, tensor<16x8xf32>) -> tensor<2x3x8xf32>
  %logits = xfmr.linear %x, %wte : (tensor<2x3x8xf32>, tensor<16x8xf32>) -> tensor<2x3x16xf32>
  %loss = xfmr.softmax_cross_entropy %logits, %targets : (tensor<2x3x16xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A residual connection: the activation %x feeds both the linear and the
// add, so its gradient is the sum of the two; a linear whose input depends on
// a parameter gets a linear_grad_input.

// CHECK-LABEL: func.func @train_step(
// CHECK-SAME:    %[[WTE:[a-z0-9_]+]]: tensor<16x8xf32> {xfmr.param = "wte"}, %[[W:[a-z0-9_]+]]: tensor<8x8xf32> {xfmr.param = "w"}, %[[HEAD:[a-z0-9_]+]]: tensor<16x8xf32> {xfmr.param = "head"}
// CHECK-SAME:    %[[TOK:[a-z0-9_]+]]: tensor<2x3xi32> {xfmr.input = "tokens"}
// CHECK:       %[[X:[a-z0-9_]+]] = xfmr.embedding %[[TOK]], %[[WTE]]
// CHECK:       %[[H:[a-z0-9_]+]] = xfmr.linear %[[X]], %[[W]] :
// CHECK:       %[[R:[a-z0-9_]+]] = xfmr.add %[[X]], %[[H]]
// CHECK:       %[[LOGITS:[a-z0-9_]+]] = xfmr.linear %[[R]], %[[HEAD]] :
// CHECK:       %[[DLOGITS:[a-z0-9_]+]] = xfmr.softmax_cross_entropy_grad
// CHECK:       %[[DR:[a-z0-9_]+]] = xfmr.linear_grad_input %[[DLOGITS]], %[[HEAD]]
// CHECK:       %[[DHEAD:[a-z0-9_]+]] = xfmr.linear_grad_weight %[[DLOGITS]], %[[R]]
// CHECK:       %[[DXLIN:[a-z0-9_]+]] = xfmr.linear_grad_input %[[DR]], %[[W]]
// CHECK:       %[[DW:[a-z0-9_]+]] = xfmr.linear_grad_weight %[[DR]], %[[X]]
// CHECK:       %[[DX:[a-z0-9_]+]] = xfmr.add %[[DR]], %[[DXLIN]]
// CHECK:       %[[DWTE:[a-z0-9_]+]] = xfmr.embedding_grad %[[DX]], %[[TOK]]
// CHECK-NOT:   xfmr.add
// CHECK:       xfmr.adamw %[[WTE]], %[[DWTE]],
// CHECK:       xfmr.adamw %[[W]], %[[DW]],
// CHECK:       xfmr.adamw %[[HEAD]], %[[DHEAD]],

func.func @residual(%wte: tensor<16x8xf32> {xfmr.param = "wte"},
                    %w: tensor<8x8xf32> {xfmr.param = "w"},
                    %head: tensor<16x8xf32> {xfmr.param = "head"},
                    %tokens: tensor<2x3xi32> {xfmr.input = "tokens"},
                    %targets: tensor<2x3xi32> {xfmr.input = "targets"}) -> tensor<f32> {
  %x = xfmr.embedding %tokens, %wte : (tensor<2x3xi32>, tensor<16x8xf32>) -> tensor<2x3x8xf32>
  %h = xfmr.linear %x, %w : (tensor<2x3x8xf32>, tensor<8x8xf32>) -> tensor<2x3x8xf32>
  %r = xfmr.add %x, %h : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %logits = xfmr.linear %r, %head : (tensor<2x3x8xf32>, tensor<16x8xf32>) -> tensor<2x3x16xf32>
  %loss = xfmr.softmax_cross_entropy %logits, %targets : (tensor<2x3x16xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A parameter the loss does not use gets a zero gradient (and is still
// updated: weight decay applies to it); the pass warns about it
// (train_step_verification.mlir).

// CHECK-LABEL: func.func @train_step(
// CHECK-SAME:    %[[WTE:[a-z0-9_]+]]: tensor<16x8xf32> {xfmr.param = "wte"}, %[[SPARE:[a-z0-9_]+]]: tensor<3x5xf32> {xfmr.param = "spare"}
// CHECK:       %[[ZERO:[a-z0-9_]+]] = arith.constant dense<0.000000e+00> : tensor<3x5xf32>
// CHECK:       xfmr.adamw %[[WTE]],
// CHECK:       xfmr.adamw %[[SPARE]], %[[ZERO]], {{.*}} {beta2 = 0.949999988 : f32, weight_decay = 1.000000e-01 : f32} : (tensor<3x5xf32>,

func.func @unused(%wte: tensor<16x8xf32> {xfmr.param = "wte"},
                  %spare: tensor<3x5xf32> {xfmr.param = "spare"},
                  %tokens: tensor<2x3xi32> {xfmr.input = "tokens"},
                  %targets: tensor<2x3xi32> {xfmr.input = "targets"}) -> tensor<f32> {
  %x = xfmr.embedding %tokens, %wte : (tensor<2x3xi32>, tensor<16x8xf32>) -> tensor<2x3x8xf32>
  %logits = xfmr.linear %x, %wte : (tensor<2x3x8xf32>, tensor<16x8xf32>) -> tensor<2x3x16xf32>
  %loss = xfmr.softmax_cross_entropy %logits, %targets : (tensor<2x3x16xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// The signature: parameters in argument order (wherever the tokens and
// targets were), then first moments, second moments, step, lr, tokens,
// targets; results: loss, new parameters, new moments, step + 1. The forward
// function's xfmr.model is kept, xfmr.train_step records the options, and a
// function without parameters is left alone.

// CHECK-LABEL: func.func @helper(
// CHECK-SAME:    %{{.+}}: tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT:    return
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME:    %{{.+}}: tensor<8xf32> {xfmr.param = "ln.weight"}, %{{.+}}: tensor<16x8xf32> {xfmr.param = "wte"},
// CHECK-SAME:    %{{.+}}: tensor<8xf32> {xfmr.moment1 = "ln.weight"}, %{{.+}}: tensor<16x8xf32> {xfmr.moment1 = "wte"},
// CHECK-SAME:    %{{.+}}: tensor<8xf32> {xfmr.moment2 = "ln.weight"}, %{{.+}}: tensor<16x8xf32> {xfmr.moment2 = "wte"},
// CHECK-SAME:    %{{.+}}: tensor<i32> {xfmr.input = "step"}, %{{.+}}: tensor<f32> {xfmr.input = "lr"},
// CHECK-SAME:    %{{.+}}: tensor<2x3xi32> {xfmr.input = "tokens"}, %{{.+}}: tensor<2x3xi32> {xfmr.input = "targets"})
// CHECK-SAME:    -> (tensor<f32> {xfmr.output = "loss"},
// CHECK-SAME:    tensor<8xf32> {xfmr.param = "ln.weight"}, tensor<16x8xf32> {xfmr.param = "wte"},
// CHECK-SAME:    tensor<8xf32> {xfmr.moment1 = "ln.weight"}, tensor<16x8xf32> {xfmr.moment1 = "wte"},
// CHECK-SAME:    tensor<8xf32> {xfmr.moment2 = "ln.weight"}, tensor<16x8xf32> {xfmr.moment2 = "wte"},
// CHECK-SAME:    tensor<i32> {xfmr.output = "step"})
// CHECK-SAME:    attributes {xfmr.model = {arch = "gpt2", layers = 0 : i64},
// CHECK-SAME:    xfmr.train_step = {beta1 = 0.899999976 : f32, beta2 = 0.949999988 : f32, epsilon = 9.99999993E-9 : f32, microbatches = 1 : i64, optimizer = "adamw", weight_decay = 1.000000e-01 : f32}}
// CHECK:         xfmr.rmsnorm_grad
// CHECK-NOT:   func.func @signature

func.func @helper(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

func.func @signature(%targets: tensor<2x3xi32> {xfmr.input = "targets"},
                     %g: tensor<8xf32> {xfmr.param = "ln.weight"},
                     %tokens: tensor<2x3xi32> {xfmr.input = "tokens"},
                     %wte: tensor<16x8xf32> {xfmr.param = "wte"}) -> tensor<f32>
    attributes {xfmr.model = {arch = "gpt2", layers = 0 : i64}} {
  %x = xfmr.embedding %tokens, %wte : (tensor<2x3xi32>, tensor<16x8xf32>) -> tensor<2x3x8xf32>
  %n = xfmr.rmsnorm %x, %g {epsilon = 1.0e-05 : f32} : (tensor<2x3x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  %logits = xfmr.linear %n, %wte : (tensor<2x3x8xf32>, tensor<16x8xf32>) -> tensor<2x3x16xf32>
  %loss = xfmr.softmax_cross_entropy %logits, %targets : (tensor<2x3x16xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A forward function may itself be called @train_step: it is replaced. The
// backward of xfmr.scale is a scale by the same factor.

// CHECK-LABEL: func.func @train_step(
// CHECK-SAME:    %[[W:[a-z0-9_]+]]: tensor<4x8xf32> {xfmr.param = "w"}
// CHECK-SAME:    xfmr.train_step =
// CHECK:       %[[Y:[a-z0-9_]+]] = xfmr.linear %{{.+}}, %[[W]]
// CHECK:       %[[S:[a-z0-9_]+]] = xfmr.scale %[[Y]] {factor = 2.500000e-01 : f32}
// CHECK:       %[[DS:[a-z0-9_]+]] = xfmr.softmax_cross_entropy_grad %{{.+}}, %[[S]],
// CHECK:       %[[DY:[a-z0-9_]+]] = xfmr.scale %[[DS]] {factor = 2.500000e-01 : f32}
// CHECK:       %[[DW:[a-z0-9_]+]] = xfmr.linear_grad_weight %[[DY]],
// CHECK:       xfmr.adamw %[[W]], %[[DW]],
// CHECK-NOT:   func.func

func.func @train_step(%w: tensor<4x8xf32> {xfmr.param = "w"},
                      %tokens: tensor<2x3xi32> {xfmr.input = "tokens"},
                      %targets: tensor<2x3xi32> {xfmr.input = "targets"}) -> tensor<f32> {
  %table = arith.constant dense<1.0> : tensor<16x8xf32>
  %x = xfmr.embedding %tokens, %table : (tensor<2x3xi32>, tensor<16x8xf32>) -> tensor<2x3x8xf32>
  %y = xfmr.linear %x, %w : (tensor<2x3x8xf32>, tensor<4x8xf32>) -> tensor<2x3x4xf32>
  %s = xfmr.scale %y {factor = 2.5e-01 : f32} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %loss = xfmr.softmax_cross_entropy %s, %targets : (tensor<2x3x4xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
