#!/bin/bash
# Runs the deliberately racy //conformance:planted_race and checks the
# result against the kind of build:
#   TSan build (--config=tsan): PASS only if the output contains
#     "WARNING: ThreadSanitizer: data race".
#   any other build: TSan cannot report anything, so this only checks that
#     the program runs and exits 0, and says so.
# A cross-target binary is run through toolchains/qemu_run, which picks QEMU
# from the ELF header (this script itself runs on the host).
set -uo pipefail

mode="$1"      # "tsan" or "plain", chosen by select() in conformance/BUILD
racy="$2"      # path of the planted_race binary (runfiles-relative)
runner="$3"    # toolchains/qemu_run

out="$(TSAN_OPTIONS="halt_on_error=0 exitcode=66" "$runner" "$racy" 2>&1)"
rc=$?
printf '%s\n' "$out"

if [[ "$mode" == tsan ]]; then
  if grep -q "WARNING: ThreadSanitizer: data race" <<<"$out"; then
    echo "PASS: ThreadSanitizer reported the planted race (exit $rc)"
    exit 0
  fi
  echo "FAIL: TSan build, but no 'WARNING: ThreadSanitizer: data race' in the output (exit $rc)"
  exit 1
fi

if [[ "$rc" == 0 ]]; then
  echo "PASS (not a TSan build: only checked that the racy program runs; use --config=tsan for the real check)"
  exit 0
fi
echo "FAIL: planted_race exited $rc in a non-TSan build"
exit 1
