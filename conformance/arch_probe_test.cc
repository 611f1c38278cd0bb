// Checks every claim arch/cpu.h makes about the target against what the
// compiler actually produced, and that the binary is the target the build
// asked for (RWSEM_EXPECTED_TARGET comes from --config=<target> in .bazelrc,
// so a silent fallback to the host toolchain fails here).
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "arch/cpu.h"
#include "gtest/gtest.h"

namespace {

using rwsem::arch::kCacheLineSize;
using rwsem::arch::kTarget;

#ifdef RWSEM_EXPECTED_TARGET
constexpr const char* kExpected = RWSEM_EXPECTED_TARGET;
#else
constexpr const char* kExpected = nullptr;
#endif

std::string Where() {
  return std::string("[target ") + kTarget.name + ", RWSEM_EXPECTED_TARGET=" +
         (kExpected ? kExpected : "(not set)") + "]";
}

TEST(ArchProbe, BuiltForTheRequestedTarget) {
  if (kExpected == nullptr) {
    GTEST_SKIP() << "RWSEM_EXPECTED_TARGET not defined (no --config=<target>); "
                 << "built for " << kTarget.name;
  }
  EXPECT_STREQ(kTarget.name, kExpected)
      << Where() << ": the binary was compiled for " << kTarget.name
      << " but the build asked for " << kExpected
      << " (did the toolchain fall back to the host?)";
}

TEST(ArchProbe, DataModel) {
  EXPECT_EQ(static_cast<int>(sizeof(long) * 8), kTarget.long_bits)
      << Where() << ": sizeof(long) is " << sizeof(long);
  EXPECT_EQ(static_cast<int>(sizeof(void*) * 8), kTarget.pointer_bits)
      << Where() << ": sizeof(void*) is " << sizeof(void*);
  EXPECT_EQ(sizeof(std::uintptr_t), sizeof(void*)) << Where();
}

TEST(ArchProbe, ByteOrder) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  constexpr bool kCompilerBigEndian = true;
#elif defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  constexpr bool kCompilerBigEndian = false;
#else
#error "rwsem: the compiler does not define __BYTE_ORDER__"
#endif
  EXPECT_EQ(kCompilerBigEndian, kTarget.big_endian)
      << Where() << ": __BYTE_ORDER__ says "
      << (kCompilerBigEndian ? "big" : "little") << " endian";

  // And what the running machine (or emulator) actually does.
  const std::uint32_t word = 0x01020304u;
  unsigned char bytes[sizeof(word)];
  std::memcpy(bytes, &word, sizeof(word));
  const bool runtime_big_endian = bytes[0] == 0x01;
  EXPECT_TRUE(bytes[0] == 0x01 || bytes[0] == 0x04)
      << Where() << ": mixed byte order, first byte " << int(bytes[0]);
  EXPECT_EQ(runtime_big_endian, kTarget.big_endian)
      << Where() << ": at run time the first byte of 0x01020304 is "
      << int(bytes[0]);
}

TEST(ArchProbe, CacheLine) {
  EXPECT_EQ(kCacheLineSize, kTarget.cache_line) << Where();
  EXPECT_GT(kCacheLineSize, 0u) << Where();
  EXPECT_EQ(kCacheLineSize & (kCacheLineSize - 1), 0u)
      << Where() << ": cache line " << kCacheLineSize
      << " is not a power of two";
  EXPECT_GE(kCacheLineSize, alignof(std::max_align_t))
      << Where() << ": cache line " << kCacheLineSize
      << " is smaller than alignof(max_align_t) " << alignof(std::max_align_t);
}

TEST(ArchProbe, AtomicsAreLockFree) {
  EXPECT_TRUE(std::atomic<std::uint32_t>::is_always_lock_free)
      << Where() << ": 32-bit atomics must be lock-free on every target";
  std::atomic<std::uint32_t> a32{0};
  EXPECT_TRUE(a32.is_lock_free()) << Where();

  constexpr bool kAlways64 = std::atomic<std::uint64_t>::is_always_lock_free;
  std::atomic<std::uint64_t> a64{0};
  const bool runtime64 = a64.is_lock_free();
  if (kTarget.needs_lockfree_64) {
    EXPECT_TRUE(kAlways64)
        << Where() << ": the default count layout is 64-bit, so "
        << "std::atomic<uint64_t> must be always lock-free";
    EXPECT_TRUE(runtime64) << Where();
  } else {
    RecordProperty("atomic64_always_lock_free", kAlways64 ? "yes" : "no");
    RecordProperty("atomic64_lock_free_at_run_time", runtime64 ? "yes" : "no");
    std::printf("%s std::atomic<uint64_t>: is_always_lock_free=%d, "
                "is_lock_free()=%d (32-bit layout is the default here)\n",
                Where().c_str(), int(kAlways64), int(runtime64));
  }
  // Whether lock-free or through libatomic, 64-bit atomics must work.
  a64.store(0xfedcba9876543210ull);
  std::uint64_t expected = 0xfedcba9876543210ull;
  EXPECT_TRUE(a64.compare_exchange_strong(expected, 1ull)) << Where();
  EXPECT_EQ(a64.fetch_add(0x100000000ull), 1ull) << Where();
  EXPECT_EQ(a64.load(), 0x100000001ull) << Where();
}

}  // namespace
