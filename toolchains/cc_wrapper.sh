#!/bin/bash
# Compiler driver for every rwsem toolchain: clang-19, plus the per-target
# sanitizer fixes that a static cc_toolchain_config cannot express (they depend
# on which sanitizer config .bazelrc turned on).
#
# 1. aarch64 + ThreadSanitizer: link GCC 12's libtsan.so.2 (Debian
#    libtsan2-arm64-cross) instead of clang's runtime, and compile with
#    -tsan-instrument-memintrinsics=false because GCC 12's runtime has no
#    __tsan_memcpy/__tsan_memset (memcpy/memset are still checked by the
#    runtime's libc interceptors). See toolchains/NOTES-ppc64le-tsan.md for
#    what was measured with both runtimes under qemu-aarch64.
# 2. UBSan on targets with no clang UBSan runtime in Debian (ppc64le, ppc64,
#    ppc, s390x, riscv64): trap mode. A check that fires executes a trap
#    instruction, so the test dies with SIGILL/SIGTRAP instead of a report.
set -u

clang=/usr/bin/clang-19
rtdir=/usr/lib/llvm-19/lib/clang/19/lib/linux

target=""
tsan=0
ubsan=0
link=1
for a in "$@"; do
  case "$a" in
    --target=*) target="${a#--target=}" ;;
    -fsanitize=thread) tsan=1 ;;
    -fsanitize=undefined) ubsan=1 ;;
    -c|-S|-E) link=0 ;;
  esac
done

args=()
if [[ "$tsan" == 1 && "$target" == aarch64-linux-gnu ]]; then
  if [[ "$link" == 1 ]]; then
    # First on the link line so its interceptors win.
    args+=(-Wl,--push-state,--no-as-needed
           /usr/aarch64-linux-gnu/lib/libtsan.so.2
           -Wl,--pop-state)
    for a in "$@"; do
      case "$a" in
        -fsanitize=thread|-fsanitize-link-c++-runtime) ;;
        *) args+=("$a") ;;
      esac
    done
  else
    args=("$@" -mllvm -tsan-instrument-memintrinsics=false)
  fi
  exec "$clang" "${args[@]}"
fi

if [[ "$ubsan" == 1 ]]; then
  case "$target" in
    x86_64-linux-gnu) rt=x86_64 ;;
    i686-linux-gnu) rt=i386 ;;
    aarch64-linux-gnu) rt=aarch64 ;;
    arm-linux-gnueabihf) rt=armhf ;;
    *) rt="" ;;
  esac
  if [[ -z "$rt" || ! -e "$rtdir/libclang_rt.ubsan_standalone-$rt.a" ]]; then
    args=()
    for a in "$@"; do
      [[ "$a" == -fsanitize-link-c++-runtime ]] || args+=("$a")
    done
    exec "$clang" "${args[@]}" -fsanitize-trap=undefined
  fi
fi

exec "$clang" "$@"
