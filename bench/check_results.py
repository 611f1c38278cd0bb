#!/usr/bin/env python3
"""Validates a lockbench results.json (used by //bench:bench_smoke_test).

    check_results.py results.json [--locks a,b] [--scenarios 1,2,...] [--reps N]

Fails (exit 1) unless the file parses and is consistent: every listed lock
has --reps runs (default: config.reps) of every listed timed scenario at each
thread count, the lock order rotated between reps; every run that was not
skipped did operations, reports every thread with the scenario's roles, saw
no torn read, and its derived numbers agree with its per-thread counts
(balanced rate B <= total rate, reads/s + writes/s = total rate, the gate
false exactly when some role's Min/Max < 0.25, p50 <= p99 <= p99.9, Jain's
index in (0, 1], CPU time > 0); the summaries agree with their reps; every
cell has a load measurement and every timed scenario a ceiling; scenario 6
has the floors and a positive read and write latency per lock (read absent
for exclusive-only locks). No timing thresholds.
"""
import argparse
import json
import sys

ROLES = {1: "RW", 2: "W", 3: "R", 4: "W", 5: "M", 7: "RW"}
REL = 1e-6  # lockbench prints 9 significant digits


def close(a, b, abs_eps=1e-3):
    return abs(a - b) <= abs_eps + REL * max(abs(a), abs(b))


def role_ops(run):
    ops = {}
    for role, r, w in zip(run["roles"], run["reads"], run["writes"]):
        ops.setdefault(role, []).append(r + w)
    return ops


def min_max(xs):
    return min(xs) / max(xs) if max(xs) else 0.0


def check_run(r, scenario, gate, err):
    """The derived numbers of one run against its per-thread counts."""
    counts = [x + y for x, y in zip(r["reads"], r["writes"])]
    if len(counts) != r["threads"] or len(r["roles"]) != r["threads"]:
        err("per-thread counts missing")
        return
    if r["total_ops"] <= 0:
        err("no operations")
    if sum(counts) != r["total_ops"]:
        err("per-thread counts do not add up")
    if set(r["roles"]) != set(ROLES[scenario]):
        err("roles %r, want %r" % (r["roles"], ROLES[scenario]))
    if r["violations"]:
        err("%d torn reads" % r["violations"])
    if r["elapsed_s"] <= 0:
        err("no elapsed time")
        return
    rate = r["total_ops"] / r["elapsed_s"] / 1000
    if not close(r["rate_kops"], rate):
        err("rate_kops %g, counts say %g" % (r["rate_kops"], rate))
    if not close(r["read_kops"] + r["write_kops"], r["rate_kops"]):
        err("reads/s %g + writes/s %g != total rate %g" % (r["read_kops"], r["write_kops"],
                                                          r["rate_kops"]))
    ops = role_ops(r)
    b = r["threads"] * min(sum(v) / len(v) for v in ops.values()) / r["elapsed_s"] / 1000
    if not close(r["balanced_kops"], b):
        err("balanced_kops %g, counts say %g" % (r["balanced_kops"], b))
    if r["balanced_kops"] > r["rate_kops"] * (1 + REL) + 1e-3:
        err("B %g > total rate %g" % (r["balanced_kops"], r["rate_kops"]))
    ratios = {role: min_max(v) for role, v in ops.items()}
    if r["gate"] != all(q >= gate for q in ratios.values()):
        err("gate %s but Min/Max %s" % (r["gate"], ratios))
    for role, q in ratios.items():
        if not close(r["by_role"][role]["min_max"], q, 1e-6):
            err("role %s Min/Max %g, counts say %g" % (role, r["by_role"][role]["min_max"], q))
    if set(r["wait_ns"]) != set(ops):
        err("wait percentiles for roles %s, want %s" % (sorted(r["wait_ns"]), sorted(ops)))
    for role, w in r["wait_ns"].items():
        if w["samples"] and not w["p50"] <= w["p99"] <= w["p999"]:
            err("role %s waits p50 %s p99 %s p99.9 %s out of order" % (
                role, w["p50"], w["p99"], w["p999"]))
    if not 0 < r["jain"] <= 1 + REL:
        err("Jain's index %s outside (0, 1]" % r["jain"])
    if not r["cpu_s"] > 0:
        err("CPU time %s" % r["cpu_s"])
    cpu = r["thread_cpu_s"]
    if len(cpu) != r["threads"] or min(cpu) < 0:
        err("per-thread CPU times %s" % cpu)
        return
    if not close(sum(cpu), r["cpu_s"], 1e-6):
        err("per-thread CPU times add up to %g, cpu_s says %g" % (sum(cpu), r["cpu_s"]))
    for role in ops:
        mine = [c for c, x in zip(cpu, r["roles"]) if x == role]
        q = min(mine) / max(mine) if max(mine) > 0 else None
        got = r["by_role"][role]["cpu_min_max"]
        if (q is None) != (got is None) or (q is not None and not close(got, q, 1e-6)):
            err("role %s CPU Min/Max %s, per-thread times say %s" % (role, got, q))
    if r["ctx_switches"] < 0:
        err("negative context switches")


