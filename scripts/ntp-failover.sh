#!/usr/bin/env bash
# Nonuniform tensor parallelism after a failure (docs/nonuniform-tp.md,
# "Resuming after a failure"), on CPU ranks:
#
#   1. train gpt2-tiny (a batch of 6) on 8 ranks, dp 2 x tp 4, saving a
#      checkpoint every SAVE_EVERY steps;
#   2. kill one rank (KILL_RANK, of the second replica) after step
#      KILL_AFTER: the job stops, every rank exits non-zero, the last
#      checkpoint stays whole (saves are atomic);
#   3. resume that checkpoint on the ranks left without a spare: on 6 as
#      replicas [{"tp": 4, "batch_share": 2}, {"tp": 2, "batch_share": 1}]
#      (gpt2-tiny's 4 heads allow no tp 3, so the degraded replica runs at
#      tp 2 on a third of the batch), or with HEADS=12 (gpt2-tiny at width
#      96 and 12 heads, a batch of 14) on all 7 as [{"tp": 4,
#      "batch_share": 4}, {"tp": 3, "batch_share": 3}]; train to STEPS;
#   4. resume the same checkpoint on one device and compare the two loss
#      curves step by step (relative 1e-4).
#
#   scripts/ntp-failover.sh [WORKDIR]        (default build/ntp-failover)
#   STEPS=8 SAVE_EVERY=2 KILL_AFTER=5 scripts/ntp-failover.sh /tmp/f
#   HEADS=12 scripts/ntp-failover.sh          (resume on 7 ranks, tp 4 + 3)
#
# Needs a build (scripts/build.sh; BIN=build/bin) and mpirun (OpenMPI).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${BIN:-$root/build/bin}"
work="${1:-$root/build/ntp-failover}"
steps="${STEPS:-40}"
save_every="${SAVE_EVERY:-5}"
kill_after="${KILL_AFTER:-12}"
kill_rank="${KILL_RANK:-5}"
lr="${LR:-3e-3}"
heads="${HEADS:-4}"
ranks_py="$root/test/e2e/Inputs/ranks.py"

for tool in partition-gen partition-compile partition-run; do
  [ -x "$bin/$tool" ] || { echo "ntp-failover: $bin/$tool is missing; build first (scripts/build.sh) or set BIN" >&2; exit 1; }
done
command -v mpirun >/dev/null || { echo "ntp-failover: mpirun is missing; install openmpi-bin" >&2; exit 1; }
if [ "$kill_after" -lt "$save_every" ] || [ "$kill_after" -ge "$steps" ]; then
  echo "ntp-failover: KILL_AFTER=$kill_after must be at least SAVE_EVERY=$save_every (a checkpoint before the failure) and below STEPS=$steps" >&2
  exit 1
fi

# Root in containers, more ranks than cores, shared memory only.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl="${OMPI_MCA_btl:-self,vader}"
export OMPI_MCA_btl_vader_single_copy_mechanism=none
# Quicker start-up: ob1, not UCX, and no PCI scan (test/lit.cfg.py).
export OMPI_MCA_pml="${OMPI_MCA_pml:-ob1}"
export HWLOC_COMPONENTS="${HWLOC_COMPONENTS:--pci,-linuxio}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
mpirun=(mpirun --oversubscribe)

rm -rf "$work" && mkdir -p "$work"
cd "$work"
echo '{"mesh": {"dp": 2, "tp": 4}}' > uniform.json
# The degraded replica's degree: 3 where the heads allow it (all 7 ranks
# left), else 2 (6 of them); its batch share follows its degree.
if [ "$heads" = 4 ]; then
  "$bin/partition-gen" --preset gpt2-tiny --batch 6 -o model.mlir
  echo '{"replicas": [{"tp": 4, "batch_share": 2}, {"tp": 2, "batch_share": 1}]}' > degraded.json
  left=6 degraded="tp 4 (2/3 of the batch) + tp 2 (1/3)"
elif [ $((heads % 12)) = 0 ]; then
  "$bin/partition-gen" --preset gpt2-tiny --hidden $((heads * 8)) --heads "$heads" --batch 14 -o model.mlir
  echo '{"replicas": [{"tp": 4, "batch_share": 4}, {"tp": 3, "batch_share": 3}]}' > degraded.json
  left=7 degraded="tp 4 (4/7 of the batch) + tp 3 (3/7)"
else
  echo "ntp-failover: HEADS=$heads: use 4 (gpt2-tiny; resume on 6 ranks) or a multiple of 12 (tp 4 and tp 3 divide it; resume on 7)" >&2
  exit 1
fi
"$bin/partition-compile" model.mlir --plan uniform.json -o uniform.ptp
"$bin/partition-compile" model.mlir --plan degraded.json -o degraded.ptp
"$bin/partition-compile" model.mlir -o one.ptp
run=(--steps "$steps" --lr "$lr" --eval-every 0)

echo "== 1-2. dp 2 x tp 4 on 8 ranks, checkpoint every $save_every steps; rank $kill_rank killed after step $kill_after"
python3 "$ranks_py" fault --signal KILL --rank "$kill_rank" --after-step "$kill_after" --max-seconds 120 -- \
  "${mpirun[@]}" -n 8 "$bin/partition-run" uniform.ptp "${run[@]}" \
  --save ckpt --save-every "$save_every" --metrics-out uniform.jsonl > failure.log 2>&1 || {
  cat failure.log; echo "ntp-failover: the failed job did not stop as it should" >&2; exit 1; }
grep -E '^step ' failure.log | tail -n 2
grep -E 'exited on signal|timed out' failure.log || true
echo "the job stopped: rank $kill_rank lost after step $kill_after; $(grep -E '^(exit|ranks left)' failure.log | paste -sd ' ' -)"

# The kill follows the "step N" line through mpirun's buffered output; on a
# busy machine a short job can reach its last steps (and their checkpoint)
# first. Then the resumed runs train past STEPS, so that there is still a
# curve to compare.
last=$(grep -oE '^step +[0-9]+' failure.log | tail -n 1 | grep -oE '[0-9]+$' || true)
if [ "${last:-0}" -ge $((steps - 1)) ]; then
  steps=$((steps + steps - kill_after))
  run=(--steps "$steps" --lr "$lr" --eval-every 0)
  echo "(the job reached step $last before the kill: the resumed runs train to step $steps)"
fi

echo "== 3. resume on $left ranks: replicas $degraded"
"$bin/partition-run" --nproc "$left" degraded.ptp "${run[@]}" --resume ckpt \
  --save ckpt-ntp --metrics-out ntp.jsonl | tee ntp.log | grep -E '^(resumed|partition-run|step)' | sed -n '1,3p;$p'

echo "== 4. the same checkpoint on one device"
"$bin/partition-run" one.ptp "${run[@]}" --resume ckpt --metrics-out one.jsonl > one.log
python3 "$ranks_py" close ntp.jsonl one.jsonl --rtol 1e-4
echo "ntp-failover: the degraded replicas continue the single-device curve from the checkpoint of step $(grep -o 'at step [0-9]*' ntp.log | grep -o '[0-9]*$') to step $steps; files in $work"
