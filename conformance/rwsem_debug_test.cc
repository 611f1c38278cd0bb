// Debug mode (the kernel's DEBUG_RWSEMS): misuse aborts with a message that
// names the lock, its decoded count and the calling thread. This file is
// compiled with RWSEM_DEBUG=1 (see conformance/BUILD).
#include <gtest/gtest.h>

#include <thread>

#include "conformance/lock_types.h"
#include "lib/rwsem/rwsem.h"

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

}  // namespace
}  // namespace rwsem_test
