#!/usr/bin/env python3
"""Turns lockbench output into the report: target checks and PNG plots.

    report.py OUT_DIR        (reads OUT_DIR/results.json, OUT_DIR/events.json)

Writes into OUT_DIR:
  targets.txt            the targets for the rwsem entries, each met or MISSED
                         with its numbers, and a met/missed count
  results.json           gains "rwsem_events" (the runs of events.json), if any
  s1-throughput.png      scenario 1: median balanced rate B vs threads, bars
                         min..max over reps, starving cells left out
  s1-spread.png          scenario 1: per-thread iterations min/mean/max of the
                         median rep, readers and writers, every lock and count
  s2-, s3-, s5-throughput.png, s4-spread.png   the same for other scenarios
Plots need gnuplot (Debian gnuplot-nox, pngcairo terminal). Standard library
only otherwise. Every plot title carries the machine description.
"""
import json
import math
import os
import subprocess
import sys

RWSEM = ["rwsem", "rwsem-nospin"]
# The external locks the rwsem entries must beat (the project's own qrwlock
# and mutex are not peers; mutex has a target of its own).
PEERS = ["pthread", "pthread-wpref", "std-shared", "absl", "tbb-queuing", "tbb-spin",
         "boost-shared"]
GATE = 0.25


def fmt(x, p=3):
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else "%.*f" % (p, x)


def kops(x):
    return "-" if x is None else "{:,.0f}".format(x)


class Report:
    """The summaries of one results.json, and the tally of verdicts."""

    def __init__(self, res):
        self.res = res
        self.summ = {(s["scenario"], s["lock"], s["threads"]): s for s in res["summaries"]}
        self.cells = {(c["scenario"], c["threads"]): c for c in res.get("cells", [])}
        self.locks = [l["name"] for l in res["locks"]]
        self.met = self.missed = 0
        self.lines = []

    def say(self, s=""):
        self.lines.append(s)

    def verdict(self, ok):
        if ok:
            self.met += 1
            return "met"
        self.missed += 1
        return "MISSED"

    def get(self, scenario, lock, threads):
        s = self.summ.get((scenario, lock, threads))
        return s if s and not s["skipped"] and s["reps"] else None

    def threads(self, scenario):
        return sorted({t for (sc, _, t) in self.summ if sc == scenario})

    def suspect(self, scenario, threads):
        c = self.cells.get((scenario, threads))
        return "  (machine busy before the cell: suspect)" if c and c["suspect"] else ""

    @staticmethod
    def b(s):
        """The median B a comparison uses: a starving cell counts as 0."""
        return 0.0 if s["starves"] else s["median_balanced_kops"]

    @staticmethod
    def minmax(s):
        return " ".join("%s %s" % (r, fmt(v)) for r, v in sorted(s["median_min_max"].items()))


def beat_peers(rep):
    for scenario, lock in [(sc, lock) for sc in (1, 5, 2) for lock in RWSEM]:
        for n in rep.threads(scenario):
            me = rep.get(scenario, lock, n)
            peers = [(rep.b(s), p) for p in PEERS for s in [rep.get(scenario, p, n)] if s]
            if not me or not peers:
                continue
            best, who = max(peers)
            ok = rep.b(me) >= best and not me["starves"]
            rep.say("   %-13s s%d %3d threads: B %10s%s vs best peer %10s (%s) = %5sx; Min/Max %s  %s%s" % (
                lock, scenario, n, kops(me["median_balanced_kops"]),
                " starves" if me["starves"] else "", kops(best), who,
                fmt(rep.b(me) / best if best else float("inf"), 2), rep.minmax(me),
                rep.verdict(ok), rep.suspect(scenario, n)))


def near_ceiling(rep):
    for scenario, lock in [(sc, lock) for sc in (1, 5, 2) for lock in RWSEM]:
        for n in rep.threads(scenario):
            me = rep.get(scenario, lock, n)
            if not me or n < 4:
                continue
            ratio = me["ceiling_ratio"]
            if me["starves"]:
                ratio = 0.0
            rep.say("   %-13s s%d %3d threads: B / ceiling = %s  %s%s" % (
                lock, scenario, n, fmt(ratio), rep.verdict(ratio is not None and ratio >= 0.5),
                rep.suspect(scenario, n)))


