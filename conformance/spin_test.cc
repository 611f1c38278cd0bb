// Optimistic spinning scenarios (rwsem series patches 4, 5, 7, 8), observed through
// the lock event counters (this binary is built with RWSEM_LOCK_EVENTS=1).
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "conformance/liveness_util.h"
#include "conformance/lock_types.h"
#include "conformance/test_util.h"
#include "lib/rwsem/rwsem.h"
#include "lib/rwsem/testing.h"

namespace rwsem_test {
namespace {

using namespace std::chrono_literals;
using rwsem::LockEvent;
using rwsem::testing::Peer;
using Native = rwsem::internal::NativePlatform;

// max_spinners() reads the CPUs of the process's main thread once, on its
// first call; RealtimeWriterSpinsOnAWriterItCanSee pins the main thread to
// one CPU, and if the first call came then, spinning would be off for the
// rest of the binary. Ask here, before main(), from the unpinned thread.
const unsigned g_spinners_at_start = Native::max_spinners();

template <class L>
class Spinning : public ::testing::Test {
 protected:
  using Lock = rwsem::BasicRwSemaphore<L>;
  void SetUp() override {
    if (!rwsem::kSpinCompiledIn) GTEST_SKIP() << "spinning compiled out (--define=rwsem_spin=off)";
  }
  // A budget far beyond the hang limit: a spinner that ignores the
  // condition under test keeps spinning, and the test fails instead of
  // passing by budget expiry.
  ScopedSpinBudget budget_{std::chrono::hours(1)};
};
TYPED_TEST_SUITE(Spinning, AllLayouts, LayoutNames);

TYPED_TEST(Spinning, WriterSpinsAndGetsLockWithoutSleepingWhileOwnerRuns) {
  typename TestFixture::Lock sem;
  sem.down_write();
  const auto before = rwsem::lock_events_snapshot();
  std::atomic<bool> got{false};
  ThreadGroup g;
  g.spawn([&] {
    sem.down_write();
    got = true;
    sem.up_write();
  });
  ASSERT_TRUE(eventually(sem, [&] { return Peer::spinning(sem); }, "W spinning"));
  for (int i = 0; i < 1000; ++i) rwsem::arch::cpu_relax();  // the owner runs
  sem.up_write();
  g.join();
  const auto d = rwsem::lock_events_snapshot() - before;
  EXPECT_TRUE(got.load());
  EXPECT_EQ(d[LockEvent::opt_wlock], 1u);
  EXPECT_EQ(d[LockEvent::sleep_writer], 0u) << "the spinner slept";
  EXPECT_EQ(d[LockEvent::wlock], 0u) << "the spinner queued";
}

TYPED_TEST(Spinning, ReaderSpinsOnWriterAndGetsLock) {
  typename TestFixture::Lock sem;
  sem.down_write();
  const auto before = rwsem::lock_events_snapshot();
  ThreadGroup g;
  g.spawn([&] {
    sem.down_read();
    sem.up_read();
  });
  ASSERT_TRUE(eventually(sem, [&] { return Peer::spinning(sem); }, "R spinning"));
  sem.up_write();
  g.join();
  const auto d = rwsem::lock_events_snapshot() - before;
  EXPECT_EQ(d[LockEvent::opt_rlock], 1u);
  EXPECT_EQ(d[LockEvent::sleep_reader], 0u);
}

// The owner blocks on another lock (parks): the spinner must stop spinning
// and sleep, long before its one-hour budget.
TYPED_TEST(Spinning, SpinnerStopsWhenOwnerParks) {
  // b does not spin, so the owner of a parks on it at once.
  rwsem::Options no_spin;
  no_spin.spin_budget = std::chrono::nanoseconds(0);
  // a has no handoff timer during the test: W, once queued, leaves its
  // sleep only when woken. With the 4 ms timer, a timer expiry that races
  // the owner's unlock let W take the lock with no woken sleep at all
  // (seen once under qemu-ppc64le, where the release took longer).
  rwsem::Options no_handoff_timer;
  no_handoff_timer.handoff_timeout = std::chrono::seconds(10);
  typename TestFixture::Lock a(no_handoff_timer), b(no_spin);
  const auto before = rwsem::lock_events_snapshot();
  std::atomic<bool> b_held{false}, owner_done{false};
  ThreadGroup g;
  // X holds b until the spinner on a has gone to sleep.
  g.spawn([&] {
    b.down_write();
    b_held = true;
    EXPECT_TRUE(eventually(a, [&] { return Peer::queue_length(a) == 1 && !Peer::spinning(a); },
                           "the spinner on a gave up and queued"));
    b.up_write();
  });
  ASSERT_TRUE(eventually(b, [&] { return b_held.load(); }, "X holds b"));
  // The owner of a: takes a, waits for the spinner, then parks on b.
  g.spawn([&] {
    a.down_write();
    std::thread w([&] {
      a.down_write();
      a.up_write();
    });
    EXPECT_TRUE(eventually(a, [&] { return Peer::spinning(a); }, "W spinning on a"));
    b.down_read();  // parks: X holds b
    b.up_read();
    a.up_write();
    w.join();
    owner_done = true;
  });
  ASSERT_TRUE(eventually(a, [&] { return owner_done.load(); }, "everyone done"));
  g.join();
  const auto d = rwsem::lock_events_snapshot() - before;
  EXPECT_GE(d[LockEvent::opt_fail], 1u);
  EXPECT_EQ(d[LockEvent::sleep_writer] >= 1u, true);
}

// Not a kernel rule (README, "Where the lock departs from the kernel"): a
// locker that finds a waiter queued (WAITERS set) does not start spinning,
// even on an owner that runs; it queues. In user space a queued waiter is
// the sign that the lock has more takers than CPUs. W2's own budget (200
// us) runs out on the running owner, so it queues; then a writer and a
// reader come, and neither may spin, though the owner still runs.
TYPED_TEST(Spinning, NoSpinStartsWhileAWaiterIsQueued) {
  typename TestFixture::Lock sem(rwsem::Options{10s, 200us});
  sem.down_write();
  ThreadGroup g;
  g.spawn([&] {
    sem.down_write();
    sem.up_write();
  });
  ASSERT_TRUE(eventually(sem, [&] { return Peer::queue_length(sem) == 1 && !Peer::spinning(sem); },
                         "W2 gave up spinning and queued"));
  const auto before = rwsem::lock_events_snapshot();
  g.spawn([&] {
    sem.down_write();
    sem.up_write();
  });
  g.spawn([&] {
    sem.down_read();
    sem.up_read();
  });
  ASSERT_TRUE(eventually(sem, [&] { return Peer::queue_length(sem) == 3; }, "W3 and R queued"));
  const auto d = rwsem::lock_events_snapshot() - before;
  EXPECT_EQ(d[LockEvent::opt_fail] + d[LockEvent::opt_wlock] + d[LockEvent::opt_rlock], 0u)
      << "a locker spun while a waiter was queued";
  sem.up_write();
  g.join();
}

// Patch 8: a writer spins on a reader-owned lock for at most 10-25 us, then
// marks the lock NONSPINNABLE; the next writer owner clears the mark.
TYPED_TEST(Spinning, NonSpinnableAfterReaderSpinLimitClearedByNextWriter) {
  typename TestFixture::Lock sem;
  sem.down_read();
  const auto before = rwsem::lock_events_snapshot();
  std::atomic<bool> got{false}, release{false};
  ThreadGroup g;
  g.spawn([&] {
    sem.down_write();
    got = true;
    while (!release) std::this_thread::sleep_for(1ms);
    sem.up_write();
  });
  ASSERT_TRUE(eventually(sem, [&] { return Peer::queue_length(sem) == 1; },
                         "W gave up spinning on readers and queued"));
  EXPECT_TRUE(Peer::nonspinnable(sem));
  const auto d = rwsem::lock_events_snapshot() - before;
  EXPECT_EQ(d[LockEvent::opt_nospin], 1u);
  sem.up_read();
  ASSERT_TRUE(eventually(sem, [&] { return got.load(); }, "W got the lock"));
  EXPECT_FALSE(Peer::nonspinnable(sem)) << "a writer owner must clear NONSPINNABLE";
  release = true;
  g.join();
}

// Holds sem's write lock until a writer W has queued behind it (and is not
// spinning), then lets W through. Returns the lock events of the episode.
template <class Lock>
rwsem::LockEventSnapshot writer_queues_then_gets_lock(Lock& sem) {
  sem.down_write();
  const auto before = rwsem::lock_events_snapshot();
  ThreadGroup g;
  g.spawn([&] {
    sem.down_write();
    sem.up_write();
  });
  EXPECT_TRUE(eventually(sem, [&] { return Peer::queue_length(sem) == 1 && !Peer::spinning(sem); },
                         "W queued"));
  sem.up_write();
  g.join();
  return rwsem::lock_events_snapshot() - before;
}

// A queued writer polls its wait state before it parks where the lock may
// spin (config.h, kWaiterPolls), and only there: on one CPU nothing polls.
// Its spin budget of 1 us ends the spin on the running owner long before
// the owner lets go, so it queues and sleeps.
TYPED_TEST(Spinning, QueuedWriterPollsBeforeItParksIfItMaySpin) {
  typename TestFixture::Lock sem(rwsem::Options{10s, 1us});
  const auto d = writer_queues_then_gets_lock(sem);
  EXPECT_GE(d[LockEvent::sleep_writer], 1u);
  if (Native::max_spinners() > 0)
    EXPECT_GE(d[LockEvent::wlock_poll], 1u) << "the queued writer parked without polling";
  else EXPECT_EQ(d[LockEvent::wlock_poll], 0u) << "a writer polled on one CPU";
}

// Patch 5 ("Ensure an RT task will not spin on reader", LINEAGE.md): a
// SCHED_FIFO writer spins only on a writer it can see. On readers, or on an
// owner it cannot see, it could be spinning on a thread it has preempted;
// it queues instead.
//
// Runs `body` on a SCHED_FIFO thread of `g`, pinned to `cpu` (unless < 0).
// Returns "" once that thread runs as SCHED_FIFO; otherwise why not, and
// the caller skips (the machine refused SCHED_FIFO) or stops (the thread
// never started, a failure recorded here). `sem` is for the diagnostics of
// that wait.
template <class Lock, class F>
std::string spawn_realtime(ThreadGroup& g, Lock& sem, int cpu, F body) {
  auto rt = std::make_shared<RtThread>();
  g.spawn([rt, cpu, body] {
    if (rt->start(cpu)) body();
  });
  if (!eventually(sem, [&] { return rt->decided(); }, "the real-time thread started")) {
    ADD_FAILURE() << "the real-time thread never started";
    return "the real-time thread never started";
  }
  return rt->refused() ? rt->refusal() : "";
}

TYPED_TEST(Spinning, RealtimeWriterDoesNotSpinOnReaders) {
  typename TestFixture::Lock sem;
  sem.down_read();
  const auto before = rwsem::lock_events_snapshot();
  ThreadGroup g;
  const std::string refused = spawn_realtime(g, sem, -1, [&] {
    sem.down_write();
    sem.up_write();
  });
  if (!refused.empty()) {
    sem.up_read();
    g.join();
    GTEST_SKIP() << refused;
  }
  const bool queued =
      eventually(sem, [&] { return Peer::queue_length(sem) == 1; }, "RT writer queued");
  if (!queued) sem.up_read();  // lets the group join
  ASSERT_TRUE(queued);
  const auto d = rwsem::lock_events_snapshot() - before;
  EXPECT_FALSE(Peer::nonspinnable(sem)) << "the RT writer spun on readers";
  EXPECT_EQ(d[LockEvent::opt_nospin], 0u);
  sem.up_read();
  g.join();
  // Nor does it poll before it parks: a poll holds a CPU its waker may need.
  const auto after = rwsem::lock_events_snapshot() - before;
  EXPECT_GE(after[LockEvent::sleep_writer], 1u);
  EXPECT_EQ(after[LockEvent::wlock_poll], 0u) << "the RT writer polled";
}

// The rule's other half: on a writer it can see, which runs on another CPU,
// the SCHED_FIFO writer does spin (its budget is an hour) for as long as
// the owner holds the lock. (A lock that never let RT threads spin would
// pass the test above.) The owner is pinned to one CPU and the RT writer to
// another, so the RT writer cannot be what keeps the owner from running.
//
// Only the spin while the owner holds the lock is checked, not how the
// writer then takes it. With the owner in a word of its own (the generic
// layouts) the unlock clears the owner before it releases the count, and
// an RT spinner that looks in between sees a writer it cannot see and
// stops; it then steals the lock, or finds it still held, queues, and
// takes it at its first try in the queue (both seen under QEMU, the second
// with TSan on aarch64, once each in a few hundred runs).
TYPED_TEST(Spinning, RealtimeWriterSpinsOnAWriterItCanSee) {
  const std::vector<int> cpus = allowed_cpus();
  if (cpus.size() < 2) GTEST_SKIP() << "needs 2 CPUs (one for the owner, one for the RT writer)";
  ASSERT_EQ(Native::max_spinners(), g_spinners_at_start);
  ASSERT_GT(g_spinners_at_start, 0u);
  ScopedAffinity restore;
  ASSERT_EQ(pin_to(pthread_self(), cpus[0]), 0);
  typename TestFixture::Lock sem;
  sem.down_write();
  const auto before = rwsem::lock_events_snapshot();
  std::atomic<bool> arrived{false};
  ThreadGroup g;
  const std::string refused = spawn_realtime(g, sem, cpus[1], [&] {
    arrived = true;
    sem.down_write();
    sem.up_write();
  });
  if (!refused.empty()) {
    sem.up_write();
    g.join();
    GTEST_SKIP() << refused;
  }
  const bool there = eventually(sem, [&] {
    return arrived.load() && (Peer::spinning(sem) || Peer::queue_length(sem) == 1);
  }, "the RT writer spinning or queued");
  if (!there) sem.up_write();  // lets the group join
  ASSERT_TRUE(there);
  // Our nap does not park us in one of the lock's waits, so to the lock we
  // still run: a writer that spins on us spins on.
  nap(2ms);
  const bool still_spinning = Peer::spinning(sem) && Peer::queue_length(sem) == 0;
  const auto d = rwsem::lock_events_snapshot() - before;
  sem.up_write();
  g.join();
  EXPECT_TRUE(still_spinning) << "the RT writer stopped spinning on a running writer it can see";
  EXPECT_EQ(d[LockEvent::opt_fail] + d[LockEvent::wlock] + d[LockEvent::sleep_writer], 0u)
      << "the RT writer gave up a spin, queued or slept while its owner still ran";
}

// Spinning off (Options::spin_budget = 0, or compiled out) means no busy
// waiting at all: a queued writer parks without polling.
TEST(SpinningOff, QueuedWriterParksWithoutPolling) {
  rwsem::RwSemaphore sem(rwsem::Options{10s, 0ns});
  const auto d = writer_queues_then_gets_lock(sem);
  EXPECT_GE(d[LockEvent::sleep_writer], 1u);
  EXPECT_EQ(d[LockEvent::wlock_poll], 0u) << "a writer polled with spinning off";
}

}  // namespace
}  // namespace rwsem_test
