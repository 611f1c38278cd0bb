#!/usr/bin/env bash
# Smoke test of the benchmark harness: every scenario, a tiny window, two
# locks (this project's rwsem and std::shared_mutex), then check_results.py
# asserts that every run did iterations, no reader saw a torn write, the
# latency table has numbers, and results.json parses. No timing thresholds.
set -euo pipefail
bin="$TEST_SRCDIR/rwsem/bench/lockbench"
check="$TEST_SRCDIR/rwsem/bench/check_results.py"
out="${TEST_TMPDIR:-$(mktemp -d)}/bench-out"
"$bin" --quick --window 0.2 --locks rwsem,std-shared --threads 2,4 \
  --min-time 0.01 --out "$out" >"$out.stdout"
grep -q "Iterations Min/Mean/Max = " "$out.stdout" || { echo "no Min/Mean/Max lines"; exit 1; }
grep -q "# of Threads" "$out.stdout" || { echo "no locking rate table"; exit 1; }
python3 "$check" "$out/results.json" --locks rwsem,std-shared --scenarios 1,2,3,4,5,6
echo "bench smoke test passed"
