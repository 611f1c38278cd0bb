// What every lock type promises through the std names (Lockable,
// SharedLockable, TimedLockable where it has them), over AllLocks. The
// rwsem's SharedTimedMutex details (queue positions, system_clock
// deadlines) are in api_test.cc.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <shared_mutex>
#include <thread>

#include "conformance/lock_types.h"
#include "conformance/test_util.h"
#include "lib/rwsem/testing.h"

namespace rwsem_test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

template <class T>
class StdLockApi : public ::testing::Test {};
TYPED_TEST_SUITE(StdLockApi, AllLocks, LockNames);

// Runs f on another thread and returns its result: try_* must be asked by a
// thread that does not hold the lock.
template <class F>
bool elsewhere(F f) {
  bool r = false;
  std::thread([&] { r = f(); }).join();
  return r;
}

TYPED_TEST(StdLockApi, TryLockRespectsTheHolder) {
  TypeParam m;
  m.lock();
  const auto held = m.count();
  EXPECT_FALSE(elsewhere([&] { return m.try_lock(); })) << m.describe();
  EXPECT_FALSE(elsewhere([&] { return read_try_lock(m); })) << m.describe();
  // A try that fails leaves no trace (no flag a later unlock would act on).
  EXPECT_EQ(m.count(), held) << m.describe();
  m.unlock();
  EXPECT_EQ(m.count(), 0u) << m.describe();
  EXPECT_TRUE(elsewhere([&] {
    const bool got = m.try_lock();
    if (got) m.unlock();
    return got;
  }));
  EXPECT_EQ(m.count(), 0u) << m.describe();
}

TYPED_TEST(StdLockApi, SharedHoldersAdmitReadersNotWriters) {
  if constexpr (!kShared<TypeParam>) {
    GTEST_SKIP() << TypeParam::kName << " has no shared mode";
  } else {
    TypeParam m;
    m.lock_shared();
    EXPECT_TRUE(elsewhere([&] {
      const bool got = m.try_lock_shared();
      if (got) m.unlock_shared();
      return got;
    })) << m.describe();
    EXPECT_FALSE(elsewhere([&] { return m.try_lock(); })) << m.describe();
    m.unlock_shared();
    EXPECT_EQ(m.count(), 0u) << m.describe();
  }
}

TYPED_TEST(StdLockApi, WorksWithStdGuards) {
  TypeParam a, b;
  {
    std::lock_guard<TypeParam> g(a);
    EXPECT_NE(a.count(), 0u);
  }
  {
    std::unique_lock<TypeParam> g(a, std::try_to_lock);
    EXPECT_TRUE(g.owns_lock());
  }
  {
    std::scoped_lock both(a, b);  // std::lock's try_lock-based deadlock avoidance
    EXPECT_NE(a.count(), 0u);
    EXPECT_NE(b.count(), 0u);
  }
  if constexpr (kShared<TypeParam>) {
    std::shared_lock<TypeParam> r1(a);
    std::shared_lock<TypeParam> r2(a, std::try_to_lock);
    EXPECT_TRUE(r2.owns_lock());
  }
  EXPECT_EQ(a.count(), 0u) << a.describe();
  EXPECT_EQ(b.count(), 0u) << b.describe();
}

// [thread.timedmutex.requirements]: a timed try that fails has waited at
// least the requested time (the bound the API itself promises), and leaves
// no trace in the lock.
TYPED_TEST(StdLockApi, TimedTryFailsAfterTheTimeAndLeavesNoTrace) {
  if constexpr (!kTimed<TypeParam>) {
    GTEST_SKIP() << TypeParam::kName << " has no timed tries";
  } else {
    TypeParam m;
    m.lock();
    const auto held = m.count();
    ThreadGroup g;
    ASSERT_TRUE(g.spawn_n(3, [&](int) {
      for (auto d : {1ms, 15ms}) {
        const auto t0 = Clock::now();
        EXPECT_FALSE(m.try_lock_for(d));
        EXPECT_GE(Clock::now() - t0, d);
        const auto until = Clock::now() + d;
        EXPECT_FALSE(m.try_lock_until(until));
        EXPECT_GE(Clock::now(), until);
      }
    }));
    g.join();
    EXPECT_EQ(m.count(), held) << "timed-out waiters left flags behind: " << m.describe();
    m.unlock();
    EXPECT_EQ(m.count(), 0u) << m.describe();
  }
}

