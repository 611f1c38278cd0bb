// Scenario tests of the rwsem core, run for every count layout on every
// target: wake batching, handoff, READFAIL, timed waits, downgrade, owner
// ids, and the std::shared_timed_mutex surface.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <vector>

#include "conformance/lock_types.h"
#include "conformance/test_util.h"
#include "lib/rwsem/rwsem.h"
#include "lib/rwsem/testing.h"

namespace rwsem_test {
namespace {

using namespace std::chrono_literals;
using rwsem::testing::Peer;
using Native = rwsem::internal::NativePlatform;

template <class L>
class RwsemCore : public ::testing::Test {
 protected:
  using Lock = rwsem::BasicRwSemaphore<L>;
  using B = rwsem::internal::CountBits<L>;
  using Word = typename L::Word;

  static std::size_t queued(Lock& s) { return Peer::queue_length(s); }
  static bool sleeping_front(Lock& s) {
    std::vector<typename Lock::WaiterInfo> ws;
    return s.waiters(&ws) && !ws.empty() && ws.front().sleeping;
  }
  // Read phases: with the caller holding the write lock, starts reader R
  // and then writer W, each once the one before it is queued, so that the
  // caller's up_write() grants R and skips W, which stays queued.
  template <class R, class W>
  static ::testing::AssertionResult queue_reader_then_writer(Lock& s, ThreadGroup& g, R r, W w) {
    g.spawn(r);
    if (auto q = eventually(s, [&] { return queued(s) == 1; }, "R queued"); !q) return q;
    g.spawn(w);
    return eventually(s, [&] { return queued(s) == 2; }, "W queued");
  }
  // Phantom readers that make a rejoin possible: more holders than could
  // be running beside R.
  static std::int64_t phase_holders() { return std::int64_t{Native::max_spinners()} + 1; }
  // Reader R of the read-phase tests: takes the read lock `n` times and
  // holds the i-th until `step` moves past i; `locks` counts its entries.
  static auto stepping_reader(Lock& s, int n, std::atomic<int>& locks, std::atomic<int>& step) {
    return [&s, n, &locks, &step] {
      for (int i = 0; i < n; ++i) {
        s.down_read();
        locks++;
        while (step.load() == i) std::this_thread::sleep_for(100us);
        s.up_read();
      }
    };
  }
  // Writer W of the read-phase tests: takes the write lock once.
  static auto writer_once(Lock& s, std::atomic<bool>& in) {
    return [&s, &in] {
      s.down_write();
      in = true;
      s.up_write();
    };
  }
  // The end of a read-phase test: the phantom holders leave, the last of
  // them wakes W, W takes the lock, and R takes its `last`-th read lock
  // after W; then the lock must be free.
  static void phantoms_leave_then_writer_then_reader(Lock& s, ThreadGroup& g, std::int64_t phantoms,
                                                     std::atomic<bool>& w_in,
                                                     std::atomic<int>& r_locks,
                                                     std::atomic<int>& step, int last) {
    Peer::add_phantom_readers(s, -phantoms);
    ASSERT_TRUE(eventually(s, [&] { return w_in.load(); }, "W got the lock"));
    ASSERT_TRUE(eventually(s, [&] { return r_locks.load() == last; }, "R after W"));
    step = last;
    g.join();
    EXPECT_EQ(s.count(), 0u) << s.describe();
  }
};
TYPED_TEST_SUITE(RwsemCore, AllLayouts, LayoutNames);

TYPED_TEST(RwsemCore, ReadersShareWritersExclude) {
  using B = typename TestFixture::B;
  typename TestFixture::Lock sem;
  EXPECT_EQ(sem.count(), 0u);
  sem.down_read();
  ASSERT_TRUE(sem.down_read_trylock());
  EXPECT_EQ(B::reader_count(sem.count()), 2u) << sem.describe();
  EXPECT_FALSE(B::is_write_locked(sem.count()));
  bool w = true;
  std::thread([&] { w = sem.down_write_trylock(); }).join();
  EXPECT_FALSE(w) << "a writer got in beside two readers";
  sem.up_read();
  sem.up_read();
  EXPECT_EQ(sem.count(), 0u) << sem.describe();

  sem.down_write();
  EXPECT_TRUE(B::is_write_locked(sem.count()));
  bool r = true, w2 = true;
  std::thread([&] {
    r = sem.down_read_trylock();
    w2 = sem.down_write_trylock();
  }).join();
  EXPECT_FALSE(r) << "a reader got in beside a writer";
  EXPECT_FALSE(w2) << "two writers";
  EXPECT_EQ(B::reader_count(sem.count()), 0u) << "a failed reader left its bias";
  sem.up_write();
  EXPECT_EQ(sem.count(), 0u) << sem.describe();
}

// waiters() is what the watchdogs print when a test hangs, so a wrong
// answer misleads exactly when it matters: it must replace *out with the
// queue front first, each waiter's role, thread, wait so far and state, and
// give up after `patience` (false, *out empty) while someone else holds the
// wait lock, rather than read the queue without it.
TYPED_TEST(RwsemCore, WaitersReportsTheQueueFrontFirst) {
  using Info = typename TestFixture::Lock::WaiterInfo;
  typename TestFixture::Lock sem(rwsem::Options{std::chrono::seconds(100)});  // no handoff
  sem.down_write();
  // Reader, writer, reader, each queued before the next starts.
  const bool roles[] = {true, false, true};
  std::atomic<std::uint32_t> tids[3] = {};
  ThreadGroup g;
  for (int i = 0; i < 3; ++i) {
    g.spawn([&, i] {
      tids[i] = rwsem::internal::current_thread().tid;
      if (roles[i]) {
        sem.down_read();
        sem.up_read();
      } else {
        sem.down_write();
        sem.up_write();
      }
    });
    ASSERT_TRUE(eventually(sem, [&] { return TestFixture::queued(sem) == std::size_t(i) + 1; },
                           "the next waiter queued"));
  }
  std::vector<Info> ws(5, Info{false, 0, -1, true, false});  // replaced, not appended to
  ASSERT_TRUE(sem.waiters(&ws));
  ASSERT_EQ(ws.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(ws[i].reader, roles[i]);
    EXPECT_EQ(ws[i].tid, tids[i].load());
    EXPECT_GE(ws[i].waited_ns, 0);
    if (i > 0) EXPECT_GE(ws[i - 1].waited_ns, ws[i].waited_ns) << "not front first";
    EXPECT_FALSE(ws[i].handoff_set);
    EXPECT_TRUE(ws[i].sleeping) << "a queued waiter nobody woke";
  }

  // Someone else holds the wait lock: waiters() gives up after its
  // patience (a lower bound the API promises) and reports nothing.
  Peer::with_wait_lock(sem, [&] {
    std::thread([&] {
      std::vector<Info> out(2);
      const auto t0 = std::chrono::steady_clock::now();
      EXPECT_FALSE(sem.waiters(&out, 20ms));
      EXPECT_GE(std::chrono::steady_clock::now() - t0, 20ms);
      EXPECT_TRUE(out.empty());
    }).join();
  });
  sem.up_write();
  g.join();
  EXPECT_EQ(sem.count(), 0u) << sem.describe();
  ws.assign(1, Info{});
  EXPECT_TRUE(sem.waiters(&ws));
  EXPECT_TRUE(ws.empty());
}

TYPED_TEST(RwsemCore, OwnerIdRoundTripsAndIsCachedPerThread) {
  using L = TypeParam;
  typename TestFixture::Lock sem;
  const std::uint64_t me = rwsem::internal::current_thread().owner_id();
  ASSERT_NE(me, 0u);
  EXPECT_EQ(rwsem::internal::thread_from_owner_id<Native>(me), &rwsem::internal::current_thread());
  EXPECT_EQ(rwsem::internal::writer_word_of<L>(rwsem::internal::current_thread()),
            rwsem::internal::writer_word_of<L>(rwsem::internal::current_thread()));
  sem.down_write();
  EXPECT_EQ(sem.owner_id(), me) << sem.describe();
  if (L::kOwnerInCount) {
    EXPECT_EQ(L::owner_id(sem.count()), me) << "owner id truncated in the count";
  }
  sem.up_write();
  EXPECT_EQ(sem.owner_id(), 0u);

  // Another thread has another id, and it too round-trips.
  std::uint64_t other = 0, seen = 0;
  std::thread([&] {
    other = rwsem::internal::current_thread().owner_id();
    sem.down_write();
    seen = sem.owner_id();
    sem.up_write();
  }).join();
  EXPECT_NE(other, me);
  EXPECT_EQ(seen, other);
}

TEST(RwsemOwnerId, MergedLayoutRejectsIdsPastBit47) {
  using M = rwsem::MergedOwnerLayout;
  EXPECT_TRUE(M::encodable((std::uint64_t{1} << 45) - 1));
  EXPECT_FALSE(M::encodable(std::uint64_t{1} << 45));
  EXPECT_FALSE(M::encodable(0));
  const std::uint64_t id = 0x155555555555ULL;  // 45 bits, alternating
  EXPECT_EQ(M::owner_id(M::writer_word(id)), id);
  EXPECT_EQ(M::writer_word(id) & ~M::kWriterMask, 0u);
}

// Rwsem series patch 6: with a reader first in the queue, one wake-up grants the read
// lock to at most 256 readers; the rest wait until those have left.
TYPED_TEST(RwsemCore, WakeBatchIsAtMost256Readers) {
  using B = typename TestFixture::B;
  constexpr int kReaders = 300;
  static_assert(rwsem::kMaxReadersWakeup == 256, "the series' batch size");
  typename TestFixture::Lock sem;
  std::atomic<int> acquired{0};
  std::atomic<bool> release{false};

  sem.down_write();
  ThreadGroup readers;
  ASSERT_TRUE(readers.spawn_n(kReaders, [&](int) {
    sem.down_read();
    acquired.fetch_add(1);
    while (!release.load()) std::this_thread::sleep_for(1ms);
    sem.up_read();
  }));
  ASSERT_TRUE(eventually(sem, [&] { return TestFixture::queued(sem) == kReaders; },
                         "all 300 readers queued behind the writer"));
  sem.up_write();

  ASSERT_TRUE(eventually(sem, [&] { return acquired.load() == 256; }, "256 readers woken"));
  // The other 44 stay queued while the 256 hold the lock.
  EXPECT_EQ(TestFixture::queued(sem), std::size_t{kReaders - 256});
  EXPECT_EQ(B::reader_count(sem.count()), 256u) << sem.describe();
  EXPECT_TRUE(B::has_waiters(sem.count())) << sem.describe();
  EXPECT_EQ(acquired.load(), 256);

  release.store(true);
  ASSERT_TRUE(eventually(sem, [&] { return acquired.load() == kReaders; },
                         "the remaining 44 readers woken once the batch left"));
  readers.join();
  EXPECT_EQ(sem.count(), 0u) << sem.describe();
}

// Patch 6 again: readers behind a queued writer are woken with the readers
// in front of it; the writer keeps its place.
TYPED_TEST(RwsemCore, ReaderWakeSkipsQueuedWriters) {
  typename TestFixture::Lock sem;
  std::atomic<int> readers_in{0};
  std::atomic<bool> writer_in{false}, release{false};
  sem.down_write();
  ThreadGroup g;
  g.spawn([&] {
    sem.down_read();
    readers_in++;
    while (!release) std::this_thread::sleep_for(1ms);
    sem.up_read();
  });
  ASSERT_TRUE(eventually(sem, [&] { return TestFixture::queued(sem) == 1; }, "R1 queued"));
  g.spawn([&] {
    sem.down_write();
    writer_in = true;
    sem.up_write();
  });
  ASSERT_TRUE(eventually(sem, [&] { return TestFixture::queued(sem) == 2; }, "W queued"));
  g.spawn([&] {
    sem.down_read();
    readers_in++;
    while (!release) std::this_thread::sleep_for(1ms);
    sem.up_read();
  });
  ASSERT_TRUE(eventually(sem, [&] { return TestFixture::queued(sem) == 3; }, "R2 queued"));

  sem.up_write();
  ASSERT_TRUE(eventually(sem, [&] { return readers_in.load() == 2; },
                         "both readers, including the one behind the writer"));
  EXPECT_FALSE(writer_in.load());
  EXPECT_EQ(TestFixture::queued(sem), 1u);
  release = true;
  ASSERT_TRUE(eventually(sem, [&] { return writer_in.load(); }, "writer after readers"));
  g.join();
  EXPECT_EQ(sem.count(), 0u) << sem.describe();
}

// Rwsem series patch 2 / the handoff commit, writer side: a first waiter that has waited past
// the handoff timeout sets HANDOFF when it next fails to get the lock; then
// nobody can steal the lock from it.
TYPED_TEST(RwsemCore, WriterHandoffAfterTimeout) {
  using B = typename TestFixture::B;
  rwsem::testing::FakeHandoffClock clock;
  typename TestFixture::Lock sem(rwsem::Options{4ms});
  std::atomic<bool> w_in{false}, w_release{false};

  sem.down_write();
  ThreadGroup g;
  g.spawn([&] {
    sem.down_write();
    w_in = true;
    while (!w_release) std::this_thread::sleep_for(1ms);
    sem.up_write();
  });
  ASSERT_TRUE(eventually(sem, [&] { return TestFixture::sleeping_front(sem); },
                         "writer W queued and asleep"));

  // Before the timeout, a wake-up that finds the lock taken leaves no
  // HANDOFF behind: stealing stays allowed.
  clock.advance(3ms);
  Peer::wake(sem);
  ASSERT_TRUE(eventually(sem, [&] { return TestFixture::sleeping_front(sem); },
                         "W retried and went back to sleep"));
  EXPECT_FALSE(B::has_handoff(sem.count())) << sem.describe();

  // Past the timeout, the same wake-up makes W claim the lock.
  clock.advance(2ms);
  Peer::wake(sem);
  ASSERT_TRUE(eventually(sem, [&] { return B::has_handoff(sem.count()); }, "W set HANDOFF"));
  EXPECT_TRUE(B::has_waiters(sem.count()));

  sem.up_write();
  // The lock is owed to W: neither a writer nor a reader can steal it.
  EXPECT_FALSE(sem.down_write_trylock()) << sem.describe();
  EXPECT_FALSE(sem.down_read_trylock()) << sem.describe();
  ASSERT_TRUE(eventually(sem, [&] { return w_in.load(); }, "W got the lock"));
  EXPECT_FALSE(B::has_handoff(sem.count())) << "HANDOFF not cleared: " << sem.describe();
  EXPECT_FALSE(B::has_waiters(sem.count())) << sem.describe();
  w_release = true;
  g.join();
  EXPECT_EQ(sem.count(), 0u) << sem.describe();
}

// A lock owed to its first waiter goes to that waiter even before it has
// been woken. The state: W owns HANDOFF, the last reader has released the
// lock and its wake-up has not run yet (a window every up_read() has; here
// a phantom reader leaves by a bare subtraction from the count, so the
// window stays open). A writer, and then a reader, that come along must
// queue behind W: the free lock is not theirs to take, whether they try
// it before queueing or from the queue. The first to queue on the free
// lock wakes W.
TYPED_TEST(RwsemCore, AFreeLockOwedToTheFirstWaiterIsNotTakenPastIt) {
  using B = typename TestFixture::B;
  using Word = typename TestFixture::Word;
  for (const bool later_reads : {false, true}) {
    SCOPED_TRACE(later_reads ? "a reader comes along" : "a writer comes along");
    rwsem::testing::FakeHandoffClock clock;
    typename TestFixture::Lock sem(rwsem::Options{4ms, 0ns});  // no spinning
    std::atomic<int> order{0}, w_pos{0}, later_pos{0};

    Peer::add_phantom_readers(sem, 1);
    ThreadGroup g;
    g.spawn([&] {
      sem.down_write();
      w_pos = ++order;
      sem.up_write();
    });
    ASSERT_TRUE(eventually(sem, [&] { return TestFixture::sleeping_front(sem); },
                           "writer W queued behind the reader"));
    clock.advance(5ms);
    Peer::wake(sem);  // W retries past its deadline and claims HANDOFF
    ASSERT_TRUE(eventually(sem, [&] {
      return B::has_handoff(sem.count()) && TestFixture::sleeping_front(sem);
    }, "W owns HANDOFF and sleeps"));

    // The reader releases; its wake-up does not follow.
    Peer::count(sem).fetch_sub(static_cast<Word>(B::kReaderBias), std::memory_order_release);
    ASSERT_FALSE(B::is_locked(sem.count())) << sem.describe();
    ASSERT_TRUE(B::has_handoff(sem.count())) << sem.describe();

    g.spawn([&] {
      if (later_reads) {
        sem.down_read();
        later_pos = ++order;
        sem.up_read();
      } else {
        sem.down_write();
        later_pos = ++order;
        sem.up_write();
      }
    });
    ASSERT_TRUE(eventually(sem, [&] { return w_pos.load() != 0 && later_pos.load() != 0; },
                           "both got the lock"));
    g.join();
    EXPECT_EQ(w_pos.load(), 1) << "the lock owed to W went to a "
                               << (later_reads ? "reader" : "writer") << " that came later";
    EXPECT_EQ(sem.count(), 0u) << sem.describe();
  }
}

// The handoff timer: a writer queued behind a reader that keeps its lock
// claims HANDOFF at its handoff deadline by itself, with no unlock to wake
// it. Without the timer it would sleep until the reader count reaches zero,
// which readers that keep overlapping (or one long reader) can put off
// indefinitely; with HANDOFF set, no reader can join and no writer can
// steal, so the writer's wait is bounded by the reader in progress.
TYPED_TEST(RwsemCore, QueuedWriterClaimsHandoffAtItsDeadline) {
  using B = typename TestFixture::B;
  rwsem::testing::FakeHandoffClock clock;
  typename TestFixture::Lock sem(rwsem::Options{4ms, 0ns});
  std::atomic<bool> w_in{false};

  sem.down_read();
  ThreadGroup g;
  g.spawn([&] {
    sem.down_write();
    w_in = true;
    sem.up_write();
  });
  ASSERT_TRUE(eventually(sem, [&] { return TestFixture::sleeping_front(sem); },
                         "writer W queued behind the reader"));
  EXPECT_FALSE(B::has_handoff(sem.count())) << sem.describe();

  // W's handoff deadline passes while the reader still holds the lock. The
  // promise is bounded (handoff timeout + the time W needs to wake), so the
  // wait for HANDOFF is bounded too, generously for QEMU and TSan.
  clock.advance(5ms);
  const auto limit = std::chrono::steady_clock::now() + 2s;
  while (!B::has_handoff(sem.count()) && std::chrono::steady_clock::now() < limit)
    std::this_thread::sleep_for(200us);
  ASSERT_TRUE(B::has_handoff(sem.count()))
      << "a writer past its handoff deadline did not claim HANDOFF while the "
         "reader held the lock\n"
      << lock_state(sem);
  // The lock is owed to W: a new reader cannot join, a writer cannot steal.
  EXPECT_FALSE(sem.down_read_trylock()) << sem.describe();
  EXPECT_FALSE(sem.down_write_trylock()) << sem.describe();
  EXPECT_FALSE(w_in.load());

  sem.up_read();
  ASSERT_TRUE(eventually(sem, [&] { return w_in.load(); }, "W got the lock"));
  g.join();
  EXPECT_EQ(sem.count(), 0u) << sem.describe();
}

// Reader side of handoff: the waker finds the lock stolen by a writer and,
// if the first reader has waited long enough, sets HANDOFF for it.
TYPED_TEST(RwsemCore, ReaderHandoffAfterTimeout) {
  using B = typename TestFixture::B;
  rwsem::testing::FakeHandoffClock clock;
  typename TestFixture::Lock sem(rwsem::Options{4ms});
  std::atomic<bool> r_in{false}, r_release{false};

  sem.down_write();
  ThreadGroup g;
  // R keeps its read lock until told: otherwise on a slow target it can be
  // woken, run and leave before our trylock below, which then rightly
  // succeeds (seen under QEMU ppc + UBSan).
  g.spawn([&] {
    sem.down_read();
    r_in = true;
    while (!r_release.load()) std::this_thread::sleep_for(std::chrono::microseconds(100));
    sem.up_read();
  });
  ASSERT_TRUE(eventually(sem, [&] { return TestFixture::queued(sem) == 1; }, "R queued"));

  Peer::wake(sem);  // as if the lock had been stolen before the timeout
  EXPECT_FALSE(B::has_handoff(sem.count())) << sem.describe();
  EXPECT_EQ(B::reader_count(sem.count()), 0u) << "waker left its test bias";

  clock.advance(5ms);
  Peer::wake(sem);
  EXPECT_TRUE(B::has_handoff(sem.count())) << sem.describe();
  EXPECT_EQ(B::reader_count(sem.count()), 0u) << "waker left its test bias";
  EXPECT_FALSE(r_in.load());

  sem.up_write();
  EXPECT_FALSE(sem.down_write_trylock()) << "stole a lock owed to a reader";
  ASSERT_TRUE(eventually(sem, [&] { return r_in.load(); }, "R got the lock"));
  EXPECT_FALSE(B::has_handoff(sem.count())) << "HANDOFF not cleared: " << sem.describe();
  EXPECT_EQ(B::reader_count(sem.count()), 1u) << sem.describe();
  r_release = true;
  g.join();
  EXPECT_EQ(sem.count(), 0u) << "HANDOFF or WAITERS left: " << sem.describe();
}

// Wait-bound rule 4: a reader R queued behind a writer W that has not
// claimed HANDOFF is granted ahead of W once R has waited the handoff
// timeout; before that, or once W owns HANDOFF, W goes first. The order in
// which R and the writers got the lock is what the test reads, so a lock
// that grants the wrong one, grants both, or strands either fails it. The
// cases also fail a lock that asks whether W (not R) is overdue, or that
// looks only at the waiter right behind W.
TYPED_TEST(RwsemCore, OverdueReaderBehindAWriterGoesFirst) {
  using B = typename TestFixture::B;
  struct Case {
    const char* name;
    int writers;                      // queued ahead of R
    std::chrono::seconds before_r;    // fake clock advanced before R queues
    std::chrono::seconds after_r;     // ... and after
    bool writer_claims;               // W claims HANDOFF before the release
    bool reader_first;                // expected
  };
  const Case cases[] = {
      {"neither overdue", 1, 0s, 0s, false, false},
      {"both overdue", 1, 0s, 11s, false, true},
      {"only W overdue", 1, 6s, 5s, false, false},
      {"R overdue behind two writers", 2, 0s, 11s, false, true},
      {"W owns HANDOFF", 1, 0s, 11s, true, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    rwsem::testing::FakeHandoffClock clock;
    // The writers sleep on a real-time handoff timer of this length and
    // claim HANDOFF when they wake past their deadline on the fake clock:
    // 10 s keeps them asleep for the whole case, 20 ms lets W claim.
    typename TestFixture::Lock sem(rwsem::Options{c.writer_claims ? 20ms : 10s});
    std::atomic<int> next{0}, r_turn{-1};
    std::vector<std::atomic<int>> w_turn(c.writers);
    for (auto& t : w_turn) t = -1;

    sem.down_write();
    ThreadGroup g;
    for (int k = 0; k < c.writers; ++k) {
      g.spawn([&, k] {
        sem.down_write();
        w_turn[k] = next++;
        sem.up_write();
      });
      ASSERT_TRUE(eventually(sem, [&] { return TestFixture::queued(sem) == std::size_t(k) + 1; },
                             "writer queued"));
    }
    ASSERT_TRUE(eventually(sem, [&] { return TestFixture::sleeping_front(sem); },
                           "writer W queued and asleep"));
    clock.advance(c.before_r);
    g.spawn([&] {
      sem.down_read();
      r_turn = next++;
      sem.up_read();
    });
    ASSERT_TRUE(eventually(sem, [&] {
      return TestFixture::queued(sem) == std::size_t(c.writers) + 1;
    }, "reader R queued behind the writers"));
    clock.advance(c.after_r);
    if (c.writer_claims)
      ASSERT_TRUE(eventually(sem, [&] { return B::has_handoff(sem.count()); }, "W set HANDOFF"));
    else EXPECT_FALSE(B::has_handoff(sem.count())) << sem.describe();

    sem.up_write();
    g.join();
    EXPECT_EQ(next.load(), c.writers + 1);
    if (c.reader_first) EXPECT_EQ(r_turn.load(), 0) << "the overdue reader did not go before W";
    else EXPECT_EQ(w_turn[0].load(), 0) << "R went before the writer queued ahead of it";
    for (int k = 1; k < c.writers; ++k)
      EXPECT_GT(w_turn[k].load(), w_turn[0].load()) << "writers out of queue order";
    EXPECT_EQ(sem.count(), 0u) << sem.describe();
  }
}

// Read phases (rwsem.h): a reader granted by a wake-up that left a writer
// queued opens a read phase. Within it, it may take the read lock again
// past that writer while more readers hold the lock than could be running
// (phantom readers stand in for granted readers still waiting for a CPU);
// after it, rule 1 holds again and it queues behind the writer. A rejoin
// reads the clock for the phase's end on the phase's first rejoin and every
// kReadPhaseClockStride-th after, so once the phase is over the reader
// queues within that many asks. The phase runs on the fake handoff clock,
// so no step depends on how fast the machine is. A lock without phases
// fails the first step, and so does one that lets a phase rejoin only on
// the asks that read the clock (the first step asks past a clock stride)
// or whose phases are shorter than kPhase (its last ask reads the clock
// 1 us before the end); one whose phases are longer, or never end, fails
// the second (its asks read the clock 1 us after the end). A phase found over is gone
// for good: once the reader has been granted again by a wake-up that left
// nobody queued (which opens no phase), it must queue behind the next
// writer at its first ask. A lock that only refuses the asks that read the
// clock, and keeps the phase, fails that third step.
TYPED_TEST(RwsemCore, GrantedReaderRejoinsOnlyWithinItsReadPhase) {
  rwsem::testing::FakeHandoffClock clock;
  // 4 ms handoff timeout, so phases of 4 ms / kReadPhaseDivisor; no
  // spinning, so every wait queues.
  constexpr auto kPhase = std::chrono::nanoseconds(4ms) / rwsem::kReadPhaseDivisor;
  typename TestFixture::Lock sem(rwsem::Options{4ms, 0ns});
  const std::int64_t holders = TestFixture::phase_holders();
  std::atomic<int> r_locks{0}, step{0};
  std::atomic<bool> w_in{false}, r_done{false};

  sem.down_write();
  ThreadGroup g;
  // R: takes the read lock, holds it until the step moves past its count,
  // and asks again, until told it is done.
  auto reader = [&] {
    for (int i = 0; !r_done.load(); ++i) {
      sem.down_read();
      r_locks++;
      while (step.load() == i && !r_done.load()) std::this_thread::sleep_for(100us);
      sem.up_read();
    }
  };
  ASSERT_TRUE(
      TestFixture::queue_reader_then_writer(sem, g, reader, TestFixture::writer_once(sem, w_in)));

  sem.up_write();  // grants R, skipping W: R opens its read phase
  ASSERT_TRUE(eventually(sem, [&] { return r_locks.load() == 1; }, "R granted"));
  Peer::add_phantom_readers(sem, holders);
  // After a failed check: the phantoms leave and R stops asking, so that
  // every thread can finish (W, or W2 below, then R) and the test ends.
  auto let_everyone_finish = [&] {
    Peer::add_phantom_readers(sem, -holders);
    r_done = true;
  };
  // R leaves and asks again within its phase, past one clock stride: every
  // ask must rejoin the readers past the queued writer. The last ask reads
  // the clock (the stride's), 1 us before the phase ends.
  constexpr int kRejoins = int{rwsem::kReadPhaseClockStride} + 1;
  for (int k = 1; k <= kRejoins; ++k) {
    if (k == kRejoins) clock.advance(kPhase - 1us);
    step = k;
    ASSERT_TRUE(eventually(sem, [&] {
      return TestFixture::queued(sem) == 2 || r_locks.load() == 1 + k;
    }, "R asked again within its phase"));
    if (r_locks.load() != 1 + k) {
      ADD_FAILURE() << "R queued behind W at ask " << k << " of its phase; " << lock_state(sem);
      return let_everyone_finish();
    }
  }
  EXPECT_FALSE(w_in.load());
  EXPECT_EQ(TestFixture::queued(sem), 1u) << lock_state(sem);

  clock.advance(2us);  // 1 us past R's phase, long before W's handoff deadline
  // R leaves and asks again, as often as it gets in: rule 1 must queue it
  // behind W within kReadPhaseClockStride asks.
  int asks = 0;
  bool queued = false;
  while (!queued && asks < int{rwsem::kReadPhaseClockStride}) {
    ++asks;
    step = kRejoins + asks;
    ASSERT_TRUE(eventually(sem, [&] {
      return TestFixture::queued(sem) == 2 || r_locks.load() == 1 + kRejoins + asks;
    }, "R asked again after its phase"));
    queued = TestFixture::queued(sem) == 2;
  }
  if (!queued) {
    ADD_FAILURE() << "R still rejoined past W " << asks << " asks after its phase ended; "
                  << lock_state(sem);
    return let_everyone_finish();
  }
  EXPECT_FALSE(w_in.load());

  // The last reader out wakes W; R gets in after it, granted by W's unlock
  // with nobody left queued: no new phase.
  int before = r_locks.load();
  Peer::add_phantom_readers(sem, -holders);
  ASSERT_TRUE(eventually(sem, [&] { return w_in.load(); }, "W got the lock"));
  ASSERT_TRUE(eventually(sem, [&] { return r_locks.load() == before + 1; }, "R after W"));

  // A second writer queues behind R, more readers hold the lock than could
  // be running, and R asks again: the old phase is over, so R must queue.
  std::atomic<bool> w2_in{false};
  g.spawn(TestFixture::writer_once(sem, w2_in));
  ASSERT_TRUE(eventually(sem, [&] { return TestFixture::queued(sem) == 1; }, "W2 queued"));
  Peer::add_phantom_readers(sem, holders);
  before = r_locks.load();
  step = before;  // R leaves its current read lock and asks again
  ASSERT_TRUE(eventually(sem, [&] {
    return TestFixture::queued(sem) == 2 || r_locks.load() == before + 1;
  }, "R asked again after a grant that opened no phase"));
  if (r_locks.load() != before) {
    ADD_FAILURE() << "R rejoined past W2 on a read phase that had ended; " << lock_state(sem);
    return let_everyone_finish();
  }
  EXPECT_FALSE(w2_in.load());

  Peer::add_phantom_readers(sem, -holders);
  ASSERT_TRUE(eventually(sem, [&] { return w2_in.load(); }, "W2 got the lock"));
  ASSERT_TRUE(eventually(sem, [&] { return r_locks.load() == before + 1; }, "R after W2"));
  r_done = true;
  g.join();
  EXPECT_EQ(sem.count(), 0u) << sem.describe();
}

// A rejoin needs a holder that cannot be running: with only as many other
// readers holding the lock as there are other CPUs, they may all be
// working, and R, although within its phase, queues behind W as rule 1
// says. A phase that ignores the holder count (or counts one too few) lets
// R in.
TYPED_TEST(RwsemCore, AReadPhaseNeedsAHolderThatCannotBeRunning) {
  if (Native::max_spinners() == 0)
    GTEST_SKIP() << "one CPU: any other holder may be waiting for it, so no count is too few";
  rwsem::testing::FakeHandoffClock clock;
  typename TestFixture::Lock sem(rwsem::Options{4ms, 0ns});
  const std::int64_t holders = TestFixture::phase_holders() - 1;  // one too few
  std::atomic<int> r_locks{0}, step{0};
  std::atomic<bool> w_in{false};

  sem.down_write();
  ThreadGroup g;
  ASSERT_TRUE(TestFixture::queue_reader_then_writer(
      sem, g, TestFixture::stepping_reader(sem, 2, r_locks, step),
      TestFixture::writer_once(sem, w_in)));

  sem.up_write();  // grants R, skipping W: R opens its read phase
  ASSERT_TRUE(eventually(sem, [&] { return r_locks.load() == 1; }, "R granted"));
  Peer::add_phantom_readers(sem, holders);
  step = 1;  // R leaves and asks again within its phase
  ASSERT_TRUE(eventually(sem, [&] { return TestFixture::queued(sem) == 2; },
                         "R queued behind W: every other holder may be running"));
  EXPECT_EQ(r_locks.load(), 1) << lock_state(sem);

  // The last reader out wakes W.
  TestFixture::phantoms_leave_then_writer_then_reader(sem, g, holders, w_in, r_locks, step, 2);
}

// A read phase never joins a writer. While a writer holds the lock, the
// count still shows readers: the fast-path biases of readers that failed
// and have not backed out yet (phantom readers stand in for them). A phase
// that tested only the reader count would let R in beside the writer.
TYPED_TEST(RwsemCore, AReadPhaseNeverJoinsAWriter) {
  rwsem::testing::FakeHandoffClock clock;
  typename TestFixture::Lock sem(rwsem::Options{4ms, 0ns});
  const std::int64_t holders = TestFixture::phase_holders();
  std::atomic<int> r_locks{0}, step{0};
  std::atomic<bool> w_in{false}, w_release{false};

  sem.down_write();
  ThreadGroup g;
  ASSERT_TRUE(TestFixture::queue_reader_then_writer(sem, g, [&] {
    sem.down_read();
    r_locks++;
    while (step.load() < 1) std::this_thread::sleep_for(100us);
    sem.up_read();  // the last reader out: wakes W
    while (step.load() < 2) std::this_thread::sleep_for(100us);
    sem.down_read();  // within its phase, but W holds the lock
    r_locks++;
    sem.up_read();
  }, [&] {
    sem.down_write();
    w_in = true;
    while (!w_release.load()) std::this_thread::sleep_for(100us);
    sem.up_write();
  }));

  sem.up_write();  // grants R, skipping W: R opens its read phase
  ASSERT_TRUE(eventually(sem, [&] { return r_locks.load() == 1; }, "R granted"));
  step = 1;
  ASSERT_TRUE(eventually(sem, [&] { return w_in.load(); }, "W got the lock after R"));
  Peer::add_phantom_readers(sem, holders);  // failed readers' biases beside W
  step = 2;
  ASSERT_TRUE(eventually(sem, [&] { return TestFixture::queued(sem) == 1; },
                         "R queued behind the writer that holds the lock"));
  EXPECT_EQ(r_locks.load(), 1) << "R got a read lock while W held the write lock\n"
                               << lock_state(sem);

  Peer::add_phantom_readers(sem, -holders);
  w_release = true;
  ASSERT_TRUE(eventually(sem, [&] { return r_locks.load() == 2; }, "R after W"));
  g.join();
  EXPECT_EQ(sem.count(), 0u) << sem.describe();
}

// HANDOFF ends a read phase: the queued writer's wait stays bounded by its
// handoff timeout. W has waited almost its timeout when R is granted, so
// W's deadline passes while R's phase is still open; once W owns HANDOFF,
// R must queue behind it. A phase that ignores HANDOFF lets R in again.
TYPED_TEST(RwsemCore, HandoffEndsAReadPhase) {
  using B = typename TestFixture::B;
  rwsem::testing::FakeHandoffClock clock;
  typename TestFixture::Lock sem(rwsem::Options{4ms, 0ns});
  const std::int64_t holders = TestFixture::phase_holders();
  std::atomic<int> r_locks{0}, step{0};
  std::atomic<bool> w_in{false};

  sem.down_write();
  ThreadGroup g;
  ASSERT_TRUE(TestFixture::queue_reader_then_writer(
      sem, g, TestFixture::stepping_reader(sem, 2, r_locks, step),
      TestFixture::writer_once(sem, w_in)));

  clock.advance(3900us);  // W has waited 3.9 ms of its 4
  sem.up_write();         // grants R (phase until 4.15 ms), skipping W
  ASSERT_TRUE(eventually(sem, [&] { return r_locks.load() == 1; }, "R granted"));
  Peer::add_phantom_readers(sem, holders);
  clock.advance(200us);  // W is past its deadline; R's phase is still open
  Peer::wake(sem);       // W retries and claims HANDOFF on the reader-owned lock
  ASSERT_TRUE(eventually(sem, [&] { return B::has_handoff(sem.count()); }, "W owns HANDOFF"));

  step = 1;  // R leaves and asks again: HANDOFF queues it behind W
  ASSERT_TRUE(eventually(sem, [&] { return TestFixture::queued(sem) == 2; },
                         "R queued behind the writer that owns HANDOFF"));
  EXPECT_EQ(r_locks.load(), 1) << lock_state(sem);
  EXPECT_FALSE(w_in.load());

  // The last reader out wakes W.
  TestFixture::phantoms_leave_then_writer_then_reader(sem, g, holders, w_in, r_locks, step, 2);
}

// A read phase stops at READFAIL: with the reader count full, R within its
// phase must back out and queue like any reader, not add one more bias to
// a count with no room for it. Phantom readers fill the count. A phase
// that tests only the reader count lets R in past the guard bit.
TYPED_TEST(RwsemCore, AReadPhaseStopsAtReadFail) {
  using B = typename TestFixture::B;
  rwsem::testing::FakeHandoffClock clock;
  typename TestFixture::Lock sem(rwsem::Options{4ms, 0ns});
  const std::int64_t full = static_cast<std::int64_t>(B::kMaxReaders);
  std::atomic<int> r_locks{0}, step{0};
  std::atomic<bool> w_in{false};

  sem.down_write();
  ThreadGroup g;
  ASSERT_TRUE(TestFixture::queue_reader_then_writer(
      sem, g, TestFixture::stepping_reader(sem, 2, r_locks, step),
      TestFixture::writer_once(sem, w_in)));

  sem.up_write();  // grants R, skipping W: R opens its read phase
  ASSERT_TRUE(eventually(sem, [&] { return r_locks.load() == 1; }, "R granted"));
  Peer::add_phantom_readers(sem, full);
  ASSERT_TRUE(B::is_read_fail(sem.count())) << sem.describe();
  step = 1;  // R leaves and asks again within its phase: READFAIL queues it
  ASSERT_TRUE(eventually(sem, [&] { return TestFixture::queued(sem) == 2; },
                         "R queued: the reader count is full"));
  EXPECT_EQ(r_locks.load(), 1) << lock_state(sem);
  EXPECT_EQ(B::reader_count(sem.count()), B::kMaxReaders) << "R left its bias in a full count\n"
                                                          << lock_state(sem);

  // The last reader out wakes W.
  TestFixture::phantoms_leave_then_writer_then_reader(sem, g, full, w_in, r_locks, step, 2);
}

// A read phase is for the lock whose wake-up granted it. R, granted past
// W on lock A, asks for lock B within that phase, where readers (phantom)
// hold B and writer V is queued: rule 1 holds on B, and R queues behind V.
// A phase that forgets which lock opened it lets R in on B.
TYPED_TEST(RwsemCore, AReadPhaseIsForTheLockThatGrantedIt) {
  rwsem::testing::FakeHandoffClock clock;
  typename TestFixture::Lock a(rwsem::Options{4ms, 0ns}), b(rwsem::Options{4ms, 0ns});
  const std::int64_t holders = TestFixture::phase_holders();
  std::atomic<int> r_locks{0}, step{0};
  std::atomic<bool> w_in{false}, v_in{false}, r_in_b{false};

  a.down_write();
  ThreadGroup g;
  ASSERT_TRUE(TestFixture::queue_reader_then_writer(a, g, [&] {
    a.down_read();
    r_locks++;
    while (step.load() < 1) std::this_thread::sleep_for(100us);
    a.up_read();  // the last reader out of A: wakes W
    b.down_read();
    r_in_b = true;
    b.up_read();
  }, TestFixture::writer_once(a, w_in)));

  Peer::add_phantom_readers(b, holders);
  g.spawn(TestFixture::writer_once(b, v_in));
  ASSERT_TRUE(eventually(b, [&] { return TestFixture::queued(b) == 1; }, "V queued on B"));

  a.up_write();  // grants R on A, skipping W: R opens its read phase on A
  ASSERT_TRUE(eventually(a, [&] { return r_locks.load() == 1; }, "R granted on A"));
  step = 1;  // R leaves A and asks for B within its phase on A
  ASSERT_TRUE(eventually(b, [&] { return TestFixture::queued(b) == 2; },
                         "R queued behind V on B: its phase is on A"));
  EXPECT_FALSE(r_in_b.load()) << lock_state(b);
  ASSERT_TRUE(eventually(a, [&] { return w_in.load(); }, "W got A after R"));

  Peer::add_phantom_readers(b, -holders);  // the last readers out of B wake V
  ASSERT_TRUE(eventually(b, [&] { return v_in.load(); }, "V got B"));
  ASSERT_TRUE(eventually(b, [&] { return r_in_b.load(); }, "R got B after V"));
  g.join();
  EXPECT_EQ(a.count(), 0u) << a.describe();
  EXPECT_EQ(b.count(), 0u) << b.describe();
}

// Patch 10: a reader that finds READFAIL set backs out and sleeps, and is not
// woken until all readers have left. Phantom readers stand in for 2^23 threads.
TYPED_TEST(RwsemCore, ReadFailSleepsUntilReadersDrain) {
  using B = typename TestFixture::B;
  typename TestFixture::Lock sem;
  const std::int64_t phantoms = static_cast<std::int64_t>(B::kMaxReaders - 1);
  Peer::add_phantom_readers(sem, phantoms);
  EXPECT_FALSE(B::is_read_fail(sem.count())) << sem.describe();

  sem.down_read();  // the last reader that fits sets the guard bit
  EXPECT_TRUE(B::is_read_fail(sem.count())) << sem.describe();
  EXPECT_FALSE(sem.down_read_trylock());

  std::atomic<bool> r_in{false};
  ThreadGroup g;
  g.spawn([&] {
    sem.down_read();
    r_in = true;
    sem.up_read();
  });
  ASSERT_TRUE(
      eventually(sem, [&] { return TestFixture::queued(sem) == 1; }, "reader asleep on READFAIL"));
  EXPECT_TRUE(B::has_waiters(sem.count())) << sem.describe();
  EXPECT_EQ(B::reader_count(sem.count()), B::kMaxReaders) << "bias not backed out";

  // A writer that queues on the reader-owned lock wakes the readers ahead
  // of it that could join, and with READFAIL set none can: R stays queued
  // and asleep at the front, and no bias is added to the full count.
  std::atomic<bool> w_in{false};
  g.spawn([&] {
    sem.down_write();
    w_in = true;
    sem.up_write();
  });
  std::vector<typename TestFixture::Lock::WaiterInfo> ws;
  ASSERT_TRUE(eventually(sem, [&] {
    return sem.waiters(&ws) && !ws.empty() && !ws.back().reader && ws.back().sleeping;
  }, "writer asleep in the queue"));
  ASSERT_EQ(ws.size(), 2u) << "R left the queue while READFAIL was set: " << lock_state(sem);
  EXPECT_TRUE(ws.front().reader && ws.front().sleeping) << lock_state(sem);
  EXPECT_FALSE(r_in.load()) << "R granted while READFAIL was set";
  EXPECT_EQ(B::reader_count(sem.count()), B::kMaxReaders) << sem.describe();

  sem.up_read();  // READFAIL clears, but readers remain: no wake-up yet
  EXPECT_FALSE(B::is_read_fail(sem.count())) << sem.describe();
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(r_in.load()) << "woken while readers still hold the lock";
  EXPECT_EQ(TestFixture::queued(sem), 2u);

  Peer::add_phantom_readers(sem, -phantoms);  // the last readers leave
  ASSERT_TRUE(eventually(sem, [&] { return r_in.load(); }, "reader woken after drain"));
  ASSERT_TRUE(eventually(sem, [&] { return w_in.load(); }, "writer after the reader"));
  g.join();
  EXPECT_EQ(sem.count(), 0u) << sem.describe();
}

TYPED_TEST(RwsemCore, TimedWaitsExpireWithCleanCount) {
  typename TestFixture::Lock sem;
  sem.down_write();
  const auto held = sem.count();
  bool r = true, w = true;
  std::thread([&] {
    r = sem.down_read_timeout(20ms);
    w = sem.down_write_timeout(20ms);
  }).join();
  EXPECT_FALSE(r);
  EXPECT_FALSE(w);
  EXPECT_EQ(sem.count(), held) << "expired waiters left bits: " << sem.describe();
  EXPECT_EQ(TestFixture::queued(sem), 0u);
  sem.up_write();
  EXPECT_EQ(sem.count(), 0u);

  sem.down_read();
  std::thread([&] { w = sem.down_write_timeout(20ms); }).join();
  EXPECT_FALSE(w);
  EXPECT_EQ(sem.count(), (typename TestFixture::Word)TestFixture::B::kReaderBias) << sem.describe();
  sem.up_read();
  EXPECT_EQ(sem.count(), 0u);
}

// A timed-out first waiter that owns HANDOFF clears it, and the waiters
// behind it move up; nobody is stranded.
TYPED_TEST(RwsemCore, TimedOutHandoffOwnerClearsHandoff) {
  using B = typename TestFixture::B;
  rwsem::testing::FakeHandoffClock clock;
  // No spinning: a spinning reader may join our reader-owned lock past the
  // queued writer (by design, until NONSPINNABLE), and R2 must queue here.
  rwsem::Options opts;
  opts.handoff_timeout = 4ms;
  opts.spin_budget = 0ns;
  typename TestFixture::Lock sem(opts);
  sem.down_read();
  std::atomic<int> state{0};  // 1 = timed out, 2 = got it
  ThreadGroup g;
  g.spawn([&] {
    state = sem.down_write_timeout(300ms) ? 2 : 1;
    if (state == 2) sem.up_write();
  });
  ASSERT_TRUE(eventually(sem, [&] { return TestFixture::sleeping_front(sem); }, "W1 queued"));
  std::atomic<bool> r2_in{false};
  g.spawn([&] {
    sem.down_read();
    r2_in = true;
    sem.up_read();
  });
  ASSERT_TRUE(eventually(sem, [&] { return TestFixture::queued(sem) == 2; }, "R2 queued"));

  clock.advance(5ms);
  Peer::wake(sem);  // W1 is first: it retries, fails, and claims HANDOFF
  ASSERT_TRUE(eventually(sem, [&] { return B::has_handoff(sem.count()); }, "W1 set HANDOFF"));
  ASSERT_TRUE(eventually(sem, [&] { return state.load() == 1; }, "W1 timed out"));
  // W1 left: HANDOFF is gone, and R2 joined our reader-owned lock.
  ASSERT_TRUE(eventually(sem, [&] { return r2_in.load(); }, "R2 woken when W1 left"));
  EXPECT_FALSE(B::has_handoff(sem.count())) << sem.describe();
  g.join();
  sem.up_read();
  EXPECT_EQ(sem.count(), 0u) << sem.describe();
}

// The same with a writer behind the HANDOFF owner. A reader behind it is
// granted, and the grant clears HANDOFF whoever set it, so the test above
// cannot tell whether the owner cleared it when it left; a writer behind
// it, not yet due itself, is only woken to retry, and finds the reader-
// owned lock still taken. HANDOFF must then be clear: nobody owns it, and
// a bit nobody owns would keep new readers out and stop every steal until
// that writer gets the lock.
TYPED_TEST(RwsemCore, TimedOutHandoffOwnerLeavesNoHandoffBehind) {
  using B = typename TestFixture::B;
  rwsem::testing::FakeHandoffClock clock;
  typename TestFixture::Lock sem(rwsem::Options{4ms, 0ns});  // no spinning
  sem.down_read();
  std::atomic<int> w1_state{0};  // 1 = timed out, 2 = got it
  std::atomic<bool> w2_in{false};
  ThreadGroup g;
  g.spawn([&] {
    w1_state = sem.down_write_timeout(300ms) ? 2 : 1;
    if (w1_state == 2) sem.up_write();
  });
  ASSERT_TRUE(eventually(sem, [&] { return TestFixture::sleeping_front(sem); }, "W1 queued"));
  clock.advance(5ms);
  Peer::wake(sem);  // W1 is first and overdue: it retries and claims HANDOFF
  ASSERT_TRUE(eventually(sem, [&] { return B::has_handoff(sem.count()); }, "W1 set HANDOFF"));
  g.spawn([&] {  // queued now, so its own deadline is 4 ms away
    sem.down_write();
    w2_in = true;
    sem.up_write();
  });
  ASSERT_TRUE(eventually(sem, [&] { return TestFixture::queued(sem) == 2; }, "W2 queued"));
  ASSERT_TRUE(eventually(sem, [&] { return w1_state.load() != 0; }, "W1 timed out"));
  ASSERT_EQ(w1_state.load(), 1) << "W1 got a lock we still hold";
  ASSERT_TRUE(eventually(sem, [&] { return TestFixture::sleeping_front(sem); },
                         "W2 first in the queue, asleep"));
  EXPECT_FALSE(B::has_handoff(sem.count())) << "HANDOFF outlived its owner: " << sem.describe();
  EXPECT_FALSE(w2_in.load());
  sem.up_read();
  ASSERT_TRUE(eventually(sem, [&] { return w2_in.load(); }, "W2 got the lock"));
  g.join();
  EXPECT_EQ(sem.count(), 0u) << sem.describe();
}

// Timed waiters expiring at the front, the middle and the back of a queue
// leave the others correctly queued. The timed waiter must still be queued
// when the queue is complete; on a slow machine (QEMU under load) it may
// expire while the others are still arriving, so such a round does not
// count and is repeated with twice the timeout.
TYPED_TEST(RwsemCore, TimeoutAtEveryQueuePosition) {
  using B = typename TestFixture::B;
  for (int pos = 0; pos < 3; ++pos) {
    SCOPED_TRACE(::testing::Message() << "timed waiter at position " << pos);
    for (auto timeout = std::chrono::milliseconds(50);; timeout *= 2) {
      ASSERT_LE(timeout, hang_limit()) << "the queue never formed before the timed waiter expired";
      typename TestFixture::Lock sem;
      sem.down_write();
      std::atomic<int> done{0};
      std::atomic<bool> timed_result{true};
      ThreadGroup g;
      for (int i = 0; i < 3; ++i) {
        if (i == pos) {
          g.spawn([&] {
            timed_result = sem.down_read_timeout(timeout);
            done++;
          });
        } else {
          g.spawn([&] {
            sem.down_write();
            sem.up_write();
            done++;
          });
        }
        ASSERT_TRUE(eventually(sem, [&] {
          return TestFixture::queued(sem) + done.load() == std::size_t(i + 1);
        }, "waiter queued"));
      }
      bool complete = false;  // saw all three queued at once
      ASSERT_TRUE(eventually(sem, [&] {
        complete = complete || TestFixture::queued(sem) == 3;
        return done.load() == 1;
      }, "timed waiter gave up"));
      if (!complete) {
        std::printf(
            "  position %d: timed waiter expired before the queue formed; retry with %lld ms\n",
            pos, static_cast<long long>(2 * timeout.count()));
        sem.up_write();
        g.join();
        continue;
      }
      EXPECT_FALSE(timed_result.load());
      EXPECT_EQ(TestFixture::queued(sem), 2u);
      EXPECT_TRUE(B::has_waiters(sem.count())) << sem.describe();
      EXPECT_EQ(B::reader_count(sem.count()), 0u) << sem.describe();
      sem.up_write();
      ASSERT_TRUE(eventually(sem, [&] { return done.load() == 3; }, "the two writers ran"));
      g.join();
      EXPECT_EQ(sem.count(), 0u) << sem.describe();
      break;
    }
  }
}

TYPED_TEST(RwsemCore, DowngradeWakesQueuedReadersNotWriters) {
  using B = typename TestFixture::B;
  typename TestFixture::Lock sem;
  sem.down_write();
  std::atomic<int> readers_in{0};
  std::atomic<bool> writer_in{false}, release{false};
  ThreadGroup g;
  for (int i = 0; i < 3; ++i)
    g.spawn([&] {
      sem.down_read();
      readers_in++;
      while (!release) std::this_thread::sleep_for(1ms);
      sem.up_read();
    });
  ASSERT_TRUE(eventually(sem, [&] { return TestFixture::queued(sem) == 3; }, "3 readers queued"));
  g.spawn([&] {
    sem.down_write();
    writer_in = true;
    sem.up_write();
  });
  ASSERT_TRUE(eventually(sem, [&] { return TestFixture::queued(sem) == 4; }, "writer queued"));

  sem.downgrade_write();
  ASSERT_TRUE(
      eventually(sem, [&] { return readers_in.load() == 3; }, "readers woken by downgrade"));
  EXPECT_FALSE(B::is_write_locked(sem.count())) << sem.describe();
  EXPECT_EQ(B::reader_count(sem.count()), 4u) << sem.describe();
  EXPECT_FALSE(writer_in.load());
  EXPECT_EQ(sem.owner_id(), 0u);
  release = true;
  sem.up_read();
  ASSERT_TRUE(eventually(sem, [&] { return writer_in.load(); }, "writer after all readers"));
  g.join();
  EXPECT_EQ(sem.count(), 0u) << sem.describe();
}

TYPED_TEST(RwsemCore, SharedTimedMutexSurface) {
  typename TestFixture::Lock sem;
  {
    std::unique_lock<typename TestFixture::Lock> w(sem);
    EXPECT_TRUE(w.owns_lock());
    bool r = true;
    std::thread([&] {
      std::shared_lock<typename TestFixture::Lock> s(sem, std::try_to_lock);
      r = s.owns_lock();
    }).join();
    EXPECT_FALSE(r);
  }
  {
    std::shared_lock<typename TestFixture::Lock> a(sem);
    std::shared_lock<typename TestFixture::Lock> b(sem, 10ms);
    EXPECT_TRUE(b.owns_lock());
    bool w = true;
    std::thread([&] {
      // Past deadlines on any clock behave like the try form.
      w = sem.try_lock_until(std::chrono::system_clock::now() - 1h) ||
          sem.try_lock_until(std::chrono::steady_clock::now() - 1s) || sem.try_lock_for(-5ms) ||
          sem.try_lock_for(0s);
    }).join();
    EXPECT_FALSE(w);
  }
  EXPECT_TRUE(sem.try_lock_until(std::chrono::system_clock::now() - 1h))
      << "a past deadline must still take a free lock";
  sem.unlock();
  EXPECT_TRUE(sem.try_lock_shared_until(std::chrono::system_clock::now() + 1s));
  EXPECT_TRUE(sem.try_lock_shared_for(std::chrono::duration<double>(0.01)));
  sem.unlock_shared();
  sem.unlock_shared();
  EXPECT_EQ(sem.count(), 0u);

  // A system_clock deadline is honoured as "time left": it expires.
  sem.lock();
  bool got = true;
  const auto start = std::chrono::steady_clock::now();
  std::thread([&] {
    got = sem.try_lock_shared_until(std::chrono::system_clock::now() + 30ms);
  }).join();
  EXPECT_FALSE(got);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 30ms);
  sem.unlock();
}

// Without --define=rwsem_lock_events=1 the counters compile away; with it,
// a timed-out read is counted.
TYPED_TEST(RwsemCore, LockEventsCountOnlyWhenEnabled) {
  typename TestFixture::Lock sem;
  const auto before = rwsem::lock_events_snapshot();
  sem.down_write();
  std::thread([&] { EXPECT_FALSE(sem.down_read_timeout(1ms)); }).join();
  sem.up_write();
  const auto d = rwsem::lock_events_snapshot() - before;
  EXPECT_EQ(d[rwsem::LockEvent::rlock_fail], rwsem::kLockEventsEnabled ? 1u : 0u);
}

// Mixed readers and writers over non-atomic data: under TSan a missing
// acquire/release shows up as a race, elsewhere as a torn pattern.
TYPED_TEST(RwsemCore, MixedSmokeOverPlainData) {
  typename TestFixture::Lock sem;
  constexpr int kWords = 8;
  long data[kWords] = {};
  std::atomic<int> torn{0};
  ThreadGroup g;
  ASSERT_TRUE(g.spawn_n(4, [&](int t) {
    for (int i = 0; i < 2000; ++i) {
      switch ((i + t) % 5) {
        case 0: {
          std::unique_lock<typename TestFixture::Lock> l(sem);
          for (long& d : data) d++;
          break;
        }
        case 1:
          if (sem.down_write_timeout(100us)) {
            for (long& d : data) d++;
            sem.downgrade_write();
            for (long d : data) torn += d != data[0];
            sem.up_read();
          }
          break;
        default: {
          std::shared_lock<typename TestFixture::Lock> l(sem);
          for (long d : data) torn += d != data[0];
        }
      }
    }
  }));
  g.join();
  EXPECT_EQ(torn.load(), 0);
  EXPECT_EQ(sem.count(), 0u) << sem.describe();
}

}  // namespace
}  // namespace rwsem_test
