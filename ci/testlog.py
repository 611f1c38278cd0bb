"""What a test log says: gtest's console output, sanitizer reports, the
model checker's verdicts, the corpus's watchdog and crash signs.

The one reader of test logs for ci/report.py (per-test outcomes and lock
states of a cell), ci/faults (the evidence that killed a fault) and
ci/mutations (the model checker's verdict). Python 3 standard library
only.
"""

import re

# Lines that show the lock's state or why a test died.
STATE_RE = re.compile(r"readers=|writer=|WATCHDOG|HANG:|lock rwsem|^\s*lock |waiters|handoff|"
                      r"seed[:=]|ThreadGroup:|ThreadSanitizer|AddressSanitizer|runtime error|"
                      r"Failure$|Expected|Which is|Value of|Actual|uncaught target signal|Aborted")
SEED_RE = re.compile(r"(?:\bseed=|RWSEM_SEED=)(\d+)")
RUN_RE = re.compile(r"^\[ RUN +\] (\S+)")
END_RE = re.compile(r"^\[ +(OK|FAILED|SKIPPED) +\] (\S+?)(?:,| \(| *$)")
# The model checker's verdict: "<scenario>: data race: ..." and so on.
MODEL_VERDICT_RE = re.compile(
    r"^[a-z0-9][^:]*: (data race|deadlock or lost wake-up|livelock|use after free|check failed)")
# The model checker's summary of a random scenario (model.cc, explore()):
# "<scenario>: random, <n> executions (seeds 0x<first>..0x<last>, ...".
MODEL_RANDOM_RE = re.compile(r"^(.+): random, [0-9]+ executions \(seeds 0x([0-9a-f]+)\.\.")
# gtest's line for a failed test (the summary repeats it without the time).
FAILED_RE = re.compile(r"^\[  FAILED  \] (.*) \([0-9]+ ms\)")
# The corpus's whole-binary hang guard (conformance/hang_guard.h) aborting.
HANG_RE = re.compile(r"^HANG: (\S+) still running", re.M)
# gtest's line for a failed assertion: "<file>:<line>: Failure".
ASSERTION_RE = re.compile(r"^\S+:[0-9]+: Failure$")
# Signs of a test that failed or crashed before gtest printed FAILED.
DEBUG_RE = re.compile(r"^rwsem DEBUG: (.*)$", re.M)
CRASH_RE = re.compile(r": Failure$|SEGV|Segmentation fault|uncaught target signal|Aborted|ThreadGroup:")
CRASH_HOW_RE = re.compile(r"SEGV|Segmentation fault|uncaught target signal|Aborted|"
                          r"ThreadGroup: [0-9]+ of [0-9]+ threads still blocked|: Failure$")


# gtest's line before a GTEST_SKIP() message: "<file>:<line>: Skipped".
SKIPPED_AT_RE = re.compile(r"^\S+:[0-9]+: Skipped$")


def skip_reason(lines):
    """The message of a skipped test's GTEST_SKIP(), from its lines (the
    ones after "<file>:<line>: Skipped", joined), or "" if it gave none."""
    for i, line in enumerate(lines):
        if SKIPPED_AT_RE.match(line):
            return " ".join(l.strip() for l in lines[i + 1:] if l.strip())
    return ""


def parse_lines(lines):
    """gtest's console output: test -> {'outcome', 'lines', 'seeds'} (and
    'skip_reason' for a skipped test), the
    tests in the order they started, and every seed the log mentions."""
    tests, order, seeds = {}, [], []
    current = None
    for line in lines:
        for s in SEED_RE.findall(line):
            if s not in seeds:
                seeds.append(s)
        m = RUN_RE.match(line)
        if m:
            current = m.group(1)
            tests[current] = {"outcome": "crashed", "lines": [line], "seeds": []}
            order.append(current)
            continue
        m = END_RE.match(line)
        if m and m.group(2) in tests and tests[m.group(2)]["outcome"] == "crashed":
            t = tests[m.group(2)]
            t["outcome"] = {"OK": "passed", "FAILED": "failed", "SKIPPED": "skipped"}[m.group(1)]
            if t["outcome"] == "skipped":
                t["skip_reason"] = skip_reason(t["lines"])
            t["lines"].append(line)
            current = None
            continue
        if current is not None:
            tests[current]["lines"].append(line)
            for s in SEED_RE.findall(line):
                if s not in tests[current]["seeds"]:
                    tests[current]["seeds"].append(s)
    return tests, order, seeds


