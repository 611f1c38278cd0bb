"""clang-19 + lld-19 toolchains and platforms for every entry in RWSEM_TARGETS."""

load("@bazel_tools//tools/cpp:unix_cc_toolchain_config.bzl", "cc_toolchain_config")
load(":targets.bzl", "RWSEM_TARGETS")

HOST = "x86_64"

_LLVM = "/usr/lib/llvm-19"

def _tool_paths():
    # Absolute paths into Debian's llvm-19 packages.
    return {
        "ar": _LLVM + "/bin/llvm-ar",
        "cpp": _LLVM + "/bin/clang-cpp",
        "dwp": _LLVM + "/bin/llvm-dwp",
        "gcc": "/usr/bin/clang-19",
        "gcov": "/bin/false",
        "ld": _LLVM + "/bin/ld.lld",
        "llvm-cov": _LLVM + "/bin/llvm-cov",
        "nm": _LLVM + "/bin/llvm-nm",
        "objcopy": _LLVM + "/bin/llvm-objcopy",
        "objdump": _LLVM + "/bin/llvm-objdump",
        "strip": _LLVM + "/bin/llvm-strip",
    }

def _builtin_include_dirs(triple):
    # Directories clang may read headers from without Bazel declaring them.
    # The clang resource dir also holds the sanitizer ignore lists
    # (share/*_ignorelist.txt) that -fsanitize=... adds as dependencies.
    return [
        "/usr/" + triple + "/include",
        "/usr/lib/gcc-cross/" + triple + "/12/include",
        _LLVM + "/lib/clang/19/include",
        _LLVM + "/lib/clang/19/share",
        # /usr/bin/clang-19 with -no-canonical-prefixes finds its resource
        # dir through this symlink.
        "/usr/lib/clang/19/include",
        "/usr/lib/clang/19/share",
        "/usr/include",
        "/usr/local/include",
        "/usr/lib/gcc/x86_64-linux-gnu/12/include",
    ]

def rwsem_toolchains():
    """Declares, per target: cc_toolchain_config, cc_toolchain, toolchain, platform."""
    for name, t in RWSEM_TARGETS.items():
        target_flag = "--target=" + t.triple

        # Without a working UBSan runtime, UBSan builds use trap mode: a
        # failed check executes a trap instruction (the test dies with
        # SIGILL/SIGTRAP instead of printing a report). The flag is inert
        # unless --config=ubsan turns -fsanitize=undefined on, and with every
        # check trapping the driver links no UBSan runtime.
        trap = [] if t.ubsan_runtime else ["-fsanitize-trap=undefined"]
        cc_toolchain_config(
            name = name + "_config",
            cpu = name,
            compiler = "clang",
            toolchain_identifier = "clang19-" + name,
            host_system_name = "x86_64-linux-gnu",
            target_system_name = t.triple,
            target_libc = "glibc",
            abi_version = "clang19",
            abi_libc_version = "glibc",
            tool_paths = _tool_paths(),
            cxx_builtin_include_directories = _builtin_include_dirs(t.triple),
            compile_flags = [
                target_flag,
                # The target's name as the table spells it (arch/cpu.h).
                "-DRWSEM_TARGET_NAME=\"%s\"" % name,
                "-fno-omit-frame-pointer",
                "-fstack-protector",
                "-U_FORTIFY_SOURCE",
                # Checks the wait locks' annotations
                # (lib/rwsem/internal/thread_annotations.h); RWSEM_COPTS'
                # -Werror makes a finding fail the build. Here, not in
                # RWSEM_COPTS: other compilers do not know the flag.
                "-Wthread-safety",
            ] + trap,
            dbg_compile_flags = ["-g"],
            opt_compile_flags = [
                "-g0",
                "-O2",
                "-D_FORTIFY_SOURCE=1",
                "-DNDEBUG",
                "-ffunction-sections",
                "-fdata-sections",
            ],
            cxx_flags = ["-std=c++17"],
            link_flags = [
                target_flag,
            ] + ([
                # Search the cross sysroot before clang's multilib guesses:
                # for powerpc-linux-gnu clang also looks in /usr/lib32 and
                # would pick the host's i386 libgcc_s.so.1.
                "-L/usr/" + t.triple + "/lib",
            ] if name != HOST else []) + [
                "-fuse-ld=" + t.linker,
                "-Wl,-no-as-needed",
                "-Wl,-z,relro,-z,now",
                "-pthread",
            ] + t.link_flags + trap,
            # 32-bit ABIs: 64-bit atomics become __atomic_* calls where the
            # ISA has no 64-bit atomic instructions (gtest and the benchmark
            # use 64-bit counters even where the lock's layouts do not).
            link_libs = ["-lstdc++", "-lm"] + (["-latomic"] if t.bits == 32 else []),
            opt_link_flags = ["-Wl,--gc-sections"],
            unfiltered_compile_flags = [
                "-no-canonical-prefixes",
                "-Wno-builtin-macro-redefined",
                "-D__DATE__=\"redacted\"",
                "-D__TIMESTAMP__=\"redacted\"",
                "-D__TIME__=\"redacted\"",
            ],
            coverage_compile_flags = ["--coverage"],
            coverage_link_flags = ["--coverage"],
            # --start-lib/--end-lib are lld options; GNU ld (ppc64) lacks them.
            supports_start_end_lib = t.linker == "lld",
        )

        native.cc_toolchain(
            name = name + "_cc_toolchain",
            all_files = ":empty",
            ar_files = ":empty",
            as_files = ":empty",
            compiler_files = ":empty",
            dwp_files = ":empty",
            linker_files = ":empty",
            objcopy_files = ":empty",
            strip_files = ":empty",
            toolchain_config = ":" + name + "_config",
            toolchain_identifier = "clang19-" + name,
        )

        native.toolchain(
            name = name + "_toolchain",
            exec_compatible_with = [
                "@platforms//cpu:x86_64",
                "@platforms//os:linux",
            ],
            target_compatible_with = [
                t.cpu,
                "@platforms//os:linux",
            ],
            toolchain = ":" + name + "_cc_toolchain",
            toolchain_type = "@bazel_tools//tools/cpp:toolchain_type",
        )

        native.platform(
            name = name,
            constraint_values = [
                t.cpu,
                "@platforms//os:linux",
            ],
        )
