// arch/cpu.h: the per-ISA facts the lock depends on, declared in one place.
//
// Porting to a new ISA starts here: add one block below with the target's
// name, expected data model, byte order and cache-line size, and its
// cpu_relax() hint. //conformance:arch_probe_test checks every claim made
// here against what the compiler actually produced, on every target.
#ifndef RWSEM_ARCH_CPU_H_
#define RWSEM_ARCH_CPU_H_

#include <cstddef>

namespace rwsem {
namespace arch {

struct TargetInfo {
  const char* name;          // the Bazel --config name of the target
  int long_bits;             // sizeof(long) * 8 the ABI promises
  int pointer_bits;          // sizeof(void*) * 8 the ABI promises
  bool big_endian;           // byte order of the ABI
  std::size_t cache_line;    // bytes; used to pad hot lock words
  bool needs_lockfree_64;    // a 64-bit count layout is this target's default
};

#if defined(__x86_64__)
inline constexpr TargetInfo kTarget{"x86_64", 64, 64, false, 64, true};
#elif defined(__aarch64__)
inline constexpr TargetInfo kTarget{"aarch64", 64, 64, false, 64, true};
#elif defined(__powerpc64__) && defined(__LITTLE_ENDIAN__)
inline constexpr TargetInfo kTarget{"ppc64le", 64, 64, false, 128, true};
#elif defined(__powerpc64__)
inline constexpr TargetInfo kTarget{"ppc64", 64, 64, true, 128, true};
#elif defined(__powerpc__)
inline constexpr TargetInfo kTarget{"ppc", 32, 32, true, 32, false};
#elif defined(__i386__)
inline constexpr TargetInfo kTarget{"i386", 32, 32, false, 64, false};
#elif defined(__arm__)
inline constexpr TargetInfo kTarget{"armv7", 32, 32, false, 64, false};
#elif defined(__s390x__)
inline constexpr TargetInfo kTarget{"s390x", 64, 64, true, 256, true};
#elif defined(__riscv) && __riscv_xlen == 64
inline constexpr TargetInfo kTarget{"riscv64", 64, 64, false, 64, true};
#else
#error "rwsem: unknown ISA. Add a TargetInfo block and a cpu_relax() to arch/cpu.h."
#endif

inline constexpr std::size_t kCacheLineSize = kTarget.cache_line;

// A hint to the core that the caller is in a spin-wait loop. It saves power
// and, on SMT cores, yields pipeline resources to the sibling thread.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__) || (defined(__arm__) && __ARM_ARCH >= 7)
  __asm__ __volatile__("yield" ::: "memory");
#elif defined(__powerpc__)
  // "or 1,1,1" lowers SMT thread priority; "or 2,2,2" restores it.
  __asm__ __volatile__("or 1,1,1\n\tor 2,2,2" ::: "memory");
#else
  __asm__ __volatile__("" ::: "memory");
#endif
}

}  // namespace arch
}  // namespace rwsem

#endif  // RWSEM_ARCH_CPU_H_
