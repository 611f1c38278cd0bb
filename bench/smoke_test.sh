#!/usr/bin/env bash
# Smoke test of the benchmark harness: every scenario, a tiny window, two reps,
# two locks (this project's rwsem and std::shared_mutex), then check_results.py
# asserts that every run did operations with no torn read and that the derived
# numbers (balanced rate, gate, rates, wait percentiles, Jain, CPU time and
# its per-thread spread, reps, summaries) agree with the per-thread counts.
# No timing thresholds. Then the check is shown able to fail: each doctored
# copy of the results breaks one rule and must be rejected.
set -euo pipefail
bin="$TEST_SRCDIR/rwsem/bench/lockbench"
check="$TEST_SRCDIR/rwsem/bench/check_results.py"
out="${TEST_TMPDIR:-$(mktemp -d)}/bench-out"
args=(--locks "rwsem,std-shared" --reps 2)
"$bin" --quick --window 0.1 "${args[@]}" --threads 2,4 --min-time 0.01 --out "$out" >"$out.stdout"
for want in "Balanced rate B" "Iterations Min/Mean/Max = " "CPU time Min/Max " "# of Threads" "x class"; do
  grep -q "$want" "$out.stdout" || { echo "no '$want' in the tables"; exit 1; }
done
python3 "$check" "$out/results.json" "${args[@]}"

# doctor STATEMENT: run STATEMENT (Python, on `res` and `run`, the first
# measured run of scenario 1) over a copy of the results; the check must fail.
doctor() {
  python3 - "$out/results.json" "$out/doctored.json" "$1" <<'EOF'
import json, sys
res = json.load(open(sys.argv[1]))
run = next(r for r in res["runs"] if r["scenario"] == 1 and not r["skipped"])
exec(sys.argv[3])
json.dump(res, open(sys.argv[2], "w"))
EOF
  if python3 "$check" "$out/doctored.json" "${args[@]}" >"$out/doctored.log"; then
    echo "check_results accepted a doctored file: $1"
    exit 1
  fi
}
doctor 'run["balanced_kops"] = 2 * run["rate_kops"]'
doctor 'run["gate"] = not run["gate"]'
doctor 'run["write_kops"] += 1'
doctor 'run["wait_ns"]["W"]["p50"] = run["wait_ns"]["W"]["p999"] + 1'
doctor 'run["jain"] = 0'
doctor 'run["cpu_s"] = 0'
doctor 'run["thread_cpu_s"][0] += 1'
doctor 'run["by_role"]["R"]["cpu_min_max"] = 1.5'
doctor 'res["runs"].remove(run)'
echo "bench smoke test passed"
