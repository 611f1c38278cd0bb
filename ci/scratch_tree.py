"""A scratch copy of the checkout in which a tool builds the lock with one
change at a time and runs tests on it with Bazel: ci/faults (the kill
matrix) and ci/mutations --native (the survey's second stage).

The copy lives under ${XDG_CACHE_HOME:-~/.cache}/<name>/tree, one per tool,
so that the two never edit each other's tree; it is never the checkout.
Bazel runs there with the checkout's flags and shares its disk cache.
"""

import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlog  # noqa: E402  (the one reader of test logs)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "toolchains"))
import targets  # noqa: E402  (the table of targets)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The native corpus a defect of the lock must fail (the kill matrix's
# definition of "caught").
CORPUS = ["//conformance:corpus_test", "//conformance:wakeup_test",
          "//conformance:liveness_test", "//conformance:lifetime_test"]
RUN_FLAGS = ["--test_arg=--gtest_fail_fast", "--test_output=all", "--test_timeout=600"]


def scratch_dir(name):
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return os.path.join(cache, name, "tree")


def tracked_files():
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True,
                           text=True).stdout.split("\0")
    files = [f for f in files if f and os.path.isfile(os.path.join(ROOT, f))]
    if os.path.isfile(os.path.join(ROOT, "user.bazelrc")):
        files.append("user.bazelrc")
    return files


class Tree:
    """A copy of the checkout's tracked files at `path`. sync() makes it
    pristine (rewriting only what differs, removing files the checkout no
    longer tracks; Bazel's own output links are left alone); apply() writes
    one change's files; restore() puts them back."""

    MANIFEST = ".rwsem-scratch-files"

    def __init__(self, path):
        self.path = path
        self.files = tracked_files()
        self.pristine = {}
        self.mutated = []

    def read(self, f):
        """The checkout's text of tracked file f, or None."""
        if f not in self.pristine:
            if f not in self.files:
                return None
            with open(os.path.join(ROOT, f), encoding="utf-8", newline="") as fh:
                self.pristine[f] = fh.read()
        return self.pristine[f]

    def sync(self):
        os.makedirs(self.path, exist_ok=True)
        manifest = os.path.join(self.path, self.MANIFEST)
        try:
            old = set(open(manifest).read().split("\0"))
        except OSError:
            old = set()
        for f in sorted(old - set(self.files) - {""}):
            try:
                os.remove(os.path.join(self.path, f))
            except OSError:
                pass
        for f in self.files:
            src, dst = os.path.join(ROOT, f), os.path.join(self.path, f)
            try:
                same = os.path.getsize(src) == os.path.getsize(dst) and \
                    open(src, "rb").read() == open(dst, "rb").read()
            except OSError:
                same = False
            if not same:
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                if os.path.lexists(dst):
                    os.remove(dst)
                shutil.copy2(src, dst)
        with open(manifest, "w") as fh:
            fh.write("\0".join(self.files))
        self.mutated = []

    def apply(self, texts):
        """Makes the tree pristine, then writes {file: text}."""
        self.restore()
        for f, text in texts.items():
            with open(os.path.join(self.path, f), "w", encoding="utf-8", newline="") as fh:
                fh.write(text)
            self.mutated.append(f)

    def restore(self):
        for f in self.mutated:
            with open(os.path.join(self.path, f), "w", encoding="utf-8", newline="") as fh:
                fh.write(self.read(f))
        self.mutated = []

    def shutdown(self):
        """The tree's Bazel server is idle until the next run."""
        subprocess.run(["bazel", "shutdown"], cwd=self.path, capture_output=True)


def config_flags(cfg):
    """Bazel flags of a config: "model" is the host's model checker; any
    other is "target" or "target+sanitizer" from the table of targets."""
    if cfg == "model":
        return []
    r = subprocess.run([sys.executable, os.path.join(ROOT, "toolchains", "targets.py"), "flags", cfg],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None
    return r.stdout.split()


def hang_seconds(cfg):
    """The hang guard's and the watchdog's limit in a cell. Short, so that a
    defect that loses a wake-up fails in seconds with the lock state printed,
    instead of using up the test timeout. But ThreadSanitizer under an
    emulator takes longer than that to print a data race (measured on
    aarch64: 21-30 s from the race to the report), while the racing thread
    may hold the lock, so there the hang guard would cut the report off and
    be named as the killer."""
    target, _, san = cfg.partition("+")
    if cfg != "model" and san.startswith("tsan") and targets.row(target).qemu is not None:
        return 90
    return 15


def run_tests(tree, log, cfg, flags, tests):
    """`tests` in the tree on config `cfg` (whose Bazel flags are `flags`),
    output to `log`. Returns None if they passed, else the killing evidence."""
    hang = ["--test_env=RWSEM_TEST_HANG_SECONDS=%d" % hang_seconds(cfg),
            "--test_env=RWSEM_WATCHDOG_SECONDS=%d" % hang_seconds(cfg)]
    with open(log, "w") as fh:
        rc = subprocess.run(["bazel", "test"] + flags + RUN_FLAGS + hang + tests, cwd=tree.path,
                            stdout=fh, stderr=subprocess.STDOUT).returncode
    if rc == 0:
        return None
    return testlog.failure_evidence(testlog.read_lines(log) or [], rc)
