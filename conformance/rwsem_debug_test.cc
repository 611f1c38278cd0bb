// Debug mode (the kernel's DEBUG_RWSEMS): misuse aborts with a message that
// names the lock, its decoded count and the calling thread. This file is
// compiled with RWSEM_DEBUG=1 (see conformance/BUILD).
#include <gtest/gtest.h>

#include <thread>

#include "conformance/lock_types.h"
#include "lib/rwsem/rwsem.h"
#include "lib/rwsem/testing.h"

#if !defined(RWSEM_DEBUG)
#error "rwsem_debug_test must be built with RWSEM_DEBUG=1"
#endif

namespace rwsem_test {
namespace {

using rwsem::testing::Peer;

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
        sem.down_write();
        std::thread([&] { sem.up_write(); }).join();
      },
      TestFixture::report("up_write by a thread that is not the owner"));
}

TYPED_TEST(RwsemDebug, DoubleUpWriteAborts) {
  EXPECT_DEATH(
      {
        typename TestFixture::Lock sem;
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
        sem.down_write();
        std::thread([&] { sem.downgrade_write(); }).join();
      },
      TestFixture::report("downgrade_write by a thread that is not the owner"));
}

TYPED_TEST(RwsemDebug, DestroyWhileLockedAborts) {
  EXPECT_DEATH(
      {
        typename TestFixture::Lock sem;
        sem.down_read();
      },
      TestFixture::report("rwsem destroyed while locked"));
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
      ((Word{1} << 48) - 1) & ~(kWriterMask | kWaiters | kHandoff);
  static constexpr bool encodable(std::uint64_t id) {
    return id != 0 && (id >> kOwnerBits) == 0;
  }
  static constexpr Word writer_word(std::uint64_t id) { return Word(id) << kOwnerShift; }
  static constexpr std::uint64_t owner_id(Word w) { return (w & kWriterMask) >> kOwnerShift; }
};

// Where the merged layout does not build (lock_types.h) the test is
// skipped; the alias then names a lock that builds, so the file compiles.
using TinyOwnerSem = rwsem::BasicRwSemaphore<
    std::conditional_t<kLayoutBuildsHere<TinyOwnerLayout>, TinyOwnerLayout,
                       rwsem::Generic32Layout>>;

// In every build, not only debug ones: the check guards the count.
TEST(RwsemOwnerId, UnencodableOwnerIdFailsLoudly) {
  if (!kLayoutBuildsHere<TinyOwnerLayout>)
    GTEST_SKIP() << "the merged layout does not build on " << rwsem::arch::kTarget.name
                 << " (no lock-free 64-bit atomics)";
  ASSERT_GE(rwsem::internal::current_thread().owner_id, 1u << 8);
  EXPECT_DEATH(
      {
        TinyOwnerSem sem;
        sem.down_write();
      },
      "owner id does not fit the count layout");
}

}  // namespace
}  // namespace rwsem_test
