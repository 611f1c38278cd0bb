#!/usr/bin/env python3
"""Per-cell results and the qualification report for ci/qualify.

ci/qualify stays a thin loop over bazel invocations; everything that reads
test results lives here (Python 3 standard library only):

  report.py collect ...   after one cell's `bazel test`: reads its Build Event
                          Protocol file, copies each test's test.xml/test.log
                          into qualify-out/cells/<cell>/, buckets testcases by
                          layout and writes cell.json; prints the progress line
  report.py eta ...       prints the estimate for cells not yet run
  report.py layouts       reads `corpus_test --gtest_list_tests` on stdin and
                          prints the layout names of its typed tests
  report.py report ...    writes report.md, report.json and report.html
  report.py shard ...     prints the cells of shard I/N (ci/qualify --shard)
  report.py merge --out=DIR SHARD_DIR...
                          one report from the N shard outputs; refuses
                          (exit 2) shards that are not the parts of one run
  report.py durations REPORT_JSON...
                          refreshes the committed ci/cell_durations.json
  report.py compare A.json B.json
                          diffs the cell ids and statuses of two reports

Layouts are never listed here: a typed test is named `Suite/<kName>.Test` by
conformance/lock_types.h, so the part after the suite's last '/' is the
layout (or lock type). Tests without one go to the "common" bucket.
"""

import argparse
import datetime
import glob
import hashlib
import html
import json
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import urllib.parse
import xml.etree.ElementTree as ET

COMMON = "common"
STATUS_ORDER = {"FAIL": 0, "PASS": 1, "NOTRUN": 2}
SANITIZERS = ["none", "tsan", "asan", "ubsan"]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "toolchains"))
import targets as target_table  # noqa: E402  (the table of targets)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from testlog import STATE_RE, parse_log, seed_base_problems  # noqa: E402  (the one reader of test logs)
from skips import expected_why  # noqa: E402  (which skips the suite expects)

# The model checker's scenarios, whose random ones a full qualification
# moves to a fresh seed base (ci/qualify, RWSEM_MC_SEED_BASE).
MODEL_TEST_LABEL = "//conformance/model:model_test"
SEED_BASE_RE = re.compile(r"--test_env=RWSEM_MC_SEED_BASE=([0-9]+)")


def layout_of(test):
    """'RwsemCore/merged.WakeBatch' -> 'merged'; 'LockSize.Foo' -> common.

    Value-parameterized names ('Prefix/Suite.Test/3') and Bazel's own
    testcase for non-gtest tests ('conformance/x_test') have a '/' after the
    dot (or no dot) and are common too."""
    suite, dot, name = test.partition(".")
    if dot and "/" in suite and "/" not in name:
        return suite.rsplit("/", 1)[1]
    return COMMON


# ---------------------------------------------------------------- parsing


