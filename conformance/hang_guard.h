// A whole-binary hang guard for the corpus.
//
// The corpus's other guards (eventually(), ThreadGroup::join(), the torture
// Watchdog) only help when the thread that hangs is one a test watches from
// another thread. A test whose own main thread blocks forever in a broken
// lock used to hang until Bazel's test timeout, with no state printed.
//
// Every corpus binary links hang_guard.cc (alwayslink), which registers a
// gtest event listener before main(). At each test start it arms a deadline
// of hang_limit() (RWSEM_TEST_HANG_SECONDS, default 120 s; times
// RWSEM_STRESS_SCALE and RWSEM_TIME_SCALE when those are above 1, since
// long qualification runs are legitimately longer) and disarms it at the
// end. A background thread checks the deadline; if a test overruns it
// prints
//
//   HANG: <Suite.Test> still running after N s (RWSEM_TEST_HANG_SECONDS=...)
//     seed=<seed> (replay with RWSEM_SEED=<seed>)
//     lock <name>:
//       <decoded state>
//
// flushes, and aborts the process.
//
// Tests register what the report should show:
//
//   auto h = HangGuard::watch("sem", [&] { return lock_state(sem); });
//   HangGuard::set_seed(seed);
//
// The handle unregisters the lock when it goes out of scope: declare it
// after the lock, so it dies first.
//
// A test's own bounded waits keep priority: eventually(), ThreadGroup::join()
// and the torture Watchdog call HangGuard::extend_until() with the moment
// they will give up (plus a grace period), so they fail with their own,
// more specific diagnosis before this guard would fire.
#ifndef RWSEM_CONFORMANCE_HANG_GUARD_H_
#define RWSEM_CONFORMANCE_HANG_GUARD_H_

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>

namespace rwsem_test {

// Hang guard for "wait until the other threads reach state X": the limit
// the corpus's bounded waits use. RWSEM_TEST_HANG_SECONDS, default 120 s
// (generous for TSan under QEMU).
inline std::chrono::seconds hang_limit() {
  const char* s = std::getenv("RWSEM_TEST_HANG_SECONDS");
  return std::chrono::seconds(s && *s ? std::atoi(s) : 120);
}

class HangGuard {
 public:
  // Unregisters its lock on destruction.
  class Handle {
   public:
    Handle() = default;
    explicit Handle(std::uint64_t id) : id_(id) {}
    Handle(Handle&& o) noexcept : id_(o.id_) { o.id_ = 0; }
    Handle& operator=(Handle&& o) noexcept;
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;
    ~Handle();

   private:
    std::uint64_t id_ = 0;
  };

  // Registers a lock whose decoded state a HANG report prints. `dump` runs
  // on the guard's thread while the test is stuck: it must not block (the
  // corpus's lock_state() overloads give up on a held wait lock after 1 s).
  [[nodiscard]] static Handle watch(std::string name, std::function<std::string()> dump);

  // The seed of the running test, printed by a HANG report. Cleared at the
  // end of each test.
  static void set_seed(std::uint64_t seed);

  // A bounded wait that gives up at `t` and then prints its own diagnosis:
  // the guard does not fire before t + grace (5 s).
  static void extend_until(std::chrono::steady_clock::time_point t);

  // The guard's per-test limit (hang_limit() times the stress and time
  // scales).
  static std::chrono::seconds test_limit();
  // Registers the per-test listener (arm at each test start, disarm at its
  // end). Called before main() by hang_guard_listener.cc, which every corpus
  // binary links except the two whose death tests start threads in the
  // forked child (rwsem_debug_test, watchdog_demo_test): a guard thread in
  // the parent makes that child's first thread abort QEMU user mode. Their
  // death-test children arm the guard themselves, by registering a lock
  // with watch() (rwsem_debug_test), or are bounded by their own watchdog
  // (watchdog_demo_test).
  static void install();
};

}  // namespace rwsem_test

#endif  // RWSEM_CONFORMANCE_HANG_GUARD_H_
