// Liveness under contention: how long a waiter can be starved by a stream of
// readers or writers, how often later writers may bypass a queued one, and
// what signals do to sleeping waiters. Every test prints what it measured.
//
// The only timing assertions are the lock's stated wait bound: a waiter gets
// the lock within the handoff timeout plus the critical sections that may
// legitimately run ahead of it, plus a slack for scheduling. Slack and all
// durations scale with RWSEM_TIME_SCALE (QEMU, TSan). Every wait on another
// thread goes through the hang guards in test_util.h.
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "conformance/liveness_util.h"
#include "conformance/lock_types.h"
#include "conformance/test_util.h"
#include "lib/rwsem/lock_events.h"
#include "lib/rwsem/rwsem.h"
#include "lib/rwsem/testing.h"

namespace rwsem_test {
namespace {

using namespace std::chrono_literals;
using rwsem::testing::Peer;

constexpr auto kHandoff = 4ms;

void update_max(std::atomic<std::int64_t>& m, std::int64_t v) {
  std::int64_t cur = m.load(std::memory_order_relaxed);
  while (v > cur && !m.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}

// How long a holder blocked the waiter the stream test measures: from the
// later of its lock call (`asked`) and the start of the waiter's current
// wait (`since`, Clock ticks; 0 when the waiter is not waiting) to the end
// of its section, and never less than the section (`t0`..`t1`).
std::int64_t hold_ns(Clock::time_point asked, Clock::time_point t0, Clock::time_point t1,
                     std::int64_t since) {
  const std::int64_t section = (t1 - t0).count();
  if (since == 0) return section;
  const std::int64_t from = std::max(asked.time_since_epoch().count(), since);
  return std::max(section, t1.time_since_epoch().count() - from);
}

// ---- 1. a writer under a stream of overlapping readers ----------------------
//
// Four readers take read sections of 200 us - 2 ms (sleeping inside), started
// staggered and re-acquiring at once, so the reader count rarely drops to 0.
// One writer repeatedly asks for the write lock. Once it is queued, WAITERS
// stops new readers' fast path and, past the handoff timeout, HANDOFF stops
// everyone, so its wait is bounded by
//   handoff timeout + the longest read section in progress + slack.
// A lock whose readers keep joining a reader-owned lock while a writer waits
// (spinning readers that ignore WAITERS) starves the writer instead.
//
// As in the writer stream below: a reader's hold counts from the later of
// its lock_shared() call and the start of the writer's current wait (a
// reader preempted inside the call, after it took the lock, delays the
// writer as much as one in its section), and each of the writer's waits
// leaves out its own run-queue delay.
template <class T>
class ReaderStream : public ::testing::Test {
 protected:
  static void run(std::chrono::nanoseconds budget) {
    if (!kSpins<T> && budget.count() >= 0)
      GTEST_SKIP() << T::kName << " does not spin: only the default variant applies";
    rwsem::Options o;
    o.handoff_timeout = kHandoff;
    o.spin_budget = budget;
    const auto lock = make_lock_with<T>(o);
    T& sem = *lock;
    constexpr int kReaders = 4;
    const auto slack = scaled(500ms);
    const auto attempt_limit = scaled(2s);  // a write attempt that expires fails the bound
    std::atomic<bool> stop{false};
    std::atomic<std::int64_t> longest_hold_ns{0};
    // When the writer's current wait began (Clock ticks); 0 while it is not
    // waiting.
    std::atomic<std::int64_t> writer_waiting_since{0};
    std::atomic<std::uint64_t> reads{0};
    ThreadGroup readers;
    ASSERT_TRUE(readers.spawn_n(kReaders, [&](int i) {
      std::mt19937 rng(1234u + static_cast<unsigned>(i));
      std::uniform_int_distribution<int> cs_us(200, 2000);
      nap(std::chrono::microseconds(500 * i));  // staggered start
      while (!stop.load(std::memory_order_relaxed)) {
        const auto asked = Clock::now();
        read_lock(sem);
        const auto t0 = Clock::now();
        nap(std::chrono::microseconds(cs_us(rng)));
        const auto t1 = Clock::now();
        update_max(longest_hold_ns, hold_ns(asked, t0, t1, writer_waiting_since.load()));
        read_unlock(sem);
        reads.fetch_add(1, std::memory_order_relaxed);
      }
    }));
    ASSERT_TRUE(eventually(sem, [&] { return reads.load() >= 2 * kReaders; }, "readers running"));

    constexpr int kRounds = 6;
    // A lock without shared mode runs the "readers" exclusively: each of them
    // may be ahead of the writer.
    const auto ahead = kShared<T> ? 1 : kReaders + 1;
    const auto bound_now = [&] {
      return std::chrono::nanoseconds(kHandoff) +
             std::chrono::nanoseconds(longest_hold_ns.load()) * ahead + slack;
    };
    std::atomic<bool> writer_done{false};
    // The writer's worst wait without its own run-queue delay, and that delay.
    std::chrono::nanoseconds worst{0}, worst_off_cpu{0};
    bool rq_ok = false;
    int rounds = 0, timeouts = 0;
    ThreadGroup writer;
    writer.spawn([&] {
      const RunQueueDelay rq;
      rq_ok = rq.ok();
      for (; rounds < kRounds; ++rounds) {
        const auto rq0 = rq.now();
        const auto t0 = Clock::now();
        writer_waiting_since = t0.time_since_epoch().count();
        const bool ok = write_lock_for(sem, attempt_limit);
        writer_waiting_since = 0;
        const std::chrono::nanoseconds off_cpu = rq.now() - rq0;
        const auto waited = Clock::now() - t0 - off_cpu;
        if (waited > worst) {
          worst = waited;
          worst_off_cpu = off_cpu;
        }
        if (!ok) {
          ++timeouts;
          ++rounds;
          break;  // one expiry is enough evidence; do not spend more time
        }
        nap(100us);
        sem.unlock();
        if (waited > bound_now()) {
          ++rounds;
          break;  // over the bound already: no need for more rounds
        }
        nap(3ms);  // let the readers overlap again
      }
      writer_done = true;
    });
    const bool finished = eventually(sem, [&] { return writer_done.load(); }, "writer rounds done");
    stop = true;
    writer.join();
    readers.join();
    ASSERT_TRUE(finished);
    const std::chrono::nanoseconds longest(longest_hold_ns.load());  // the longest read hold
    const auto bound = bound_now();
    std::printf(
        "  [%s spin=%s] reader stream: writer worst wait %.1f ms (+ %.1f ms waiting for a "
        "CPU%s) over %d round(s), %d timed out (limit %.0f ms); bound %.1f ms = handoff %.0f + "
        "%d x longest read hold %.2f + slack %.0f; reads %llu\n",
        T::kName, budget_name(budget).c_str(), ms(worst), ms(worst_off_cpu),
        rq_ok ? "" : ": no schedstat, not measured", rounds, timeouts, ms(attempt_limit), ms(bound),
        ms(kHandoff), ahead, ms(longest), ms(slack), static_cast<unsigned long long>(reads.load()));
    EXPECT_EQ(timeouts, 0) << "the writer's attempt expired: readers starved it";
    EXPECT_LE(worst.count(), bound.count())
        << "writer waited " << ms(worst) << " ms (not counting " << ms(worst_off_cpu)
        << " ms in which it waited for a CPU), bound " << ms(bound) << " ms";
    EXPECT_EQ(sem.count(), 0u) << "lock not clean: " << sem.describe();
  }
};
TYPED_TEST_SUITE(ReaderStream, AllLocks, LockNames);

TYPED_TEST(ReaderStream, WriterBoundSpinDefault) { TestFixture::run(std::chrono::nanoseconds(-1)); }
TYPED_TEST(ReaderStream, WriterBoundSpin5us) { TestFixture::run(5us); }
TYPED_TEST(ReaderStream, WriterBoundSpin20us) { TestFixture::run(20us); }
TYPED_TEST(ReaderStream, WriterBoundSpinOff) { TestFixture::run(0us); }

// ---- 2. a reader under a stream of writers ----------------------------------
//
// Writers hammer the lock (short sections, or ~100 us busy sections); one
// reader asks for read locks back to back for a window and measures each
// wait. Bound: handoff timeout + (writers that may be ahead + 1) x the
// longest write hold + slack. Also prints reader vs writer throughput.
//
// A writer blocks the reader from the moment it is ahead of it, which can
// be before its section starts: the queued rwlock's head writer holds the
// queue in its slow path, and any writer may be preempted inside lock()
// right after it took the lock. The reader then waits as long as that
// writer is off the CPU, and the writer's section does not show it. Seen on
// 2 cores with other processes yielding in a loop: a reader waited 131 ms
// for the writer byte while the longest write section was 0.39 ms; that
// writer's lock() call to its unlock() took 136 ms. So a write hold is
// measured from the later of the writer's lock() call and the start of the
// reader's current wait, up to the writer's unlock(), for every section
// that ends while the reader waits, and never less than the section.
//
// What still fails: writers that overtake the waiting reader again and
// again (each hold is then one quick acquisition plus a section), and a
// reader that is not woken while the lock is free. What this bound excuses:
// a writer that is slow inside lock() while the reader waits behind it, for
// whatever reason, including a lost wake-up of that writer; the missed
// wake-up checks of the corpus cover those.
//
// The reader's own preemption is the scheduler's, not the lock's: each wait
// is measured without the reader's run-queue delay (RunQueueDelay). In the
// same runs the reader spent up to 38 ms of one wait runnable but without a
// CPU.
template <class T>
class WriterStream : public ::testing::Test {
 protected:
  static void run(bool spin, std::chrono::nanoseconds cs, int writers) {
    if (!kSpins<T> && !spin)
      GTEST_SKIP() << T::kName << " does not spin: the spin-on variant covers it";
    if constexpr (std::is_same_v<T, rwsem::QRwLock>) {
      // The queued rwlock's waiters never sleep; it is meant for threads
      // that do not outnumber the CPUs. With more spinners than CPUs a
      // waiter's turn in its FIFO queue also waits for preempted spinners
      // ahead of it to be scheduled, which no lock bound covers. So: at most
      // one writer per CPU beside the reader.
      const int cpus = static_cast<int>(allowed_cpus().size());
      const int cap = std::max(1, cpus - 1);
      if (writers > cap) {
        std::printf("  [%s] %d CPU(s): %d writer(s) instead of %d (its waiters spin)\n", T::kName,
                    cpus, cap, writers);
        writers = cap;
      }
    }
    rwsem::Options o;
    o.handoff_timeout = kHandoff;
    if (!spin) o.spin_budget = 0ns;
    const auto lock = make_lock_with<T>(o);
    T& sem = *lock;
    const auto slack = scaled(500ms);
    const auto attempt_limit = scaled(2s);
    const auto window = scaled(300ms);
    std::atomic<bool> stop{false};
    std::atomic<std::int64_t> longest_cs_ns{0}, longest_hold_ns{0};
    // When the reader's current wait began (Clock ticks); 0 while it is not
    // waiting.
    std::atomic<std::int64_t> reader_waiting_since{0};
    std::atomic<std::uint64_t> writes{0};
    ThreadGroup hammers;
    ASSERT_TRUE(hammers.spawn_n(writers, [&](int) {
      while (!stop.load(std::memory_order_relaxed)) {
        const auto asked = Clock::now();
        sem.lock();
        const auto t0 = Clock::now();
        if (cs.count() > 0) busy_for(cs);
        else
          for (int k = 0; k < 50; ++k) rwsem::arch::cpu_relax();
        const auto t1 = Clock::now();
        update_max(longest_cs_ns, (t1 - t0).count());
        update_max(longest_hold_ns, hold_ns(asked, t0, t1, reader_waiting_since.load()));
        sem.unlock();
        writes.fetch_add(1, std::memory_order_relaxed);
      }
    }));
    ASSERT_TRUE(eventually(sem, [&] { return writes.load() > 100; }, "writers running"));

    std::atomic<bool> reader_done{false};
    // The reader's worst wait with its own run-queue delay taken out, and
    // that delay.
    std::chrono::nanoseconds worst{0}, worst_off_cpu{0};
    bool rq_ok = false;
    std::uint64_t reads = 0, writes_in_window = 0;
    int timeouts = 0;
    ThreadGroup reader;
    reader.spawn([&] {
      const RunQueueDelay rq;
      rq_ok = rq.ok();
      const std::uint64_t w0 = writes.load();
      const auto end = Clock::now() + window;
      while (Clock::now() < end) {
        const auto rq0 = rq.now();
        const auto t0 = Clock::now();
        reader_waiting_since = t0.time_since_epoch().count();
        const bool ok = read_lock_for(sem, attempt_limit);
        reader_waiting_since = 0;
        const std::chrono::nanoseconds wall = Clock::now() - t0, off_cpu = rq.now() - rq0;
        if (wall - off_cpu > worst) {
          worst = wall - off_cpu;
          worst_off_cpu = off_cpu;
        }
        if (!ok) {
          ++timeouts;
          break;
        }
        read_unlock(sem);
        ++reads;
      }
      writes_in_window = writes.load() - w0;
      reader_done = true;
    });
    const bool finished = eventually(sem, [&] { return reader_done.load(); }, "reader window done");
    stop = true;
    reader.join();
    hammers.join();
    ASSERT_TRUE(finished);
    const std::chrono::nanoseconds longest(longest_cs_ns.load()), hold(longest_hold_ns.load());
    const auto bound = std::chrono::nanoseconds(kHandoff) + hold * (writers + 1) + slack;
    std::printf(
        "  [%s spin=%s cs=%s writers=%d] writer stream: reader worst wait %.2f ms "
        "(+ %.2f ms waiting for a CPU%s), %d timed out; bound %.1f ms = handoff %.0f + %d x "
        "longest write hold %.3f (section %.3f) + slack %.0f; in %.0f ms: reads %llu, "
        "writes %llu\n",
        T::kName, spin ? "on" : "off", cs.count() ? "100us" : "short", writers, ms(worst),
        ms(worst_off_cpu), rq_ok ? "" : ": no schedstat, not measured", timeouts, ms(bound),
        ms(kHandoff), writers + 1, ms(hold), ms(longest), ms(slack), ms(window),
        static_cast<unsigned long long>(reads), static_cast<unsigned long long>(writes_in_window));
    EXPECT_EQ(timeouts, 0) << "the reader's attempt expired: writers starved it";
    EXPECT_LE(worst.count(), bound.count())
        << "reader waited " << ms(worst) << " ms (not counting " << ms(worst_off_cpu)
        << " ms in which it waited for a CPU), bound " << ms(bound) << " ms";
    EXPECT_GT(reads, 0u) << "the reader never got in";
    EXPECT_EQ(sem.count(), 0u) << "lock not clean: " << sem.describe();
  }
};
TYPED_TEST_SUITE(WriterStream, AllLocks, LockNames);

TYPED_TEST(WriterStream, ReaderBoundShortSectionsSpinOn) { TestFixture::run(true, 0ns, 3); }
TYPED_TEST(WriterStream, ReaderBoundShortSectionsSpinOff) { TestFixture::run(false, 0ns, 3); }
TYPED_TEST(WriterStream, ReaderBound100usSectionsSpinOn) { TestFixture::run(true, 100us, 2); }
TYPED_TEST(WriterStream, ReaderBound100usSectionsSpinOff) { TestFixture::run(false, 100us, 2); }

// ---- 2b. bypasses of a queued writer ------------------------------------------
//
// Writer W waits in the queue behind a writer that keeps the lock, and two
// later writers (the hammers) keep trying to take it with
// down_write_trylock. A fake handoff clock jumps past W's handoff timeout:
// W's handoff timer must wake it, and W must claim HANDOFF though the lock
// is still held. The holder then lets go, and from the moment HANDOFF is
// visible no hammer may take the lock before W (a "bypass"): the free,
// owed lock is W's. W gets it within the slack of the unlock.
//
// An earlier form let the hammers steal the lock before the timeout and
// raced W's wake-ups against them, retrying while W won; under QEMU, with
// the tests of another binary running beside it, W won every attempt and
// the test measured nothing. Here nothing races for the measurement except
// the hammers' tries of the free, owed lock, which the test counts: an
// attempt in which no hammer tried in that window (W took the lock first)
// is repeated.
template <class L>
class Bypass : public ::testing::Test {};
TYPED_TEST_SUITE(Bypass, AllLayouts, LayoutNames);

TYPED_TEST(Bypass, NoWriterBypassesAQueuedWriterOnceItOwnsHandoff) {
  using B = rwsem::internal::CountBits<TypeParam>;
  using Lock = rwsem::BasicRwSemaphore<TypeParam>;
  constexpr int kHammers = 2;
  constexpr int kAttempts = 5;
  const auto slack = scaled(500ms);
  // The holder (this thread) and W share one CPU, the hammers another, and
  // W runs as SCHED_IDLE: woken by the unlock, it waits for the CPU while
  // the holder stays busy after its unlock, until a hammer has tried the
  // free, owed lock. Unpinned and at normal priority, W took the lock
  // within a few microseconds of the unlock, and in about a third of the
  // attempts no hammer had looked at it; with a fixed 1 ms of holding, a
  // test binary run beside this one (two jobs on two CPUs) still kept the
  // hammers off their CPU for that long in about a fifth.
  const std::vector<int> cpus = allowed_cpus();
  if (cpus.size() < 2)
    GTEST_SKIP() << "needs 2 CPUs (one for the holder and W, one for the hammers)";
  ScopedAffinity restore;
  ASSERT_EQ(pin_to(pthread_self(), cpus[0]), 0);  // W, spawned from here, inherits it
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    rwsem::testing::FakeHandoffClock clock;
    // Spin budget 0: W parks as soon as it queues, so only its handoff
    // timer and unlocks wake it.
    Lock sem(rwsem::Options{kHandoff, 0ns});
    std::atomic<bool> w_done{false}, stop{false};
    std::atomic<int> hammers_running{0};
    // Locks a hammer got before W; tries of a free lock with HANDOFF set.
    std::atomic<std::uint64_t> bypasses{0}, owed_tries{0};
    std::atomic<std::int64_t> w_got_ns{0};
    sem.down_write();
    ThreadGroup g;
    g.spawn([&] {
      EXPECT_EQ(become_idle(), 0);
      sem.down_write();
      w_got_ns = Clock::now().time_since_epoch().count();
      w_done = true;  // inside W's section: nobody else can be in it
      sem.up_write();
    });
    const bool queued = eventually(sem, [&] { return Peer::queue_length(sem) == 1; }, "W queued");
    const auto hammers = queued && g.spawn_n(kHammers, [&](int) {
      pin_to(pthread_self(), cpus[1]);
      hammers_running.fetch_add(1);
      while (!stop.load(std::memory_order_relaxed)) {
        const auto c = sem.count();
        if (!sem.down_write_trylock()) {
          if (B::has_handoff(c) && !B::is_locked(c)) owed_tries.fetch_add(1);
          rwsem::arch::cpu_relax();
          continue;
        }
        if (!w_done.load()) bypasses.fetch_add(1);
        sem.up_write();
      }
    });
    const bool running = hammers && eventually(sem, [&] {
      return hammers_running.load() == kHammers;
    }, "the hammers running");
    const auto t_timeout = Clock::now();
    if (running) clock.advance(kHandoff + 1ms);
    const bool owed = running && eventually(sem, [&] { return B::has_handoff(sem.count()); },
                                            "W claimed HANDOFF at its handoff timer");
    const auto t_owed = Clock::now();
    if (!owed) stop = true;  // lets the group join once W is in
    sem.up_write();
    const auto hold_until = Clock::now() + scaled(1s);
    while (owed_tries.load() == 0 && !w_done.load() && Clock::now() < hold_until)
      rwsem::arch::cpu_relax();
    // W's time is counted from here, when this thread lets W have the CPU:
    // the hold above may last longer than the slack.
    const auto t_free = Clock::now();
    const bool w_in =
        owed && eventually(sem, [&] { return w_done.load(); }, "W got the lock after the unlock");
    stop = true;
    g.join();
    ASSERT_TRUE(queued && hammers && running && owed && w_in);
    const auto claim = t_owed - t_timeout;
    const auto after = std::chrono::nanoseconds(w_got_ns.load()) - t_free.time_since_epoch();
    std::printf(
        "  [%s] attempt %d: W claimed HANDOFF %.2f ms after its timeout (bound %.1f ms), "
        "got the lock %.2f ms after the holder let it have the CPU (bound %.1f ms); the hammers "
        "tried the free, owed lock %llu times and took it %llu times before W (must be 0)\n",
        TypeParam::kName, attempt, ms(claim), ms(kHandoff + slack), ms(after), ms(slack),
        static_cast<unsigned long long>(owed_tries.load()),
        static_cast<unsigned long long>(bypasses.load()));
    EXPECT_EQ(bypasses.load(), 0u) << "a writer stole the lock owed to W";
    EXPECT_LE(claim.count(), std::chrono::nanoseconds(kHandoff + slack).count())
        << "W's handoff timer did not wake it";
    EXPECT_LE(after.count(), std::chrono::nanoseconds(slack).count());
    EXPECT_EQ(sem.count(), 0u) << sem.describe();
    if (owed_tries.load() > 0 || ::testing::Test::HasFailure()) return;
  }
  // W took the freed lock before either hammer looked at it, every time.
  FAIL() << "no hammer tried the free lock owed to W in " << kAttempts << " attempts";
}

// ---- 2c. the lone reader a writer's unlock wakes -----------------------------
//
// A writer's unlock that finds one reader R queued before R's handoff
// deadline wakes R to retry instead of granting it the lock ("Woken
// reader" in rwsem.h): the lock stays free, and the writer, still running,
// may take it again before R is on a CPU. Past its deadline, or as a
// real-time thread, R is granted the lock at the unlock, as in the kernel,
// and so are two readers queued together (a batch).
// Each case: R queues behind this thread's write lock (spin budget 0, so R
// parks), under a fake handoff clock; this thread unlocks and at once asks
// for the lock again with down_write_trylock(), then lets R in. R runs as
// SCHED_IDLE on this thread's CPU, so it cannot run before that try (an
// attempt in which it got in first anyway is repeated); a real-time R
// preempts this thread at the unlock, and only the wake-up it got is
// checked. The lock events (this binary counts them) say which wake-up R
// got from that unlock: a lock that woke R only at a later unlock would
// still let it in.
template <class L>
class WokenReader : public ::testing::Test {
 protected:
  enum class R { kBeforeDeadline, kPastDeadline, kRealtime, kBatch };