def parse_xml(path):
    """gtest's JUnit XML: test -> outcome, or None if Bazel wrote the XML
    itself (non-gtest test, or a gtest binary that died before writing)."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return None
    if root.get("name") != "AllTests":
        return None
    out = {}
    for tc in root.iter("testcase"):
        name = "%s.%s" % (tc.get("classname", ""), tc.get("name", ""))
        if tc.find("failure") is not None or tc.find("error") is not None:
            out[name] = "failed"
        elif tc.get("status") == "notrun" or tc.get("result") in ("skipped", "suppressed") \
                or tc.find("skipped") is not None:
            out[name] = "skipped"
        else:
            out[name] = "passed"
    return out


def read_bep(path):
    """Test results of one bazel invocation: label -> dict."""
    results, summaries, build_failed = {}, {}, []
    try:
        fh = open(path)
    except OSError:
        return results, summaries, build_failed
    for line in fh:
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        eid = ev.get("id", {})
        if "testResult" in eid and "testResult" in ev:
            label = eid["testResult"]["label"]
            tr = ev["testResult"]
            files = {o["name"]: urllib.parse.unquote(urllib.parse.urlparse(o["uri"]).path)
                     for o in tr.get("testActionOutput", []) if o.get("uri", "").startswith("file:")}
            info = tr.get("executionInfo", {})
            results.setdefault(label, []).append({
                "status": tr.get("status", "UNKNOWN"),
                "files": files,
                "cached": bool(tr.get("cachedLocally") or info.get("cachedRemotely")),
                "seconds": int(tr.get("testAttemptDurationMillis", 0)) / 1000.0,
                "shard": eid["testResult"].get("shard", 1),
                "attempt": eid["testResult"].get("attempt", 1),
            })
        elif "testSummary" in eid and "testSummary" in ev:
            summaries[eid["testSummary"]["label"]] = ev["testSummary"].get("overallStatus", "UNKNOWN")
        elif "targetCompleted" in eid and ev.get("completed", {}).get("success") is False:
            build_failed.append(eid["targetCompleted"]["label"])
        elif "targetCompleted" in eid and "aborted" in ev:
            build_failed.append(eid["targetCompleted"]["label"])
    return results, summaries, build_failed


def excerpt(lines, head=15, tail=60):
    if len(lines) <= head + tail:
        return lines
    return lines[:head] + ["... (%d lines omitted) ..." % (len(lines) - head - tail)] + lines[-tail:]


def shell_quote(s):
    if re.fullmatch(r"[A-Za-z0-9_@%+=:,./*-]+", s):
        return s
    return "'" + s.replace("'", "'\\''") + "'"


def replay_command(flags, label, test, seeds):
    words = ["bazel", "test"] + flags.split()
    words = [w for w in words if not w.startswith("--test_filter=")]
    if test and test != label:
        words.append("--test_filter=" + test)
    if seeds:
        words.append("--test_env=RWSEM_SEED=" + seeds[0])
    words.append(label)
    return " ".join(shell_quote(w) for w in words)


# ---------------------------------------------------------------- collect


def collect(a):
    cell_dir = os.path.join(a.out, "cells", a.cell)
    os.makedirs(cell_dir, exist_ok=True)
    results, summaries, build_failed = read_bep(a.bep)
    layouts = {}
    failures = []
    targets = []
    model_runs = []  # (status, log path, lines) per shard and attempt of MODEL_TEST_LABEL

    def bucket(name):
        return layouts.setdefault(name, {"status": "NOTRUN", "run": 0, "failed": 0, "skipped": 0,
                                         "failed_tests": [], "seeds": []})

    def fail_target(label, entry, how, target_status, state, lines, seeds, log_path):
        """A failure of a whole test target, not of one testcase: counted in
        the common bucket as `entry`."""
        b = bucket(COMMON)
        b["run"] += 1
        b["failed"] += 1
        b["status"] = "FAIL"
        b["failed_tests"].append(entry)
        failures.append({
            "test": label, "layout": COMMON, "label": label, "how": how,
            "target_status": target_status, "state": state, "excerpt": excerpt(lines, 5, 60),
            "seeds": seeds, "replay": replay_command(a.flags, label, "", seeds),
            "log": os.path.relpath(log_path, a.out),
        })

    for label in sorted(results):
        for r in results[label]:
            sub = label.lstrip("/").replace(":", "/")
            if r["shard"] != 1 or r["attempt"] != 1:
                sub += "/shard%d_attempt%d" % (r["shard"], r["attempt"])
            dest = os.path.join(cell_dir, "testlogs", sub)
            os.makedirs(dest, exist_ok=True)
            for name, src in r["files"].items():
                if name in ("test.log", "test.xml") and os.path.exists(src):
                    shutil.copyfile(src, os.path.join(dest, name))
            log_path = os.path.join(dest, "test.log")
            log_tests, order, seeds, log_lines = parse_log(log_path)
            xml = parse_xml(os.path.join(dest, "test.xml"))
            if xml:
                outcomes = dict(xml)
                # A test gtest started but whose end the log never shows
                # (crash, timeout) is not in the XML; the log knows it.
                for t in order:
                    if t not in outcomes:
                        outcomes[t] = log_tests[t]["outcome"]
            else:
                outcomes = {t: log_tests[t]["outcome"] for t in order}
            passed_status = r["status"] == "PASSED"
            targets.append({"label": label, "status": r["status"], "cached": r["cached"],
                            "seconds": r["seconds"], "tests": len(outcomes), "seeds": seeds,
                            "log": os.path.relpath(log_path, a.out)})
            if not outcomes and xml is None:
                # Not a gtest binary (sh_test): one common entry. (A gtest
                # binary whose filter matched nothing ran no tests.)
                outcomes = {label: "passed" if passed_status else "failed"}
                log_tests = {label: {"lines": log_lines, "seeds": seeds}}
            any_failed = False
            for test, outcome in outcomes.items():
                b = bucket(layout_of(test))
                for s in seeds:
                    if s not in b["seeds"]:
                        b["seeds"].append(s)
                reason = log_tests.get(test, {}).get("skip_reason", "")
                if outcome == "skipped" and expected_why(reason) is not None:
                    b["skipped"] += 1
                    continue
                b["run"] += 1
                if b["status"] == "NOTRUN":
                    b["status"] = "PASS"
                if outcome in ("failed", "crashed", "skipped"):
                    any_failed = True
                    b["failed"] += 1
                    b["status"] = "FAIL"
                    b["failed_tests"].append(test)
                    lines = log_tests.get(test, {}).get("lines") or log_lines
                    tseeds = log_tests.get(test, {}).get("seeds") or seeds
                    failures.append({
                        "test": test, "layout": layout_of(test), "label": label,
                        "how": {"crashed": "crashed or timed out",
                                "skipped": "skipped, and ci/skips.py does not expect it: "
                                + (reason or "(no message)")}.get(outcome, "failed"),
                        "target_status": r["status"],
                        "state": [l for l in lines if STATE_RE.search(l)][:40],
                        "excerpt": excerpt(lines),
                        "seeds": tseeds,
                        "replay": replay_command(a.flags, label, test if test != label else "", tseeds),
                        "log": os.path.relpath(log_path, a.out),
                    })
            if not passed_status and not any_failed:
                # Every testcase passed but the test did not (a sanitizer
                # report at exit, a crash after the last test, a timeout
                # between tests): never let that read as a pass.
                fail_target(label, "%s (%s)" % (label, r["status"]),
                            "test target %s after its testcases passed" % r["status"], r["status"],
                            [l for l in log_lines if STATE_RE.search(l)][-40:], log_lines, seeds,
                            log_path)
            if label == MODEL_TEST_LABEL:
                model_runs.append((r["status"], log_path, log_lines))
    flags = a.flags or ""
    seed_base = SEED_BASE_RE.search(flags)
    if model_runs and all(st == "PASSED" for st, _, _ in model_runs) and seed_base \
            and int(seed_base.group(1)):
        # The run claims fresh model-checker executions: check that every
        # random scenario (over all shards of the test) started at the base.
        # Under a test filter (--layout) the run may hold no random scenario.
        problems = seed_base_problems([l for _, _, lines in model_runs for l in lines],
                                      int(seed_base.group(1)),
                                      expect_some="--test_filter" not in flags)
        if problems:
            fail_target(MODEL_TEST_LABEL, "%s (seed base not applied)" % MODEL_TEST_LABEL,
                        "RWSEM_MC_SEED_BASE=%s not applied to every random scenario"
                        % seed_base.group(1), "PASSED", problems[:40], problems, [],
                        model_runs[0][1])
    bazel_errors = []
    for label in sorted(set(build_failed) - set(results)):
        bazel_errors.append("%s did not build" % label)
    if a.rc != 0 and not failures:
        try:
            out_lines = open(a.bazel_log, errors="replace").read().splitlines()
        except (OSError, TypeError):
            out_lines = []
        errs = [l for l in out_lines if re.search(r"^(ERROR|FAIL)|error:|FAILED|TIMEOUT", l)]
        bazel_errors.append("bazel test exited with status %d" % a.rc)
        b = bucket(COMMON)
        b["status"] = "FAIL"
        b["failed"] += 1
        b["failed_tests"].append("bazel (exit %d)" % a.rc)
        failures.append({"test": "bazel test (exit %d)" % a.rc, "layout": COMMON, "label": "",
                         "how": "build or infrastructure failure", "target_status": "",
                         "state": errs[:40], "excerpt": excerpt(out_lines, 5, 60), "seeds": [],
                         "replay": replay_command(a.flags, a.what, "", []),
                         "log": os.path.relpath(a.bazel_log, a.out) if a.bazel_log else ""})
    status = "PASS" if a.rc == 0 and not failures else "FAIL"
    cell = {
        "id": a.cell, "target": a.target, "sanitizer": a.sanitizer, "spin": a.spin,
        "layout_filter": a.layout or None, "profile": a.profile, "stress_scale": a.scale,
        "flags": a.flags, "what": a.what,
        "command": "bazel test %s %s" % (a.flags, a.what), "rc": a.rc,
        "status": status, "seconds": a.seconds,
        "started": a.started, "bazel_log": os.path.relpath(a.bazel_log, a.out) if a.bazel_log else "",
        "layouts": dict(sorted(layouts.items(), key=lambda kv: (kv[0] == COMMON, kv[0]))),
        "targets": targets, "failures": failures, "bazel_errors": bazel_errors,
        "tests_run": sum(b["run"] for b in layouts.values()),
        "tests_failed": sum(b["failed"] for b in layouts.values()),
        "tests_cached": sum(1 for t in targets if t["cached"]),
    }
    with open(os.path.join(cell_dir, "cell.json"), "w") as f:
        json.dump(cell, f, indent=1)
    record_duration(a, cell)
    lays = " ".join("%s=%s" % (k, v["status"]) for k, v in cell["layouts"].items()) or "no tests"
    line = "%-30s %s %5ds  %s" % (a.cell, status, a.seconds, lays)
    if cell["tests_cached"]:
        line += "  (%d test results from cache)" % cell["tests_cached"]
    if a.remaining is not None:
        line += "  | " + eta_text(a, a.remaining.split())
    print(line)
    for fl in failures[:5]:
        print("    FAIL %s (%s)" % (fl["test"], fl["how"]))
        for l in fl["state"][:6]:
            print("      " + l.strip()[:160])
        print("      replay: " + fl["replay"])


# ---------------------------------------------------------------- ETA


def durations_paths(a):
    return [os.path.join(a.out, "durations.json"), os.path.join(a.cache_dir, "durations.json")]


def load_durations(a):
    merged = {}
    for p in reversed(durations_paths(a)):  # qualify-out wins over the cache dir
        try:
            merged.update(json.load(open(p)))
        except (OSError, ValueError):
            pass
    return merged


def duration_key(a, cell):
    return "%s|scale=%s|layout=%s" % (cell, a.scale, a.layout or "*")


def record_duration(a, cell):
    d = load_durations(a)
    d[duration_key(a, a.cell)] = a.seconds
    for p in durations_paths(a):
        try:
            os.makedirs(os.path.dirname(p), exist_ok=True)
            tmp = p + ".tmp"
            with open(tmp, "w") as f:
                json.dump(d, f, indent=1, sort_keys=True)
            os.replace(tmp, p)
        except OSError:
            pass


def eta_text(a, remaining):
    if not remaining:
        return "done"
    d = load_durations(a)
    suffix = "|scale=%s|layout=%s" % (a.scale, a.layout or "*")
    same = [v for k, v in d.items() if k.endswith(suffix)]
    default = sum(same) / len(same) if same else 90
    known = 0
    total = 0
    for c in remaining:
        v = d.get(duration_key(a, c))
        if v is not None:
            known += 1
            total += v
        else:
            total += default
    return "%d cell(s) left, ETA ~%s (%d of them timed in an earlier run)" % (
        len(remaining), fmt_secs(total), known)


def short_commit(c):
    return c[:12] + ("-dirty" if c.endswith("-dirty") else "")


def fmt_secs(s):
    s = int(s)
    if s < 60:
        return "%ds" % s
    if s < 3600:
        return "%dm%02ds" % (s // 60, s % 60)
    return "%dh%02dm" % (s // 3600, (s % 3600) // 60)


def eta(a):
    print(eta_text(a, a.remaining.split()))


# ---------------------------------------------------------------- layouts


def layouts_from_listing(_a):
    names, suite = [], None
    for line in sys.stdin:
        if not line.startswith(" ") and line.strip():
            suite = line.split()[0].rstrip(".")
            if "/" in suite:
                n = suite.rsplit("/", 1)[1]
                if n not in names:
                    names.append(n)
    print(" ".join(names))


# ---------------------------------------------------------------- shards
#
# `ci/qualify --shard I/N` runs one of N disjoint parts of the selected
# cells, so N machines together run the matrix; `merge` builds one report
# from their outputs.
#
# The split must come out the same on every machine, or the shards would
# overlap and leave cells out. Each machine's own ETA cache
# (~/.cache/rwsem-qualify, qualify-out/durations.json) holds what that
# machine happened to run, so it differs between machines; the split reads
# only the durations table committed in the repository (ci/cell_durations.json)
# and the per-kind defaults below, both fixed by the commit. The table is
# refreshed from a full run's report.json with `report.py durations`.

TABLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cell_durations.json")
TABLE_NAME = "ci/cell_durations.json"
# Seconds for a cell the table does not time, by sanitizer: rough figures
# for this matrix (a TSan cell runs several times slower than a plain one,
# ASan and UBSan in between). Only their ratios matter when no cell is timed.
DEFAULT_CELL_SECONDS = {"none": 60, "ubsan": 90, "asan": 120, "tsan": 240}
DEFAULT_OTHER_SECONDS = 90


class Refused(Exception):
    """A bad request: the message says why; the exit status is 2."""


def table_key(cell, scale, layout):
    return "%s|scale=%s|layout=%s" % (cell, scale, layout or "*")


def load_table(path):
    """The committed durations table: (key -> seconds, sha256 of the file)."""
    try:
        raw = open(path, "rb").read()
    except OSError:
        return {}, None  # no table at this commit: every cell gets its default
    try:
        seconds = json.loads(raw.decode())["seconds"]
    except (ValueError, KeyError, TypeError) as e:
        raise Refused("%s is not a durations table (%s)" % (path, e))
    return seconds, hashlib.sha256(raw).hexdigest()


def estimate(table, cell, scale, layout):
    """Seconds for one cell: its time at this scale and layout filter, else
    its time at this scale without a layout filter, else the default for
    its sanitizer."""
    for key in (table_key(cell, scale, layout), table_key(cell, scale, "")):
        if key in table:
            return int(round(float(table[key])))
    parts = cell.split("+")
    san = parts[1] if len(parts) == 3 else ""
    return DEFAULT_CELL_SECONDS.get(san, DEFAULT_OTHER_SECONDS)


def parse_shard(text):
    m = re.fullmatch(r"([0-9]+)/([0-9]+)", text or "")
    if not m:
        raise Refused("--shard '%s': expected I/N, e.g. --shard 2/3 for the second of three shards" % text)
    i, n = int(m.group(1)), int(m.group(2))
    if n < 1 or not 1 <= i <= n:
        raise Refused("--shard '%s': need 1 <= I <= N (got I=%d, N=%d)" % (text, i, n))
    return i, n


def split(cells, table, scale, layout, n):
    """Greedy longest-processing-time: cells from the longest estimate down
    (ties by cell id, so the input order does not matter), each to the shard
    with the least load so far (ties: the lowest shard number). Within a
    shard, cells keep the order of `cells`. Returns (shards, loads, est)."""
    if len(set(cells)) != len(cells):
        raise Refused("the cell list names a cell twice")
    if n > len(cells):
        raise Refused("N=%d shards, but the filters select only %d cell(s)" % (n, len(cells)))
    est = {c: estimate(table, c, scale, layout) for c in cells}
    loads = [0] * n
    members = [[] for _ in range(n)]
    for c in sorted(cells, key=lambda c: (-est[c], c)):
        k = min(range(n), key=lambda k: (loads[k], k))
        loads[k] += est[c]
        members[k].append(c)
    rank = {c: i for i, c in enumerate(cells)}
    return [sorted(m, key=rank.get) for m in members], loads, est


def shard_cmd(a):
    try:
        i, n = parse_shard(a.shard)
        table, sha = load_table(a.table)
        cells = a.cells.split()
        try:
            shards, loads, est = split(cells, table, a.scale, a.layout, n)
        except Refused as e:
            raise Refused("--shard '%s': %s" % (a.shard, e))
    except Refused as e:
        print("ci/report.py shard: %s" % e, file=sys.stderr)
        return 2
    if a.json:
        json.dump({"count": n, "table_sha256": sha, "estimates": est,
                   "shards": [{"index": k + 1, "cells": m, "load": loads[k]}
                              for k, m in enumerate(shards)]}, sys.stdout, indent=1, sort_keys=True)
        print()
        return 0
    timed = sum(1 for c in cells if table_key(c, a.scale, a.layout) in table
                or table_key(c, a.scale, "") in table)
    print("shard %d/%d: %d of %d cells, estimated %s (all shards: %s; %d of %d cells timed in %s, "
          "the rest by sanitizer defaults)" % (
              i, n, len(shards[i - 1]), len(cells), fmt_secs(loads[i - 1]),
              " ".join(fmt_secs(l) for l in loads), timed, len(cells), TABLE_NAME), file=sys.stderr)
    print(" ".join(shards[i - 1]))
    return 0


def run_meta(a, order):
    """What a merge must find equal between shards, and the shard itself."""
    meta = {"filters": {"target": getattr(a, "filter_target", "") or None,
                        "sanitizer": getattr(a, "filter_sanitizer", "") or None,
                        "spin": getattr(a, "filter_spin", "") or None,
                        "layout": a.layout or None},
            "shard": None}
    if getattr(a, "shard", None):
        i, n = parse_shard(a.shard)
        table, sha = load_table(a.table)
        meta["shard"] = {"index": i, "count": n, "cells": order,
                         "all_cells": a.all_cells.split(), "table_sha256": sha,
                         "table": TABLE_NAME if os.path.abspath(a.table) == TABLE else a.table,
                         "estimates": {c: estimate(table, c, a.scale, a.layout) for c in order}}
    return meta


def run_lines(meta):
    sh, mg = meta.get("shard"), meta.get("merged")
    if sh:
        return ["Shard %d/%d: %d of the %d cells the filters select (split by %s); "
                "`ci/report.py merge` joins the %d shard outputs into one report." % (
                    sh["index"], sh["count"], len(sh["cells"]), len(sh["all_cells"]), sh["table"],
                    sh["count"]), ""]
    if mg:
        out = ["Merged from %d shards run in parallel (wall time above: the slowest shard):" % mg["count"], ""]
        for s in mg["shards"]:
            out.append("- shard %d/%d on %s, %s, %s: %s" % (
                s["index"], mg["count"], s["hostname"], s["date"], fmt_secs(s["wall_seconds"]),
                ", ".join(s["cells"])))
        for w in mg.get("warnings", []):
            out.append("- note: " + w)
        return out + [""]
    return []


def durations_cmd(a):
    """Refresh the committed table from full runs' report.json (or merged
    ones, or a durations.json of the ETA). Only passing cells that ran their tests count: a cached result
    or a failure (a timeout, a build error) says nothing of the usual time.
    Keys of other scales and layout filters stay."""
    try:
        table, _ = load_table(a.table)
    except Refused as e:
        print("ci/report.py durations: %s" % e, file=sys.stderr)
        return 2
    table = dict(table)
    added, skipped = 0, []
    for path in a.reports:
        try:
            rep = json.load(open(path))
            if isinstance(rep, dict) and rep and all("|scale=" in k for k in rep):
                # A durations.json of the ETA (qualify-out/ or ~/.cache/rwsem-qualify/):
                # times of one machine's earlier runs, same keys.
                table.update({k: int(v) for k, v in rep.items()})
                added += len(rep)
                continue
            meta = rep["meta"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            print("ci/report.py durations: %s: neither a report.json nor a durations.json (%s)" % (
                path, e), file=sys.stderr)
            return 2
        for c in rep.get("cells", []):
            if c["status"] != "PASS" or c.get("tests_cached"):
                skipped.append(c["id"])
                continue
            table[table_key(c["id"], meta["stress_scale"], meta.get("layout_filter"))] = int(c["seconds"])
            added += 1
    with open(a.table + ".tmp", "w") as f:
        json.dump({"about": "Cell durations in seconds that ci/qualify --shard balances on. Committed, so "
                            "every machine splits the same way. Refresh from a full run: "
                            "python3 ci/report.py durations qualify-out/report.json",
                   "seconds": dict(sorted(table.items()))}, f, indent=1)
        f.write("\n")
    os.replace(a.table + ".tmp", a.table)
    print("%s: %d cell time(s) updated, %d in the table%s" % (
        a.table, added, len(table),
        "; not timed (failed or cached): " + " ".join(skipped) if skipped else ""))
    return 0


# ---------------------------------------------------------------- merge


def merge_check(dirs, out):
    """Reads the shard outputs and raises Refused unless they are the N
    parts of one split run. Returns [(dir, report.json, {cell id: cell dir})]."""
    if not dirs:
        raise Refused("no shard output directories given")
    shards = []
    for d in dirs:
        if os.path.realpath(d) == os.path.realpath(out):
            raise Refused("--out %s is one of the shard outputs" % out)
        p = os.path.join(d, "report.json")
        try:
            rep = json.load(open(p))
            meta = rep["meta"]
        except (OSError, ValueError, KeyError) as e:
            raise Refused("%s: no readable report.json, not a finished shard output (%s)" % (d, e))
        if not meta.get("shard"):
            raise Refused("%s is not a shard output (its report.json has no shard id; "
                          "run ci/qualify --shard I/N)" % d)
        cells = {}
        for cj in sorted(glob.glob(os.path.join(d, "cells", "*", "cell.json"))):
            try:
                cid = json.load(open(cj))["id"]
            except (OSError, ValueError, KeyError):
                raise Refused("%s: unreadable" % cj)
            cells[cid] = os.path.dirname(cj)
        shards.append((d, rep, cells))

    def same(what, get):
        vals = [(d, get(rep["meta"])) for d, rep, _ in shards]
        if len({json.dumps(v, sort_keys=True) for _, v in vals}) > 1:
            raise Refused("different %s: %s" % (what, "; ".join(
                "%s: %s" % (d, json.dumps(v, sort_keys=True)) for d, v in vals)))

    git = lambda m: m.get("git") or {"head": m.get("commit")}
    same("commits", lambda m: git(m)["head"])
    same("uncommitted changes (same commit, different working trees)",
         lambda m: git(m).get("diff_sha256"))
    for d, rep, _ in shards:
        if git(rep["meta"])["head"] in (None, "?", ""):
            raise Refused("%s: the commit is unknown (not run in a git checkout)" % d)
    same("profiles", lambda m: m["profile"])
    same("stress scales", lambda m: m["stress_scale"])
    same("filters", lambda m: m.get("filters") or {"layout": m.get("layout_filter")})
    same("shard counts N", lambda m: m["shard"]["count"])
    same("selected cell lists", lambda m: m["shard"]["all_cells"])
    same("durations tables (%s)" % TABLE_NAME, lambda m: m["shard"].get("table_sha256"))

    n = shards[0][1]["meta"]["shard"]["count"]
    seen = {}
    for d, rep, _ in shards:
        i = rep["meta"]["shard"]["index"]
        if i in seen:
            raise Refused("duplicate shard %d/%d: %s and %s" % (i, n, seen[i], d))
        if not 1 <= i <= n:
            raise Refused("%s: shard %d/%d is out of range" % (d, i, n))
        seen[i] = d
    missing = [i for i in range(1, n + 1) if i not in seen]
    if missing:
        raise Refused("missing shard(s) %s of %d (given: %s)" % (
            ", ".join("%d/%d" % (i, n) for i in missing), n, ", ".join("%d" % i for i in sorted(seen))))

    owner, ran = {}, {}
    for d, rep, cells in shards:
        sh = rep["meta"]["shard"]
        for c in sh["cells"]:
            if c in owner:
                raise Refused("overlapping cells: %s is planned in shard %d (%s) and shard %d (%s)" % (
                    c, owner[c][0], owner[c][1], sh["index"], d))
            owner[c] = (sh["index"], d)
        for c in cells:
            if c in ran:
                raise Refused("overlapping cells: %s ran in shard %d (%s) and shard %d (%s)" % (
                    c, ran[c][0], ran[c][1], sh["index"], d))
            ran[c] = (sh["index"], d)
            if c not in sh["cells"]:
                raise Refused("overlapping cells: %s has results for %s, which is not one of its cells" % (d, c))
    all_cells = shards[0][1]["meta"]["shard"]["all_cells"]
    if set(owner) != set(all_cells):
        raise Refused("the shards' cells are not the selected cells: missing %s, extra %s" % (
            " ".join(c for c in all_cells if c not in owner) or "none",
            " ".join(c for c in owner if c not in all_cells) or "none"))
    return sorted(shards, key=lambda s: s[1]["meta"]["shard"]["index"])


def merge_env(shards):
    """One environment for the merged report: the shared commit, the
    toolchain versions (a version that differs between shards is listed per
    shard and noted), every machine."""
    metas = [(rep["meta"]["shard"]["index"], rep["meta"]) for _, rep, _ in shards]
    tools, warnings = {}, []
    for k in sorted({k for _, m in metas for k in m["toolchain"]}):
        vals = [(i, m["toolchain"][k]) for i, m in metas if k in m["toolchain"]]
        if len({v for _, v in vals}) == 1:
            tools[k] = vals[0][1]
        else:
            tools[k] = "; ".join("shard %d: %s" % iv for iv in vals)
            warnings.append("%s differs between shards" % k)

    def joined(key):
        out = []
        for _, m in metas:
            v = str(m["machine"].get(key))
            if v not in out:
                out.append(v)
        return ", ".join(out)
    first = metas[0][1]
    env = {"toolchain": tools, "commit": first["commit"], "git": first.get("git"),
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "machine": {"hostname": joined("hostname"), "uname": joined("uname"),
                       "cpus": "+".join(str(m["machine"].get("cpus")) for _, m in metas),
                       "cpu": joined("cpu")}}
    return env, warnings


def merge_extras(shards):
    """The checks outside the matrix: ci/report_test runs in every shard (all
    must pass); ci/faults and ci/remote_cache_test in shard 1 only."""
    extras = {}
    for _, rep, _ in shards:
        i = rep["meta"]["shard"]["index"]
        for name in ("report_test", "faults", "remote_cache"):
            if name not in rep:
                continue
            x = extras.setdefault(name, {"status": "PASS", "exit_status": 0, "shards": {}})
            x["shards"][str(i)] = rep[name]
            if rep[name].get("status", "PASS") != "PASS":
                x["status"] = "FAIL"
                x["exit_status"] = rep[name].get("exit_status", 1)
            for k, v in rep[name].items():
                if k not in ("status", "exit_status"):
                    x.setdefault(k, v)
    return extras


def merge(a):
    try:
        shards = merge_check(a.shard_dirs, a.out)
    except Refused as e:
        print("ci/report.py merge: refused: %s" % e, file=sys.stderr)
        return 2
    first = shards[0][1]["meta"]
    os.makedirs(a.out, exist_ok=True)
    for f in ("report.md", "report.json", "report.html"):
        if os.path.exists(os.path.join(a.out, f)):
            os.remove(os.path.join(a.out, f))
    shutil.rmtree(os.path.join(a.out, "cells"), ignore_errors=True)
    env, warnings = merge_env(shards)
    for d, rep, cells in shards:
        m = rep["meta"]
        for cid, src in cells.items():
            dest = os.path.join(a.out, "cells", cid)
            shutil.copytree(src, dest)
            cj = os.path.join(dest, "cell.json")
            cell = json.load(open(cj))
            cell.update(shard=m["shard"]["index"], machine=m["machine"], toolchain=m["toolchain"],
                        date=m["date"])
            with open(cj, "w") as f:
                json.dump(cell, f, indent=1)
    # Extra files the shard-1 checks wrote (faults.md, remote-cache-test/...).
    for name in ("faults.md", "faults-logs", "remote-cache-test", "remote_cache_test.log"):
        for d, _, _ in shards:
            src = os.path.join(d, name)
            if os.path.exists(src) and not os.path.exists(os.path.join(a.out, name)):
                (shutil.copytree if os.path.isdir(src) else shutil.copyfile)(src, os.path.join(a.out, name))
    n = first["shard"]["count"]
    run = {"filters": first.get("filters"), "shard": None,
           "merged": {"count": n, "all_cells": first["shard"]["all_cells"],
                      "table_sha256": first["shard"].get("table_sha256"), "warnings": warnings,
                      "shards": [{"index": rep["meta"]["shard"]["index"], "dir": d,
                                  "cells": rep["meta"]["shard"]["cells"],
                                  "hostname": rep["meta"]["machine"]["hostname"],
                                  "date": rep["meta"]["date"], "wall_seconds": rep["meta"]["wall_seconds"],
                                  "overall": rep["meta"]["overall"], "command": rep["meta"]["command"]}
                                 for d, rep, _ in shards]}}
    ra = argparse.Namespace(out=a.out, scale=first["stress_scale"], layout=first.get("layout_filter") or "",
                            profile=first["profile"], order=" ".join(first["shard"]["all_cells"]),
                            wall=max(rep["meta"]["wall_seconds"] for _, rep, _ in shards),
                            command="ci/report.py merge --out=%s %s" % (
                                a.out, " ".join(d for d, _, _ in shards)))
    report(ra, env=env, extras=merge_extras(shards), run=run)
    return 0 if json.load(open(os.path.join(a.out, "report.json")))["meta"]["overall"] == "PASS" else 1


def verdicts(path):
    """cell id -> 'STATUS layout=STATUS ...' from a report.json."""
    rep = json.load(open(path))
    return {c["id"]: " ".join([c["status"]] + ["%s=%s" % (l, b["status"]) for l, b in sorted(c["layouts"].items())])
            for c in rep["cells"]}


def compare(a):
    """Cell ids, statuses and per-layout statuses of two reports, as a diff."""
    x, y = verdicts(a.a), verdicts(a.b)
    same = True
    for cid in sorted(set(x) | set(y)):
        if x.get(cid) == y.get(cid):
            print("  %-28s %s" % (cid, x[cid]))
        else:
            same = False
            print("- %-28s %s" % (cid, x.get(cid, "(absent)")))
            print("+ %-28s %s" % (cid, y.get(cid, "(absent)")))
    print("%s: %d cells in %s, %d in %s" % ("same" if same else "DIFFERENT", len(x), a.a, len(y), a.b))
    return 0 if same else 1


# ---------------------------------------------------------------- report


def run_first_line(cmd):
    try:
        out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             universal_newlines=True, timeout=60).stdout
        return out.strip().splitlines()[0] if out.strip() else "?"
    except (OSError, subprocess.SubprocessError):
        return "not available"


def bazel_version():
    try:
        out = subprocess.run(["bazel", "version"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             universal_newlines=True, timeout=120).stdout
    except (OSError, subprocess.SubprocessError):
        return "not available"
    for line in out.splitlines():
        if line.startswith("Build label:"):
            return "bazel " + line.split(":", 1)[1].strip()
    # Debian's bazel-bootstrap is built without a version label.
    pkg = run_first_line(["dpkg-query", "-W", "-f=${Version}", "bazel-bootstrap"])
    return "bazel (Debian bazel-bootstrap %s)" % pkg


def git_state():
    """HEAD, whether tracked files differ from it, and a hash of that
    difference: two runs with the same head and the same hash built the same
    sources (untracked files are not counted, as before)."""
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

    def git(*args):
        return subprocess.run(["git", "-C", repo] + list(args), stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL).stdout
    try:
        head = git("rev-parse", "HEAD").decode().strip() or "?"
        dirty = bool(git("status", "--porcelain", "--untracked-files=no").strip())
        diff = hashlib.sha256(git("diff", "HEAD", "--binary")).hexdigest() if dirty else None
    except OSError:
        head, dirty, diff = "?", False, None
    return {"head": head, "dirty": dirty, "diff_sha256": diff}


def environment(targets):
    tools = {"clang": run_first_line(["clang-19", "--version"]),
             "bazel": bazel_version(),
             "python": platform.python_version()}
    for t in targets:
        # Emulator per target, only to record its version in the report.
        kind, qemu = target_table.emulator(t) if t in target_table.TARGETS else ("native", None)
        if kind == "qemu":
            tools[qemu] = run_first_line([qemu, "--version"])
    git = git_state()
    commit, dirty = git["head"], git["dirty"]
    cpu = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"toolchain": tools, "commit": commit + ("-dirty" if dirty else ""), "git": git,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "machine": {"hostname": socket.gethostname(), "uname": " ".join(platform.uname()),
                        "cpus": os.cpu_count(), "cpu": cpu}}


def column_key(c):
    return (SANITIZERS.index(c[0]) if c[0] in SANITIZERS else 99, 0 if c[1] == "on" else 1)


def load_cells(out, order):
    cells = []
    for p in glob.glob(os.path.join(out, "cells", "*", "cell.json")):
        try:
            cells.append(json.load(open(p)))
        except (OSError, ValueError):
            pass
    rank = {c: i for i, c in enumerate(order)}
    cells.sort(key=lambda c: rank.get(c["id"], len(rank)))
    return cells


def mark(status):
    return {"PASS": "✓", "FAIL": "✗", "NOTRUN": "–"}.get(status, "?")


def lay_status(cell, layout):
    """A layout seen in other cells but not in this one did not run here
    (a crash before its tests, or a target that lacks it)."""
    return cell["layouts"].get(layout, {}).get("status", "NOTRUN")


def report(a, env=None, extras=None, run=None):
    """env, extras and run are given by merge (from the shards' reports);
    a run of ci/qualify has them measured or derived from its arguments."""
    order = a.order.split() if a.order else []
    cells = load_cells(a.out, order)
    targets = []
    for c in cells:
        if c["target"] not in targets:
            targets.append(c["target"])
    columns = sorted({(c["sanitizer"], c["spin"]) for c in cells}, key=column_key)
    grid = {(c["target"], c["sanitizer"], c["spin"]): c for c in cells}
    if env is None:
        env = environment(targets)
    if run is None:
        run = run_meta(a, order)
    layouts = []
    for c in cells:
        for l in c["layouts"]:
            if l not in layouts and l != COMMON:
                layouts.append(l)
    layouts.sort()
    if any(COMMON in c["layouts"] for c in cells):
        layouts.append(COMMON)
    failed = [c for c in cells if c["status"] != "PASS"]
    planned = order or [c["id"] for c in cells]
    missing = [i for i in planned if i not in {c["id"] for c in cells}]
    if extras is None:
        extras = {}
    for name in ("report_test", "faults", "remote_cache"):
        rc = getattr(a, name + "_rc", None)
        if rc is None:
            continue
        p = os.path.join(a.out, name + ".json")
        try:
            extras[name] = json.load(open(p))
        except (OSError, ValueError):
            extras[name] = {"error": "no readable %s" % p} if name != "report_test" else {}
        extras[name]["status"] = "PASS" if rc == 0 else "FAIL"
        extras[name]["exit_status"] = rc
    overall = "PASS" if cells and not failed and not missing else "FAIL"
    for name, e in extras.items():
        if e.get("status", "PASS") != "PASS":
            overall = "FAIL"
    meta = dict(env, profile=a.profile, stress_scale=a.scale, wall_seconds=a.wall,
                layout_filter=a.layout or None, overall=overall, cells_planned=len(planned),
                cells_run=len(cells), cells_failed=len(failed), cells_missing=missing,
                layouts=layouts, command=a.command, **run,
                targets_without_lockfree64=[t for t in targets if t in target_table.TARGETS
                                            and not target_table.TARGETS[t].lockfree64])

    # ---- report.json: per cell, and flat per (cell, layout) records
    records = []
    for c in cells:
        for lname, b in c["layouts"].items():
            records.append({"target": c["target"], "layout": lname, "sanitizer": c["sanitizer"],
                            "spin": c["spin"], "status": b["status"], "tests_run": b["run"],
                            "tests_failed": b["failed"], "failed_tests": b["failed_tests"],
                            "duration_seconds": c["seconds"], "seeds": b["seeds"],
                            "cell": c["id"], "toolchain": c.get("toolchain", env["toolchain"]),
                            "commit": env["commit"], "date": c.get("date", env["date"]),
                            "machine": c.get("machine", env["machine"])})
    with open(os.path.join(a.out, "report.json"), "w") as f:
        json.dump({"meta": meta, "results": records, "cells": cells, **extras}, f, indent=1)

    # ---- report.md
    md = ["# rwsem qualification: %s" % overall, "",
          "Profile `%s`, stress scale %s, %d/%d cells run, %d failed, wall time %s. "
          "Commit `%s`, %s, on %s (%s CPUs)." % (
              a.profile, a.scale, len(cells), len(planned), len(failed), fmt_secs(a.wall),
              short_commit(env["commit"]), env["date"], env["machine"]["hostname"], env["machine"]["cpus"]),
          ""]
    md += run_lines(run)
    if a.layout:
        md += ["Layout filter: only `%s` typed tests ran (`--test_filter=*/%s.*`); "
               "the common bucket holds only tests that ignore gtest filters." % (a.layout, a.layout), ""]
    md += ["Each cell: status, seconds, then per layout (" + ", ".join(layouts) +
           "): ✓ pass, ✗ fail, – not run.", ""]
    md.append("| target | " + " | ".join("%s, spin %s" % col for col in columns) + " |")
    md.append("|---|" + "---|" * len(columns))
    for t in targets:
        row = ["**%s**" % t]
        for (san, spin) in columns:
            c = grid.get((t, san, spin))
            if not c:
                row.append("n/a")
                continue
            lay = " ".join("%s%s" % (l, mark(lay_status(c, l))) for l in layouts)
            row.append("%s %s %ds<br>%s" % ("✅" if c["status"] == "PASS" else "❌", c["status"],
                                            c["seconds"], lay))
        md.append("| " + " | ".join(row) + " |")
    md.append("")
    partial = [t for t in targets if t in target_table.TARGETS and not target_table.TARGETS[t].lockfree64]
    if partial:
        md += ["Partial targets (toolchains/targets.bzl, `lockfree64 = False`): %s. They have no "
               "lock-free 64-bit atomics, so the 64-bit count layouts refuse to compile there "
               "and show as not run; the rest of the corpus runs." % ", ".join(partial), ""]
    if missing:
        md += ["Not run (interrupted or not reached): " + ", ".join(missing), ""]
    if failed:
        md += ["## Failures", ""]
        for c in failed:
            for fl in c["failures"]:
                md.append("- **%s** `%s` (%s, layout %s)" % (c["id"], fl["test"], fl["how"], fl["layout"]))
                for l in fl["state"][:8]:
                    md.append("    - `%s`" % l.strip()[:200].replace("`", "'"))
                md.append("    - replay: `%s`" % fl["replay"])
                if fl.get("log"):
                    md.append("    - log: `%s/%s`" % (a.out, fl["log"]))
        md.append("")
    if "faults" in extras:
        fx = extras["faults"]
        md += ["## Fault kill matrix (ci/faults)", "",
               "%s: %s killed, %s survived; details in `faults.md`." % (
                   fx.get("status", "?"), fx.get("kills", "?"), fx.get("survivors", "?")), ""]
    if "report_test" in extras:
        md += ["Report page check (ci/report_test, headless Chromium on a fixture): %s" %
               extras["report_test"]["status"], ""]
    if "remote_cache" in extras:
        rc = extras["remote_cache"]
        md += ["## Remote cache check (ci/remote_cache_test)", "",
               "%s: %s" % (rc.get("status", "?"), rc.get("summary") or rc.get("error", "")),
               "", "Log: `remote_cache_test.log`, `remote-cache-test/`.", ""]
    md += ["## Environment", ""]
    for k, v in env["toolchain"].items():
        md.append("- %s: %s" % (k, v))
    md.append("- machine: %s" % env["machine"]["uname"])
    md.append("- cpu: %s" % env["machine"]["cpu"])
    md.append("")
    md.append("Per-cell logs: `%s/cells/<cell>/` (bazel.log, testlogs/**/test.log, test.xml)." % a.out)
    with open(os.path.join(a.out, "report.md"), "w") as f:
        f.write("\n".join(md) + "\n")

    # ---- report.html
    with open(os.path.join(a.out, "report.html"), "w") as f:
        f.write(render_html(meta, cells, targets, columns, grid, layouts, extras))
    print("%s: %d/%d cells, %d failed; %s/report.md, report.json, report.html" % (
        overall, len(cells), len(planned), len(failed), a.out))
    return 0


CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
h1 .PASS{color:#1a7f37} h1 .FAIL{color:#cf222e}
table.grid{border-collapse:collapse;margin:1em 0}
.grid th,.grid td{border:1px solid #999;padding:4px 8px;text-align:center;vertical-align:top}
.grid th.row{text-align:left}
td.cell{cursor:pointer;min-width:8em}
td.cell.pass{background:rgb(204,255,204)} td.cell.fail{background:rgb(255,170,170)}
td.na{background:rgb(230,230,230);color:#777}
td.cell.selected{outline:3px solid #0969da}
.lay{display:inline-block;font-size:11px;padding:0 3px;margin:1px;border-radius:3px}
.lay.PASS{background:rgb(120,200,120)} .lay.FAIL{background:rgb(220,60,60);color:#fff}
.lay.NOTRUN{background:#ccc}
#detail{border:1px solid #999;padding:.5em 1em;background:#fafafa}
pre{background:#222;color:#eee;padding:.5em;overflow:auto;max-height:30em;font-size:12px}
pre.state{background:#3b1f1f} code.replay{display:block;background:#eef;padding:.3em;white-space:pre-wrap}
"""

JS = r"""
function show(td){
  document.querySelectorAll('td.cell.selected').forEach(function(x){x.classList.remove('selected');});
  td.classList.add('selected');
  var d=document.getElementById('detail');
  d.innerHTML=document.getElementById('ex-'+td.dataset.cell).innerHTML;
  d.dataset.cell=td.dataset.cell;
  d.hidden=false;
}
document.querySelectorAll('td.cell').forEach(function(td){
  td.addEventListener('click',function(){show(td);});
  // Computed colours land in the DOM, so a --dump-dom check sees what is painted.
  td.dataset.bg=getComputedStyle(td).backgroundColor;
});
var open=new URLSearchParams(location.search).get('open');
if(open){var t=document.querySelector('td.cell[data-cell="'+open+'"]'); if(t) t.click();}
document.body.dataset.ready='1';
"""


def render_html(meta, cells, targets, columns, grid, layouts, extras):
    e = html.escape
    h = ["<!DOCTYPE html><html><head><meta charset='utf-8'><title>rwsem qualification</title>",
         "<style>%s</style></head><body>" % CSS,
         "<h1>rwsem qualification: <span class='%s' id='overall'>%s</span></h1>" % (meta["overall"], meta["overall"]),
         "<p>Profile <b>%s</b>, stress scale %s, %d/%d cells run, %d failed, wall %s. Commit <code>%s</code>, %s, %s.</p>" % (
             e(meta["profile"]), e(str(meta["stress_scale"])), meta["cells_run"], meta["cells_planned"],
             meta["cells_failed"], fmt_secs(meta["wall_seconds"]), e(short_commit(meta["commit"])), e(meta["date"]),
             e(meta["machine"]["hostname"])),
         "".join("<p class='run'>%s</p>" % e(l) for l in run_lines(meta) if l),
         "<p>Click a cell for its failing tests, decoded lock state, log excerpt and replay command. "
         "Layouts: %s.</p>" % e(", ".join(layouts)),
         "".join("<p class='run'>Partial target %s: no lock-free 64-bit atomics, so the 64-bit "
                 "count layouts refuse to compile there and show as not run.</p>" % e(t)
                 for t in meta.get("targets_without_lockfree64", [])),
         "<table class='grid' id='grid'><tr><th>target</th>"]
    for san, spin in columns:
        h.append("<th>%s<br>spin %s</th>" % (e(san), e(spin)))
    h.append("</tr>")
    for t in targets:
        h.append("<tr><th class='row'>%s</th>" % e(t))
        for san, spin in columns:
            c = grid.get((t, san, spin))
            if not c:
                h.append("<td class='na'>n/a</td>")
                continue
            chips = "".join("<span class='lay %s' title='%s: %d run, %d failed'>%s</span>" % (
                lay_status(c, l), e(l), c["layouts"].get(l, {}).get("run", 0),
                c["layouts"].get(l, {}).get("failed", 0), e(l)) for l in layouts)
            h.append("<td class='cell %s' data-cell='%s' data-status='%s'><b>%s</b> %ds<br>%s</td>" % (
                c["status"].lower(), e(c["id"]), c["status"], c["status"], c["seconds"], chips))
        h.append("</tr>")
    h.append("</table>")
    h.append("<div id='detail' hidden></div>")
    for c in cells:
        d = ["<h2>%s: %s (%ds)</h2>" % (e(c["id"]), c["status"], c["seconds"]),
             "<p>Command: <code class='replay'>%s</code></p>" % e(c["command"]),
             "<table class='grid'><tr><th>layout</th><th>status</th><th>run</th><th>failed</th><th>seeds</th></tr>"]
        for l, b in c["layouts"].items():
            d.append("<tr><td>%s</td><td class='lay %s'>%s</td><td>%d</td><td>%d</td><td>%s</td></tr>" % (
                e(l), b["status"], b["status"], b["run"], b["failed"], e(" ".join(b["seeds"]))))
        d.append("</table>")
        for fl in c["failures"]:
            d.append("<div class='failure'><h3 class='failed-test'>%s</h3><p>%s; layout %s; %s</p>" % (
                e(fl["test"]), e(fl["how"]), e(fl["layout"]), e(fl.get("log", ""))))
            if fl["state"]:
                d.append("<p>Lock state and failure lines:</p><pre class='state'>%s</pre>" % e("\n".join(fl["state"])))
            d.append("<p>Replay:</p><code class='replay'>%s</code>" % e(fl["replay"]))
            d.append("<p>Log excerpt:</p><pre class='excerpt'>%s</pre></div>" % e("\n".join(fl["excerpt"])))
        if not c["failures"]:
            d.append("<p>No failures. %d tests run, %d results from cache.</p>" % (c["tests_run"], c["tests_cached"]))
        h.append("<template id='ex-%s'>%s</template>" % (e(c["id"]), "".join(d)))
    for name, x in extras.items():
        h.append("<h2>%s</h2><pre>%s</pre>" % (e(name), e(json.dumps(x, indent=1)[:4000])))
    h.append("<h2>Environment</h2><ul>")
    for k, v in meta["toolchain"].items():
        h.append("<li>%s: %s</li>" % (e(k), e(v)))
    h.append("<li>machine: %s</li></ul>" % e(meta["machine"]["uname"]))
    h.append("<script>%s</script></body></html>\n" % JS)
    return "".join(h)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--out", default="qualify-out")
    common.add_argument("--cache-dir", default=os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "rwsem-qualify"))
    common.add_argument("--scale", default="1")
    common.add_argument("--layout", default="")
    c = sub.add_parser("collect", parents=[common])
    for k in ("cell", "target", "sanitizer", "spin", "bep", "flags", "what"):
        c.add_argument("--" + k, required=True)
    c.add_argument("--profile", default="full")
    c.add_argument("--rc", type=int, required=True)
    c.add_argument("--seconds", type=int, required=True)
    c.add_argument("--started", default="")
    c.add_argument("--bazel-log", default="")
    c.add_argument("--remaining", default=None)
    c.set_defaults(fn=collect)
    t = sub.add_parser("eta", parents=[common])
    t.add_argument("--remaining", default="")
    t.set_defaults(fn=eta)
    l = sub.add_parser("layouts")
    l.set_defaults(fn=layouts_from_listing)
    r = sub.add_parser("report", parents=[common])
    r.add_argument("--profile", default="full")
    r.add_argument("--order", default="")
    r.add_argument("--wall", type=int, default=0)
    r.add_argument("--command", default="")
    r.add_argument("--report-test-rc", type=int, default=None, help="ci/report_test ran, with this status")
    r.add_argument("--faults-rc", type=int, default=None, help="ci/faults ran, with this status")
    r.add_argument("--remote-cache-rc", type=int, default=None,
                   help="ci/remote_cache_test ran, with this status")
    r.add_argument("--shard", default="", help="this run is shard I/N (ci/qualify --shard)")
    r.add_argument("--all-cells", default="", help="with --shard: every cell the filters select")
    r.add_argument("--table", default=TABLE, help="with --shard: the durations table of the split")
    for k in ("target", "sanitizer", "spin"):
        r.add_argument("--filter-" + k, default="", help="ci/qualify --%s, recorded for merge" % k)
    r.set_defaults(fn=report)
    s = sub.add_parser("shard", parents=[common],
                       help="print the cells of shard I/N of --cells (stderr: the plan)")
    s.add_argument("--shard", required=True)
    s.add_argument("--cells", required=True, help="the selected cells, space-separated, in run order")
    s.add_argument("--table", default=TABLE)
    s.add_argument("--json", action="store_true", help="every shard, loads and estimates as JSON")
    s.set_defaults(fn=shard_cmd)
    d = sub.add_parser("durations", help="refresh %s from report.json files" % TABLE_NAME)
    d.add_argument("reports", nargs="+", metavar="REPORT_JSON")
    d.add_argument("--table", default=TABLE)
    d.set_defaults(fn=durations_cmd)
    m = sub.add_parser("merge", help="one report from the outputs of ci/qualify --shard 1/N .. N/N")
    m.add_argument("--out", required=True)
    m.add_argument("shard_dirs", nargs="+", metavar="SHARD_DIR")
    m.set_defaults(fn=merge)
    c = sub.add_parser("compare", help="diff the cell ids and statuses of two report.json")
    c.add_argument("a")
    c.add_argument("b")
    c.set_defaults(fn=compare)
    a = p.parse_args()
    try:
        sys.exit(a.fn(a) or 0)
    except Refused as e:
        print("ci/report.py %s: %s" % (a.cmd, e), file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
