#!/usr/bin/env python3
"""Validates a lockbench results.json (used by //bench:bench_smoke_test).

    check_results.py results.json [--locks a,b] [--scenarios 1,2,...]

Fails (exit 1) unless: the file parses; every listed lock has a run in every
listed timed scenario (1-5); every run that was not skipped did iterations,
reports every thread with the scenario's roles, and no reader saw a torn write; scenario 6 has
a positive read and write latency for the floor and each lock (read may be
absent for exclusive-only locks). No timing thresholds.
"""
import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--locks", default="")
    ap.add_argument("--scenarios", default="1,2,3,4,5,6")
    a = ap.parse_args()
    with open(a.results) as f:
        res = json.load(f)
    errors = []
    for key in ("machine", "config", "locks", "runs", "latency"):
        if key not in res:
            errors.append("missing key %r" % key)
    if errors:
        print("\n".join(errors))
        return 1
    locks = [l for l in a.locks.split(",") if l] or [l["name"] for l in res["locks"]]
    scen = [int(s) for s in a.scenarios.split(",") if s]
    excl = {l["name"]: l["exclusive_only"] for l in res["locks"]}
    for s in [s for s in scen if s != 6]:
        for lock in locks:
            runs = [r for r in res["runs"] if r["scenario"] == s and r["lock"] == lock]
            if not runs:
                errors.append("scenario %d: no run for %s" % (s, lock))
            for r in runs:
                where = "scenario %d %s %d threads" % (s, lock, r["threads"])
                if r["skipped"]:
                    if not (excl.get(lock) and s == 3):
                        errors.append(where + ": skipped")
                    continue
                if r["total_ops"] <= 0:
                    errors.append(where + ": no iterations")
                # Every thread reports; the counts add up. (A thread may do 0
                # iterations in a tiny window on a loaded machine: not an error.)
                counts = [x + y for x, y in zip(r["reads"], r["writes"])]
                if len(counts) != r["threads"] or len(r["roles"]) != r["threads"]:
                    errors.append(where + ": per-thread counts missing")
                if sum(counts) != r["total_ops"]:
                    errors.append(where + ": per-thread counts do not add up")
                want = {1: "RW", 2: "W", 3: "R", 4: "W", 5: "M"}[s]
                if set(r["roles"]) != set(want):
                    errors.append(where + ": roles %r, want %r" % (r["roles"], want))
                if r["violations"]:
                    errors.append(where + ": %d torn reads" % r["violations"])
                if r["elapsed_s"] <= 0:
                    errors.append(where + ": no elapsed time")
    if 6 in scen:
        lat = {l["lock"]: l for l in res["latency"]}
        for lock in ["atomic-floor"] + locks:
            l = lat.get(lock)
            if l is None:
                errors.append("latency: no entry for %s" % lock)
                continue
            if not (l["write_ns"] or 0) > 0:
                errors.append("latency: %s has no write latency" % lock)
            if not excl.get(lock) and not (l["read_ns"] or 0) > 0:
                errors.append("latency: %s has no read latency" % lock)
    if errors:
        print("check_results: FAILED\n  " + "\n  ".join(errors))
        return 1
    print("check_results: %d runs, %d latency entries OK" % (len(res["runs"]), len(res["latency"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
