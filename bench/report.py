#!/usr/bin/env python3
"""Turns lockbench output into the issue-8 report: target check and PNG plots.

    report.py OUT_DIR        (reads OUT_DIR/results.json, OUT_DIR/events.json)

Writes into OUT_DIR:
  targets.txt            the issue's targets for the rwsem entries: met/missed
  results.json           gains "rwsem_events" (the runs of events.json), if any
  s1-throughput.png      scenario 1: total locking rate vs threads, every lock
  s1-spread.png          scenario 1: per-thread iterations min/mean/max, readers
                         and writers, every lock and thread count
  s2-, s3-, s5-throughput.png, s4-spread.png   the same for the other scenarios
Plots need gnuplot (Debian gnuplot-nox, pngcairo terminal). Standard library
only otherwise. Every plot title carries the machine description.
"""
import json
import math
import os
import subprocess
import sys

RWSEM = ["rwsem", "rwsem-nospin"]
# The locks the mixed-rate target compares against (both pthread kinds).
PEERS = ["pthread", "pthread-wpref", "std-shared", "absl"]


def runs_of(res, scenario):
    return [r for r in res["runs"] if r["scenario"] == scenario and not r["skipped"]]


def find(res, scenario, lock, threads):
    for r in res["runs"]:
        if r["scenario"] == scenario and r["lock"] == lock and r["threads"] == threads:
            return r
    return None


def ratio(spread):
    """Min/Max per-thread iterations; 0 if the whole group was starved."""
    if not spread:
        return float("nan")
    return spread["min"] / spread["max"] if spread["max"] else 0.0


def starves_writers(run):
    """Writers starved: Min/Max < 0.25, or writers did < 1% of the readers'
    iterations per thread (every writer equally starved has Min/Max ~1)."""
    w, r = run["writers"], run["readers"]
    return ratio(w) < 0.25 or (r and r["mean"] > 0 and w["mean"] < 0.01 * r["mean"])


def fmt(x, p=3):
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else "%.*f" % (p, x)


def targets(res):
    out = []
    say = out.append
    say("Issue 8 targets, rwsem entries (compared build: lock events off)")
    say("machine: " + res["machine"]["line"])
    say("window: %.2f s per timed run" % res["config"]["window_s"])
    locks = {l["name"] for l in res["locks"]}
    lat = {l["lock"]: l for l in res.get("latency", [])}

    say("\n1. Uncontended lock+unlock within 1.3x of the bare-atomic floor (scenario 6)")
    for lock in RWSEM:
        l = lat.get(lock)
        if not l or "atomic-floor" not in lat:
            continue
        for kind in ("read", "write"):
            r = l[kind + "_ratio"]
            say("   %-13s %-5s %7s ns vs floor %7s ns = %5sx  %s" % (
                lock, kind, fmt(l[kind + "_ns"], 2), fmt(lat["atomic-floor"][kind + "_ns"], 2),
                fmt(r, 2), "met" if r is not None and r <= 1.3 else "MISSED"))

    say("\n2. Mixed (scenario 1) total rate >= best of %s, per thread count" % ", ".join(
        p for p in PEERS if p in locks))
    threads = sorted({r["threads"] for r in runs_of(res, 1)})
    for lock in RWSEM:
        for n in threads:
            me = find(res, 1, lock, n)
            peers = [(find(res, 1, p, n), p) for p in PEERS if p in locks]
            peers = [(r["rate_kops"], p) for r, p in peers if r and not r["skipped"]]
            if not me or not peers:
                continue
            best, who = max(peers)
            say("   %-13s %3d threads: %10.0f kops/s vs best %10.0f (%s) = %5.2fx  %s" % (
                lock, n, me["rate_kops"], best, who, me["rate_kops"] / best if best else 0,
                "met" if me["rate_kops"] >= best else "MISSED"))

    say("\n3. Writer Iterations Min/Max >= 0.25 in scenario 1 where default pthread_rwlock")
    say("   starves writers (its writer Min/Max < 0.25, or writer mean < 1% of reader mean)")
    for n in threads:
        p = find(res, 1, "pthread", n)
        if not p:
            continue
        pr = ratio(p["writers"])
        starving = starves_writers(p)
        for lock in RWSEM:
            me = find(res, 1, lock, n)
            if not me:
                continue
            mr = ratio(me["writers"])
            verdict = ("met" if mr >= 0.25 else "MISSED") if starving else "(pthread not starving)"
            say("   %3d threads: pthread writer min/max %s, writer/reader mean %s; %-13s %s  %s" % (
                n, fmt(pr), fmt(p["writers"]["mean"] / p["readers"]["mean"]
                               if p["readers"]["mean"] else float("nan"), 4),
                lock, fmt(mr), verdict))

    say("\n4. Scenario 4 (5 us sleeping writers) Iterations Min/Max >= 0.5")
    for lock in RWSEM:
        for r in sorted(runs_of(res, 4), key=lambda r: r["threads"]):
            if r["lock"] != lock:
                continue
            q = ratio(r["writers"])
            say("   %-13s %3d threads: min/mean/max %d/%.0f/%d = %s  %s" % (
                lock, r["threads"], r["writers"]["min"], r["writers"]["mean"],
                r["writers"]["max"], fmt(q), "met" if q >= 0.5 else "MISSED"))
    return "\n".join(out) + "\n"


