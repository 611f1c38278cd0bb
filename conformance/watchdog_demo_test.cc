// The watchdog proves itself: in a build of the lock whose up_write never
// wakes the queue (RWSEM_FAULT_MISSED_WAKEUP, see conformance/BUILD) a reader
// is stranded, and the watchdog must fail the run with the decoded state
// instead of hanging.
#include <gtest/gtest.h>

#include <thread>

#include "conformance/test_util.h"
#include "conformance/torture.h"
#include "lib/rwsem/rwsem.h"
#include "lib/rwsem/testing.h"

#if !defined(RWSEM_FAULT_MISSED_WAKEUP)
#error "watchdog_demo_test must be built with RWSEM_FAULT_MISSED_WAKEUP"
#endif

namespace rwsem_test {
namespace {

void strand_a_reader() {
  rwsem::RwSemaphore sem;
  Watchdog dog("missed-wakeup demo", std::chrono::seconds(2));
  dog.add_lock("rwsem", [&] { return lock_state(sem); });
  sem.down_write();
  std::thread reader([&] {
    sem.down_read();  // never returns: the wake-up below is lost
    dog.progress();
    sem.up_read();
  });
  while (rwsem::testing::Peer::queue_length(sem) != 1) std::this_thread::yield();
  sem.up_write();
  dog.progress();
  reader.join();
}

TEST(WatchdogDemo, FiresOnLostWakeupWithDecodedState) {
  EXPECT_DEATH(strand_a_reader(),
               "WATCHDOG: no progress for [0-9.]+ s in missed-wakeup demo"
               ".*seed: [0-9]+ \\(replay with RWSEM_SEED=[0-9]+\\)"
               ".*lock rwsem:.*readers=0 writer=none waiters"
               ".*reader tid [0-9]+ sleeping");
}

}  // namespace
}  // namespace rwsem_test
