// RUN: partition-opt %s --xfmr-train-step --split-input-file -verify-diagnostics

// Bad option values are reported on the forward function before anything is
// built (here on a generated model, so each RUN line sees one forward).
// RUN: partition-gen --preset gpt2-tiny --layers 1 | not partition-opt --xfmr-train-step="microbatches=0" 2>&1 | FileCheck %s --check-prefix=MICRO
// RUN: partition-gen --preset gpt2-tiny --layers 1 | not partition-opt --xfmr-train-step="microbatches=-3" 2>&1 | FileCheck %s --check-prefix=MICRO-NEG
// RUN: partition-gen --preset gpt2-tiny --layers 1 | not partition-opt --xfmr-train-step="microbatches=99999999999" 2>&1 | FileCheck %s --check-prefix=MICRO-BIG
// RUN: partition-gen --preset gpt2-tiny --layers 1 | not partition-opt --xfmr-train-step="beta1=1.5" 2>&1 | FileCheck %s --check-prefix=BETA1
// RUN: partition-gen --preset gpt2-tiny --layers 1 | not partition-opt --xfmr-train-step="beta2=1" 2>&1 | FileCheck %s --check-prefix=BETA2
// RUN: partition-gen --preset gpt2-tiny --layers 1 | not partition-opt --xfmr-train-step="beta1=-0.1" 2>&1 | FileCheck %s --check-prefix=BETA1-NEG
// RUN: partition-gen --preset gpt2-tiny --layers 1 | not partition-opt --xfmr-train-step="epsilon=0" 2>&1 | FileCheck %s --check-prefix=EPS
// RUN: partition-gen --preset gpt2-tiny --layers 1 | not partition-opt --xfmr-train-step="weight-decay=-1" 2>&1 | FileCheck %s --check-prefix=WD

// MICRO:     error: microbatches must be between 1 and 4096, but is 0{{$}}
// MICRO-NEG: error: microbatches must be between 1 and 4096, but is -3{{$}}
// MICRO-BIG: error: microbatches must be between 1 and 4096, but is 99999999999{{$}}
// BETA1:     error: beta1 must be in [0, 1), but is 1.500000e+00
// BETA2:     error: beta2 must be in [0, 1), but is 1.000000e+00
// BETA1-NEG: error: beta1 must be in [0, 1), but is -1.000000e-01
// EPS:       error: epsilon must be positive, but is 0.000000e+00
// WD:        error: weight-decay must be non-negative, but is -1.000000e+00

// expected-error@+1 {{forward function has no body}}
func.func private @forward(%w: tensor<4x8xf32> {xfmr.param = "w"},
                           %tokens: tensor<2x3xi32> {xfmr.input = "tokens"},
                           %targets: tensor<2x3xi32> {xfmr.input = "targets"})
    -> tensor<f32>

// -----

// expected-error@+1 {{forward function must be a single block}}
func.func @forward(%w: tensor<f32> {xfmr.param = "w"},
                   %tokens: tensor<2x3xi32> {xfmr.input = "tokens"},
                   %targets: tensor<2x3xi32> {xfmr.input = "targets"}) -> tensor<f32> {
  return %w : tensor<f32>
^bb1:
  return %w : tensor<f32>
}

// -----

// expected-error@+1 {{forward function must return exactly one loss of type 'tensor<f32>', but returns ('tensor<4xf32>')}}
func.func @forward(%w: tensor<4xf32> {xfmr.param = "w"},
                   %tokens: tensor<2x3xi32> {xfmr.input = "tokens"},
                   %targets: tensor<2x3xi32> {xfmr.input = "targets"}) -> tensor<4xf32> {
  return %w : tensor<4xf32>
}

// -----

