// Scenarios specific to the companion locks: the queued rwlock's word and
// queue behaviour (the qrwlock series) and the mutex's handoff (the waiter-spinning series).
// What they share with every lock (ordering, torture, std API) runs in the
// typed suites over AllLocks.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>

#include "arch/count_layouts.h"
#include "conformance/test_util.h"
#include "lib/rwsem/mutex.h"
#include "lib/rwsem/qrwlock.h"
#include "lib/rwsem/testing.h"

namespace rwsem_test {
namespace {

using namespace std::chrono_literals;
using QL = rwsem::QRwLockLayout;

// ---- queued rwlock -----------------------------------------------------------

// The writer byte is bits 0-7 of the word, wherever byte order puts them.
// The layout's offset must name the byte that holds them on this target.
TEST(QRwLockLayout, WriterByteOffsetMatchesByteOrder) {
  const QL::Word w = QL::kWriterLocked;
  unsigned char bytes[sizeof w];
  std::memcpy(bytes, &w, sizeof w);
  for (std::size_t i = 0; i < sizeof w; ++i)
    EXPECT_EQ(bytes[i], i == QL::kWriterByteOffset ? 0xff : 0x00)
        << "byte " << i << " of the word; the layout says the writer byte is byte "
        << QL::kWriterByteOffset << " (" << rwsem::arch::kTarget.name << ", "
        << (rwsem::arch::kTarget.big_endian ? "big" : "little") << "-endian)";
  EXPECT_EQ(QL::kReaderBias & QL::kWriterMask, 0u);
  EXPECT_EQ(QL::kWriterWaiting & QL::kWriterLocked, 0u);
  EXPECT_EQ(sizeof(rwsem::QRwLock), 8u);
}

// unlock() stores to the writer byte alone: it must clear exactly LOCKED and
// leave readers' biases and WAITING alone.
TEST(QRwLock, UnlockClearsOnlyTheWriterByte) {
  rwsem::QRwLock q;
  q.lock();
  ASSERT_EQ(q.count(), QL::kWriterLocked) << q.describe();
  q.unlock();
  // ASSERT: if the store missed the writer byte the lock stays locked, and
  // the lock() below would spin forever (a spinning lock has no timeout).
  ASSERT_EQ(q.count(), 0u) << q.describe();

  // A reader backing out of a failed fast path leaves its bias in the word
  // for a moment; simulate it with a reader that is spinning at the head.
  q.lock();
  std::atomic<bool> in{false};
  ThreadGroup reader;  // bounded join: a broken lock fails, not hangs
  reader.spawn([&] {
    q.lock_shared();
    in = true;
    q.unlock_shared();
  });
  // The qrwlock series, "locking/qrwlock: Reduce reader/writer to reader lock transfer latency":
  // the reader at the head of the queue adds its bias while the writer
  // still holds the lock, and waits only for LOCKED.
  ASSERT_TRUE(eventually(q, [&] { return QL::readers(q.count()) == 1; },
                         "head reader adds its bias under the writer"));
  EXPECT_TRUE(QL::write_locked(q.count())) << q.describe();
  std::this_thread::sleep_for(20ms);  // room for a broken reader to run
  EXPECT_FALSE(in.load()) << "a reader entered while the writer held the lock";
  q.unlock();  // must leave the reader's bias: the word is now one reader
  reader.join();
  EXPECT_TRUE(in.load());
  EXPECT_EQ(q.count(), 0u) << q.describe();
}

// The other half of the qrwlock series' "locking/qrwlock: Reduce writer to writer lock transfer latency":
// with readers present, a writer announces itself with WAITING, and readers
// arriving after it queue behind it.
TEST(QRwLock, WaitingWriterGoesBeforeLaterReaders) {
  rwsem::QRwLock q;
  q.lock_shared();
  std::atomic<int> order{0}, writer_at{0}, reader_at{0};
  ThreadGroup g;
  g.spawn([&] {
    q.lock();
    writer_at = ++order;
    q.unlock();
  });
  ASSERT_TRUE(eventually(q, [&] { return QL::writer_waiting(q.count()); }, "writer waiting"));
  EXPECT_EQ(QL::readers(q.count()), 1u) << q.describe();
  g.spawn([&] {
    q.lock_shared();
    reader_at = ++order;
    q.unlock_shared();
  });
  // The late reader must not get in beside us while the writer waits.
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(reader_at.load(), 0) << "a reader overtook a waiting writer: " << q.describe();
  q.unlock_shared();
  g.join();
  EXPECT_EQ(writer_at.load(), 1);
  EXPECT_EQ(reader_at.load(), 2);
  EXPECT_EQ(q.count(), 0u) << q.describe();
}

// The writer-to-writer half's bound: a head writer tries the one-step take
// only for the short phase of its wait. Then it sets WAITING even with no
// reader present, which fast-path writers (they take the word only from 0)
// respect as readers do; a lock that keeps trying the one step lets a
// stream of fast-path writers keep it, and the queue behind it, waiting
// without end, and never sets WAITING here.
TEST(QRwLock, HeadWriterStopsFastPathWritersAfterAShortWait) {
  rwsem::QRwLock q;
  q.lock();  // a fast-path writer holds the lock; no reader anywhere
  std::atomic<bool> in{false};
  ThreadGroup g;
  g.spawn([&] {
    q.lock();
    in = true;
    q.unlock();
  });
  // EXPECT, not ASSERT: the unlock below must run either way, or the
  // writer thread never finishes.
  EXPECT_TRUE(eventually(q, [&] { return QL::writer_waiting(q.count()); },
                         "head writer sets WAITING with no reader present"));
  EXPECT_EQ(QL::readers(q.count()), 0u) << q.describe();
  EXPECT_FALSE(in.load());
  q.unlock();  // leaves WAITING alone: the word is now WAITING
  // A fast-path writer must not take the word past the waiting writer: a
  // try_lock() may succeed only once that writer has been through (its
  // store of `in` comes before its unlock, which our acquire sees).
  if (q.try_lock()) {
    EXPECT_TRUE(in.load()) << "a fast-path writer overtook the waiting head writer";
    q.unlock();
  }
  g.join();
  EXPECT_TRUE(in.load());
  EXPECT_EQ(q.count(), 0u) << q.describe();
}

TEST(QRwLock, DescribeDecodesTheWord) {
  EXPECT_EQ(rwsem::QRwLock::describe_word(0), "qrwlock 0x0 readers=0 writer=none");
  EXPECT_EQ(rwsem::QRwLock::describe_word(QL::kWriterLocked | 2 * QL::kReaderBias),
            "qrwlock 0x4ff readers=2 writer=locked");
  EXPECT_EQ(rwsem::QRwLock::describe_word(QL::kWriterWaiting | QL::kReaderBias),
            "qrwlock 0x300 readers=1 writer=none waiting");
}

// ---- mutex ------------------------------------------------------------------

using ML = rwsem::MutexOwnerLayout;

// A mutex whose lockers never spin: a contended lock() queues and sleeps.
const rwsem::Options kNoSpin{{}, std::chrono::nanoseconds(0)};

// The owner word names the owner's record; flags live in the low bits.
TEST(Mutex, OwnerWordNamesTheOwner) {
  rwsem::Mutex m;
  m.lock();
  const auto w = m.count();
  EXPECT_EQ(ML::flags(w), 0u) << m.describe();
  EXPECT_EQ(w & ML::kReservedMask, 0u) << m.describe();
  EXPECT_NE(ML::owner_bits(w), 0u);
  EXPECT_NE(m.describe().find("owner=tid "), std::string::npos) << m.describe();
  m.unlock();
  EXPECT_EQ(m.count(), 0u) << m.describe();
}

// Handoff: once the first waiter has asked for it, unlock() gives the lock
// to that waiter instead of releasing it; nobody else can take it in
// between, however fast they are.
TEST(Mutex, HandoffGoesToTheFirstWaiter) {
  // Repeated: a lock released instead of handed over is caught only if we
  // try it before the woken waiter does, which we win nearly every time.
  for (int round = 0; round < 20; ++round) {
    SCOPED_TRACE(::testing::Message() << "round " << round);
    rwsem::Mutex m(kNoSpin);
    m.lock();
    std::atomic<bool> waiter_owns{false}, release{false};
    ThreadGroup g;
    g.spawn([&] {
      m.lock();
      waiter_owns = true;
      while (!release.load()) std::this_thread::yield();
      m.unlock();
    });
    // Asleep, so that it needs a wake-up before it can take a released
    // lock: then only a handoff keeps the lock from us.
    ASSERT_TRUE(eventually(m, [&] { return rwsem::testing::MutexPeer::first_waiter_parked(m); },
                           "waiter asleep"));
    ASSERT_TRUE(ML::has_waiters(m.count())) << m.describe();
    rwsem::testing::MutexPeer::request_handoff(m);
    m.unlock();
    // The lock now belongs to the waiter (PICKUP, or already picked up).
    if (m.try_lock()) {
      ADD_FAILURE() << "the lock was released instead of handed to the waiter, and we took it";
      m.unlock();
      release = true;
      break;
    }
    EXPECT_NE(ML::owner_bits(m.count()), 0u) << m.describe();
    ASSERT_TRUE(eventually(m, [&] { return waiter_owns.load(); }, "waiter picks the lock up"));
    EXPECT_FALSE(ML::has_pickup(m.count())) << m.describe();
    EXPECT_FALSE(ML::has_handoff(m.count())) << m.describe();
    release = true;
    g.join();
    EXPECT_EQ(m.count(), 0u) << m.describe();
    EXPECT_EQ(m.queue_length(), 0u);
  }
}

// Without a HANDOFF request unlock() releases the lock and wakes the first
// waiter to retry for it: right after unlock() the owner word names nobody,
// or the woken waiter if it was that quick, and never holds a hand-over
// (PICKUP). A mutex that handed over on every unlock would pass the test
// above; this is its converse. The waiter is asleep, so its wake-up takes
// far longer than our look at the word, and a hand-over shows.
TEST(Mutex, UnlockWithoutAHandoffRequestReleases) {
  for (int round = 0; round < 20; ++round) {
    SCOPED_TRACE(::testing::Message() << "round " << round);
    rwsem::Mutex m(kNoSpin);
    m.lock();
    std::atomic<ML::Word> waiter{0};
    ThreadGroup g;
    g.spawn([&] {
      waiter = reinterpret_cast<ML::Word>(&rwsem::internal::current_thread());
      m.lock();
      m.unlock();
    });
    ASSERT_TRUE(eventually(m, [&] { return rwsem::testing::MutexPeer::first_waiter_parked(m); },
                           "waiter asleep"));
    m.unlock();
    const ML::Word w = m.count();
    EXPECT_FALSE(ML::has_pickup(w)) << "handed over without a request: " << m.describe();
    EXPECT_TRUE(ML::owner_bits(w) == 0 || ML::owner_bits(w) == waiter.load()) << m.describe();
    g.join();
    EXPECT_EQ(m.count(), 0u) << m.describe();
  }
}

// A try that fails with a waiter asleep in the queue (WAITERS set) changes
// nothing either (StdLockApi.TryLockRespectsTheHolder checks a lock without
// waiters). In particular it does not ask for HANDOFF, which only the first
// waiter may: the next unlock would hand the lock to a waiter that never
// asked.
TEST(Mutex, FailedTriesBesideAWaiterLeaveTheOwnerWordAlone) {
  rwsem::Mutex m(kNoSpin);
  m.lock();
  ThreadGroup g;
  g.spawn([&] {
    m.lock();
    m.unlock();
  });
  ASSERT_TRUE(eventually(m, [&] { return rwsem::testing::MutexPeer::first_waiter_parked(m); },
                         "waiter asleep"));
  const ML::Word queued = m.count();
  ASSERT_TRUE(ML::has_waiters(queued)) << m.describe();
  // Nobody has woken the waiter, so it has only made the first look of a
  // new waiter, which may not ask for HANDOFF either.
  EXPECT_FALSE(ML::has_handoff(queued)) << "HANDOFF before any wake-up: " << m.describe();
  // Each kind of try, from a thread that does not own the lock.
  int taken = 0;
  std::thread([&] {
    taken += m.try_lock();
    taken += m.try_lock_for(std::chrono::nanoseconds(0));
    taken += m.try_lock_until(std::chrono::steady_clock::now() - std::chrono::seconds(1));
    taken += m.try_lock_until(std::chrono::system_clock::now() - std::chrono::seconds(1));
  }).join();
  EXPECT_EQ(taken, 0);
  EXPECT_EQ(m.count(), queued) << m.describe();
  m.unlock();
  g.join();
  EXPECT_EQ(m.count(), 0u) << m.describe();
}

// A locker that finds the owner asleep (parked in one of this library's
// waits, here on another mutex) does not spin on it, and above all does not
// take the lock: it queues, and gets in only after the owner's unlock. The
// owner word still names the owner the whole time, so a lock() that
// returned on "owner asleep" would break exclusion silently.
TEST(Mutex, LockerFindingTheOwnerAsleepQueues) {
  rwsem::Mutex m;  // spinning as configured (on where it is compiled in)
  rwsem::Mutex other(kNoSpin);
  other.lock();
  std::atomic<bool> owner_inside{false}, overlapped{false}, second_done{false};
  ThreadGroup g;
  g.spawn([&] {
    m.lock();
    owner_inside = true;
    other.lock();  // parks: we hold `other`
    other.unlock();
    owner_inside = false;
    m.unlock();
  });
  ASSERT_TRUE(eventually(other, [&] {
    return rwsem::testing::MutexPeer::first_waiter_parked(other);
  }, "the owner of m asleep on another mutex"));
  g.spawn([&] {
    m.lock();
    if (owner_inside.load()) overlapped = true;
    m.unlock();
    second_done = true;
  });
  ASSERT_TRUE(eventually(m, [&] {
    return rwsem::testing::MutexPeer::first_waiter_parked(m) || second_done.load();
  }, "the second locker queued (or got in)"));
  other.unlock();
  g.join();
  EXPECT_FALSE(overlapped.load()) << "lock() returned while the owner, asleep on another mutex, "
                                     "still held it: "
                                  << m.describe();
  EXPECT_EQ(m.count(), 0u) << m.describe();
}

// A timed waiter that was handed the lock as its deadline passed keeps it:
// try_lock_for reports what happened, and nothing is left owned by nobody.
TEST(Mutex, TimedWaitersAndHandoffLeaveACleanWord) {
  rwsem::Mutex m(kNoSpin);
  for (int round = 0; round < 50; ++round) {
    m.lock();
    std::atomic<int> got{0};
    ThreadGroup g;
    // One waiter that stays (so there is always someone to hand to) and two
    // whose deadlines pass around the unlock.
    ASSERT_TRUE(g.spawn_n(3, [&](int i) {
      const auto wait = i == 0 ? std::chrono::microseconds(std::chrono::minutes(1))
                               : std::chrono::microseconds(200 * i);
      if (m.try_lock_for(wait)) {
        got++;
        m.unlock();
      }
    }));
    if (round % 2) {
      ASSERT_TRUE(eventually(m, [&] { return m.queue_length() > 0; }, "a waiter queued"));
      rwsem::testing::MutexPeer::request_handoff(m);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100 * (round % 7)));
    m.unlock();
    g.join();
    EXPECT_GE(got.load(), 1) << "round " << round << ": the long waiter timed out";
    EXPECT_EQ(m.count(), 0u) << "round " << round << ": " << m.describe();
    EXPECT_EQ(m.queue_length(), 0u) << "round " << round;
  }
}

}  // namespace
}  // namespace rwsem_test
