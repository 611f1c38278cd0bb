// try_lock_until / try_lock_shared_until on clocks other than
// std::chrono::steady_clock, over the timed locks of AllLocks.
//
// [thread.req.timing]: "the timeout expires when Clock::now() >= abs_time",
// read on the caller's clock. [thread.timedmutex.requirements]: try_lock_until
// returns false only once that time has passed. The lock parks on
// CLOCK_MONOTONIC deadlines, so a clock that runs slow, runs fast, or jumps
// backwards must be re-read after each wait (internal::until in
// lib/rwsem/internal/deadline.h).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <ratio>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "arch/futex.h"
#include "conformance/lock_types.h"
#include "conformance/test_util.h"
#include "lib/rwsem/internal/deadline.h"

namespace rwsem_test {
namespace {

using namespace std::chrono_literals;
// The deadline helpers read the futex clock of a platform policy.
using Native = rwsem::internal::NativePlatform;

// A user-defined clock: real (monotonic) time since reset(), times Num/Den,
// plus a fixed epoch offset. kJumpBack: 30 ms (real) after reset() it jumps
// back by 60 ms and runs on from there, like a wall clock being set back.
// is_steady is false, as for any clock that is not steady_clock's own.
template <std::intmax_t Num, std::intmax_t Den, bool kJumpBack = false>
struct TestClock {
  using rep = std::int64_t;
  using period = std::nano;
  using duration = std::chrono::nanoseconds;
  using time_point = std::chrono::time_point<TestClock>;
  static constexpr bool is_steady = false;

