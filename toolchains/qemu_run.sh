#!/bin/bash
# Runs a program built for any rwsem target on this x86-64 host.
#
#   toolchains/qemu_run.sh <program> [args...]
#
# .bazelrc passes every cross test through here (--run_under). The target is
# read from the program's own ELF header (class, byte order, e_machine), so a
# wrong --config can never pick the wrong emulator, and host programs
# (x86-64 binaries, shell scripts) simply run directly.
#
# Per-target fixes, all measured on Debian 12 / qemu-user 7.2:
#  - `setarch x86_64 -R`: without it ThreadSanitizer under QEMU tries to
#    re-exec itself with ASLR off and fails ("execve failed, errno 8").
#  - LD_LIBRARY_PATH=/usr/<triple>/lib in the guest: otherwise the guest
#    loader reads the host's /etc/ld.so.cache and loads the host's copy of
#    the guest libc where one exists (i386 from libc6-i386; arm64/armhf from
#    the multiarch libc6:arm64/armhf that libclang-rt-19-dev:<arch> pulls
#    in). ld.so from the sysroot with a libc of another build crashes in
#    pthread_create (armhf), spins forever under TSan (arm64) or hangs (i386).
#  - ASan: LeakSanitizer cannot run under QEMU, so detect_leaks=0. On armv7
#    the malloc-time unwinder fails a CHECK under qemu-arm, so
#    malloc_context_size=0 (reports then lack the allocation stack).
#  - RWSEM_UNDER_QEMU=<qemu binary> in the guest: binfmt_misc is not
#    available, so a guest cannot execve() another guest binary (gtest's
#    "threadsafe" death tests re-exec the test and get "Exec format error").
#    Tests can check this variable and use the "fast" (fork-only) style.
set -euo pipefail

die() { echo "qemu_run: $*" >&2; exit 127; }

[[ $# -ge 1 ]] || die "usage: qemu_run.sh <program> [args...]"
prog="$1"
[[ -f "$prog" ]] || die "no such program: $prog"

# Reads the ELF identification: class (1=32-bit, 2=64-bit), data (1=LE, 2=BE)
# and e_machine (16 bits at offset 18, in the file's byte order).
read -r m0 m1 m2 m3 class data < <(od -An -tu1 -N6 -- "$prog" 2>/dev/null || true)
if [[ "${m0:-}${m1:-}${m2:-}${m3:-}" != "127697670" ]]; then
  exec "$@"   # not ELF (e.g. an sh_test script): a host program
fi
read -r e0 e1 < <(od -An -tu1 -j18 -N2 -- "$prog")
if [[ "$data" == 2 ]]; then machine=$((e0 * 256 + e1)); else machine=$((e1 * 256 + e0)); fi

qemu="" triple="" asan_extra=""
case "$machine:$class:$data" in
  62:2:1) exec "$@" ;;                                        # x86_64: native
  183:2:1) qemu=qemu-aarch64 triple=aarch64-linux-gnu ;;
  21:2:1) qemu=qemu-ppc64le triple=powerpc64le-linux-gnu ;;
  21:2:2) qemu=qemu-ppc64 triple=powerpc64-linux-gnu ;;
  20:1:2) qemu=qemu-ppc triple=powerpc-linux-gnu ;;
  3:1:1) qemu=qemu-i386 triple=i686-linux-gnu ;;
  40:1:1) qemu=qemu-arm triple=arm-linux-gnueabihf
          asan_extra=":malloc_context_size=0" ;;
  22:2:2) qemu=qemu-s390x triple=s390x-linux-gnu ;;
  243:2:1) qemu=qemu-riscv64 triple=riscv64-linux-gnu ;;
  *) die "$prog: unsupported ELF machine=$machine class=$class data=$data" ;;
esac

# Debian package that provides the sysroot's libc for each triple.
declare -A libc_pkg=(
  [aarch64-linux-gnu]=libc6-arm64-cross
  [powerpc64le-linux-gnu]=libc6-ppc64el-cross
  [powerpc64-linux-gnu]=libc6-ppc64-cross
  [powerpc-linux-gnu]=libc6-powerpc-cross
  [i686-linux-gnu]=libc6-i386-cross
  [arm-linux-gnueabihf]=libc6-armhf-cross
  [s390x-linux-gnu]=libc6-s390x-cross
  [riscv64-linux-gnu]=libc6-riscv64-cross
)

qemu_bin="$(command -v "$qemu" || true)"
[[ -n "$qemu_bin" ]] || die "$qemu not found: install the Debian package qemu-user (ci/setup does)"
sysroot="/usr/$triple"
[[ -d "$sysroot/lib" ]] || die "sysroot $sysroot missing: install the Debian package ${libc_pkg[$triple]} (ci/setup does)"
command -v setarch >/dev/null || die "setarch not found: install the Debian package util-linux"

export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0$asan_extra"

shift
exec setarch x86_64 -R "$qemu_bin" -L "$sysroot" \
  -E "LD_LIBRARY_PATH=$sysroot/lib" -E "RWSEM_UNDER_QEMU=$qemu" "$prog" "$@"
