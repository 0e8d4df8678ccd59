#!/usr/bin/env bash
# The main job: installs what is missing, builds, generates a small GPT
# (4 layers), compiles its training step (autodiff + AdamW, partitioned by
# a plan: a 2-stage 1F1B pipeline of 4 micro-batches x tensor x sequence
# parallelism, memory plan) into a program, draws its pipeline schedule,
# trains it on 4 CPU ranks printing the loss, and writes a trace of the run.
# Usage: scripts/demo.sh [preset] [steps] [micro-batches]
#        PLAN=plan.json RANKS=N scripts/demo.sh ...   (another plan)
#        LAYERS=N scripts/demo.sh ...                 (another depth)
# The micro-batch count defaults to the plan's pipeline.microbatches.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
preset=${1:-gpt2-tiny}
steps=${2:-100}
microbatches=${3:-}
layers=${LAYERS:-4}
"$root/scripts/setup.sh"
"$root/scripts/build.sh" >/dev/null
build=${PARTITION_BUILD_DIR:-$root/build}
bin=$build/bin
out=$build/demo
mkdir -p "$out"

echo "== partition-gen --preset $preset --layers $layers"
"$bin/partition-gen" --preset "$preset" --layers "$layers" -o "$out/$preset.mlir"
"$bin/partition-opt" "$out/$preset.mlir" \
  --xfmr-train-step="microbatches=${microbatches:-1}" --xfmr-stats -o /dev/null

plan=${PLAN:-$out/plan.json}
ranks=${RANKS:-4}
if [ -z "${PLAN:-}" ]; then
  echo '{"mesh": {"pp": 2, "tp": 2}, "tensor_parallel": {"sequence_parallel": true}, "pipeline": {"schedule": "1f1b", "microbatches": 4}}' > "$plan"
fi
# A plan without pipeline parallelism has no schedule to draw.
svg=
if grep -Eq '"pp" *: *([2-9]|[1-9][0-9])' "$plan"; then
  svg=$out/$preset.schedule.svg
fi
echo "== partition-compile --plan $(cat "$plan")"
"$bin/partition-compile" "$out/$preset.mlir" -o "$out/$preset.ptp" \
  --plan "$plan" ${microbatches:+--microbatches "$microbatches"} \
  ${svg:+--schedule-svg "$svg"} --memory-report

echo "== partition-run on $ranks CPU ranks: $steps steps on the built-in synthetic language"
"$bin/partition-run" --nproc "$ranks" "$out/$preset.ptp" --steps "$steps" \
  --lr 3e-3 --eval-every 25 --metrics-out "$out/$preset.metrics.jsonl" \
  --trace "$out/$preset.trace.json"
echo "metrics: $out/$preset.metrics.jsonl"
[ -z "$svg" ] || echo "pipeline schedule: $svg (open it in a browser)"
# partition-run printed where the trace is.
