"""The table of rwsem targets. Adding a target is one row here.

Every consumer reads this table; nothing else names a target's facts:
  - Bazel: toolchains/toolchains.bzl turns each row into a cc_toolchain, a
    toolchain and a platform.
  - Everything outside Bazel goes through toolchains/targets.py, which loads
    this file (it is valid Python as well as Starlark) and derives the rest:
    the --config blocks in toolchains/targets.bazelrc (generated, checked by
    ci/test), the QEMU runner's choice of emulator and sysroot, ci/setup's
    packages, the ci/test and ci/qualify matrices, ci/faults' flags, the
    report's emulator versions and the README's target table.

Stated per row (everything else is derived, see targets.py); a row leaves
out the fields whose value is the default in _DEFAULTS below:
  triple:      clang --target triple. Debian's cross sysroot is /usr/<triple>.
  debian_arch: Debian's name of the architecture, for the cross packages
               libc6-dev-<debian_arch>-cross and libstdc++-12-dev-<...>-cross.
  cpu:         constraint_value label for the platform's cpu.
  qemu:        qemu-user binary, or None where the host kernel runs the
               target's programs itself (the host; i386 through x86-64's
               IA-32 ABI, started by the sysroot's dynamic loader).
  qemu_fallback: for a row with qemu = None other than the host: the
               emulator to use on a kernel that refuses the target's
               programs (IA-32 emulation compiled out, turned off with
               ia32_emulation=off, or a hypervisor that runs 64-bit user
               code only). An absolute path: ci/setup puts it there, from
               Debian's bookworm-backports, only on such a machine.
  elf_machine: e_machine of the target's executables (<elf.h> EM_*). The
               runner picks the emulator by it, and the arch probe checks the
               test binary's own header against it.
  bits:        pointer and long width of the ABI (LP64 or ILP32).
  big_endian:  byte order of the ABI.
  lockfree64:  std::atomic<uint64_t> is always lock-free. Where it is not,
               the 64-bit count layouts refuse to compile (see rwsem.h) and
               the corpus runs the 32-bit layouts only.
  linker:      -fuse-ld value: "lld", or "bfd" (GNU ld from the package in
               extra_packages) where lld fails.
  link_flags:  extra link flags.
  static_tests: link test binaries without shared libraries of this
               workspace (--dynamic_mode=off), for targets whose loader
               crashes on lld-linked shared objects under QEMU.
  sanitizers:  which sanitizer configs run here, and where: "test" (ci/test
               and ci/qualify) or "qualify" (ci/qualify only).
  plain_cells: where the cells without a sanitizer run, per spin mode ("on":
               optimistic spinning compiled in; "off": --define=rwsem_spin=off),
               with the same two values. ci/qualify runs every cell of every
               row; ci/test, which must stay well inside CI's time, runs
               every mission target (the host, ARM64, POWER, the 32-bit ones)
               and riscv64 with spinning on, spinning off on one target per
               count layout and memory model (x86_64: merged owner, TSO;
               aarch64: generic 64-bit, weak; armv7: 32-bit with READFAIL,
               weak), and leaves the other rows to ci/qualify.
  ubsan_runtime: a clang UBSan runtime works here; if False, UBSan builds
               use trap mode (a failed check executes a trap instruction).
  runtime_package: the Debian package holding this target's clang
               sanitizer runtimes, or None.
  extra_packages: further Debian packages this target needs.
  notes:       one line per sanitizer that does not run, or runs limited,
               saying why (shown in the README's target table).
"""

# What a row does not say: the commonest case of each field.
_DEFAULTS = dict(
    lockfree64 = True,
    linker = "lld",
    link_flags = [],
    static_tests = False,
    sanitizers = {"ubsan": "qualify"},
    plain_cells = {"on": "test", "off": "qualify"},
    ubsan_runtime = False,
    runtime_package = None,
    qemu_fallback = None,
    extra_packages = [],
    notes = {"tsan": "no runtime in Debian", "asan": "no runtime in Debian"},
)