  static void run(R kind) {
    using Lock = rwsem::BasicRwSemaphore<L>;
    using rwsem::LockEvent;
    const std::vector<int> cpus = allowed_cpus();
    ASSERT_FALSE(cpus.empty());
    ScopedAffinity restore;
    ASSERT_EQ(pin_to(pthread_self(), cpus[0]), 0);  // R, spawned from here, inherits it
    for (int attempt = 0; attempt < 5; ++attempt) {
      rwsem::testing::FakeHandoffClock clock;
      Lock sem(rwsem::Options{kHandoff, 0ns});
      const int n = kind == R::kBatch ? 2 : 1;  // readers queued
      std::atomic<int> r_in{0};
      RtThread rt;
      sem.down_write();
      ThreadGroup g;
      for (int i = 0; i < n; ++i) {
        g.spawn([&] {
          if (kind == R::kRealtime ? !rt.start(cpus[0]) : become_idle() != 0) return;
          sem.down_read();
          r_in.fetch_add(1);
          sem.up_read();
        });
      }
      if (kind == R::kRealtime &&
          (!eventually(sem, [&] { return rt.decided(); }, "R started") || rt.refused())) {
        sem.up_write();
        g.join();
        if (rt.refused()) GTEST_SKIP() << rt.refusal();
        FAIL() << "R never started";
      }
      bool queued = eventually(
          sem, [&] { return Peer::queue_length(sem) == static_cast<std::size_t>(n); }, "R queued");
      if (kind == R::kPastDeadline) clock.advance(kHandoff + 1ms);
      const auto before = rwsem::lock_events_snapshot();
      sem.up_write();
      // The wake-up R got from this unlock, not from a later one.
      const auto at_unlock = rwsem::lock_events_snapshot() - before;
      const bool retaken = sem.down_write_trylock();
      const bool r_was_in = r_in.load() > 0;
      const std::string held = sem.describe();
      if (retaken) sem.up_write();
      queued = queued && eventually(sem, [&] { return r_in.load() == n; }, "R got the lock");
      g.join();
      ASSERT_TRUE(queued);
      const auto& ev = at_unlock;
      std::printf(
          "  [%s] attempt %d: the writer's try right after its unlock %s (%s); R's "
          "wake-ups: %llu granted, %llu to retry\n",
          L::kName, attempt, retaken ? "took the lock" : "failed", held.c_str(),
          static_cast<unsigned long long>(ev[LockEvent::wake_reader]),
          static_cast<unsigned long long>(ev[LockEvent::wake_reader_retry]));
      if (kind == R::kBeforeDeadline && r_was_in) continue;  // R ran first after all
      if (kind == R::kBeforeDeadline) {
        EXPECT_TRUE(retaken) << "the unlock granted the lone reader the lock before it ran";
        EXPECT_EQ(ev[LockEvent::wake_reader], 0u);
        EXPECT_EQ(ev[LockEvent::wake_reader_retry], 1u);
      } else {
        // Granted readers that already ran and left leave the try nothing
        // to show; the wake-ups of the unlock still do.
        if (kind != R::kRealtime && !r_was_in)
          EXPECT_FALSE(retaken) << "the readers were not granted the lock at the unlock";
        EXPECT_EQ(ev[LockEvent::wake_reader], static_cast<std::uint64_t>(n));
        EXPECT_EQ(ev[LockEvent::wake_reader_retry], 0u);
      }
      EXPECT_EQ(sem.count(), 0u) << sem.describe();
      return;
    }
    FAIL() << "R got the lock before the writer's try in all 5 attempts";
  }
};
TYPED_TEST_SUITE(WokenReader, AllLayouts, LayoutNames);

TYPED_TEST(WokenReader, BeforeItsDeadlineTheWriterMayRetakeTheLock) {
  TestFixture::run(TestFixture::R::kBeforeDeadline);
}
TYPED_TEST(WokenReader, PastItsDeadlineItIsGrantedTheLock) {
  TestFixture::run(TestFixture::R::kPastDeadline);
}
TYPED_TEST(WokenReader, RealtimeReaderIsGrantedTheLock) {
  TestFixture::run(TestFixture::R::kRealtime);
}
TYPED_TEST(WokenReader, TwoQueuedReadersAreGrantedTheLock) {
  TestFixture::run(TestFixture::R::kBatch);
}

// ---- 4. signals and spurious wake-ups to sleeping waiters --------------------
//
// A no-op SIGUSR1 handler without SA_RESTART makes every interrupted futex
// wait return EINTR. Waiters (readers and writers, untimed, timed with a long
// deadline, timed with a short one) queue behind a held write lock and are
// hammered with signals (and, on the rwsem, with spurious wake() calls) for a
// while. None may return holding the lock while the holder still holds it,
// no untimed one may return at all, no timed one may give up before its
// deadline. After the release, all but the short-timed ones get the lock.
std::atomic<std::uint64_t> g_handled{0};  // lock-free: safe in a handler
void liveness_noop_handler(int) { g_handled.fetch_add(1, std::memory_order_relaxed); }

template <class T>
class Signals : public ::testing::Test {};
TYPED_TEST_SUITE(Signals, AllLocks, LockNames);

TYPED_TEST(Signals, InterruptedWaitersNeitherEnterNorGiveUpEarly) {
  using T = TypeParam;
  struct sigaction sa{}, old{};
  sa.sa_handler = liveness_noop_handler;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: waits see EINTR
  ASSERT_EQ(sigaction(SIGUSR1, &sa, &old), 0);

  const auto lock = make_lock<T>(true);
  T& sem = *lock;
  const auto short_deadline = scaled(150ms);
  const auto storm = scaled(400ms);
  struct Spec {
    bool reader;
    int timed;  // 0 untimed, 1 long deadline, 2 short deadline
  };
  std::vector<Spec> specs = {{true, 0}, {false, 0}};
  if (kTimed<T>) {
    specs.push_back({true, 1});
    specs.push_back({false, 1});
    specs.push_back({true, 2});
    specs.push_back({false, 2});
  }
  const std::size_t n = specs.size();
  std::vector<pthread_t> handles(n);
  std::vector<std::atomic<int>> outcome(n);       // 0 waiting, 1 got it, 2 gave up
  std::vector<std::atomic<std::int64_t>> waited_ns(n);
  std::atomic<int> started{0}, entered_while_held{0}, in_section{0}, overlap{0},
      exclusive_entries{0};
  std::atomic<bool> holder{true}, finish{false};
  long shared_plain = 0;  // written only by write-lock holders

  sem.lock();
  for (auto& o : outcome) o = 0;
  ThreadGroup g;
  ASSERT_TRUE(g.spawn_n(static_cast<int>(n), [&](int t) {
    const auto i = static_cast<std::size_t>(t);
    handles[i] = pthread_self();
    started.fetch_add(1);
    const Spec s = specs[i];
    const auto t0 = Clock::now();
    bool ok;
    if (s.timed == 0) {
      if (s.reader) read_lock(sem);
      else sem.lock();
      ok = true;
    } else {
      const auto d = s.timed == 1 ? std::chrono::nanoseconds(hang_limit()) : short_deadline;
      ok = s.reader ? read_lock_for(sem, d) : write_lock_for(sem, d);
    }
    waited_ns[i] = (Clock::now() - t0).count();
    if (ok) {
      if (holder.load()) entered_while_held.fetch_add(1);
      if (!s.reader || !kShared<T>) {
        if (in_section.fetch_add(1) != 0) overlap.fetch_add(1);
        ++shared_plain;
        exclusive_entries.fetch_add(1);
        in_section.fetch_sub(1);
        sem.unlock();
      } else {
        read_unlock(sem);
      }
    }
    outcome[i] = ok ? 1 : 2;
    // Stay alive until the signals stop: pthread_kill needs a live thread.
    while (!finish.load()) nap(1ms);
  }));
  ASSERT_TRUE(
      eventually(sem, [&] { return started.load() == static_cast<int>(n); }, "waiters started"));
  nap(scaled(20ms));  // let them get past spinning into their waits
  std::uint64_t signals = 0, spurious = 0;
  const std::uint64_t handled_before = g_handled.load();
  const auto storm_end = Clock::now() + storm;
  while (Clock::now() < storm_end) {
    for (std::size_t i = 0; i < n; ++i) {
      pthread_kill(handles[i], SIGUSR1);
      ++signals;
    }
    if constexpr (IsRwsem<T>::value) {
      Peer::wake(sem);
      ++spurious;
    }
    nap(100us);
  }
  int early = 0;
  std::string report;
  for (std::size_t i = 0; i < n; ++i) {
    const int o = outcome[i].load();
    const Spec s = specs[i];
    report +=
        std::string("\n    ") + (s.reader ? "reader" : "writer") +
        (s.timed == 0   ? " untimed"
         : s.timed == 1 ? " long-timed"
                        : " short-timed") +
        ": " +
        (o == 0 ? std::string("still waiting")
                : std::string(o == 1 ? "GOT THE LOCK" : "gave up") + " after " +
                      std::to_string(ms(std::chrono::nanoseconds(waited_ns[i].load()))) + " ms");
    if (o == 2 && s.timed == 2 && std::chrono::nanoseconds(waited_ns[i].load()) < short_deadline)
      ++early;
    if (o == 2 && s.timed != 2) ++early;
  }
  const int entered = entered_while_held.load();
  const std::uint64_t handled = g_handled.load() - handled_before;
  std::printf(
      "  [%s] %llu signals sent (%llu handled), %llu spurious wake() calls over %.0f ms; "
      "while held:%s\n",
      T::kName, static_cast<unsigned long long>(signals), static_cast<unsigned long long>(handled),
      static_cast<unsigned long long>(spurious), ms(storm), report.c_str());
  // Judged before the release: a lock that let a waiter in while held is
  // usually broken past releasing (the false owner's unlock corrupts the
  // count), and the waits below would then end in the hang guard's abort
  // with this verdict unsaid.
  EXPECT_EQ(entered, 0) << "a waiter returned holding the lock while the holder held it";
  EXPECT_EQ(early, 0) << "a waiter gave up before its deadline (or an untimed one gave up)";
  std::fflush(stdout);
  holder = false;
  sem.unlock();
  const bool all_in = eventually(sem, [&] {
    for (std::size_t i = 0; i < n; ++i)
      if (outcome[i].load() == 0) return false;
    return true;
  }, "every waiter returned after the release");
  finish = true;
  g.join();
  sigaction(SIGUSR1, &old, nullptr);
  EXPECT_GT(handled, 0u) << "no signal reached the waiters; the test proved nothing";
  EXPECT_EQ(overlap.load(), 0) << "two writers in the section at once";
  EXPECT_EQ(shared_plain, exclusive_entries.load()) << "lost update to data under the lock";
  ASSERT_TRUE(all_in);
  for (std::size_t i = 0; i < n; ++i)
    if (specs[i].timed != 2)
      EXPECT_EQ(outcome[i].load(), 1)
          << "waiter " << i << " did not get the lock after the release";
  EXPECT_EQ(sem.count(), 0u) << "lock not clean: " << sem.describe();
}

}  // namespace
}  // namespace rwsem_test
