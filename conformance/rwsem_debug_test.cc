// Debug mode (the kernel's DEBUG_RWSEMS and DEBUG_MUTEXES): misuse aborts
// with a message that names the lock, its decoded word and the calling
// thread. This file is compiled with RWSEM_DEBUG=1 (see conformance/BUILD).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "conformance/hang_guard.h"
#include "conformance/lock_types.h"
#include "conformance/test_util.h"
#include "lib/rwsem/mutex.h"
#include "lib/rwsem/rwsem.h"
#include "lib/rwsem/testing.h"

#if !defined(RWSEM_DEBUG)
#error "rwsem_debug_test must be built with RWSEM_DEBUG=1"
#endif

namespace rwsem_test {
namespace {

using rwsem::testing::Peer;

// This binary does not install the hang guard's listener (hang_guard.h says
// why), so a death-test child that a broken lock keeps spinning would hold
// its parent until Bazel's test timeout. Each child arms the guard itself
// by registering its lock: it then aborts after the hang limit with the
// lock's state, which fails the death test's expectation. Declared after
// the lock, so it is unregistered first.
template <class Lock>
HangGuard::Handle guard_child(Lock& lock) {
  return HangGuard::watch("under test", [&lock] { return lock_state(lock); });
}

template <class L>
class RwsemDebug : public ::testing::Test {
 protected:
  using Lock = rwsem::BasicRwSemaphore<L>;
  // What every report must contain: the lock address, the decoded count of
  // this layout, and the calling thread.
  static std::string report(const std::string& what) {
    return what + ".*lock: +0x[0-9a-f]+.*count: +" + L::kName + " 0x.*thread: tid [0-9]+";
  }
};
TYPED_TEST_SUITE(RwsemDebug, AllLayouts, LayoutNames);

TYPED_TEST(RwsemDebug, UpWriteByNonOwnerAborts) {
  EXPECT_DEATH(
      {
        typename TestFixture::Lock sem;
        const auto guard = guard_child(sem);
        sem.down_write();
        std::thread([&] { sem.up_write(); }).join();
      },
      TestFixture::report("up_write by a thread that is not the owner"));
}

TYPED_TEST(RwsemDebug, DoubleUpWriteAborts) {
  EXPECT_DEATH(
      {
        typename TestFixture::Lock sem;
        const auto guard = guard_child(sem);
        sem.down_write();
        sem.up_write();
        sem.up_write();
      },
      TestFixture::report("up_write on a rwsem that is not write-locked"));
}

TYPED_TEST(RwsemDebug, UpReadWithoutReadersAborts) {
  EXPECT_DEATH(
      {
        typename TestFixture::Lock sem;
        const auto guard = guard_child(sem);
        sem.down_read();
        sem.up_read();
        sem.up_read();
      },
      TestFixture::report("up_read on a rwsem with no readers"));
}

TYPED_TEST(RwsemDebug, UpReadOnWriteLockedAborts) {
  EXPECT_DEATH(
      {
        typename TestFixture::Lock sem;
        const auto guard = guard_child(sem);
        sem.down_write();
        sem.up_read();
      },
      TestFixture::report("up_read on a write-locked rwsem"));
}

TYPED_TEST(RwsemDebug, InconsistentCountAborts) {
  using L = TypeParam;
  EXPECT_DEATH(
      {
        typename TestFixture::Lock sem;
        const auto guard = guard_child(sem);
        sem.down_write();
        // HANDOFF without WAITERS breaks invariant H on every layout.
        Peer::count(sem).fetch_or(L::kHandoff);
        sem.up_write();
      },
      TestFixture::report("inconsistent count"));
}

TYPED_TEST(RwsemDebug, DowngradeByNonOwnerAborts) {
  EXPECT_DEATH(
      {
        typename TestFixture::Lock sem;
        const auto guard = guard_child(sem);
        sem.down_write();
        std::thread([&] { sem.downgrade_write(); }).join();
      },
      TestFixture::report("downgrade_write by a thread that is not the owner"));
}

TYPED_TEST(RwsemDebug, DestroyWhileLockedAborts) {
  EXPECT_DEATH(
      {
        typename TestFixture::Lock sem;
        const auto guard = guard_child(sem);
        sem.down_read();
      },
      TestFixture::report("rwsem destroyed while locked"));
}

// "Wait lock held" is checked, not only stated: a helper that needs the
// wait lock aborts when its caller does not hold it...
TYPED_TEST(RwsemDebug, HelperCalledWithoutTheWaitLockAborts) {
  EXPECT_DEATH(
      {
        typename TestFixture::Lock sem;
        const auto guard = guard_child(sem);
        (void)Peer::try_read_lock_unqueued(sem);
      },
      "a helper that needs the wait lock was called without it");
}

// ... and when another thread holds it (a check of "the wait lock is
// locked" instead of "the caller holds it" would pass here) ...
TYPED_TEST(RwsemDebug, HelperCalledUnderAnotherThreadsWaitLockAborts) {
  EXPECT_DEATH(
      {
        typename TestFixture::Lock sem;
        const auto guard = guard_child(sem);
        std::atomic<bool> held{false};
        std::atomic<bool> done{false};
        std::thread holder([&] {
          Peer::with_wait_lock(sem, [&] {
            held.store(true);
            while (!done.load()) std::this_thread::yield();
          });
        });
        while (!held.load()) std::this_thread::yield();
        (void)Peer::try_read_lock_unqueued(sem);
        done.store(true);
        holder.join();
      },
      "a helper that needs the wait lock was called without it");
}

// ... and after the caller has released it (a check that remembers the
// last holder but not the release would pass the two above) ...
TYPED_TEST(RwsemDebug, HelperCalledAfterReleasingTheWaitLockAborts) {
  EXPECT_DEATH(
      {
        typename TestFixture::Lock sem;
        const auto guard = guard_child(sem);
        Peer::with_wait_lock(sem, [] {});
        (void)Peer::try_read_lock_unqueued(sem);
      },
      "a helper that needs the wait lock was called without it");
}

// ... and runs when the caller holds it.
TYPED_TEST(RwsemDebug, HelperCalledUnderItsWaitLockRuns) {
  typename TestFixture::Lock sem;
  bool taken = false;
  Peer::with_wait_lock(sem, [&] { taken = Peer::try_read_lock_unqueued(sem); });
  EXPECT_TRUE(taken) << sem.describe();
  sem.up_read();
  EXPECT_EQ(sem.count(), 0u) << sem.describe();
}

TYPED_TEST(RwsemDebug, CorrectUseDoesNotAbort) {
  typename TestFixture::Lock sem;
  sem.down_write();
  sem.downgrade_write();
  sem.up_read();
  sem.down_read();
  sem.down_read();
  sem.up_read();
  sem.up_read();
  EXPECT_EQ(sem.count(), 0u);
}

// A layout with an 8-bit owner field: no real thread's id fits, and the lock
// must refuse the thread loudly instead of truncating its id.
struct TinyOwnerLayout : rwsem::MergedOwnerLayout {
  // maybe_unused: where the layout does not build (see below) nothing reads these.
  [[maybe_unused]] static constexpr const char* kName = "tiny-owner";
  static constexpr int kOwnerBits = 8;
  static constexpr Word kWriterMask = ((Word{1} << kOwnerBits) - 1) << kOwnerShift;
  [[maybe_unused]] static constexpr Word kReservedMask =
      ((Word{1} << 48) - 1) & ~(kWriterMask | kWaiters | kHandoff | kWoken);
  static constexpr bool encodable(std::uint64_t id) { return id != 0 && (id >> kOwnerBits) == 0; }
  static constexpr Word writer_word(std::uint64_t id) { return Word(id) << kOwnerShift; }
  static constexpr std::uint64_t owner_id(Word w) { return (w & kWriterMask) >> kOwnerShift; }
};

// Where the merged layout does not build (lock_types.h) the test is
// skipped; the alias then names a lock that builds, so the file compiles.
using TinyOwnerSem =
    rwsem::BasicRwSemaphore<std::conditional_t<kLayoutBuildsHere<TinyOwnerLayout>, TinyOwnerLayout,
                                               rwsem::Generic32Layout>>;

// The mutex's debug mode: an unlock by a thread that does not own the lock,
// a double unlock and destroying a held mutex abort with the decoded owner
// word. Without the checks the first two would corrupt the owner word (the
// non-owner's unlock takes the slow path and releases another thread's
// lock).
std::string mutex_report(const std::string& what) {
  return what + ".*lock: +0x[0-9a-f]+.*count: +mutex 0x.*thread: tid [0-9]+";
}

TEST(MutexDebug, UnlockByNonOwnerAborts) {
  EXPECT_DEATH(
      {
        rwsem::Mutex m;
        const auto guard = guard_child(m);
        m.lock();
        std::thread([&] { m.unlock(); }).join();
      },
      mutex_report("unlock by a thread that is not the mutex's owner"));
}

TEST(MutexDebug, DoubleUnlockAborts) {
  EXPECT_DEATH(
      {
        rwsem::Mutex m;
        const auto guard = guard_child(m);
        m.lock();
        m.unlock();
        m.unlock();
      },
      mutex_report("unlock of a mutex that is not locked"));
}

TEST(MutexDebug, DestroyWhileLockedAborts) {
  EXPECT_DEATH(
      {
        rwsem::Mutex m;
        const auto guard = guard_child(m);
        m.lock();
      },
      mutex_report("mutex destroyed while locked"));
}

// Lock and unlock from several threads, contended (handoffs and pickups
// included), and destroy the mutex: all pass every check. In a child
// process that must exit 0: this binary's later death tests fork, and a
// process that has started threads (with TSan, whose runtime then keeps a
// thread of its own) must not fork under QEMU user mode, which aborts when
// the child of a multi-threaded guest starts a thread
// ("qemu_plugin_vcpu_init_hook: assertion failed"). The child exits with
// _Exit(), so the mutex is destroyed in a scope of its own first: a
// destructor check that fires on a free mutex aborts the child.
TEST(MutexDebug, CorrectUseDoesNotAbort) {
  EXPECT_EXIT(
      {
        long counter = 0;
        bool left_free = false;
        std::string state;
        {
          rwsem::Mutex m;
          const auto guard = guard_child(m);
          std::vector<std::thread> threads;
          for (int t = 0; t < 4; ++t)
            threads.emplace_back([&] {
              for (int i = 0; i < 20000; ++i) {
                m.lock();
                ++counter;
                m.unlock();
                if (m.try_lock()) m.unlock();
              }
            });
          for (auto& t : threads) t.join();
          left_free = m.count() == 0;
          state = m.describe();
        }
        const bool ok = counter == 4 * 20000 && left_free;
        std::fprintf(stderr, "counter %ld of %d, %s, destroyed\n", counter, 4 * 20000,
                     state.c_str());
        std::_Exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "counter 80000 of 80000, mutex 0x0+ owner=none, destroyed");
}

// In every build, not only debug ones: the check guards the count.
TEST(RwsemOwnerId, UnencodableOwnerIdFailsLoudly) {
  if (!kLayoutBuildsHere<TinyOwnerLayout>)
    GTEST_SKIP() << "the merged layout does not build on " << rwsem::arch::kTarget.name
                 << " (no lock-free 64-bit atomics)";
  ASSERT_GE(rwsem::internal::current_thread().owner_id(), 1u << 8);
  EXPECT_DEATH(
      {
        TinyOwnerSem sem;
        const auto guard = guard_child(sem);
        sem.down_write();
      },
      "owner id does not fit the count layout");
}

}  // namespace
}  // namespace rwsem_test
