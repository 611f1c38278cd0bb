// The watchdog proves itself: a writer that never releases (a forgotten
// up_write in user code) strands a reader, and the watchdog must fail the
// run with the decoded lock state and the seed instead of hanging. The lock
// itself is the shipped one; the hang is the caller's.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "conformance/test_util.h"
#include "conformance/torture.h"
#include "lib/rwsem/rwsem.h"
#include "lib/rwsem/testing.h"

namespace rwsem_test {
namespace {

// Longer than the watchdog's limit by far: if the process is still alive
// when this passes, the watchdog did not fire.
constexpr auto kWatchdogMustHaveFired = std::chrono::seconds(30);

void strand_a_reader() {
  rwsem::RwSemaphore sem;
  Watchdog dog("forgotten-unlock demo", std::chrono::seconds(2));
  dog.add_lock("rwsem", [&] { return lock_state(sem); });
  sem.down_write();  // the caller's bug: no up_write() follows
  std::thread reader([&] {
    sem.down_read();  // never returns: the writer never lets go
    dog.progress();
    sem.up_read();
  });
  while (rwsem::testing::Peer::queue_length(sem) != 1) std::this_thread::yield();
  std::this_thread::sleep_for(kWatchdogMustHaveFired);
  // Still here: return normally, and EXPECT_DEATH below fails ("failed to
  // die"). The reader stays blocked; the death-test child exits anyway.
  reader.detach();
}

// The state that situation shows: no readers inside, a writer that holds
// the lock (its owner id on the merged layout, "locked" on the others),
// WAITERS set, and the reader asleep in the queue.
TEST(WatchdogDemo, FiresOnStrandedReaderWithDecodedState) {
  EXPECT_DEATH(strand_a_reader(),
               "WATCHDOG: no progress for [0-9.]+ s in forgotten-unlock demo"
               ".*seed: [0-9]+ \\(replay with RWSEM_SEED=[0-9]+\\)"
               ".*lock rwsem:.*readers=0 writer=(0x[0-9a-f]+|locked) waiters"
               ".*reader tid [0-9]+ sleeping");
}

}  // namespace
}  // namespace rwsem_test