def above_mutex(rep):
    for lock in RWSEM:
        for n in rep.threads(1):
            me, mx = rep.get(1, lock, n), rep.get(1, "mutex", n)
            if not me or not mx:
                continue
            rep.say("   %-13s %3d threads: B %10s%s vs mutex %10s%s  %s%s" % (
                lock, n, kops(me["median_balanced_kops"]), " starves" if me["starves"] else "",
                kops(mx["median_balanced_kops"]), " starves" if mx["starves"] else "",
                rep.verdict(rep.b(me) > rep.b(mx)), rep.suspect(1, n)))


def sleep_fairness(rep):
    for lock in RWSEM:
        for n in rep.threads(4):
            me = rep.get(4, lock, n)
            if not me:
                continue
            q = me["median_min_max"].get("W")
            rep.say("   %-13s %3d threads: writer Min/Max %s  %s%s" % (
                lock, n, fmt(q), rep.verdict(q is not None and q >= 0.5), rep.suspect(4, n)))


def latency(rep):
    lat = {l["lock"]: l for l in rep.res.get("latency", [])}
    floor, cls = lat.get("atomic-floor"), lat.get("atomic-floor-rmw")
    if not floor or not cls:
        return
    for lock in RWSEM:
        l = lat.get(lock)
        if not l:
            continue
        r, w = l["read_ratio"], l["write_class_ratio"]
        rep.say("   %-13s read  %7s ns vs read floor %7s ns = %5sx (<= 1.05)  %s" % (
            lock, fmt(l["read_ns"], 2), fmt(floor["read_ns"], 2), fmt(r, 2),
            rep.verdict(r is not None and r <= 1.05)))
        rep.say("   %-13s write %7s ns vs same-class floor %7s ns = %5sx (<= 1.1), vs bare pair "
                "%sx  %s" % (lock, fmt(l["write_ns"], 2), fmt(cls["write_ns"], 2), fmt(w, 2),
                             fmt(l["write_ratio"], 2), rep.verdict(w is not None and w <= 1.1)))


def ceiling_table(rep):
    ceil = {c["scenario"]: c["rate_kops"] for c in rep.res.get("ceilings", [])}
    for sc in sorted(ceil):
        rep.say("   scenario %d, ceiling %s kops/s:" % (sc, kops(ceil[sc])))
        for lock in RWSEM:
            cells = []
            for n in rep.threads(sc):
                s = rep.get(sc, lock, n)
                if s:
                    cells.append("%d: %s" % (n, "starves" if s["starves"] else fmt(s["ceiling_ratio"])))
            if cells:
                rep.say("     %-13s %s" % (lock, ", ".join(cells)))


def targets(res):
    rep = Report(res)
    say = rep.say
    cfg = res["config"]
    say("Targets for the rwsem entries (compared build: lock events off)")
    say("machine: " + res["machine"]["line"])
    say("window: %.2f s per timed run, %d reps per cell; B = balanced rate (median over reps)"
        % (cfg["window_s"], cfg["reps"]))
    say("gate: every role's per-thread ops Min/Max >= %g; \"starves\": %s; a starving cell's B "
        "counts as 0" % (cfg["gate_min_max"], cfg["median_rule"]))
    say("machine load: %d of %d cells started with the machine more than %d%% busy"
        % (res.get("suspect_cells", 0), len(res.get("cells", [])), 100 * cfg["busy_threshold"]))
    peers = [p for p in PEERS if p in rep.locks]
    say("external peers measured: " + (", ".join(peers) or "none"))

    sections = [
        ("1. B >= the best external peer's B, and no role starving (Min/Max >= %g)" % GATE,
         beat_peers),
        ("2. B >= 0.5 x the physical ceiling from 4 threads up (scenarios 1, 5, 2)",
         near_ceiling),
        ("3. Scenario 1: B above the project's own mutex", above_mutex),
        ("4. Scenario 4 (5 us sleeping writers): writer Min/Max >= 0.5 (median rep)",
         sleep_fairness),
        ("5. Scenario 6: read within 1.05x of the read floor, write within 1.1x of the "
         "same-class write floor", latency),
    ]
    for title, check in sections:
        say("\n" + title)
        before = len(rep.lines)
        check(rep)
        if len(rep.lines) == before:
            say("   (not measured in this run: no rwsem entry, peer or scenario to compare)")
    say("\nB / physical ceiling per scenario (no target; a single thread on the floor lock)")
    ceiling_table(rep)
    say("\nsummary: %d met, %d missed" % (rep.met, rep.missed))
    return "\n".join(rep.lines) + "\n"


