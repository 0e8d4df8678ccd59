// RUN: partition-opt %s -split-input-file --xfmr-explicit-positions="chunks=4" -verify-diagnostics
// RUN: not partition-opt %s --xfmr-explicit-positions="chunks=3" 2>&1 | FileCheck %s --check-prefix=ODD
// RUN: not partition-opt %s --xfmr-explicit-positions="chunks=0" 2>&1 | FileCheck %s --check-prefix=ZERO

// The errors of --xfmr-explicit-positions: a sequence that the chunks do
// not divide; odd or no chunks (the last RUN lines).
// ODD: error: --xfmr-explicit-positions: chunks must be 1 or even (two per context-parallel rank), got 3
// ZERO: error: --xfmr-explicit-positions: chunks must be 1 or even (two per context-parallel rank), got 0

func.func @not_dividing(%a: tensor<1x6x8xf32>) -> tensor<1x6x8xf32> {
  // expected-error @+1 {{'xfmr.attention' op has a sequence of 6, which --xfmr-explicit-positions chunks=4 does not divide}}
  %x = xfmr.attention %a, %a, %a {num_heads = 2 : i64, num_kv_heads = 2 : i64}
      : (tensor<1x6x8xf32>, tensor<1x6x8xf32>, tensor<1x6x8xf32>) -> tensor<1x6x8xf32>
  return %x : tensor<1x6x8xf32>
}
