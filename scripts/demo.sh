#!/usr/bin/env bash
# The main job: installs what is missing, builds, generates a small GPT,
# compiles its training step (autodiff + AdamW, memory plan) into a program
# and trains it on the CPU, printing the loss.
# Usage: scripts/demo.sh [preset] [steps] [micro-batches]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
preset=${1:-gpt2-tiny}
steps=${2:-300}
microbatches=${3:-1}
"$root/scripts/setup.sh"
"$root/scripts/build.sh" >/dev/null
build=${PARTITION_BUILD_DIR:-$root/build}
bin=$build/bin
out=$build/demo
mkdir -p "$out"

echo "== partition-gen --preset $preset"
"$bin/partition-gen" --preset "$preset" -o "$out/$preset.mlir"
"$bin/partition-opt" "$out/$preset.mlir" \
  --xfmr-train-step="microbatches=$microbatches" --xfmr-stats -o /dev/null

echo "== partition-compile (memory plan)"
"$bin/partition-compile" "$out/$preset.mlir" -o "$out/$preset.ptp" \
  --microbatches "$microbatches" --memory-report

echo "== partition-run: $steps steps on the built-in synthetic language"
"$bin/partition-run" "$out/$preset.ptp" --steps "$steps" --lr 3e-3 \
  --eval-every 50 --metrics-out "$out/$preset.metrics.jsonl"
echo "metrics: $out/$preset.metrics.jsonl"
