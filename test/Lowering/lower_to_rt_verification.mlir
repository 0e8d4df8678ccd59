// RUN: partition-opt %s --split-input-file --lower-to-rt -verify-diagnostics

// One case per error of --lower-to-rt (LowerToRt.cpp).

// expected-error @+1 {{argument #1 has no xfmr.param, xfmr.moment1, xfmr.moment2 or xfmr.input role}}
func.func @argument_without_role(%w: tensor<4xf32> {xfmr.param = "w"}, %x: tensor<4xf32>)
    -> (tensor<f32> {xfmr.output = "loss"}) attributes {xfmr.train_step = {}} {
  %loss = arith.constant dense<0.0> : tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Inputs too: an integer argument without xfmr.input.
// expected-error @+1 {{argument #2 has no xfmr.param, xfmr.moment1, xfmr.moment2 or xfmr.input role}}
func.func @third_argument_without_role(%w: tensor<4xf32> {xfmr.param = "w"}, %t: tensor<2x3xi32> {xfmr.input = "tokens"}, %x: tensor<2x3xi32>)
    -> (tensor<f32> {xfmr.output = "loss"}) attributes {xfmr.train_step = {}} {
  %loss = arith.constant dense<0.0> : tensor<f32>
  return %loss : tensor<f32>
}

// -----

// expected-error @+1 {{argument #1 must be a statically shaped tensor, but is 'index'}}
func.func @scalar_argument(%w: tensor<4xf32> {xfmr.param = "w"}, %i: index {xfmr.input = "step"})
    -> (tensor<f32> {xfmr.output = "loss"}) attributes {xfmr.train_step = {}} {
  %loss = arith.constant dense<0.0> : tensor<f32>
  return %loss : tensor<f32>
}

// -----

// expected-error @+1 {{argument #0 must be a statically shaped tensor, but is 'tensor<?x8xf32>'}}
func.func @dynamic_argument(%w: tensor<?x8xf32> {xfmr.param = "w"})
    -> (tensor<f32> {xfmr.output = "loss"}) attributes {xfmr.train_step = {}} {
  %loss = arith.constant dense<0.0> : tensor<f32>
  return %loss : tensor<f32>
}

// -----

// expected-error @+1 {{result #1 must be a statically shaped tensor, but is 'tensor<?xf32>'}}
func.func @dynamic_result(%w: tensor<4xf32> {xfmr.param = "w"})
    -> (tensor<f32> {xfmr.output = "loss"}, tensor<?xf32> {xfmr.param = "w"}) attributes {xfmr.train_step = {}} {
  %loss = arith.constant dense<0.0> : tensor<f32>
  %d = tensor.cast %w : tensor<4xf32> to tensor<?xf32>
  return %loss, %d : tensor<f32>, tensor<?xf32>
}

// -----

// expected-error @+1 {{result #1 updates no argument (no argument has the same role and name)}}
func.func @result_without_role(%w: tensor<4xf32> {xfmr.param = "w"})
    -> (tensor<f32> {xfmr.output = "loss"}, tensor<4xf32>) attributes {xfmr.train_step = {}} {
  %loss = arith.constant dense<0.0> : tensor<f32>
  return %loss, %w : tensor<f32>, tensor<4xf32>
}

// -----

// expected-error @+1 {{result #1 updates no argument (no argument has the same role and name)}}
func.func @result_for_unknown_parameter(%w: tensor<4xf32> {xfmr.param = "w"})
    -> (tensor<f32> {xfmr.output = "loss"}, tensor<4xf32> {xfmr.param = "v"}) attributes {xfmr.train_step = {}} {
  %loss = arith.constant dense<0.0> : tensor<f32>
  return %loss, %w : tensor<f32>, tensor<4xf32>
}

// -----

// Same name, other role: the parameter "w" has no first moment here.
// expected-error @+1 {{result #0 updates no argument (no argument has the same role and name)}}
func.func @result_for_missing_moment(%w: tensor<4xf32> {xfmr.param = "w"})
    -> (tensor<4xf32> {xfmr.moment1 = "w"}, tensor<f32> {xfmr.output = "loss"}) attributes {xfmr.train_step = {}} {
  %loss = arith.constant dense<0.0> : tensor<f32>
  return %w, %loss : tensor<4xf32>, tensor<f32>
}

// -----

// expected-error @+1 {{result #1 updates no argument (no argument has the same role and name)}}
func.func @step_result_without_step(%w: tensor<4xf32> {xfmr.param = "w"})
    -> (tensor<f32> {xfmr.output = "loss"}, tensor<i32> {xfmr.output = "step"}) attributes {xfmr.train_step = {}} {
  %loss = arith.constant dense<0.0> : tensor<f32>
  %step = arith.constant dense<1> : tensor<i32>
  return %loss, %step : tensor<f32>, tensor<i32>
}

// -----

// expected-error @+1 {{training step has no result with xfmr.output = "loss"}}
func.func @no_loss(%w: tensor<4xf32> {xfmr.param = "w"})
    -> (tensor<4xf32> {xfmr.param = "w"}) attributes {xfmr.train_step = {}} {
  %n = xfmr.scale %w {factor = 2.0 : f32} : (tensor<4xf32>) -> tensor<4xf32>
  return %n : tensor<4xf32>
}

// -----

// An eval step needs a loss too.
// expected-error @+1 {{training step has no result with xfmr.output = "loss"}}
func.func @eval_without_loss(%w: tensor<4xf32> {xfmr.param = "w"}) attributes {xfmr.eval_step = {}} {
  return
}

// -----

func.func @op_without_kernel(%w: tensor<4xf32> {xfmr.param = "w"})
    -> (tensor<f32> {xfmr.output = "loss"}) attributes {xfmr.train_step = {}} {
  // expected-error @+1 {{'arith.addf' op has no runtime kernel}}
  %x = arith.addf %w, %w : tensor<4xf32>
  %loss = arith.constant dense<0.0> : tensor<f32>
  return %loss : tensor<f32>
}

// -----

// The runtime reduces f32 buffers only.
dist.mesh @m axes = [dp = 2]
func.func @all_reduce_i32(%w: tensor<4xf32> {xfmr.param = "w"}, %t: tensor<2x3xi32> {xfmr.input = "tokens"})
    -> (tensor<f32> {xfmr.output = "loss"}) attributes {xfmr.train_step = {}} {
  // expected-error @+1 {{'dist.all_reduce' op reduces 'tensor<2x3xi32>', but the runtime reduces f32 and bf16 buffers only}}
  %w2, %t2 = dist.all_reduce %w, %t on @m axes [dp] reduce = sum : tensor<4xf32>, tensor<2x3xi32>
  %loss = arith.constant dense<0.0> : tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Point-to-point transfers (the pipeline's) move f32, bf16 and i32 buffers
// between pipeline stages: the peer is one coordinate, on the pipeline axis.
dist.mesh @m axes = [pp = 2]
func.func @send_f16(%w: tensor<4x2xf16> {xfmr.param = "w"})
    -> (tensor<f32> {xfmr.output = "loss"}) attributes {xfmr.train_step = {}} {
  // expected-error @+1 {{'dist.send' op sends 'tensor<4x2xf16>', but the runtime moves f32, bf16 and i32 buffers only}}
  dist.send %w to @m [pp = 1] : tensor<4x2xf16>
  %loss = arith.constant dense<0.0> : tensor<f32>
  return %loss : tensor<f32>
}

// -----

dist.mesh @m axes = [pp = 2, tp = 2]
func.func @recv_two_coordinates(%w: tensor<4x2xf32> {xfmr.param = "w"})
    -> (tensor<f32> {xfmr.output = "loss"}) attributes {xfmr.train_step = {}} {
  // expected-error @+1 {{'dist.recv' op names its peer by 2 coordinates, but the runtime moves data between pipeline stages only: give the peer's coordinate on the pipeline axis alone}}
  %x = dist.recv from @m [pp = 1, tp = 0] : tensor<4x2xf32>
  %loss = arith.constant dense<0.0> : tensor<f32>
  return %loss : tensor<f32>
}

// -----

func.func @tensor_op_without_kernel(%w: tensor<4xf32> {xfmr.param = "w"})
    -> (tensor<f32> {xfmr.output = "loss"}, tensor<4xf32> {xfmr.param = "w"}) attributes {xfmr.train_step = {}} {
  %loss = arith.constant dense<0.0> : tensor<f32>
  // expected-error @+1 {{'tensor.empty' op has no runtime kernel}}
  %e = tensor.empty() : tensor<4xf32>
  return %loss, %e : tensor<f32>, tensor<4xf32>
}

// -----

func.func @non_splat_constant(%w: tensor<4xf32> {xfmr.param = "w"})
    -> (tensor<f32> {xfmr.output = "loss"}) attributes {xfmr.train_step = {}} {
  // expected-error @+1 {{'arith.constant' op only splat constants can be lowered}}
  %c = arith.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %loss = arith.constant dense<0.0> : tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A slice at a computed offset: the offset is a scalar constant, which has
// no buffer.
func.func @dynamic_slice_offset(%w: tensor<4xf32> {xfmr.param = "w"}, %tokens: tensor<4x3xi32> {xfmr.input = "tokens"})
    -> (tensor<f32> {xfmr.output = "loss"}) attributes {xfmr.train_step = {}} {
  // expected-error @+1 {{'arith.constant' op only splat constants can be lowered}}
  %c1 = arith.constant 1 : index
  %s = tensor.extract_slice %tokens[%c1, 0] [2, 3] [1, 1] : tensor<4x3xi32> to tensor<2x3xi32>
  %loss = arith.constant dense<0.0> : tensor<f32>
  return %loss : tensor<f32>
}

// -----

// expected-error @+1 {{a training step to lower must have a body of exactly one block}}
func.func private @declaration(%w: tensor<4xf32> {xfmr.param = "w"})
    -> (tensor<f32> {xfmr.output = "loss"}) attributes {xfmr.train_step = {}}

// -----

// expected-error @+1 {{a training step to lower must have a body of exactly one block}}
func.func @two_blocks(%w: tensor<4xf32> {xfmr.param = "w"})
    -> (tensor<f32> {xfmr.output = "loss"}) attributes {xfmr.train_step = {}} {
  %loss = arith.constant dense<0.0> : tensor<f32>
  return %loss : tensor<f32>
^dead:
  return %loss : tensor<f32>
}

// -----

// A forward function alone (--xfmr-train-step has not run).
// expected-error @+1 {{no training step to lower (run --xfmr-train-step first)}}
module {
  func.func @forward(%w: tensor<4x8xf32> {xfmr.param = "w"}, %tokens: tensor<2x3xi32> {xfmr.input = "tokens"},
                     %targets: tensor<2x3xi32> {xfmr.input = "targets"}) -> tensor<f32> {
    %loss = arith.constant dense<0.0> : tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// expected-error @+1 {{no training step to lower (run --xfmr-train-step first)}}
module {
}
