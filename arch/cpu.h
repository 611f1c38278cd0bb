// arch/cpu.h: the per-ISA code the lock depends on, and nothing else.
//
// A target's facts (name, word size, byte order, ELF machine, whether 64-bit
// atomics are lock-free) are stated once, in the table of targets
// (toolchains/targets.bzl). This header derives what the code needs from
// the compiler, and holds only what an ISA truly needs code for: its
// spin-wait hint and, where it is not 64 bytes, its cache-line size. A new
// ISA that has neither needs no entry here (PORTING.md).
// //conformance:arch_probe_test checks the compiler's output against the
// table on every target.
#ifndef RWSEM_ARCH_CPU_H_
#define RWSEM_ARCH_CPU_H_

#include <cstddef>

namespace rwsem {
namespace arch {

#if !defined(__BYTE_ORDER__) || \
    (__BYTE_ORDER__ != __ORDER_BIG_ENDIAN__ && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__)
#error "rwsem: the compiler must define __BYTE_ORDER__ as big or little endian"
#endif

struct TargetInfo {
  const char* name;          // the row of the table this build is for
  int long_bits;             // sizeof(long) * 8
  int pointer_bits;          // sizeof(void*) * 8
  bool big_endian;           // __BYTE_ORDER__
  std::size_t cache_line;    // bytes; used to pad hot lock words
};

// The rwsem toolchains define RWSEM_TARGET_NAME to the table's name of the
// target (toolchains/toolchains.bzl); other builds of the library work too,
// and say so in messages.
// RWSEM_ARCH_NAME is the same name as a string literal, for static_assert
// messages.
#ifdef RWSEM_TARGET_NAME
#define RWSEM_ARCH_NAME RWSEM_TARGET_NAME
inline constexpr const char* kTargetName = RWSEM_TARGET_NAME;
#else
#define RWSEM_ARCH_NAME "this target"
inline constexpr const char* kTargetName = "(built outside the rwsem toolchains)";
#endif

// Coherence granule the hot lock words are padded to: 128 bytes on 64-bit
// POWER, 256 on z, 32 on 32-bit PowerPC cores, and 64 everywhere else (the
// Linux kernel's SMP_CACHE_BYTES on x86, arm, riscv, Loongson-3 mips64 and
// sparc64; Cavium Octeon's 128-byte lines make 64 an under-estimate there,
// which costs speed, never correctness).
#if defined(__powerpc64__)
inline constexpr std::size_t kCacheLineSize = 128;
#elif defined(__s390x__)
inline constexpr std::size_t kCacheLineSize = 256;
#elif defined(__powerpc__)
inline constexpr std::size_t kCacheLineSize = 32;
#else
inline constexpr std::size_t kCacheLineSize = 64;
#endif

inline constexpr TargetInfo kTarget{kTargetName, static_cast<int>(sizeof(long) * 8),
                                    static_cast<int>(sizeof(void*) * 8),
                                    __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__, kCacheLineSize};

// A hint to the core that the caller is in a spin-wait loop. It saves power
// and, on SMT cores, yields pipeline resources to the sibling thread. An ISA
// without such a hint gets a compiler barrier: the loop still re-reads
// memory each time round.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__) || (defined(__arm__) && __ARM_ARCH >= 7)
  __asm__ __volatile__("yield" ::: "memory");
#elif defined(__powerpc__)
  // "or 1,1,1" lowers SMT thread priority; "or 2,2,2" restores it.
  __asm__ __volatile__("or 1,1,1\n\tor 2,2,2" ::: "memory");
#elif defined(__mips__)
  // What the Linux kernel does on Loongson-3 (the usual 64-bit MIPS
  // hardware): its store-fill buffer may hold a store indefinitely while
  // the core spins on reads, so a spin loop must drain it with a full
  // barrier. Elsewhere on MIPS the kernel uses only a compiler barrier, and
  // a sync there merely slows a spin. Not "pause" (MIPS32/64 R2): it stalls
  // until the LL bit clears, which after a failed LL/SC compare-exchange
  // (no SC) can take until the next interrupt.
  __asm__ __volatile__("sync" ::: "memory");
#elif defined(__sparc__) && defined(__arch64__)
  // The Linux kernel's sparc64 cpu_relax() before boot-time patching:
  // reading %ccr makes a T-series strand yield for a few cycles, and is a
  // valid V9 instruction everywhere (QEMU included). The kernel patches in
  // "wr %g0, 128, %asr27" (PAUSE) only on CPUs that have it (T4 and later),
  // which user code cannot know at compile time.
  __asm__ __volatile__("rd %%ccr, %%g0\n\trd %%ccr, %%g0\n\trd %%ccr, %%g0" ::: "memory");
#else
  __asm__ __volatile__("" ::: "memory");
#endif
}

}  // namespace arch
}  // namespace rwsem

#endif  // RWSEM_ARCH_CPU_H_
