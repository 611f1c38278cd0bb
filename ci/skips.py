#!/usr/bin/env python3
"""Which tests one `bazel test` invocation skipped, and whether the suite
expects each skip.

A skip is expected when the test does not apply to what the cell builds:
the lock type lacks the feature, the target cannot build the layout, the
cell compiles spinning out, a sanitizer's runtime cannot run the scenario.
Any other skip means that part of the corpus silently did not run: the
machine refused something (SCHED_FIFO, too few CPUs), a test was built
without the flags it needs, or a new skip nobody listed here. ci/test fails
a cell with an unexpected skip, and ci/qualify's report counts it as a
failure, so a test that cannot run on the machine is never read as passed.

    ci/skips.py BEP_JSON      # one line per skip reason; exit 1 if any is unexpected

Python 3 standard library only.
"""

import json
import re
import sys
import urllib.parse

from testlog import parse_log

# (pattern searched in the GTEST_SKIP() message, why the skip is expected).
EXPECTED = [
    (r"has no (timed tries|shared mode|downgrade)$|takes no Options$|does not spin: |"
     r"has no owner to spin on$", "the lock type under test has no such feature"),
    (r"^the merged layout does not build on ", "the target's count word cannot hold an owner id"),
    (r"^spinning compiled out", "the cell builds with --define=rwsem_spin=off"),
    (r"^the sanitizer runtimes abort when|^skipped under TSan: ",
     "the sanitizer's runtime cannot run the scenario"),
    (r"^a 64-bit guest has room for every stack", "under QEMU a 64-bit guest has nothing to exhaust"),
]


def expected_why(reason):
    """Why a skip with this message is expected, or None if it is not."""
    return next((why for pat, why in EXPECTED if re.search(pat, reason)), None)


def test_logs(bep_path):
    """(label, test.log path) for every test result of a build event file."""
    out = []
    with open(bep_path) as fh:
        for line in fh:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if "testResult" not in ev.get("id", {}) or "testResult" not in ev:
                continue
            for o in ev["testResult"].get("testActionOutput", []):
                if o.get("name") == "test.log" and o.get("uri", "").startswith("file:"):
                    out.append((ev["id"]["testResult"]["label"],
                                urllib.parse.unquote(urllib.parse.urlparse(o["uri"]).path)))
    return out


# gtest's footer when tests are turned off with the DISABLED_ prefix.
DISABLED_RE = re.compile(r"YOU HAVE ([0-9]+) DISABLED TESTS?")


def skips(bep_path):
    """[(label, test, reason)] for every skipped test of the invocation, and
    one entry per binary with tests turned off by the DISABLED_ prefix (they
    never start, so only gtest's footer counts them)."""
    found = []
    for label, log in test_logs(bep_path):
        tests, order, _, lines = parse_log(log)
        found += [(label, t, tests[t].get("skip_reason", "")) for t in order
                  if tests[t]["outcome"] == "skipped"]
        disabled = max([int(m.group(1)) for m in map(DISABLED_RE.search, lines) if m] or [0])
        if disabled:
            found.append((label, label, "%d test(s) turned off with DISABLED_" % disabled))
    return found


def main(argv):
    if len(argv) != 2:
        sys.stderr.write("usage: ci/skips.py BEP_JSON\n")
        return 2
    by_reason = {}
    for label, test, reason in skips(argv[1]):
        by_reason.setdefault(reason, []).append(test)
    unexpected = 0
    for reason, tests in sorted(by_reason.items()):
        why = expected_why(reason)
        if why is None:
            unexpected += len(tests)
        print("%s %d skipped: %s%s" % ("UNEXPECTED" if why is None else "expected", len(tests),
                                       reason or "(no message)",
                                       "" if why is None else " [%s]" % why))
        if why is None:
            for t in tests:
                print("    " + t)
    total = sum(len(t) for t in by_reason.values())
    print("%d skipped, %d of them unexpected%s" %
          (total, unexpected, ": part of the corpus did not run" if unexpected else ""))
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