  static time_point now() {
    const std::int64_t real =
        rwsem::arch::monotonic_now_ns() - base.load(std::memory_order_relaxed);
    std::int64_t v = real / Den * Num + real % Den * Num / Den;
    if (kJumpBack && real >= std::chrono::nanoseconds(30ms).count())
      v -= std::chrono::nanoseconds(60ms).count();
    return time_point(duration(v) + std::chrono::hours(1));
  }
  static void reset() { base.store(rwsem::arch::monotonic_now_ns(), std::memory_order_relaxed); }
  static inline std::atomic<std::int64_t> base{0};
};

using SlowClock = TestClock<1, 3>;           // 1/3 of real speed
using FastClock = TestClock<3, 1>;           // 3x real speed
using JumpBackClock = TestClock<1, 1, true>;  // real speed, set back 60 ms once

template <class C>
void reset_clock() {
  if constexpr (!std::is_same_v<C, std::chrono::system_clock>) C::reset();
}

template <class C>
const char* clock_name() {
  if constexpr (std::is_same_v<C, SlowClock>) return "slow (1/3 speed) clock";
  else if constexpr (std::is_same_v<C, FastClock>) return "fast (3x) clock";
  else if constexpr (std::is_same_v<C, JumpBackClock>) return "clock set back 60 ms";
  else return "system_clock";
}

template <class D>
double ms(D d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// The two timed tries under test: exclusive, and shared where there is one.
template <class T, class TP>
bool timed_try(T& m, bool shared, const TP& t) {
  if constexpr (kShared<T>) {
    if (shared) return m.try_lock_shared_until(t);
  }
  return m.try_lock_until(t);
}
template <class T>
void unlock_as(T& m, bool shared) {
  if (shared) read_unlock(m);
  else m.unlock();
}

// Held by this thread throughout: another thread's try_lock_until(now+100ms)
// on clock C fails, and not before C says the deadline has come.
template <class C, class T>
void expect_fails_at_deadline_on(T& m, bool shared) {
  SCOPED_TRACE(std::string(clock_name<C>()) + (shared ? ", shared" : ", exclusive"));
  bool got = true;
  typename C::time_point deadline, returned;
  std::thread([&] {
    reset_clock<C>();
    deadline = C::now() + 100ms;
    got = timed_try(m, shared, deadline);
    returned = C::now();
    if (got) unlock_as(m, shared);
  }).join();
  EXPECT_FALSE(got) << "acquired a lock this thread holds: " << m.describe();
  EXPECT_TRUE(returned >= deadline) << "gave up " << ms(deadline - returned)
                                    << " ms before the deadline, read on the caller's clock";
}

// The holder lets go when C has advanced 50 ms (halfway to the deadline):
// the timed try succeeds.
template <class C, class T>
void expect_succeeds_when_released_midway_on(T& m, bool shared) {
  SCOPED_TRACE(std::string(clock_name<C>()) + (shared ? ", shared" : ", exclusive"));
  std::atomic<bool> started{false};
  std::atomic<bool> got{false};
  typename C::time_point start;
  ThreadGroup g;
  g.spawn([&] {
    reset_clock<C>();
    start = C::now();
    started.store(true);
    if (timed_try(m, shared, start + 100ms)) {
      got.store(true);
      unlock_as(m, shared);
    }
  });
  ASSERT_TRUE(eventually(m, [&] { return started.load(); }, "waiter started"));
  ASSERT_TRUE(eventually(m, [&] { return C::now() >= start + 50ms; },
                         "the caller's clock reached the midpoint"));
  m.unlock();
  g.join();
  EXPECT_TRUE(got.load()) << m.describe();
  EXPECT_EQ(m.count(), 0u) << m.describe();
  m.lock();  // the caller holds it again, as it found it
}

template <class T>
class TimedUntil : public ::testing::Test {};
TYPED_TEST_SUITE(TimedUntil, AllLocks, LockNames);

template <class T>
std::vector<bool> modes() {
  if constexpr (kShared<T>) return {false, true};
  else return {false};
}

TYPED_TEST(TimedUntil, FailsOnlyOnceTheCallersClockReachedTheDeadline) {
  if constexpr (!kTimed<TypeParam>) {
    GTEST_SKIP() << TypeParam::kName << " has no timed tries";
  } else {
    TypeParam m;
    m.lock();
    for (bool shared : modes<TypeParam>()) {
      expect_fails_at_deadline_on<SlowClock>(m, shared);
      expect_fails_at_deadline_on<FastClock>(m, shared);
      expect_fails_at_deadline_on<JumpBackClock>(m, shared);
      expect_fails_at_deadline_on<std::chrono::system_clock>(m, shared);
    }
    m.unlock();
    EXPECT_EQ(m.count(), 0u) << "timed-out waiters left flags behind: " << m.describe();
  }
}

TYPED_TEST(TimedUntil, SucceedsWhenReleasedBeforeTheCallersDeadline) {
  if constexpr (!kTimed<TypeParam>) {
    GTEST_SKIP() << TypeParam::kName << " has no timed tries";
  } else {
    TypeParam m;
    m.lock();
    for (bool shared : modes<TypeParam>()) {
      expect_succeeds_when_released_midway_on<SlowClock>(m, shared);
      expect_succeeds_when_released_midway_on<FastClock>(m, shared);
      expect_succeeds_when_released_midway_on<JumpBackClock>(m, shared);
      expect_succeeds_when_released_midway_on<std::chrono::system_clock>(m, shared);
    }
    m.unlock();
    EXPECT_EQ(m.count(), 0u) << m.describe();
  }
}

// A time point that has passed, on any clock, is one try_lock(): it takes a
// free lock and fails at once on a held one.
TYPED_TEST(TimedUntil, PastTimePointIsOneNonBlockingTry) {
  if constexpr (!kTimed<TypeParam>) {
    GTEST_SKIP() << TypeParam::kName << " has no timed tries";
  } else {
    TypeParam m;
    SlowClock::reset();
    JumpBackClock::reset();
    for (bool shared : modes<TypeParam>()) {
      EXPECT_TRUE(timed_try(m, shared, SlowClock::now() - 1ms));
      unlock_as(m, shared);
      EXPECT_TRUE(timed_try(m, shared, SlowClock::time_point::min()));
      unlock_as(m, shared);
    }
    m.lock();
    for (bool shared : modes<TypeParam>()) {
      const auto t0 = std::chrono::steady_clock::now();
      bool got = false;
      std::thread([&] {
        got = timed_try(m, shared, SlowClock::now() - 1ms) ||
              timed_try(m, shared, JumpBackClock::now() - 1h) ||
              timed_try(m, shared, std::chrono::system_clock::now() - 1s) ||
              timed_try(m, shared, std::chrono::system_clock::time_point::min());
      }).join();
      EXPECT_FALSE(got);
      // Not a timing assertion proper: a blocking wait on any of them would
      // last until the holder let go, i.e. forever.
      EXPECT_LT(std::chrono::steady_clock::now() - t0, hang_limit());
    }
    m.unlock();
    EXPECT_EQ(m.count(), 0u) << m.describe();
  }
}

// ---- internal::until itself ---------------------------------------------

TEST(DeadlineUntil, PastTimePointCallsTheOperationExactlyOnceWithDeadlineNow) {
  SlowClock::reset();
  for (bool result : {false, true}) {
    int calls = 0;
    std::int64_t before = rwsem::arch::monotonic_now_ns(), seen = -1;
    auto op = [&](std::int64_t d) {
      ++calls;
      seen = d;
      return result;
    };
    EXPECT_EQ(rwsem::internal::until<Native>(SlowClock::now() - 1ms, op), result);
    EXPECT_EQ(calls, 1);
    EXPECT_GE(seen, before);
    EXPECT_LE(seen, rwsem::arch::monotonic_now_ns()) << "a past time point must not wait";
    calls = 0;
    EXPECT_EQ(rwsem::internal::until<Native>(std::chrono::system_clock::time_point::min(), op),
              result);
    EXPECT_EQ(calls, 1);
    calls = 0;
    EXPECT_EQ(rwsem::internal::until<Native>(std::chrono::steady_clock::now() - 1s, op), result);
    EXPECT_EQ(calls, 1);
    EXPECT_LE(seen, rwsem::arch::monotonic_now_ns());
  }
}

// An operation that fails exactly at its monotonic deadline (as a lock held
// throughout does) is retried until the caller's clock has passed the time
// point; on steady_clock, the futex clock itself, once is enough.
TEST(DeadlineUntil, RetriesUntilTheCallersClockHasPassed) {
  auto wait_until_deadline = [](int* calls) {
    return [calls](std::int64_t d) {
      ++*calls;
      while (rwsem::arch::monotonic_now_ns() < d)
        std::this_thread::sleep_for(std::chrono::nanoseconds(d - rwsem::arch::monotonic_now_ns()));
      return false;
    };
  };
  int calls = 0;
  SlowClock::reset();
  const auto t = SlowClock::now() + 30ms;
  EXPECT_FALSE(rwsem::internal::until<Native>(t, wait_until_deadline(&calls)));
  EXPECT_GE(SlowClock::now(), t);
  EXPECT_GE(calls, 2) << "a slow clock needs more than one wait";

  calls = 0;
  const auto s = std::chrono::steady_clock::now() + 10ms;
  EXPECT_FALSE(rwsem::internal::until<Native>(s, wait_until_deadline(&calls)));
  EXPECT_GE(std::chrono::steady_clock::now(), s);
  EXPECT_EQ(calls, 1);

  // A success ends the loop at once.
  calls = 0;
  SlowClock::reset();
  EXPECT_TRUE(rwsem::internal::until<Native>(SlowClock::now() + 1h, [&](std::int64_t) {
    ++calls;
    return true;
  }));
  EXPECT_EQ(calls, 1);
}

// A bound no deadline can hold (deadline.h: more than ~30 years is "for
// ever") reaches the wait as a deadline at least 1e18 ns (~31.7 years)
// away, whatever its duration type or clock. Lock-level tests can only see
// a try that gives up while they watch (StdLockApi.TimedTriesWithoutA-
// ReachableBoundWaitForTheUnlock); this sees a clamp to any nearer finite
// deadline, or a conversion that overflows.
TEST(DeadlineUntil, UnreachableBoundsBecomeDeadlinesDecadesAway) {
  constexpr std::int64_t kDecades = 1000000000000000000;
  const std::int64_t now = rwsem::arch::monotonic_now_ns();
  std::vector<std::int64_t> seen;
  seen.push_back(rwsem::internal::deadline_after<Native>(std::chrono::hours::max()));
  seen.push_back(rwsem::internal::deadline_after<Native>(std::chrono::nanoseconds::max()));
  seen.push_back(rwsem::internal::deadline_after<Native>(std::chrono::duration<double>(1e300)));
  const auto take = [&](std::int64_t d) {
    seen.push_back(d);
    return true;
  };
  EXPECT_TRUE(rwsem::internal::until<Native>(std::chrono::steady_clock::time_point::max(), take));
  EXPECT_TRUE(rwsem::internal::until<Native>(std::chrono::system_clock::time_point::max(), take));
  ASSERT_EQ(seen.size(), 5u);
  for (std::size_t i = 0; i < seen.size(); ++i)
    EXPECT_GE(seen[i], now + kDecades)
        << "bound " << i << " became a deadline " << (seen[i] - now) / 1000000000 << " s away";
}

}  // namespace
}  // namespace rwsem_test
