#!/bin/bash
# Runs a program built for any rwsem target on this x86-64 host: under
# qemu-<arch>, or, for a target the host kernel runs itself (i386), through
# the sysroot's dynamic loader.
#
#   toolchains/qemu_run.sh <program> [args...]
#
# .bazelrc passes every cross test through here (--run_under). The target is
# read from the program's own ELF header (class, byte order, e_machine) and
# looked up in the table of targets (toolchains/targets.py runner), so a
# wrong --config can never pick the wrong emulator, and host programs
# (x86-64 binaries, shell scripts) simply run directly.
#
# What every guest needs, all measured on Debian 12 / qemu-user 7.2:
#  - `setarch x86_64 -R`: without it ThreadSanitizer under QEMU tries to
#    re-exec itself with ASLR off and fails ("execve failed, errno 8").
#  - LD_LIBRARY_PATH=/usr/<triple>/lib in the guest: otherwise the guest
#    loader reads the host's /etc/ld.so.cache and loads the host's copy of
#    the guest libc where one exists (i386 from libc6-i386; arm64/armhf from
#    the multiarch libc6:arm64/armhf that libclang-rt-19-dev:<arch> pulls
#    in). ld.so from the sysroot with a libc of another build crashes in
#    pthread_create (armhf), spins forever under TSan (arm64) or hangs (i386).
#  - ASAN_OPTIONS: the table's per-target additions (LeakSanitizer cannot
#    run under QEMU, so detect_leaks=0 everywhere).
#  - RWSEM_UNDER_QEMU=<qemu binary> in the guest: binfmt_misc is not
#    available, so a guest cannot execve() another guest binary (gtest's
#    "threadsafe" death tests re-exec the test and get "Exec format error").
#    Tests check this variable and use the "fast" (fork-only) style.
set -euo pipefail

die() { echo "qemu_run: $*" >&2; exit 127; }

[[ $# -ge 1 ]] || die "usage: qemu_run.sh <program> [args...]"
prog="$1"
[[ -f "$prog" ]] || die "no such program: $prog"

# The table sits beside this script: in the source tree, or in the runfiles
# of //toolchains:qemu_run when Bazel runs it.
here="${BASH_SOURCE[0]%/*}"
table=""
for d in "$here" "$0.runfiles/__main__/toolchains" "${RUNFILES_DIR:-/nonexistent}/__main__/toolchains"; do
  [[ -f "$d/targets.py" ]] && { table="$d/targets.py"; break; }
done
[[ -n "$table" ]] || die "cannot find targets.py beside $0"
command -v python3 >/dev/null || die "python3 not found: install the Debian package python3 (ci/setup does)"

read -r kind qemu sysroot asan_opts < <(python3 "$table" runner "$prog") || die "cannot classify $prog"
[[ -n "$kind" ]] || die "cannot classify $prog"
[[ "$kind" == native ]] && exec "$@"
[[ -d "$sysroot/lib" ]] || die "sysroot $sysroot missing: run ci/setup (it installs the cross libc of every target)"
[[ "$asan_opts" == - ]] || export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}$asan_opts"

if [[ "$kind" == loader ]]; then
  # A target the host kernel runs itself (i386 on x86-64's IA-32 ABI; the
  # runner has checked that this kernel does, and names the row's
  # qemu_fallback otherwise): started by the sysroot's own dynamic loader,
  # so the sysroot's libc is used with its own ld.so, never the host's copy.
  ldso="$qemu"
  shift
  exec "$ldso" --library-path "$sysroot/lib" "$prog" "$@"
fi

qemu_bin="$(command -v "$qemu" || true)"
[[ -n "$qemu_bin" ]] || die "$qemu not found: run ci/setup (it installs qemu-user, and where this kernel cannot run i386 programs, qemu-i386 from bookworm-backports)"
command -v setarch >/dev/null || die "setarch not found: install the Debian package util-linux"

shift
exec setarch x86_64 -R "$qemu_bin" -L "$sysroot" \
  -E "LD_LIBRARY_PATH=$sysroot/lib" -E "RWSEM_UNDER_QEMU=$qemu" "$prog" "$@"
