"""The one table of rwsem targets: Bazel --config name -> clang triple and ISA facts.

Everything per-target in toolchains/ (cc_toolchain, platform, toolchain
registration) is generated from RWSEM_TARGETS by rwsem_toolchains() in
toolchains/toolchains.bzl. The keys match kTarget.name in arch/cpu.h and the
--config names in .bazelrc.

Fields:
  triple:     clang --target triple; Debian's cross sysroot is /usr/<triple>.
  cpu:        constraint_value label for the platform's cpu.
  qemu:       qemu-user binary name, None for the host.
  link_libs:  extra libraries at the end of every link line. The 32-bit
              targets without native 64-bit atomics need -latomic for
              std::atomic<uint64_t>.
  linker:     -fuse-ld value. lld everywhere except ppc64 (big-endian, ELFv1
              ABI), where lld 19 fails on gtest's COMDAT groups ("relocation
              refers to a discarded section"); GNU ld from
              binutils-powerpc64-linux-gnu links it.
  link_flags: extra link flags. ppc: lld-linked 32-bit PowerPC PIE
              executables crash at start-up under qemu-ppc (SIGSEGV before
              main), non-PIE ones work, so ppc links -no-pie.
"""

RWSEM_TARGETS = {
    "x86_64": struct(
        triple = "x86_64-linux-gnu",
        cpu = "@platforms//cpu:x86_64",
        qemu = None,
        link_libs = [],
        linker = "lld",
        link_flags = [],
    ),
    "aarch64": struct(
        triple = "aarch64-linux-gnu",
        cpu = "@platforms//cpu:aarch64",
        qemu = "qemu-aarch64",
        link_libs = [],
        linker = "lld",
        link_flags = [],
    ),
    "ppc64le": struct(
        triple = "powerpc64le-linux-gnu",
        cpu = "//toolchains:cpu_ppc64le",
        qemu = "qemu-ppc64le",
        link_libs = [],
        linker = "lld",
        link_flags = [],
    ),
    "ppc64": struct(
        triple = "powerpc64-linux-gnu",
        cpu = "//toolchains:cpu_ppc64",
        qemu = "qemu-ppc64",
        link_libs = [],
        linker = "bfd",
        link_flags = [],
    ),
    "ppc": struct(
        triple = "powerpc-linux-gnu",
        cpu = "@platforms//cpu:ppc",
        qemu = "qemu-ppc",
        link_libs = ["-latomic"],
        linker = "lld",
        link_flags = ["-no-pie"],
    ),
    "i386": struct(
        triple = "i686-linux-gnu",
        cpu = "@platforms//cpu:i386",
        qemu = "qemu-i386",
        link_libs = ["-latomic"],
        linker = "lld",
        link_flags = [],
    ),
    "armv7": struct(
        triple = "arm-linux-gnueabihf",
        cpu = "@platforms//cpu:armv7",
        qemu = "qemu-arm",
        link_libs = ["-latomic"],
        linker = "lld",
        link_flags = [],
    ),
    "s390x": struct(
        triple = "s390x-linux-gnu",
        cpu = "@platforms//cpu:s390x",
        qemu = "qemu-s390x",
        link_libs = [],
        linker = "lld",
        link_flags = [],
    ),
    "riscv64": struct(
        triple = "riscv64-linux-gnu",
        cpu = "@platforms//cpu:riscv64",
        qemu = "qemu-riscv64",
        link_libs = [],
        linker = "lld",
        link_flags = [],
    ),
}
