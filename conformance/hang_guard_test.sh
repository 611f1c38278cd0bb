#!/bin/bash
# Proves the whole-binary hang guard (conformance/hang_guard.h) on the
# target: runs each DISABLED_ scenario of hang_guard_test in its own process
# (through toolchains/qemu_run, which picks QEMU from the ELF header) with
# a 2 s hang limit, and checks how it ended and what it printed.
set -uo pipefail

bin="$1"      # hang_guard_test (runfiles-relative)
runner="$2"   # toolchains/qemu_run
fail=0

run() {  # scenario -> sets out, rc, took
  local t0=$SECONDS
  # Without Bazel's XML and premature-exit files: the scenarios' own
  # (expected) results must not become this test's test.xml.
  out="$(env -u XML_OUTPUT_FILE -u TEST_PREMATURE_EXIT_FILE -u GTEST_OUTPUT \
         RWSEM_TEST_HANG_SECONDS=2 "$runner" "$bin" --gtest_also_run_disabled_tests \
         "--gtest_filter=HangGuardScenario.DISABLED_$1" 2>&1)"
  rc=$?
  took=$((SECONDS - t0))
  # Indented: the scenarios' expected gtest failures must not read as this
  # test's own to log parsers (ci/report.py anchors on "[  FAILED  ]").
  printf '%s\n' "----- $1 (exit $rc, ${took}s)"
  printf '%s\n' "$out" | sed 's/^/  | /'
}
expect() {  # description, extended regex over the whole output
  if grep -qzE -- "$2" <<<"$out"; then echo "ok: $1"; else echo "FAIL: $1"; fail=1; fi
}

# 1. The main thread blocks for ever: the guard aborts the binary.
run MainThreadBlockedForever
if [[ $rc != 0 ]]; then echo "ok: the binary failed (exit $rc)"; else echo "FAIL: exit 0"; fail=1; fi
expect "HANG: line names the test" "HANG: HangGuardScenario\.DISABLED_MainThreadBlockedForever still running after [0-9.]+ s"
expect "seed printed for replay" "seed=[0-9]+ \(replay with RWSEM_SEED=[0-9]+\)"
expect "decoded state of the registered lock" "lock proof-rwsem:.*count: [a-z0-9]+ 0x[0-9a-f]+ readers=0 writer=[^ ]+ waiters.*writer tid [0-9]+ sleeping"
# Well inside Bazel's timeout even with QEMU and TSan start-up.
if (( took < 120 )); then echo "ok: died after ${took}s"; else echo "FAIL: took ${took}s"; fail=1; fi

# 2. A bounded wait reports first; the guard does not pre-empt it.
run BoundedWaitReportsFirst
if [[ $rc == 1 ]]; then echo "ok: the test failed normally (exit 1)"; else echo "FAIL: exit $rc, expected 1"; fail=1; fi
expect "eventually() printed its own diagnosis" "never reached: a state that never comes.*count: "
if grep -q "HANG:" <<<"$out"; then echo "FAIL: the guard fired before the bounded wait reported"; fail=1; fi

[[ $fail == 0 ]] && echo "PASS" || echo "FAILED"
exit $fail
