#!/bin/bash
# Issue 15 check, MLP only, 60 rounds: before the house refactor (b791e9f) vs now (risk off), alternating,
# background experiments paused.
PIDS=$(pgrep -f "ganlab.train experiment=pacgan" | tr '\n' ' ')
kill -STOP $PIDS
trap "kill -CONT $PIDS" EXIT
export OMP_NUM_THREADS=1
PY=/work/main/.venv/bin/python
ARGS="--models mlp --repeats 60 --no-ablation --no-monitor-variant"
for round in 1 2 3; do
  (cd /work/wt/before && PYTHONPATH=/work/wt/before $PY tests/benchmarks/bench_loop.py $ARGS --out /work/exp/bench/mlp_before_$round) > /work/exp/bench/mlp_before_$round.txt 2>&1
  (cd /work/main && PYTHONPATH=/work/main $PY tests/benchmarks/bench_loop.py $ARGS --set monitor.risk.enabled=false --out /work/exp/bench/mlp_now_$round) > /work/exp/bench/mlp_now_$round.txt 2>&1
done
