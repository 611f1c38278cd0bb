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

}  // namespace
}  // namespace rwsem_test