// expected-error@+1 {{forward function must return exactly one loss of type 'tensor<f32>', but returns ('tensor<f32>', 'tensor<f32>')}}
func.func @forward(%w: tensor<f32> {xfmr.param = "w"},
                   %tokens: tensor<2x3xi32> {xfmr.input = "tokens"},
                   %targets: tensor<2x3xi32> {xfmr.input = "targets"}) -> (tensor<f32>, tensor<f32>) {
  return %w, %w : tensor<f32>, tensor<f32>
}

// -----

// expected-error@+1 {{argument #1 is neither a parameter (xfmr.param) nor the tokens or targets (xfmr.input)}}
func.func @forward(%w: tensor<f32> {xfmr.param = "w"}, %x: tensor<f32>,
                   %tokens: tensor<2x3xi32> {xfmr.input = "tokens"},
                   %targets: tensor<2x3xi32> {xfmr.input = "targets"}) -> tensor<f32> {
  return %w : tensor<f32>
}

// -----

// "step" is a valid xfmr.input, but not one of the forward function's.
// expected-error@+1 {{argument #1 is neither a parameter (xfmr.param) nor the tokens or targets (xfmr.input)}}
func.func @forward(%w: tensor<f32> {xfmr.param = "w"},
                   %step: tensor<i32> {xfmr.input = "step"},
                   %tokens: tensor<2x3xi32> {xfmr.input = "tokens"},
                   %targets: tensor<2x3xi32> {xfmr.input = "targets"}) -> tensor<f32> {
  return %w : tensor<f32>
}

// -----

// expected-error@+1 {{arguments #1 and #2 are both "tokens"}}
func.func @forward(%w: tensor<f32> {xfmr.param = "w"},
                   %tokens: tensor<2x3xi32> {xfmr.input = "tokens"},
                   %again: tensor<2x3xi32> {xfmr.input = "tokens"},
                   %targets: tensor<2x3xi32> {xfmr.input = "targets"}) -> tensor<f32> {
  return %w : tensor<f32>
}

// -----

// expected-error@+1 {{arguments #1 and #3 are both "targets"}}
func.func @forward(%w: tensor<f32> {xfmr.param = "w"},
                   %targets: tensor<2x3xi32> {xfmr.input = "targets"},
                   %tokens: tensor<2x3xi32> {xfmr.input = "tokens"},
                   %again: tensor<2x3xi32> {xfmr.input = "targets"}) -> tensor<f32> {
  return %w : tensor<f32>
}

// -----

// expected-error@+1 {{forward function needs a tokens and a targets argument (xfmr.input = "tokens" / "targets")}}
func.func @forward(%w: tensor<f32> {xfmr.param = "w"},
                   %tokens: tensor<2x3xi32> {xfmr.input = "tokens"}) -> tensor<f32> {
  return %w : tensor<f32>
}

// -----

// expected-error@+1 {{forward function needs a tokens and a targets argument (xfmr.input = "tokens" / "targets")}}
func.func @forward(%w: tensor<f32> {xfmr.param = "w"},
                   %targets: tensor<2x3xi32> {xfmr.input = "targets"}) -> tensor<f32> {
  return %w : tensor<f32>
}

// -----

// expected-error@+1 {{arguments #0 and #2 are both the parameter "w"}}
func.func @forward(%w: tensor<f32> {xfmr.param = "w"},
                   %v: tensor<f32> {xfmr.param = "v"},
                   %w2: tensor<f32> {xfmr.param = "w"},
                   %tokens: tensor<2x3xi32> {xfmr.input = "tokens"},
                   %targets: tensor<2x3xi32> {xfmr.input = "targets"}) -> tensor<f32> {
  return %w : tensor<f32>
}

// -----

// expected-error@+1 {{parameter "w" (argument #1) must have a static shape, but is 'tensor<?x4xf32>'}}
func.func @forward(%loss: tensor<f32> {xfmr.param = "loss"},
                   %w: tensor<?x4xf32> {xfmr.param = "w"},
                   %tokens: tensor<2x3xi32> {xfmr.input = "tokens"},
                   %targets: tensor<2x3xi32> {xfmr.input = "targets"}) -> tensor<f32> {
  return %loss : tensor<f32>
}