TYPED_TEST(StdLockApi, TimedTrySucceedsWhenFreedInTime) {
  if constexpr (!kTimed<TypeParam>) {
    GTEST_SKIP() << TypeParam::kName << " has no timed tries";
  } else {
    TypeParam m;
    m.lock();
    std::atomic<int> got{0}, started{0};
    ThreadGroup g;
    ASSERT_TRUE(g.spawn_n(2, [&](int) {
      started++;
      if (m.try_lock_for(60s)) {
        got++;
        m.unlock();
      }
    }));
    ASSERT_TRUE(eventually(m, [&] { return started.load() == 2; }, "waiters started"));
    std::this_thread::sleep_for(5ms);  // let them queue (not required to pass)
    m.unlock();
    g.join();
    EXPECT_EQ(got.load(), 2);
    EXPECT_EQ(m.count(), 0u) << m.describe();
  }
}

// Threads in a timed lock's wait list (the rwsem's and the mutex's).
template <class T>
std::size_t queued(T& m) {
  if constexpr (IsRwsem<T>::value) return rwsem::testing::Peer::queue_length(m);
  else return m.queue_length();
}

// A timeout no deadline can hold (hours::max(), nanoseconds::max(), 1e300
// s, a time point's max() on the steady clock and on system_clock) means
// "as long as it takes": each such try waits for the unlock and gets the
// lock, as lock() would. The lock stays held until all of them have queued
// or one has given up; a lock that turns such a timeout into a deadline in
// the past (a conversion to nanoseconds that overflows or wraps, a clamp to
// the wrong end) gives up at once.
TYPED_TEST(StdLockApi, TimedTriesWithoutAReachableBoundWaitForTheUnlock) {
  if constexpr (!kTimed<TypeParam>) {
    GTEST_SKIP() << TypeParam::kName << " has no timed tries";
  } else {
    TypeParam m;
    m.lock();
    std::atomic<int> got{0}, gave_up{0};
    ThreadGroup g;
    const auto attempt = [&](auto try_lock) {
      return [&, try_lock] {
        if (!try_lock()) {
          gave_up++;
          return;
        }
        got++;
        m.unlock();
      };
    };
    const bool started =
        g.spawn(attempt([&] { return m.try_lock_for(std::chrono::hours::max()); })) &&
        g.spawn(attempt([&] { return m.try_lock_for(std::chrono::nanoseconds::max()); })) &&
        g.spawn(attempt([&] { return m.try_lock_for(std::chrono::duration<double>(1e300)); })) &&
        g.spawn(attempt([&] { return m.try_lock_until(Clock::time_point::max()); })) &&
        g.spawn(attempt(
            [&] { return m.try_lock_until(std::chrono::system_clock::time_point::max()); }));
    constexpr int kTries = 5;
    ASSERT_TRUE(started);
    ASSERT_TRUE(eventually(m, [&] {
      return gave_up.load() > 0 || queued(m) == std::size_t{kTries};
    }, "every unbounded try queued"));
    EXPECT_EQ(gave_up.load(), 0)
        << "a try without a reachable bound gave up while the lock was held";
    m.unlock();
    g.join();
    EXPECT_EQ(got.load(), kTries);
    EXPECT_EQ(m.count(), 0u) << m.describe();
  }
}

// Mutual exclusion through the std names, for every lock, with a plain
// counter TSan watches.
TYPED_TEST(StdLockApi, LockExcludes) {
  TypeParam m;
  long counter = 0;  // protected by m, deliberately plain
  ThreadGroup g;
  ASSERT_TRUE(g.spawn_n(4, [&](int) {
    for (int i = 0; i < 5000; ++i) {
      std::lock_guard<TypeParam> guard(m);
      ++counter;
    }
  }));
  g.join();
  EXPECT_EQ(counter, 20000);
  EXPECT_EQ(m.count(), 0u) << m.describe();
}

}  // namespace
}  // namespace rwsem_test