def gp_quote(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def plot_throughput(res, scenario, title, path, gp):
    runs = runs_of(res, scenario)
    if not runs:
        return None
    locks = [l["name"] for l in res["locks"] if any(r["lock"] == l["name"] for r in runs)]
    dat = path[:-4] + ".dat"
    with open(dat, "w") as f:
        for lock in locks:
            f.write("# %s\n" % lock)
            for r in sorted((r for r in runs if r["lock"] == lock), key=lambda r: r["threads"]):
                f.write("%d %.3f\n" % (r["threads"], max(r["rate_kops"], 1e-3)))
            f.write("\n\n")
    threads = sorted({r["threads"] for r in runs})
    gp.append("set output %s" % gp_quote(path))
    gp.append("set title %s noenhanced" % gp_quote(
        "%s\n%s" % (title, res["machine"]["line"])))
    gp.append("unset multiplot; set size 1,1; set origin 0,0")
    gp.append("set logscale xy; set xlabel 'threads'; set ylabel 'total locking rate (kops/s)'")
    gp.append("set xtics (%s)" % ", ".join('"%d" %d' % (t, t) for t in threads))
    gp.append("set xrange [%g:%g]; set yrange [*:*]" % (threads[0] / 1.3, threads[-1] * 1.3))
    gp.append("set key outside right top noenhanced; set grid")
    gp.append("plot " + ", ".join(
        "%s index %d using 1:2 with linespoints lw 2 title %s" % (gp_quote(dat), i, gp_quote(l))
        for i, l in enumerate(locks)))
    return path


def plot_spread(res, scenario, title, path, gp, panels):
    runs = runs_of(res, scenario)
    if not runs:
        return None
    locks = [l["name"] for l in res["locks"] if any(r["lock"] == l["name"] for r in runs)]
    threads = sorted({r["threads"] for r in runs})
    dat = path[:-4] + ".dat"
    width = 0.8
    with open(dat, "w") as f:
        for panel in panels:
            for li, lock in enumerate(locks):
                f.write("# %s %s\n" % (panel, lock))
                for ti, n in enumerate(threads):
                    r = find(res, scenario, lock, n)
                    if not r or r["skipped"] or not r[panel]:
                        continue
                    s = r[panel]
                    x = ti + (li - (len(locks) - 1) / 2) * width / len(locks)
                    # log scale: a starved thread (0 iterations) is drawn at 1.
                    f.write("%.4f %.3f %d %d\n" % (x, max(s["mean"], 1), max(s["min"], 1),
                                                   max(s["max"], 1)))
                f.write("\n\n")
    gp.append("set output %s" % gp_quote(path))
    gp.append("unset title; unset logscale; set logscale y")
    gp.append("set xtics (%s)" % ", ".join('"%d" %d' % (n, i) for i, n in enumerate(threads)))
    gp.append("set xrange [-0.6:%g]; set yrange [0.8:*]" % (len(threads) - 0.4))
    gp.append("set xlabel 'threads'; set grid")
    gp.append("set key outside right top noenhanced")
    gp.append("set multiplot layout %d,1 title %s noenhanced" % (
        len(panels), gp_quote("%s\n%s" % (title, res["machine"]["line"]))))
    for pi, panel in enumerate(panels):
        gp.append("set ylabel %s" % gp_quote(
            "%s: iterations per thread\n(bar min..max, point mean)" % panel))
        gp.append("plot " + ", ".join(
            "%s index %d using 1:2:3:4 with yerrorbars ps 0.8 lw 1.5 title %s" % (
                gp_quote(dat), pi * len(locks) + li, gp_quote(l))
            for li, l in enumerate(locks)))
    gp.append("unset multiplot")
    return path


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "bench-out"
    path = os.path.join(out, "results.json")
    with open(path) as f:
        res = json.load(f)
    ev_path = os.path.join(out, "events.json")
    if os.path.exists(ev_path):
        with open(ev_path) as f:
            ev = json.load(f)
        res["rwsem_events"] = {"machine": ev["machine"], "config": ev["config"],
                               "runs": ev["runs"], "latency": ev.get("latency", [])}
        with open(path, "w") as f:
            json.dump(res, f, indent=1)
            f.write("\n")
    text = targets(res)
    with open(os.path.join(out, "targets.txt"), "w") as f:
        f.write(text)
    sys.stdout.write(text)

    gp = ["set terminal pngcairo size 1200,700 font 'sans,10'"]
    # Distinct colour and point shape for up to 12 locks (gnuplot's default
    # palette repeats after 8).
    colours = ["#9400d3", "#009e73", "#56b4e9", "#e69f00", "#c0b000", "#0072b2",
               "#e51e10", "#000000", "#8b4513", "#ff69b4", "#808080", "#00c0c0"]
    for i, c in enumerate(colours):
        gp.append("set linetype %d lc rgb '%s' pt %d" % (i + 1, c, [1, 2, 4, 6, 8, 10, 12, 3, 5, 7, 9, 11][i]))
    made = []
    for sc, title in ((1, "Scenario 1: mixed, equal readers and writers"),
                      (2, "Scenario 2: writers only"),
                      (3, "Scenario 3: readers only"),
                      (5, "Scenario 5: mostly readers (10000 reads per write)")):
        made.append(plot_throughput(res, sc, title + " - total locking rate",
                                    os.path.join(out, "s%d-throughput.png" % sc), gp))
    gp.append("set terminal pngcairo size 1200,900 font 'sans,10'")
    made.append(plot_spread(res, 1, "Scenario 1: per-thread iteration spread",
                            os.path.join(out, "s1-spread.png"), gp, ["readers", "writers"]))
    gp.append("set terminal pngcairo size 1200,600 font 'sans,10'")
    made.append(plot_spread(res, 4, "Scenario 4: 5 us sleeping writers, per-thread spread",
                            os.path.join(out, "s4-spread.png"), gp, ["writers"]))
    made = [m for m in made if m]
    script = os.path.join(out, "plots.gp")
    with open(script, "w") as f:
        f.write("\n".join(gp) + "\n")
    try:
        subprocess.run(["gnuplot", script], check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        print("report.py: gnuplot failed (%s); no plots" % e, file=sys.stderr)
        return 1
    print("plots: " + " ".join(made))
    return 0


if __name__ == "__main__":
    sys.exit(main())