// -----

// expected-error@+1 {{tokens (argument #1) must be a statically shaped [batch, seq] tensor of i32, but is 'tensor<6xi32>'}}
func.func @forward(%w: tensor<f32> {xfmr.param = "w"},
                   %tokens: tensor<6xi32> {xfmr.input = "tokens"},
                   %targets: tensor<2x3xi32> {xfmr.input = "targets"}) -> tensor<f32> {
  return %w : tensor<f32>
}

// -----

// expected-error@+1 {{tokens (argument #1) must be a statically shaped [batch, seq] tensor of i32, but is 'tensor<?x3xi32>'}}
func.func @forward(%w: tensor<f32> {xfmr.param = "w"},
                   %tokens: tensor<?x3xi32> {xfmr.input = "tokens"},
                   %targets: tensor<2x3xi32> {xfmr.input = "targets"}) -> tensor<f32> {
  return %w : tensor<f32>
}

// -----

// expected-error@+1 {{tokens (argument #1) must be a statically shaped [batch, seq] tensor of i32, but is 'i32'}}
func.func @forward(%w: tensor<f32> {xfmr.param = "w"},
                   %tokens: i32 {xfmr.input = "tokens"},
                   %targets: tensor<2x3xi32> {xfmr.input = "targets"}) -> tensor<f32> {
  return %w : tensor<f32>
}

// -----

// expected-error@+1 {{tokens (argument #1) must be a statically shaped [batch, seq] tensor of i32, but is 'tensor<2x3xi64>'}}
func.func @forward(%w: tensor<f32> {xfmr.param = "w"},
                   %tokens: tensor<2x3xi64> {xfmr.input = "tokens"},
                   %targets: tensor<2x3xi64> {xfmr.input = "targets"}) -> tensor<f32> {
  return %w : tensor<f32>
}

// -----

// expected-error@+1 {{targets (argument #2) must have the type of the tokens, 'tensor<2x5xi32>', but is 'tensor<2x3xi32>'}}
func.func @forward(%w: tensor<f32> {xfmr.param = "w"},
                   %tokens: tensor<2x5xi32> {xfmr.input = "tokens"},
                   %targets: tensor<2x3xi32> {xfmr.input = "targets"}) -> tensor<f32> {
  return %w : tensor<f32>
}

// -----

