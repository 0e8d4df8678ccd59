#!/usr/bin/env bash
# The main job: installs what is missing, builds, generates a small GPT,
# compiles its training step (autodiff + AdamW, partitioned by a plan:
# data x tensor x sequence parallelism, memory plan) into a program and
# trains it on 4 CPU ranks, printing the loss.
# Usage: scripts/demo.sh [preset] [steps] [micro-batches]
#        PLAN=plan.json RANKS=N scripts/demo.sh ...   (another plan)
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

plan=${PLAN:-$out/plan.json}
ranks=${RANKS:-4}
if [ -z "${PLAN:-}" ]; then
  echo '{"mesh": {"dp": 2, "tp": 2}, "tensor_parallel": {"sequence_parallel": true}}' > "$plan"
fi
echo "== partition-compile --plan $(cat "$plan")"
"$bin/partition-compile" "$out/$preset.mlir" -o "$out/$preset.ptp" \
  --plan "$plan" --microbatches "$microbatches" --memory-report

echo "== partition-run on $ranks CPU ranks: $steps steps on the built-in synthetic language"
"$bin/partition-run" --nproc "$ranks" "$out/$preset.ptp" --steps "$steps" \
  --lr 3e-3 --eval-every 50 --metrics-out "$out/$preset.metrics.jsonl"
echo "metrics: $out/$preset.metrics.jsonl"
