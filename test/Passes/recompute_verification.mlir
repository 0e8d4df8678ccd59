// RUN: partition-opt %s --split-input-file --dist-recompute=policy=bogus -verify-diagnostics
// RUN: echo 'module {}' | not partition-opt --dist-recompute=policy=budget 2>&1 | FileCheck %s --check-prefix=BUDGET
// BUDGET: error: recompute policy 'budget' is not implemented yet: use none, selective or full

// expected-error @below {{unknown recompute policy 'bogus': use none, selective or full}}
module {
  func.func @f() {
    return
  }
}

// -----

// A dist.recomputed attribute is a unit attribute.
module {
  func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @below {{'dist.recomputed' must be a unit attribute, but is 1 : i64}}
    %y = xfmr.gelu %x {dist.recomputed = 1} : (tensor<4xf32>) -> tensor<4xf32>
    return %y : tensor<4xf32>
  }
}