// No function has parameters: there is no forward pass to differentiate.
// expected-error@+1 {{--xfmr-train-step expects exactly one function with xfmr.param arguments (the forward pass), found 0}}
module {
  func.func @forward(%tokens: tensor<2x3xi32> {xfmr.input = "tokens"},
                     %targets: tensor<2x3xi32> {xfmr.input = "targets"}) -> tensor<f32> {
    %loss = arith.constant dense<0.0> : tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// expected-error@+1 {{--xfmr-train-step expects exactly one function with xfmr.param arguments (the forward pass), found 2}}
module {
  func.func @forward(%w: tensor<f32> {xfmr.param = "w"},
                     %tokens: tensor<2x3xi32> {xfmr.input = "tokens"},
                     %targets: tensor<2x3xi32> {xfmr.input = "targets"}) -> tensor<f32> {
    return %w : tensor<f32>
  }
  func.func @forward2(%w: tensor<f32> {xfmr.param = "w"},
                      %tokens: tensor<2x3xi32> {xfmr.input = "tokens"},
                      %targets: tensor<2x3xi32> {xfmr.input = "targets"}) -> tensor<f32> {
    return %w : tensor<f32>
  }
}

// -----

// expected-error@+1 {{symbol @train_step already exists; the training step needs that name}}
func.func private @train_step()

func.func @forward(%w: tensor<f32> {xfmr.param = "w"},
                   %tokens: tensor<2x3xi32> {xfmr.input = "tokens"},
                   %targets: tensor<2x3xi32> {xfmr.input = "targets"}) -> tensor<f32> {
  return %w : tensor<f32>
}

// -----

// An op without a gradient rule between a parameter and the loss.
func.func @forward(%w: tensor<4x8xf32> {xfmr.param = "w"},
                   %tokens: tensor<2x3xi32> {xfmr.input = "tokens"},
                   %targets: tensor<2x3xi32> {xfmr.input = "targets"}) -> tensor<f32> {
  %table = arith.constant dense<1.0> : tensor<16x8xf32>
  %x = xfmr.embedding %tokens, %table : (tensor<2x3xi32>, tensor<16x8xf32>) -> tensor<2x3x8xf32>
  %y = xfmr.linear %x, %w : (tensor<2x3x8xf32>, tensor<4x8xf32>) -> tensor<2x3x4xf32>
  // expected-error@+1 {{'arith.mulf' op has no gradient rule (it does not implement AutodiffOpInterface), but the loss depends on it}}
  %z = arith.mulf %y, %y : tensor<2x3x4xf32>
  %loss = xfmr.softmax_cross_entropy %z, %targets : (tensor<2x3x4xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A loss that does not depend on any parameter would "train" at the same
// value forever (issue 17): a constant loss...
func.func @forward(%w: tensor<4x4xf32> {xfmr.param = "w"},
                   %tokens: tensor<2x3xi32> {xfmr.input = "tokens"},
                   %targets: tensor<2x3xi32> {xfmr.input = "targets"}) -> tensor<f32> {
  // expected-error@+1 {{the loss returned by @forward does not depend on any parameter (xfmr.param), so training cannot change it: compute the loss from the parameters}}
  %loss = arith.constant dense<2.0> : tensor<f32>
  return %loss : tensor<f32>
}

// -----

// ... or one computed from the inputs alone, while the parameters feed
// values the loss does not read.
func.func @forward(%w: tensor<4x8xf32> {xfmr.param = "w"},
                   %tokens: tensor<2x3xi32> {xfmr.input = "tokens"},
                   %targets: tensor<2x3xi32> {xfmr.input = "targets"}) -> tensor<f32> {
  %table = arith.constant dense<1.0> : tensor<16x8xf32>
  %x = xfmr.embedding %tokens, %table : (tensor<2x3xi32>, tensor<16x8xf32>) -> tensor<2x3x8xf32>
  %unused = xfmr.linear %x, %w : (tensor<2x3x8xf32>, tensor<4x8xf32>) -> tensor<2x3x4xf32>
  %logits = xfmr.scale %x {factor = 2.5e-01 : f32} : (tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  // expected-error@+1 {{the loss returned by @forward does not depend on any parameter}}
  %loss = xfmr.softmax_cross_entropy %logits, %targets : (tensor<2x3x8xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// One parameter the loss does not depend on is a warning, not an error (a
// weight kept unused on purpose is legitimate): the step is still built.
// expected-warning@+1 {{the loss does not depend on parameter "spare" (argument #1): its gradient is always zero, so only weight decay changes it; remove it unless it is meant to stay unused}}
func.func @forward(%wte: tensor<16x8xf32> {xfmr.param = "wte"},
                   %spare: tensor<3x5xf32> {xfmr.param = "spare"},
                   %tokens: tensor<2x3xi32> {xfmr.input = "tokens"},
                   %targets: tensor<2x3xi32> {xfmr.input = "targets"}) -> tensor<f32> {
  %x = xfmr.embedding %tokens, %wte : (tensor<2x3xi32>, tensor<16x8xf32>) -> tensor<2x3x8xf32>
  %logits = xfmr.linear %x, %wte : (tensor<2x3x8xf32>, tensor<16x8xf32>) -> tensor<2x3x16xf32>
  %loss = xfmr.softmax_cross_entropy %logits, %targets : (tensor<2x3x16xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