def gp_quote(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def median_run(res, summary):
    for r in res["runs"]:
        if (r["scenario"], r["lock"], r["threads"], r["rep"]) == (
                summary["scenario"], summary["lock"], summary["threads"], summary["median_rep"]):
            return r
    return None


def measured(res, scenario):
    return [s for s in res["summaries"]
            if s["scenario"] == scenario and not s["skipped"] and s["reps"]]


def plot_throughput(res, scenario, title, path, gp):
    summ = measured(res, scenario)
    order = [l["name"] for l in res["locks"]]
    locks = [l for l in order if any(s["lock"] == l for s in summ)]
    shown = [l for l in locks if any(s["lock"] == l and not s["starves"] for s in summ)]
    hidden = [l for l in locks if l not in shown]
    if not shown:
        if hidden:
            print("report.py: no %s: every cell starves" % os.path.basename(path), file=sys.stderr)
        return None
    dat = path[:-4] + ".dat"
    with open(dat, "w") as f:
        for lock in shown:
            f.write("# %s: threads, median B, min B, max B (kops/s)\n" % lock)
            for s in sorted((s for s in summ if s["lock"] == lock and not s["starves"]),
                            key=lambda s: s["threads"]):
                f.write("%d %.3f %.3f %.3f\n" % (s["threads"], max(s["median_balanced_kops"], 1e-3),
                                                 max(s["min_balanced_kops"], 1e-3),
                                                 max(s["max_balanced_kops"], 1e-3)))
            f.write("\n\n")
    threads = sorted({s["threads"] for s in summ})
    note = "starving cells left out"
    if hidden:
        note += "; starving everywhere: " + ", ".join(hidden)
    gp.append("set output %s" % gp_quote(path))
    gp.append("set title %s noenhanced" % gp_quote("%s\n%s" % (title, res["machine"]["line"])))
    gp.append("unset multiplot; set size 1,1; set origin 0,0")
    gp.append("set logscale xy; set xlabel 'threads'")
    gp.append("set ylabel 'balanced rate B (kops/s): median, bars min..max over reps'")
    gp.append("set xtics (%s)" % ", ".join('"%d" %d' % (t, t) for t in threads))
    gp.append("set xrange [%g:%g]; set yrange [*:*]" % (threads[0] / 1.3, threads[-1] * 1.3))
    gp.append("set key outside right top noenhanced title %s; set grid" % gp_quote(note))
    gp.append("plot " + ", ".join(
        "%s index %d using 1:2:3:4 with yerrorlines lw 2 title %s" % (gp_quote(dat), i, gp_quote(l))
        for i, l in enumerate(shown)))
    return path


def plot_spread(res, scenario, title, path, gp, roles):
    summ = measured(res, scenario)
    if not summ:
        return None
    locks = [l["name"] for l in res["locks"] if any(s["lock"] == l["name"] for s in summ)]
    threads = sorted({s["threads"] for s in summ})
    by_cell = {(s["lock"], s["threads"]): median_run(res, s) for s in summ}
    dat = path[:-4] + ".dat"
    width = 0.8
    with open(dat, "w") as f:
        for role in roles:
            for li, lock in enumerate(locks):
                f.write("# %s %s\n" % (role, lock))
                for ti, n in enumerate(threads):
                    r = by_cell.get((lock, n))
                    s = r and r["by_role"].get(role)
                    if not s:
                        continue
                    x = ti + (li - (len(locks) - 1) / 2) * width / len(locks)
                    # log scale: a starved thread (0 iterations) is drawn at 1.
                    f.write("%.4f %.3f %d %d\n" % (x, max(s["mean"], 1), max(s["min"], 1),
                                                   max(s["max"], 1)))
                f.write("\n\n")
    names = {"R": "readers", "W": "writers", "M": "threads"}
    gp.append("set output %s" % gp_quote(path))
    gp.append("unset title; unset logscale; set logscale y")
    gp.append("set xtics (%s)" % ", ".join('"%d" %d' % (n, i) for i, n in enumerate(threads)))
    gp.append("set xrange [-0.6:%g]; set yrange [0.8:*]" % (len(threads) - 0.4))
    gp.append("set xlabel 'threads'; set grid")
    gp.append("set key outside right top noenhanced notitle")
    gp.append("set multiplot layout %d,1 title %s noenhanced" % (
        len(roles), gp_quote("%s\n%s" % (title, res["machine"]["line"]))))
    for ri, role in enumerate(roles):
        gp.append("set ylabel %s" % gp_quote(
            "%s: iterations per thread, median rep\n(bar min..max, point mean)" % names[role]))
        gp.append("plot " + ", ".join(
            "%s index %d using 1:2:3:4 with yerrorbars ps 0.8 lw 1.5 title %s" % (
                gp_quote(dat), ri * len(locks) + li, gp_quote(l))
            for li, l in enumerate(locks)))
    gp.append("unset multiplot")
    return path


def merge_events(out, path, res):
    ev_path = os.path.join(out, "events.json")
    if not os.path.exists(ev_path):
        return
    with open(ev_path) as f:
        ev = json.load(f)
    res["rwsem_events"] = {k: ev.get(k, []) for k in
                           ("machine", "config", "cells", "summaries", "runs", "latency")}
    with open(path, "w") as f:
        json.dump(res, f, indent=1)
        f.write("\n")


def plots(res, out):
    gp = ["set terminal pngcairo size 1200,700 font 'sans,10'"]
    # Distinct colour and point shape for up to 12 locks (gnuplot's default
    # palette repeats after 8).
    colours = ["#9400d3", "#009e73", "#56b4e9", "#e69f00", "#c0b000", "#0072b2",
               "#e51e10", "#000000", "#8b4513", "#ff69b4", "#808080", "#00c0c0"]
    for i, c in enumerate(colours):
        gp.append("set linetype %d lc rgb '%s' pt %d" % (
            i + 1, c, [1, 2, 4, 6, 8, 10, 12, 3, 5, 7, 9, 11][i]))
    reps = res["config"]["reps"]
    made = []
    for sc, title in ((1, "Scenario 1: mixed, equal readers and writers"),
                      (2, "Scenario 2: writers only"),
                      (3, "Scenario 3: readers only"),
                      (5, "Scenario 5: mostly readers (10000 reads per write)")):
        made.append(plot_throughput(
            res, sc, "%s - balanced rate B, median of %d reps" % (title, reps),
            os.path.join(out, "s%d-throughput.png" % sc), gp))
    gp.append("set terminal pngcairo size 1200,900 font 'sans,10'")
    made.append(plot_spread(res, 1, "Scenario 1: per-thread iteration spread",
                            os.path.join(out, "s1-spread.png"), gp, ["R", "W"]))
    gp.append("set terminal pngcairo size 1200,600 font 'sans,10'")
    made.append(plot_spread(res, 4, "Scenario 4: 5 us sleeping writers, per-thread spread",
                            os.path.join(out, "s4-spread.png"), gp, ["W"]))
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


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "bench-out"
    path = os.path.join(out, "results.json")
    with open(path) as f:
        res = json.load(f)
    merge_events(out, path, res)
    text = targets(res)
    with open(os.path.join(out, "targets.txt"), "w") as f:
        f.write(text)
    sys.stdout.write(text)
    return plots(res, out)


if __name__ == "__main__":
    sys.exit(main())
