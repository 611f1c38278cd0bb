#!/bin/bash
# Compiler driver for every rwsem toolchain: clang-19, plus one per-target
# sanitizer fix that a static cc_toolchain_config cannot express (it depends
# on which sanitizer config .bazelrc turned on).
#
# UBSan on targets with no usable clang UBSan runtime: trap mode. Debian
# ships none for ppc64le, ppc64, ppc, s390x, riscv64; the armhf one
# (libclang-rt-19-dev:armhf) dies at start-up under qemu-arm 7.2 with
# "UndefinedBehaviorSanitizer: stack-overflow" when the environment is small
# (as it is under bazel test), so armv7 uses trap mode too. A check that fires executes a trap
# instruction, so the test dies with SIGILL/SIGTRAP instead of printing a
# report; the build still fails the test on undefined behaviour.
#
# (The toolchains set supports_param_files = 0 so link lines reach this
# script as plain arguments, not @params files.)
set -u

clang=/usr/bin/clang-19
rtdir=/usr/lib/llvm-19/lib/clang/19/lib/linux

target=""
ubsan=0
for a in "$@"; do
  case "$a" in
    --target=*) target="${a#--target=}" ;;
    -fsanitize=undefined) ubsan=1 ;;
  esac
done

if [[ "$ubsan" == 1 ]]; then
  case "$target" in
    x86_64-linux-gnu) rt=x86_64 ;;
    i686-linux-gnu) rt=i386 ;;
    aarch64-linux-gnu) rt=aarch64 ;;
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