def read_lines(path):
    """The log's lines, or None if it cannot be read."""
    try:
        with open(path, errors="replace") as fh:
            return fh.read().splitlines()
    except OSError:
        return None


def parse_log(path):
    """parse_lines() of a log file, plus its lines (all empty if unreadable)."""
    lines = read_lines(path)
    if lines is None:
        return {}, [], [], []
    tests, order, seeds = parse_lines(lines)
    return tests, order, seeds, lines


def running_at(lines, pattern):
    """The test that was running at the first line matching `pattern` (a log
    may hold several test binaries one after the other, so it is not simply
    the last test started), or None."""
    current = None
    for line in lines:
        m = RUN_RE.match(line)
        if m:
            current = m.group(1)
        elif pattern.search(line):
            return current
    return None


def model_verdict(lines):
    """The model checker's first verdict line, or None."""
    return next((l for l in lines if MODEL_VERDICT_RE.match(l)), None)


def seed_base_problems(lines, base, expect_some=True):
    """Why a model checker log does not show every random scenario run from
    seed base `base` (RWSEM_MC_SEED_BASE: the top 32 bits of each scenario's
    first seed), as a list of lines; empty if it does. With `expect_some`
    (no test filter), a log in which no random scenario reported its seeds
    is a problem too: the check would otherwise pass on a log it cannot
    read."""
    problems, seen = [], 0
    for line in lines:
        m = MODEL_RANDOM_RE.match(line)
        if not m:
            continue
        seen += 1
        first = int(m.group(2), 16)
        if first >> 32 != base:
            problems.append("%s ran seeds from 0x%x, not from base %d (0x%x00000000)" %
                            (m.group(1), first, base, base))
    if seen == 0 and expect_some:
        problems.append("no random scenario reported its seeds (expected lines like "
                        "'<scenario>: random, N executions (seeds 0x...')")
    return problems


def failure_evidence(lines, rc):
    """One line saying how a failed `bazel test` run failed, most telling
    sign first: a model checker verdict, a TSan or ASan report, a failed
    gtest test, the watchdog, the hang guard, a crash, a timeout, a build
    failure."""
    text = "\n".join(lines)
    verdict = model_verdict(lines)
    if verdict:
        return "model: " + verdict[:160]
    if "ThreadSanitizer: data race" in text:
        t = running_at(lines, re.compile("ThreadSanitizer: data race"))
        return "TSan data race in %s" % (t or "?")
    if "ERROR: AddressSanitizer" in text:
        m = re.search(r"AddressSanitizer: ([a-z-]+)", text)
        t = running_at(lines, re.compile("ERROR: AddressSanitizer"))
        return "ASan %s in %s" % (m.group(1) if m else "report", t or "?")
    for line in lines:
        m = FAILED_RE.match(line)
        if m:
            return re.sub(r", where TypeParam.*", "", m.group(1))
    # A failed assertion in a test that never finished (its binary was
    # aborted by a later hang guard or watchdog): the assertion says more
    # than the abort that followed it.
    t = running_at(lines, ASSERTION_RE)
    if t:
        return "%s (failed an assertion, then the binary aborted)" % t
    # A debug check that aborted outside a death test: its report says what.
    m = DEBUG_RE.search(text)
    if m:
        return "debug abort in %s: %s" % (running_at(lines, DEBUG_RE) or "?", m.group(1)[:120])
    if "WATCHDOG" in text:
        return "watchdog"
    m = HANG_RE.search(text)
    if m:
        return "hang guard: %s" % m.group(1)
    if any(CRASH_RE.search(l) for l in lines):
        t = running_at(lines, CRASH_RE)
        how = next((m.group(0) for m in map(CRASH_HOW_RE.search, lines) if m), "")
        return "%s (%s)" % (t or "?", how[2:] if how.startswith(": ") else how)
    if "TIMEOUT" in text:
        return "test timeout"
    if re.search(r"error:|ERROR: .*Compiling", text):
        return "build failure"
    return "failed (rc=%d)" % rc
