// Ordering litmus tests: the lock alone must order one critical section
// before the next. Two threads take turns, passing the turn through a
// *relaxed* atomic, which gives no happens-before of its own; each section
// reads what the previous one wrote to plain memory. A missing acquire or
// release on any fast path is then a data race that TSan reports, and
// without TSan a weakly ordered machine can show a stale value.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "conformance/lock_types.h"

namespace rwsem_test {
namespace {

template <class T>
class Handover : public ::testing::Test {
 protected:
  using Lock = T;
  enum Kind { kRead, kWrite, kDowngrade, kReadTry, kWriteTry, kReadTimed, kWriteTimed };

  // Thread A runs `a` sections, thread B `b` sections, strictly alternating.
  // A section of a writing kind stores round+1 into every word; a reading
  // kind checks the words hold what the last writer stored.
  static void ping_pong(Kind a, Kind b, int rounds = 2000) {
    Lock sem;
    long data[4] = {};
    std::atomic<int> turn{0};  // relaxed only: the lock must do the ordering
    std::atomic<int> stale{0};
    auto side = [&](Kind k, int me) {
      for (int r = me; r < rounds; r += 2) {
        while (turn.load(std::memory_order_relaxed) != r) std::this_thread::yield();
        section(sem, k, data, r, stale);
        turn.store(r + 1, std::memory_order_relaxed);
      }
    };
    std::thread ta(side, a, 0), tb(side, b, 1);
    ta.join();
    tb.join();
    EXPECT_EQ(stale.load(), 0) << "a section saw data older than the previous section";
    EXPECT_EQ(sem.count(), 0u) << sem.describe();
  }

  // Writers set every word to round+1. A section must see one consistent
  // value and never one from the future; TSan checks it is the latest.
  static void section(Lock& sem, Kind k, long* data, int round, std::atomic<int>& stale) {
    auto write = [&] {
      for (int i = 0; i < 4; ++i) data[i] = round + 1;
    };
    // Before our own write the newest value any earlier section can have
    // stored is `round`; after it, round + 1.
    long newest = round;
    auto read = [&] {
      for (int i = 0; i < 4; ++i)
        if (data[i] != data[0] || data[i] > newest) stale++;
    };
    using namespace std::chrono_literals;
    // clang-format off: one line per kind of section, as a table
    switch (k) {
      case kRead: read_lock(sem); read(); read_unlock(sem); break;
      case kReadTry: while (!read_try_lock(sem)) {} read(); read_unlock(sem); break;
      case kReadTimed: while (!read_lock_for(sem, 10s)) {} read(); read_unlock(sem); break;
      case kWrite: sem.lock(); read(); write(); sem.unlock(); break;
      case kWriteTry: while (!sem.try_lock()) {} read(); write(); sem.unlock(); break;
      case kWriteTimed: while (!write_lock_for(sem, 10s)) {} read(); write(); sem.unlock(); break;
      case kDowngrade: {
        sem.lock(); read(); write(); newest = round + 1;
        const bool downgraded = downgrade(sem);
        read();
        unlock_after_downgrade(sem, downgraded);
        break;
      }
    }
    // clang-format on
  }
};
TYPED_TEST_SUITE(Handover, AllLocks, LockNames);

// up_write (release) -> down_read (acquire)
TYPED_TEST(Handover, WriterToReader) {
  TestFixture::ping_pong(TestFixture::kWrite, TestFixture::kRead);
}
// up_read (release) -> down_write (acquire): the reader's loads must happen
// before the writer's stores.
TYPED_TEST(Handover, ReaderToWriter) {
  TestFixture::ping_pong(TestFixture::kRead, TestFixture::kWrite);
}
TYPED_TEST(Handover, WriterToWriter) {
  TestFixture::ping_pong(TestFixture::kWrite, TestFixture::kWrite);
}
// downgrade_write (release) -> down_read (acquire)
TYPED_TEST(Handover, DowngradeToReader) {
  if (!kDowngrade<TypeParam>) GTEST_SKIP() << TypeParam::kName << " has no downgrade";
  TestFixture::ping_pong(TestFixture::kDowngrade, TestFixture::kRead);
}
// downgrade_write (release) -> down_read (acquire) while the downgraded
// writer still holds its read lock, so only the downgrade's release can
// order the writer's stores before the reader's loads.
TYPED_TEST(Handover, ReaderJoinsDowngradedWriter) {
  if constexpr (!kDowngrade<TypeParam>) {
    GTEST_SKIP() << TypeParam::kName << " has no downgrade";
  } else {
    typename TestFixture::Lock sem;
    long data[4] = {};
    std::atomic<int> turn{0};  // relaxed only, as above
    std::atomic<int> stale{0};
    constexpr int kRounds = 2000;
    std::thread writer([&] {
      for (int r = 0; r < kRounds; ++r) {
        while (turn.load(std::memory_order_relaxed) != 2 * r) std::this_thread::yield();
        sem.down_write();
        for (long& d : data) d = r + 1;
        sem.downgrade_write();
        turn.store(2 * r + 1, std::memory_order_relaxed);
        while (turn.load(std::memory_order_relaxed) != 2 * r + 2) std::this_thread::yield();
        sem.up_read();
      }
    });
    std::thread reader([&] {
      for (int r = 0; r < kRounds; ++r) {
        while (turn.load(std::memory_order_relaxed) != 2 * r + 1) std::this_thread::yield();
        sem.down_read();
        for (long d : data) stale += d != r + 1;
        sem.up_read();
        turn.store(2 * r + 2, std::memory_order_relaxed);
      }
    });
    writer.join();
    reader.join();
    EXPECT_EQ(stale.load(), 0);
    EXPECT_EQ(sem.count(), 0u) << sem.describe();
  }
}

TYPED_TEST(Handover, Trylocks) {
  TestFixture::ping_pong(TestFixture::kWriteTry, TestFixture::kReadTry);
  TestFixture::ping_pong(TestFixture::kReadTry, TestFixture::kWriteTry);
}

TYPED_TEST(Handover, TimedForms) {
  if (!kTimed<TypeParam>) GTEST_SKIP() << TypeParam::kName << " has no timed tries";
  TestFixture::ping_pong(TestFixture::kWriteTimed, TestFixture::kReadTimed);
}

}  // namespace
}  // namespace rwsem_test
