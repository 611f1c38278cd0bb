// arch/futex.h on the target ABI: futex_wait, and futex_wait_classic, the
// classic futex system call futex_wait falls back to when the kernel has no
// futex_time64. QEMU user mode and current kernels have futex_time64, so
// the fallback runs only here.
//
// Built twice (conformance/BUILD): with the toolchain's default time_t, and
// with _TIME_BITS=64 (64-bit time_t on 32-bit ABIs), where the classic
// call's 32-bit timespec is no longer the C library's struct timespec.
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <ostream>
#include <string>
#include <thread>

#include "arch/futex.h"

namespace {

using rwsem::arch::monotonic_now_ns;

constexpr std::int64_t kMs = 1000000;

using WaitFn = int (*)(std::atomic<std::uint32_t>*, std::uint32_t, std::int64_t);

struct Impl {
  const char* name;
  WaitFn wait;
  friend void PrintTo(const Impl& i, std::ostream* os) { *os << i.name; }
};

class FutexWait : public ::testing::TestWithParam<Impl> {};

TEST(FutexAbi, ReportTimeT) {
  // For the log: which time_t this binary has.
  std::printf("sizeof(time_t)=%zu sizeof(struct timespec)=%zu sizeof(long)=%zu\n", sizeof(time_t),
              sizeof(struct timespec), sizeof(long));
#if defined(RWSEM_EXPECT_TIME64)
  EXPECT_EQ(sizeof(time_t), 8u) << "built with _TIME_BITS=64 but time_t is not 64-bit";
#endif
}

// A timed wait nobody wakes returns ETIMEDOUT, at or after its absolute
// CLOCK_MONOTONIC deadline, never before. Several rounds: a deadline
// truncated to whole seconds is early in nearly all of them.
TEST_P(FutexWait, TimesOutAtTheDeadlineNotBefore) {
  std::atomic<std::uint32_t> word{0};
  for (int i = 0; i < 5; ++i) {
    const std::int64_t deadline = monotonic_now_ns() + 20 * kMs;
    int r;
    do {
      r = GetParam().wait(&word, 0, deadline);
    } while (r == EINTR);
    const std::int64_t now = monotonic_now_ns();
    EXPECT_EQ(r, ETIMEDOUT);
    EXPECT_GE(now, deadline) << "returned " << (deadline - now) / 1e6 << " ms before the deadline";
  }
}

// A word that does not hold the expected value: back at once with 0 (the
// kernel's EAGAIN), not after the deadline.
TEST_P(FutexWait, ReturnsAtOnceWhenTheWordDiffers) {
  std::atomic<std::uint32_t> word{1};
  const std::int64_t t0 = monotonic_now_ns();
  EXPECT_EQ(GetParam().wait(&word, 0, t0 + 30000 * kMs), 0);
  EXPECT_EQ(GetParam().wait(&word, 0, rwsem::arch::kNoDeadline), 0);
  EXPECT_LT(monotonic_now_ns() - t0, 20000 * kMs) << "slept on a word that differs";
}

// A waiter with a deadline far ahead returns 0 when futex_wake wakes it.
// The word is left unchanged, so only a wake-up (not EAGAIN) ends the wait;
// the waker repeats its wake until the waiter is back, since it cannot know
// when the waiter went to sleep.
TEST_P(FutexWait, WokenByFutexWakeReturnsZero) {
  for (std::int64_t ahead : {std::int64_t{60000} * kMs, rwsem::arch::kNoDeadline}) {
    std::atomic<std::uint32_t> word{0};
    std::atomic<bool> done{false};
    int r = -1;
    std::int64_t returned = 0, deadline = 0;
    std::thread waiter([&] {
      deadline = ahead == rwsem::arch::kNoDeadline ? ahead : monotonic_now_ns() + ahead;
      do {
        r = GetParam().wait(&word, 0, deadline);
      } while (r == EINTR);
      returned = monotonic_now_ns();
      done.store(true);
    });
    while (!done.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      rwsem::arch::futex_wake(&word, 1);
    }
    waiter.join();
    EXPECT_EQ(r, 0);
    if (ahead != rwsem::arch::kNoDeadline) {
      EXPECT_LT(returned, deadline) << "timed out instead of being woken";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Arch, FutexWait,
    ::testing::Values(Impl{"futex_wait", &rwsem::arch::futex_wait},
                      Impl{"futex_wait_classic", &rwsem::arch::futex_wait_classic}),
    [](const ::testing::TestParamInfo<Impl>& info) { return std::string(info.param.name); });

}  // namespace
