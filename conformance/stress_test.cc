// locktorture-style stress over every layout, the starvation bound, and
// schedule replay. Durations scale with RWSEM_STRESS_SCALE.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "conformance/lock_types.h"
#include "conformance/test_util.h"
#include "conformance/torture.h"

namespace rwsem_test {
namespace {

using namespace std::chrono_literals;

template <class T>
class Stress : public ::testing::Test {
 protected:
  using Lock = T;

  static TortureStats torture(TortureParams p, const char* what) {
    Lock sem;
    Watchdog dog(std::string(T::kName) + " " + what, Watchdog::default_limit());
    dog.add_lock(T::kName, [&] { return lock_state(sem); });
    const TortureStats s = Torture<Lock>(sem, p, std::string(T::kName) + " " + what).run(dog);
    EXPECT_EQ(sem.count(), 0u) << "lock not clean after the run: " << sem.describe();
    return s;
  }
};
TYPED_TEST_SUITE(Stress, AllLocks, LockNames);

TYPED_TEST(Stress, MixedReadersAndWriters) {
  TortureParams p;
  p.readers = 4;
  p.writers = 2;
  const TortureStats s = TestFixture::torture(p, "mixed");
  EXPECT_EQ(s.write_fail, 0u) << s.summary();
  EXPECT_EQ(s.read_fail, 0u) << s.summary();
  EXPECT_GT(s.writes_total, 0u) << s.summary();
  EXPECT_GT(s.reads_total, 0u) << s.summary();
}

TYPED_TEST(Stress, WritersOnly) {
  TortureParams p;
  p.readers = 0;
  p.writers = 4;
  p.seconds = 0.5;
  const TortureStats s = TestFixture::torture(p, "writers");
  EXPECT_EQ(s.write_fail + s.read_fail, 0u) << s.summary();
  EXPECT_GT(s.writes_total, 0u) << s.summary();
}

TYPED_TEST(Stress, ReadersOnlyNeverWait) {
  if (!kShared<TypeParam>) GTEST_SKIP() << TypeParam::kName << " has no shared mode";
  TortureParams p;
  p.readers = 4;
  p.writers = 0;
  p.seconds = 0.3;
  const TortureStats s = TestFixture::torture(p, "readers");
  EXPECT_EQ(s.read_fail, 0u) << s.summary();
  EXPECT_EQ(s.try_failed + s.timed_out, 0u) << "readers alone were refused: " << s.summary();
}

// Fairness bounds starvation: with writers hammering the lock, a newly
// arriving reader or writer gets it within the handoff timeout plus the time
// to wake it. That is the rwsem's 4 ms handoff, the mutex's handoff to its
// first waiter, and the queued rwlock's FIFO queue. The slack is generous
// (QEMU and TSan are slow) and scales with RWSEM_TIME_SCALE; without the
// fairness mechanism the wait is unbounded.
TYPED_TEST(Stress, StarvationBoundUnderWriterStream) {
  const auto lock = make_starvation_lock<TypeParam>();
  TypeParam& sem = *lock;
  const auto bound = 4ms + std::chrono::duration_cast<std::chrono::milliseconds>(
                               2s * env_double("RWSEM_TIME_SCALE", 1.0));
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> hammer_ops{0};
  ThreadGroup hammers;
  ASSERT_TRUE(hammers.spawn_n(2, [&](int) {
    while (!stop.load(std::memory_order_relaxed)) {
      sem.lock();
      for (int k = 0; k < 50; ++k) rwsem::arch::cpu_relax();
      sem.unlock();
      hammer_ops.fetch_add(1, std::memory_order_relaxed);
    }
  }));
  ASSERT_TRUE(eventually(sem, [&] { return hammer_ops.load() > 100; }, "writers running"));
  std::chrono::steady_clock::duration worst_read{}, worst_write{};
  for (int i = 0; i < 10; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    read_lock(sem);
    worst_read = std::max(worst_read, std::chrono::steady_clock::now() - t0);
    read_unlock(sem);
    t0 = std::chrono::steady_clock::now();
    sem.lock();
    worst_write = std::max(worst_write, std::chrono::steady_clock::now() - t0);
    sem.unlock();
  }
  stop = true;
  hammers.join();
  const auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
  std::printf(
      "  worst wait under a writer stream: reader %.3f ms, writer %.3f ms (bound %.0f ms)\n",
      ms(worst_read), ms(worst_write), ms(bound));
  EXPECT_LE(worst_read, bound);
  EXPECT_LE(worst_write, bound);
}

TEST(Replay, SameSeedSameSchedule) {
  const std::uint64_t seed = run_seed();
  EXPECT_EQ(schedule_digest(seed, 4, 2), schedule_digest(seed, 4, 2));
  EXPECT_NE(schedule_digest(seed, 4, 2), schedule_digest(seed + 1, 4, 2));
  // Thread t's k-th operation depends on nothing but (seed, t, k).
  for (std::uint64_t k = 0; k < 100; ++k) {
    const Op a = op_at(seed, true, 5, k), b = op_at(seed, true, 5, k);
    EXPECT_EQ(int(a.kind), int(b.kind));
    EXPECT_EQ(a.hold_spins, b.hold_spins);
    EXPECT_EQ(a.timeout_us, b.timeout_us);
  }
  std::printf("  seed %llu -> schedule digest 0x%016llx\n", static_cast<unsigned long long>(seed),
              static_cast<unsigned long long>(schedule_digest(seed, 4, 2)));
}

}  // namespace
}  // namespace rwsem_test
