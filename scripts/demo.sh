#!/usr/bin/env bash
# The main job: installs what is missing, builds, generates a small GPT,
# builds its training step (autodiff + AdamW, 2 micro-batches) and prints
# its statistics. Usage: scripts/demo.sh [preset] [micro-batches]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
preset=${1:-gpt2-tiny}
microbatches=${2:-2}
"$root/scripts/setup.sh"
"$root/scripts/build.sh" >/dev/null
bin=${PARTITION_BUILD_DIR:-$root/build}/bin
out=${PARTITION_BUILD_DIR:-$root/build}/demo
mkdir -p "$out"

"$bin/partition-gen" --preset "$preset" -o "$out/$preset.mlir"
"$bin/partition-opt" "$out/$preset.mlir" \
  --xfmr-train-step="microbatches=$microbatches" --xfmr-stats \
  -o "$out/$preset.train_step.mlir"

ops=$(grep -c ' = xfmr\.' "$out/$preset.train_step.mlir" || true)
echo "ops: $ops xfmr ops in the training step"
echo "wrote $out/$preset.mlir (forward + loss) and $out/$preset.train_step.mlir"
