// The whole-binary hang guard (conformance/hang_guard.h) proves itself.
//
// A test whose own main thread blocks forever in a lock (here: down_write
// on a rwsem that another thread write-holds and never releases) must die
// within a few seconds of RWSEM_TEST_HANG_SECONDS with "HANG:", the test's
// full name, its seed and the decoded state of the lock it registered.
// And a test's own bounded wait (eventually()) must still get to print its
// own diagnosis first: the guard waits for it.
//
// Both run as death tests in the "threadsafe" style: the child re-executes
// this binary, so the guard's listener and thread exist in it, and it reads
// RWSEM_TEST_HANG_SECONDS=2 from the environment set here.
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

// Sets an environment variable for the death-test child, and restores it
// afterwards so the next test's guard in this process keeps its own limit.
class EnvOverride {
 public:
  EnvOverride(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    setenv(name, value, 1);
  }
  ~EnvOverride() {
    if (had_) setenv(name_, old_.c_str(), 1); else unsetenv(name_);
  }

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

// QEMU (and TSan under it) starts a process in up to ~25 s.
std::chrono::seconds startup_slack() {
  const char* t = std::getenv("RWSEM_TARGET");
  const bool emulated = t != nullptr && *t && std::string(t) != "x86_64";
  return std::chrono::seconds(emulated ? 90 : 15);
}

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

TEST(HangGuardProof, MainThreadBlockedForeverDiesWithHangReport) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const EnvOverride limit("RWSEM_TEST_HANG_SECONDS", "2");  // for the child
  const std::uint64_t seed = run_seed();
  std::printf("[hang guard proof] seed=%llu hang limit 2 s\n",
              static_cast<unsigned long long>(seed));
  const auto t0 = std::chrono::steady_clock::now();
  // The child's seed is its own (RWSEM_SEED unset: from its clock), so the
  // pattern only requires that one is printed in the replayable form.
  EXPECT_DEATH(block_main_thread_forever(),
               "HANG: HangGuardProof\\.MainThreadBlockedForeverDiesWithHangReport "
               "still running after [0-9.]+ s"
               ".*seed=[0-9]+ \\(replay with RWSEM_SEED=[0-9]+\\)"
               ".*lock proof-rwsem:"
               ".*count: [a-z0-9]+ 0x[0-9a-f]+ readers=0 writer=[^ ]+ waiters"
               ".*writer tid [0-9]+ sleeping");
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[hang guard proof] the child died after %.1f s\n", took);
  EXPECT_LT(took, 2.0 + startup_slack().count()) << "the guard fired late";
}

// The same hang outside a death test, to see the report as CI would:
//   RWSEM_TEST_HANG_SECONDS=2 hang_guard_test --gtest_also_run_disabled_tests \
//       --gtest_filter='*DISABLED_Demo*'
TEST(HangGuardProof, DISABLED_Demo) { block_main_thread_forever(); }

// eventually() gives up at 2 s and prints "never reached"; the guard, armed
// at 2 s too, must wait for it (exit code 3 here; a guard abort would be
// SIGABRT).
TEST(HangGuardProof, BoundedWaitsPrintTheirOwnStateFirst) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const EnvOverride limit("RWSEM_TEST_HANG_SECONDS", "2");  // for the child
  EXPECT_EXIT(
      {
        rwsem::RwSemaphore sem;
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        const ::testing::AssertionResult r =
            eventually(sem, [] { return false; }, "a state that never comes");
        std::fprintf(stderr, "%s\n", r.message());
        std::fflush(stderr);
        std::_Exit(r ? 0 : 3);
      },
      ::testing::ExitedWithCode(3), "never reached: a state that never comes.*count: ");
}

}  // namespace
}  // namespace rwsem_test
