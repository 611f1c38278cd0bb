// Helpers shared by the corpus's scenario tests.
#ifndef RWSEM_CONFORMANCE_TEST_UTIL_H_
#define RWSEM_CONFORMANCE_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "conformance/hang_guard.h"
#include "lib/rwsem/mutex.h"
#include "lib/rwsem/qrwlock.h"
#include "lib/rwsem/rwsem.h"

namespace rwsem_test {

// hang_limit() (conformance/hang_guard.h) bounds "wait until the other
// threads reach state X". It is not a timing assertion: it only turns a lost
// wake-up into a failure with the lock state printed, instead of a test that
// hangs until CI kills it. RWSEM_TEST_HANG_SECONDS (default 120 s, generous
// for TSan under QEMU). The bounded waits below tell the whole-binary hang
// guard when they will give up, so their own diagnosis comes first.

template <class L>
std::string lock_state(rwsem::BasicRwSemaphore<L>& sem) {
  std::ostringstream os;
  os << "count: " << sem.describe() << "\nqueue (front first):";
  std::vector<typename rwsem::BasicRwSemaphore<L>::WaiterInfo> ws;
  if (!sem.waiters(&ws)) {
    os << " <wait lock held for 1 s; queue not readable>";
  } else if (ws.empty()) {
    os << " empty";
  }
  for (const auto& w : ws)
    os << "\n  " << (w.reader ? "reader" : "writer") << " tid " << w.tid
       << (w.sleeping ? " sleeping" : " woken") << (w.handoff_set ? " handoff" : "");
  return os.str();
}

inline std::string lock_state(rwsem::QRwLock& l) { return "count: " + l.describe(); }

inline std::string lock_state(rwsem::Mutex& l) {
  std::ostringstream os;
  os << "count: " << l.describe() << "\nqueue: ";
  const std::size_t n = l.queue_length();
  if (n == rwsem::Mutex::kQueueUnreadable) os << "<wait lock held for 1 s; not readable>";
  else os << n << " waiter(s)";
  return os.str();
}

// Polls `pred` until it holds; fails the test with the lock's state if the
// hang limit passes first.
template <class Lock, class Pred>
::testing::AssertionResult eventually(Lock& sem, Pred pred,
                                      const char* what) {
  const auto give_up = std::chrono::steady_clock::now() + hang_limit();
  HangGuard::extend_until(give_up);
  while (!pred()) {
    if (std::chrono::steady_clock::now() > give_up)
      return ::testing::AssertionFailure()
             << "never reached: " << what << "\n" << lock_state(sem);
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return ::testing::AssertionSuccess();
}

// Joins its threads on destruction, so a failing ASSERT cannot leave
// threads running over a destroyed lock. If they do not finish within the
// hang limit (a failed test returned while they were still blocked on the
// lock), the process fails loudly instead of hanging in join().
class ThreadGroup {
 public:
  ~ThreadGroup() { join(); }
  template <class F>
  void spawn(F f) {
    threads_.emplace_back([this, f = std::move(f)]() mutable {
      f();
      done_.fetch_add(1);
    });
  }
  void join() {
    const auto give_up = std::chrono::steady_clock::now() + hang_limit();
    HangGuard::extend_until(give_up);
    while (done_.load() < threads_.size()) {
      if (std::chrono::steady_clock::now() > give_up) {
        std::fprintf(stderr,
                     "ThreadGroup: %zu of %zu threads still blocked %lld s after the "
                     "test let go of them; aborting instead of hanging\n",
                     threads_.size() - done_.load(), threads_.size(),
                     static_cast<long long>(hang_limit().count()));
        std::fflush(stderr);
        std::abort();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    for (auto& t : threads_) t.join();
    threads_.clear();
    done_.store(0);
  }

 private:
  std::vector<std::thread> threads_;
  std::atomic<std::size_t> done_{0};
};

}  // namespace rwsem_test

#endif  // RWSEM_CONFORMANCE_TEST_UTIL_H_
