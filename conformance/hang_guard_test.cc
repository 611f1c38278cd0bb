// The whole-binary hang guard (conformance/hang_guard.h) proves itself.
//
// A test whose own main thread blocks forever in a lock (here: down_write
// on a rwsem that another thread write-holds and never releases) must die
// within a few seconds of RWSEM_TEST_HANG_SECONDS with "HANG:", the test's
// full name, its seed and the decoded state of the lock it registered.
// And a test's own bounded wait (eventually()) must still get to print its
// own diagnosis first: the guard waits for it.
//
// The scenarios run as separate processes (hang_guard_test.sh), not as
// gtest death tests: a death test's child is a fork of a process that
// already runs the guard's thread, and QEMU user mode aborts when such a
// child starts a thread; the "threadsafe" style re-executes the binary,
// which QEMU user mode without binfmt_misc cannot do either.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "conformance/hang_guard.h"
#include "conformance/test_util.h"
#include "conformance/torture.h"
#include "lib/rwsem/rwsem.h"

namespace rwsem_test {
namespace {

[[noreturn]] void block_main_thread_forever() {
  HangGuard::set_seed(run_seed());
  // Leaked: the holder thread below outlives this function's caller.
  auto* sem = new rwsem::RwSemaphore;
  auto* held = new std::atomic<bool>(false);
  auto handle = HangGuard::watch("proof-rwsem", [sem] { return lock_state(*sem); });
  std::thread([sem, held] {
    sem->down_write();  // the injected permanent holder
    held->store(true);
    for (;;) pause();
  }).detach();
  while (!held->load()) std::this_thread::yield();
  std::fprintf(stderr, "main thread: down_write on a lock that is never released\n");
  sem->down_write();  // never returns
  std::fprintf(stderr, "BUG: down_write returned on a lock held by another thread\n");
  std::_Exit(7);
}

// The scenarios are DISABLED_ so that a plain run of this binary skips
// them; hang_guard_test.sh runs each in its own process (through QEMU for
// cross targets) with RWSEM_TEST_HANG_SECONDS=2 and checks what it printed
// and how it ended.

// The test's own main thread blocks for ever: the guard must abort the
// binary with HANG:, the test name, the seed and the lock's decoded state.
TEST(HangGuardScenario, DISABLED_MainThreadBlockedForever) { block_main_thread_forever(); }

// eventually() gives up at the hang limit and prints "never reached"; the
// guard, armed with the same limit, must let it report first (the test then
// fails normally instead of the guard's abort).
TEST(HangGuardScenario, DISABLED_BoundedWaitReportsFirst) {
  rwsem::RwSemaphore sem;
  ASSERT_TRUE(eventually(sem, [] { return false; }, "a state that never comes"));
}

}  // namespace
}  // namespace rwsem_test
