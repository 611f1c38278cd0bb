// The C++ SharedTimedMutex requirements, over every layout.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <shared_mutex>
#include <thread>

#include "conformance/lock_types.h"
#include "conformance/test_util.h"
#include "lib/rwsem/rwsem.h"
#include "lib/rwsem/testing.h"

namespace rwsem_test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

template <class L>
class SharedTimedMutexApi : public ::testing::Test {
 protected:
  using Lock = rwsem::BasicRwSemaphore<L>;
};
TYPED_TEST_SUITE(SharedTimedMutexApi, AllLayouts, LayoutNames);

// [thread.timedmutex.requirements]: a timed try that fails has waited at
// least the requested time (the bound the API itself promises).
TYPED_TEST(SharedTimedMutexApi, TimedTriesWaitAtLeastTheRequestedTime) {
  typename TestFixture::Lock sem;
  sem.lock();
  std::thread([&] {
    for (auto d : {1ms, 15ms}) {
      auto t0 = Clock::now();
      EXPECT_FALSE(sem.try_lock_for(d));
      EXPECT_GE(Clock::now() - t0, d);
      t0 = Clock::now();
      EXPECT_FALSE(sem.try_lock_shared_for(d));
      EXPECT_GE(Clock::now() - t0, d);
      auto until = Clock::now() + d;
      EXPECT_FALSE(sem.try_lock_until(until));
      EXPECT_GE(Clock::now(), until);
      until = Clock::now() + d;
      EXPECT_FALSE(sem.try_lock_shared_until(until));
      EXPECT_GE(Clock::now(), until);
    }
  }).join();
  sem.unlock();
  EXPECT_EQ(sem.count(), 0u) << sem.describe();
}

TYPED_TEST(SharedTimedMutexApi, TimedTriesSucceedWhenFreedInTime) {
  typename TestFixture::Lock sem;
  sem.lock();
  std::atomic<int> got{0};
  ThreadGroup g;
  g.spawn([&] {
    if (sem.try_lock_for(60s)) {
      got++;
      sem.unlock();
    }
  });
  g.spawn([&] {
    if (sem.try_lock_shared_until(Clock::now() + 60s)) {
      got++;
      sem.unlock_shared();
    }
  });
  g.spawn([&] {
    if (sem.try_lock_shared_until(std::chrono::system_clock::now() + 60s)) {
      got++;
      sem.unlock_shared();
    }
  });
  ASSERT_TRUE(eventually(sem, [&] { return rwsem::testing::Peer::queue_length(sem) == 3; },
                         "three timed waiters queued"));
  sem.unlock();
  g.join();
  EXPECT_EQ(got.load(), 3);
  EXPECT_EQ(sem.count(), 0u) << sem.describe();
}

TYPED_TEST(SharedTimedMutexApi, PastDeadlineBehavesLikeTry) {
  typename TestFixture::Lock sem;
  EXPECT_TRUE(sem.try_lock_for(0s));
  EXPECT_FALSE(sem.try_lock_shared_until(Clock::now() - 1s));
  sem.unlock();
  EXPECT_TRUE(sem.try_lock_shared_until(std::chrono::system_clock::now() - 1h));
  EXPECT_TRUE(sem.try_lock_shared_for(-1s));
  EXPECT_FALSE(sem.try_lock_until(Clock::time_point::min()));
  EXPECT_TRUE(sem.try_lock_shared_for(std::chrono::hours::max()));
  EXPECT_TRUE(sem.try_lock_shared_until(Clock::time_point::max()));
  sem.unlock_shared();
  sem.unlock_shared();
  sem.unlock_shared();
  sem.unlock_shared();
  EXPECT_EQ(sem.count(), 0u) << sem.describe();
}

// A writer that gives up must not leave the readers that queued behind it
// (because its WAITERS bit made their fast path fail) blocked.
TYPED_TEST(SharedTimedMutexApi, ExpiredWriterDoesNotStrandReaders) {
  // No spinning: spinning readers may join a reader-owned lock ahead of a
  // queued writer by design; here they must queue behind it.
  rwsem::Options no_spin;
  no_spin.spin_budget = std::chrono::nanoseconds(0);
  typename TestFixture::Lock sem(no_spin);
  sem.lock_shared();
  std::atomic<bool> writer_done{false};
  std::atomic<int> readers_in{0};
  ThreadGroup g;
  g.spawn([&] {
    EXPECT_FALSE(sem.try_lock_for(2s));
    writer_done = true;
  });
  ASSERT_TRUE(eventually(sem, [&] { return rwsem::testing::Peer::queue_length(sem) == 1; },
                         "timed writer queued"));
  ASSERT_TRUE(g.spawn_n(3, [&](int) {
    sem.lock_shared();
    readers_in++;
    sem.unlock_shared();
  }));
  // While the writer waits, the readers queue behind it...
  // (On a very slow target the writer may give up first; then there is no
  // queue to check.)
  // readers_in is read before the queue: if all four were still queued
  // after that read, no reader can have been in before it.
  int readers_in_while_queued = -1;
  ASSERT_TRUE(eventually(sem, [&] {
    const int r = readers_in.load();
    if (rwsem::testing::Peer::queue_length(sem) == 4) readers_in_while_queued = r;
    return readers_in_while_queued >= 0 || writer_done.load();
  }, "3 readers queued behind the timed writer"));
  if (readers_in_while_queued >= 0)
    EXPECT_EQ(readers_in_while_queued, 0) << "readers overtook a queued writer";
  // ...and when it gives up, they run.
  ASSERT_TRUE(eventually(sem, [&] { return readers_in.load() == 3; },
                         "readers behind the expired writer ran"));
  g.join();
  EXPECT_TRUE(writer_done.load());
  sem.unlock_shared();
  EXPECT_EQ(sem.count(), 0u) << sem.describe();
}

TYPED_TEST(SharedTimedMutexApi, WorksWithStdLockTypes) {
  using Lock = typename TestFixture::Lock;
  Lock a, b;
  {
    std::scoped_lock both(a, b);
    EXPECT_FALSE(a.try_lock_shared());
    EXPECT_FALSE(b.try_lock_shared());
  }
  {
    std::unique_lock<Lock> w(a, std::defer_lock);
    EXPECT_TRUE(w.try_lock_for(1s));
    w.unlock();
    std::shared_lock<Lock> r1(a), r2(a, std::try_to_lock);
    EXPECT_TRUE(r2.owns_lock());
    std::shared_lock<Lock> r3(b, std::chrono::system_clock::now() + 1s);
    EXPECT_TRUE(r3.owns_lock());
  }
  EXPECT_EQ(a.count(), 0u);
  EXPECT_EQ(b.count(), 0u);
}

TYPED_TEST(SharedTimedMutexApi, ManyThreadsTryLockShared) {
  typename TestFixture::Lock sem;
  std::atomic<int> refused{0};
  ThreadGroup g;
  ASSERT_TRUE(g.spawn_n(8, [&](int) {
    for (int i = 0; i < 2000; ++i) {
      if (sem.try_lock_shared()) sem.unlock_shared();
      else refused++;
    }
  }));
  g.join();
  EXPECT_EQ(refused.load(), 0) << "try_lock_shared failed with no writer around";
  EXPECT_EQ(sem.count(), 0u) << sem.describe();
}

}  // namespace
}  // namespace rwsem_test