def _target(**fields):
    row = dict(_DEFAULTS)
    row.update(fields)
    return struct(**row)

RWSEM_TARGETS = {
    "x86_64": _target(
        triple = "x86_64-linux-gnu",
        debian_arch = "amd64",
        cpu = "@platforms//cpu:x86_64",
        qemu = None,
        elf_machine = 62,  # EM_X86_64
        bits = 64,
        big_endian = False,
        sanitizers = {"tsan": "test", "asan": "test", "ubsan": "test"},
        plain_cells = {"on": "test", "off": "test"},
        ubsan_runtime = True,
        runtime_package = "libclang-rt-19-dev:amd64",
        notes = {},
    ),
    "aarch64": _target(
        triple = "aarch64-linux-gnu",
        debian_arch = "arm64",
        cpu = "@platforms//cpu:aarch64",
        qemu = "qemu-aarch64",
        elf_machine = 183,  # EM_AARCH64
        bits = 64,
        big_endian = False,
        sanitizers = {"tsan": "test", "ubsan": "qualify"},
        plain_cells = {"on": "test", "off": "test"},
        ubsan_runtime = True,
        runtime_package = "libclang-rt-19-dev:arm64",
        # GCC's aarch64 TSan runtime, the alternative tried in
        # toolchains/NOTES-ppc64le-tsan.md.
        extra_packages = ["libtsan2-arm64-cross"],
        notes = {
            "tsan": "about 11 s start-up per process under QEMU, so ci/test leaves out the debug-mode death tests (a process each)",
            "asan": "QEMU uses more than 24 GB for the shadow memory (OOM)",
        },
    ),
    "ppc64le": _target(
        triple = "powerpc64le-linux-gnu",
        debian_arch = "ppc64el",
        cpu = "//toolchains:cpu_ppc64le",
        qemu = "qemu-ppc64le",
        elf_machine = 21,  # EM_PPC64
        bits = 64,
        big_endian = False,
        notes = {
            "tsan": "no runtime in Debian; GCC's fails under QEMU (toolchains/NOTES-ppc64le-tsan.md)",
            "asan": "no runtime in Debian",
        },
    ),
    "ppc64": _target(
        triple = "powerpc64-linux-gnu",
        debian_arch = "ppc64",
        cpu = "//toolchains:cpu_ppc64",
        qemu = "qemu-ppc64",
        elf_machine = 21,  # EM_PPC64
        bits = 64,
        big_endian = True,
        # lld 19 fails on gtest's COMDAT groups for big-endian ELFv1
        # ("relocation refers to a discarded section").
        linker = "bfd",
        extra_packages = ["binutils-powerpc64-linux-gnu"],
    ),
    "ppc": _target(
        triple = "powerpc-linux-gnu",
        debian_arch = "powerpc",
        cpu = "@platforms//cpu:ppc",
        qemu = "qemu-ppc",
        elf_machine = 20,  # EM_PPC
        bits = 32,
        big_endian = True,
        # 32-bit PowerPC has no 64-bit atomic instructions.
        lockfree64 = False,
        # lld-linked PIE executables crash at start-up under qemu-ppc
        # (SIGSEGV before main); non-PIE ones work.
        link_flags = ["-no-pie"],
        static_tests = True,
    ),
    "i386": _target(
        triple = "i686-linux-gnu",
        debian_arch = "i386",
        cpu = "@platforms//cpu:i386",
        # Not qemu-i386: 7.2 breaks signal delivery to i386 guests (x87
        # registers lost, and pthread_join failing with EDEADLK after a
        # signal storm); the corpus saw torn deadlines, waiters entering a
        # held lock and glibc malloc assertions in its signal tests. The
        # arch probe's SignalDeliveryPreservesRegisters fails under it and
        # passes on the host kernel, and under qemu-i386 10.0 (Debian's
        # bookworm-backports), which is what runs i386 where the host
        # kernel will not.
        qemu = None,
        qemu_fallback = "/opt/rwsem-qemu/bin/qemu-i386",
        elf_machine = 3,  # EM_386
        bits = 32,
        big_endian = False,
        lockfree64 = True,  # cmpxchg8b
        sanitizers = {"asan": "qualify", "ubsan": "qualify"},
        ubsan_runtime = True,
        runtime_package = "libclang-rt-19-dev:amd64",
        notes = {
            "tsan": "TSan supports 64-bit targets only",
            "asan": "single-threaded tests only: the runtime aborts in every new thread under 32-bit QEMU (not yet retried on the host kernel)",
        },
    ),
    "armv7": _target(
        triple = "arm-linux-gnueabihf",
        debian_arch = "armhf",
        cpu = "@platforms//cpu:armv7",
        qemu = "qemu-arm",
        elf_machine = 40,  # EM_ARM
        bits = 32,
        big_endian = False,
        lockfree64 = True,  # ldrexd/strexd
        sanitizers = {"asan": "qualify", "ubsan": "qualify"},
        plain_cells = {"on": "test", "off": "test"},
        # Debian's armhf UBSan runtime dies at start-up under qemu-arm 7.2
        # ("UndefinedBehaviorSanitizer: stack-overflow") when the
        # environment is small, as it is under bazel test.
        runtime_package = "libclang-rt-19-dev:armhf",
        notes = {
            "tsan": "TSan supports 64-bit targets only",
            "asan": "single-threaded tests only, and reports lack allocation stacks (the malloc-time unwinder fails under qemu-arm)",
        },
    ),
    "s390x": _target(
        triple = "s390x-linux-gnu",
        debian_arch = "s390x",
        cpu = "@platforms//cpu:s390x",
        qemu = "qemu-s390x",
        elf_machine = 22,  # EM_S390
        bits = 64,
        big_endian = True,
        plain_cells = {"on": "qualify", "off": "qualify"},
    ),
    "riscv64": _target(
        triple = "riscv64-linux-gnu",
        debian_arch = "riscv64",
        cpu = "@platforms//cpu:riscv64",
        qemu = "qemu-riscv64",
        elf_machine = 243,  # EM_RISCV
        bits = 64,
        big_endian = False,
    ),
    "mips64el": _target(
        triple = "mips64el-linux-gnuabi64",  # the n64 ABI
        debian_arch = "mips64el",
        cpu = "@platforms//cpu:mips64",
        qemu = "qemu-mips64el",
        elf_machine = 8,  # EM_MIPS
        bits = 64,
        big_endian = False,
        lockfree64 = True,  # lld/scd
        plain_cells = {"on": "qualify", "off": "qualify"},
        # lld works while libgcc stays shared: -static-libgcc pulls in
        # libgcc_eh.a, whose .eh_frame lld rejects in a PIE ("relocation
        # R_MIPS_64 cannot be used against local symbol; recompile with
        # -fPIC").
    ),
    "sparc64": _target(
        triple = "sparc64-linux-gnu",
        debian_arch = "sparc64",
        cpu = "//toolchains:cpu_sparc64",
        qemu = "qemu-sparc64",
        elf_machine = 43,  # EM_SPARCV9
        bits = 64,
        big_endian = True,
        lockfree64 = True,  # casx
        plain_cells = {"on": "qualify", "off": "qualify"},
        # lld 19 knows none of the R_SPARC_GOTDATA_OP* relocations in
        # Debian's crt files ("unknown relocation (82) against symbol
        # main"), and with -no-pie still fails on symbols libc.so and
        # libstdc++.so take from ld.so ("undefined reference:
        # __thread_self").
        linker = "bfd",
        extra_packages = ["binutils-sparc64-linux-gnu"],
    ),
}

# The sanitizer configs of .bazelrc, in report order.
RWSEM_SANITIZERS = ["tsan", "asan", "ubsan"]
