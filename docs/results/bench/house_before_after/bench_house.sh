#!/bin/bash
# Issue 15 check: bench_loop overhead of the loop before the house refactor (b791e9f) and now, same session,
# alternating, with the background experiments paused (SIGSTOP) while it runs.
set -x
PIDS=$(pgrep -f "ganlab.train experiment=pacgan" | tr '\n' ' ')
kill -STOP $PIDS
export OMP_NUM_THREADS=1
PY=/work/main/.venv/bin/python
ARGS="--models mlp dcgan --dataset digits --repeats 20 --no-ablation"
for round in 1 2; do
  (cd /work/wt/before && PYTHONPATH=/work/wt/before $PY tests/benchmarks/bench_loop.py $ARGS --out /work/exp/bench/before_$round) > /work/exp/bench/before_$round.txt 2>&1
  (cd /work/main && PYTHONPATH=/work/main $PY tests/benchmarks/bench_loop.py $ARGS --set monitor.risk.enabled=false --out /work/exp/bench/now_$round) > /work/exp/bench/now_$round.txt 2>&1
done
(cd /work/main && PYTHONPATH=/work/main $PY tests/benchmarks/bench_loop.py $ARGS --out /work/exp/bench/now_risk) > /work/exp/bench/now_risk.txt 2>&1
kill -CONT $PIDS
