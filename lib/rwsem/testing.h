// Test-only hooks. Nothing in the lock's fast paths depends on them.
#ifndef RWSEM_LIB_TESTING_H_
#define RWSEM_LIB_TESTING_H_

#include <atomic>
#include <chrono>
#include <cstdint>

namespace rwsem {
namespace testing {

// While one of these exists, handoff decisions use its time instead of the
// monotonic clock, so a test decides when a waiter has waited "long enough".
// Destroy it only after every thread that locks has stopped.
class FakeHandoffClock {
 public:
  explicit FakeHandoffClock(std::int64_t start_ns = 1'000'000'000);
  ~FakeHandoffClock();
  FakeHandoffClock(const FakeHandoffClock&) = delete;
  FakeHandoffClock& operator=(const FakeHandoffClock&) = delete;

  // relaxed: the clock orders nothing; waiters read it under the wait lock.
  std::int64_t now_ns() const { return now_.load(std::memory_order_relaxed); }
  void advance(std::chrono::nanoseconds d) {
    now_.fetch_add(d.count(), std::memory_order_relaxed);
  }

 private:
  std::atomic<std::int64_t> now_;
};

// Raw access to a lock's count and wait queue. Defined in rwsem.h, where
// BasicRwSemaphore befriends it.
struct Peer;

}  // namespace testing
}  // namespace rwsem

#endif  // RWSEM_LIB_TESTING_H_