def check_summary(s, reps, want_reps, err):
    if s["reps"] != want_reps:
        err("summary counts %d reps, want %d" % (s["reps"], want_reps))
    bs = sorted(r["balanced_kops"] for r in reps)
    if not bs:
        return
    med = [r for r in reps if r["rep"] == s["median_rep"]]
    if not med:
        err("summary's median rep %s has no run" % s["median_rep"])
        return
    if not close(s["median_balanced_kops"], bs[(len(bs) - 1) // 2]) or not close(
            med[0]["balanced_kops"], s["median_balanced_kops"]):
        err("median B %g is not the median rep's" % s["median_balanced_kops"])
    if not (close(s["min_balanced_kops"], bs[0]) and close(s["max_balanced_kops"], bs[-1])):
        err("B spread %g..%g, reps say %g..%g" % (s["min_balanced_kops"], s["max_balanced_kops"],
                                                  bs[0], bs[-1]))
    if s["starves"] != (not med[0]["gate"]):
        err("starves %s but the median rep's gate is %s" % (s["starves"], med[0]["gate"]))


def check_cell_order(res, runs, locks, err):
    """Rep r of a (scenario, threads) cell starts at lock r mod L."""
    first = {}
    for r in runs:
        if r["order"] == 0:
            first[(r["scenario"], r["threads"], r["rep"])] = r["lock"]
    for (s, n, rep), lock in sorted(first.items()):
        if lock != locks[rep % len(locks)]:
            err("scenario %d %d threads rep %d starts at %s, want %s" % (
                s, n, rep, lock, locks[rep % len(locks)]))


def check_latency(res, locks, excl, errors):
    lat = {l["lock"]: l for l in res["latency"]}
    for lock, kinds in [("atomic-floor", ("read", "write")), ("atomic-floor-rmw", ("write",))] + [
            (l, ("write",) if excl.get(l) else ("read", "write")) for l in locks]:
        l = lat.get(lock)
        if l is None:
            errors.append("latency: no entry for %s" % lock)
            continue
        for kind in kinds:
            if not (l[kind + "_ns"] or 0) > 0:
                errors.append("latency: %s has no %s latency" % (lock, kind))
        if lock in locks and l["write_class_ratio"] is None:
            errors.append("latency: %s has no same-class write ratio" % lock)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--locks", default="")
    ap.add_argument("--scenarios", default="1,2,3,4,5,6,7")
    ap.add_argument("--reps", type=int, default=0, help="default: the file's config.reps")
    a = ap.parse_args()
    with open(a.results) as f:
        res = json.load(f)
    errors = []
    for key in ("machine", "config", "locks", "cells", "ceilings", "summaries", "runs",
                "latency"):
        if key not in res:
            errors.append("missing key %r" % key)
    if errors:
        print("check_results: FAILED\n  " + "\n  ".join(errors))
        return 1
    cfg = res["config"]
    want_reps = a.reps or cfg["reps"]
    if cfg["reps"] != want_reps:
        errors.append("config.reps %d, want %d" % (cfg["reps"], want_reps))
    all_locks = [l["name"] for l in res["locks"]]
    locks = [l for l in a.locks.split(",") if l] or all_locks
    scen = [int(s) for s in a.scenarios.split(",") if s]
    excl = {l["name"]: l["exclusive_only"] for l in res["locks"]}
    summ = {(s["scenario"], s["lock"], s["threads"]): s for s in res["summaries"]}
    cells = {(c["scenario"], c["threads"]) for c in res["cells"]}
    ceilings = {c["scenario"]: c for c in res["ceilings"]}
    for s in [s for s in scen if s != 6]:
        c = ceilings.get(s)
        if not c or not c["rate_kops"] > 0:
            errors.append("scenario %d: no physical ceiling" % s)
        for lock in locks:
            runs = [r for r in res["runs"] if r["scenario"] == s and r["lock"] == lock]
            if not runs:
                errors.append("scenario %d: no run for %s" % (s, lock))
            for n in sorted({r["threads"] for r in runs}):
                where = "scenario %d %s %d threads" % (s, lock, n)
                reps = [r for r in runs if r["threads"] == n]
                if sorted(r["rep"] for r in reps) != list(range(want_reps)):
                    errors.append(where + ": reps %s, want 0..%d" % (
                        sorted(r["rep"] for r in reps), want_reps - 1))
                if (s, n) not in cells:
                    errors.append(where + ": no load check before the cell")
                measured = [r for r in reps if not r["skipped"]]
                if len(measured) != len(reps) and not (excl.get(lock) and s == 3):
                    errors.append(where + ": skipped")
                for r in measured:
                    check_run(r, s, cfg["gate_min_max"],
                              lambda m, w="%s rep %d" % (where, r["rep"]): errors.append(w + ": " + m))
                sm = summ.get((s, lock, n))
                if not sm:
                    errors.append(where + ": no summary")
                elif not sm["skipped"]:
                    check_summary(sm, measured, want_reps, lambda m: errors.append(where + ": " + m))
    check_cell_order(res, [r for r in res["runs"] if r["scenario"] in scen], all_locks,
                     errors.append)
    for c in res["cells"]:
        if c["busy"] is not None and not 0 <= c["busy"] <= 1:
            errors.append("cell %s: busy fraction %s" % (c, c["busy"]))
        if c["suspect"] != (c["busy"] is not None and c["busy"] > cfg["busy_threshold"]):
            errors.append("cell %s: suspect flag disagrees with its load" % c)
    if res.get("suspect_cells") != sum(c["suspect"] for c in res["cells"]):
        errors.append("suspect_cells %s does not count the suspect cells" % res.get("suspect_cells"))
    if 6 in scen:
        check_latency(res, locks, excl, errors)
    if errors:
        print("check_results: FAILED\n  " + "\n  ".join(errors))
        return 1
    print("check_results: %d runs, %d summaries, %d cells, %d latency entries OK" % (
        len(res["runs"]), len(res["summaries"]), len(res["cells"]), len(res["latency"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
