// Lock event counters count what happened (built with RWSEM_LOCK_EVENTS=1;
// see conformance/BUILD), and read as a snapshot.
#include <gtest/gtest.h>

#include <sstream>
#include <thread>

#include "conformance/lock_types.h"
#include "conformance/test_util.h"
#include "lib/rwsem/rwsem.h"
#include "lib/rwsem/testing.h"

#if !defined(RWSEM_LOCK_EVENTS)
#error "lock_events_test must be built with RWSEM_LOCK_EVENTS=1"
#endif

namespace rwsem_test {
namespace {

using namespace std::chrono_literals;
using rwsem::LockEvent;
// The streak length of the writer's guesses (thread_record.h).
constexpr unsigned kGuessAfter =
    rwsem::internal::BasicThreadRecord<rwsem::internal::NativePlatform>::kGuessAfter;

template <class L>
class LockEvents : public ::testing::Test {};
TYPED_TEST_SUITE(LockEvents, AllLayouts, LayoutNames);

TYPED_TEST(LockEvents, CountSlowPathOutcomes) {
  // A handoff timeout no wait here reaches: the queued reader below is
  // then never due, however slowly this runs (QEMU with TSan took over the
  // default 4 ms between its queueing and the unlock), so the unlock's
  // wake-up is always the one counted below.
  rwsem::BasicRwSemaphore<TypeParam> sem(rwsem::Options{10s, std::chrono::nanoseconds(-1)});
  const auto before = rwsem::lock_events_snapshot();

  sem.down_write();
  std::thread([&] {
    EXPECT_FALSE(sem.down_read_timeout(5ms));
    EXPECT_FALSE(sem.down_write_timeout(5ms));
  }).join();
  std::atomic<bool> in{false};
  ThreadGroup g;
  g.spawn([&] {
    sem.down_read();
    in = true;
    sem.up_read();
  });
  ASSERT_TRUE(eventually(sem, [&] { return rwsem::testing::Peer::queue_length(sem) == 1; },
                         "reader queued"));
  sem.up_write();
  ASSERT_TRUE(eventually(sem, [&] { return in.load(); }, "reader woken"));
  g.join();

  const auto d = rwsem::lock_events_snapshot() - before;
  std::ostringstream os;
  os << d;
  EXPECT_EQ(d[LockEvent::rlock_fail], 1u) << os.str();
  EXPECT_EQ(d[LockEvent::wlock_fail], 1u) << os.str();
  // The lone reader a writer's unlock finds queued is woken to retry, not
  // granted ("Woken reader" in rwsem.h), and takes the lock itself.
  EXPECT_EQ(d[LockEvent::wake_reader], 0u) << os.str();
  EXPECT_EQ(d[LockEvent::wake_reader_retry], 1u) << os.str();
  EXPECT_EQ(d[LockEvent::rlock_retry], 1u) << os.str();
  EXPECT_EQ(d[LockEvent::rlock], 1u) << os.str();
  EXPECT_EQ(d[LockEvent::wlock], 0u) << os.str();
  EXPECT_NE(os.str().find("rlock_fail=1"), std::string::npos) << os.str();
}

// The writer's guesses (rwsem.h, down_write_until_ns() and up_write()): a
// thread whose last 8 write locks found the count free compare-exchanges
// from 0 without loading it, and one whose last 8 unlocks found its own
// writer word alone compare-exchanges from that; a failed guess ends the
// streak. No outcome shows the rule (every path takes the lock), so the
// counters of failed guesses and of looks are what this checks, on one
// thread whose every count is known. Broken locks it catches: one that
// never guesses (a look per lock or unlock), one that always guesses (no
// looks after a miss), one whose looks count a held count as free, and
// one that does not restart the streak at a look that finds the lock held.
TYPED_TEST(LockEvents, WriterGuessesFollowTheirStreaks) {
  rwsem::BasicRwSemaphore<TypeParam> sem(rwsem::Options{10s, 0ns});  // no spinning
  // n uncontended lock-unlock pairs.
  const auto pairs = [&](int n) {
    for (int i = 0; i < n; ++i) {
      sem.down_write();
      sem.up_write();
    }
  };
  struct Guesses {
    std::uint64_t lock_miss, lock_look, unlock_miss, unlock_look;
    std::string all;
  };
  // The guess counters since `from`.
  const auto since = [](const rwsem::LockEventSnapshot& from) {
    const auto d = rwsem::lock_events_snapshot() - from;
    std::ostringstream os;
    os << d;
    return Guesses{d[LockEvent::wlock_guess_miss], d[LockEvent::wlock_look],
                   d[LockEvent::wunlock_guess_miss], d[LockEvent::wunlock_look], os.str()};
  };
  // Whatever this thread's record held before (records are reused), 8
  // free locks and 8 lone unlocks in a row make both streaks full.
  pairs(2 * kGuessAfter);

  auto from = rwsem::lock_events_snapshot();
  pairs(100);
  Guesses g = since(from);
  EXPECT_EQ(g.lock_look + g.lock_miss + g.unlock_look + g.unlock_miss, 0u)
      << "full streaks guess every time: " << g.all;

  // A lock guess meets a held count (a reader's bias): one miss, no look.
  rwsem::testing::Peer::add_phantom_readers(sem, 1);
  from = rwsem::lock_events_snapshot();
  EXPECT_FALSE(sem.down_write_timeout(0ns));
  g = since(from);
  EXPECT_EQ(g.lock_miss, 1u) << g.all;
  EXPECT_EQ(g.lock_look, 0u) << g.all;
  rwsem::testing::Peer::add_phantom_readers(sem, -1);

  // The miss ended the lock's streak: 3 free looks, then one that finds the
  // lock held starts the streak again, and only kGuessAfter free looks in a
  // row bring the guess back. The unlock's streak is untouched.
  from = rwsem::lock_events_snapshot();
  pairs(3);
  rwsem::testing::Peer::add_phantom_readers(sem, 1);
  EXPECT_FALSE(sem.down_write_timeout(0ns));
  rwsem::testing::Peer::add_phantom_readers(sem, -1);
  pairs(kGuessAfter + 20);
  g = since(from);
  EXPECT_EQ(g.lock_look, 3u + 1u + kGuessAfter) << "looks before the guess comes back: " << g.all;
  EXPECT_EQ(g.lock_miss, 0u) << g.all;
  EXPECT_EQ(g.unlock_look + g.unlock_miss, 0u) << g.all;

  // An unlock guess meets a queued reader (WAITERS): one miss, and the
  // reader is still woken. Then kGuessAfter lone looks bring it back.
  sem.down_write();
  std::atomic<bool> in{false};
  ThreadGroup readers;
  readers.spawn([&] {
    sem.down_read();
    in = true;
    sem.up_read();
  });
  ASSERT_TRUE(eventually(sem, [&] { return rwsem::testing::Peer::queue_length(sem) == 1; },
                         "reader queued"));
  from = rwsem::lock_events_snapshot();
  sem.up_write();
  ASSERT_TRUE(eventually(sem, [&] { return in.load(); }, "reader woken by the missed guess"));
  readers.join();
  g = since(from);
  EXPECT_EQ(g.unlock_miss, 1u) << g.all;
  EXPECT_EQ(g.unlock_look, 0u) << g.all;

  from = rwsem::lock_events_snapshot();
  pairs(kGuessAfter + 20);
  g = since(from);
  EXPECT_EQ(g.unlock_look, static_cast<std::uint64_t>(kGuessAfter)) << g.all;
  EXPECT_EQ(g.unlock_miss + g.lock_look + g.lock_miss, 0u) << g.all;
}

}  // namespace
}  // namespace rwsem_test
