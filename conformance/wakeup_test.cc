// Every unlock wakes the waiter it owes a wake-up to, checked with schedule
// perturbation (lib/rwsem/internal/perturb.h): this binary is built with
// RWSEM_PERTURB=1, so the locks yield or sleep at random at their protocol
// boundaries and the windows in which a wake-up can be lost open wide.
//
// Each round: the main thread holds the lock; a waiter thread asks for it;
// after a random delay the main thread unlocks once and does nothing else.
// Nothing but that one unlock can wake the waiter, so a lost wake-up is not
// healed by later traffic (as it is in the stress tests): the waiter stays
// asleep beside a free lock, and the hang guard fails the test with the
// lock's state printed.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <thread>

#include "conformance/lock_types.h"
#include "conformance/test_util.h"
#include "conformance/torture.h"
#include "lib/rwsem/internal/perturb.h"

static_assert(rwsem::internal::kPerturb, "wakeup_test must be built with RWSEM_PERTURB=1");

namespace rwsem_test {
namespace {

template <class T>
class Wakeup : public ::testing::Test {};
TYPED_TEST_SUITE(Wakeup, AllLocks, LockNames);

TYPED_TEST(Wakeup, TheOneUnlockWakesTheWaiter) {
  const std::uint64_t seed = run_seed();
  const int rounds = static_cast<int>(300 * env_double("RWSEM_STRESS_SCALE", 1.0));
  std::printf("[wakeup %s] seed=%llu rounds=%d\n", TypeParam::kName,
              static_cast<unsigned long long>(seed), rounds);
  std::uint64_t x = seed | 1;
  auto next = [&x] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  for (int spin = 0; spin < 2; ++spin) {
    const auto lock = make_lock<TypeParam>(spin == 1);
    TypeParam& m = *lock;
    // The main thread's own lock calls are not bounded by the hang guard;
    // the watchdog aborts with the lock state if a round stops moving.
    Watchdog dog(std::string("wakeup ") + TypeParam::kName, Watchdog::default_limit());
    dog.add_lock(TypeParam::kName, [&] { return lock_state(m); });
    std::atomic<int> turn{-1}, done{-1};
    std::atomic<bool> waiter_reads{false};
    ThreadGroup g;
    g.spawn([&] {
      for (int r = 0; r < rounds; ++r) {
        while (turn.load(std::memory_order_acquire) != r) std::this_thread::yield();
        if (waiter_reads.load(std::memory_order_relaxed)) {
          read_lock(m);
          read_unlock(m);
        } else {
          m.lock();
          m.unlock();
        }
        done.store(r, std::memory_order_release);
      }
    });
    for (int r = 0; r < rounds; ++r) {
      const std::uint64_t v = next();
      const bool holder_reads = kShared<TypeParam> && (v & 3) == 1;
      waiter_reads.store(kShared<TypeParam> && !holder_reads && (v & 3) == 2,
                         std::memory_order_relaxed);
      if (holder_reads) read_lock(m);
      else m.lock();
      turn.store(r, std::memory_order_release);
      // Up to 100 us: sometimes before the waiter queues, often after.
      const auto delay = std::chrono::microseconds((v >> 8) % 100);
      const auto until = std::chrono::steady_clock::now() + delay;
      while (std::chrono::steady_clock::now() < until) std::this_thread::yield();
      if (holder_reads) read_unlock(m);
      else m.unlock();
      ASSERT_TRUE(eventually(m, [&] { return done.load(std::memory_order_acquire) == r; },
                             "the waiter woken by the one unlock"))
          << "round " << r << (spin ? ", spinning" : ", spinning off") << ", seed " << seed;
      dog.progress();
    }
    g.join();
    EXPECT_EQ(m.count(), 0u) << m.describe();
  }
}

}  // namespace
}  // namespace rwsem_test
