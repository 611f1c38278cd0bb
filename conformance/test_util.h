// Helpers shared by the corpus's scenario tests.
#ifndef RWSEM_CONFORMANCE_TEST_UTIL_H_
#define RWSEM_CONFORMANCE_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
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

inline bool thread_start_failed_in_this_test();  // below, with ThreadGroup

// Polls `pred` until it holds; fails the test with the lock's state if the
// hang limit passes first, or at once if a thread of the test could not be
// started.
template <class Lock, class Pred>
::testing::AssertionResult eventually(Lock& sem, Pred pred, const char* what) {
  const auto give_up = std::chrono::steady_clock::now() + hang_limit();
  HangGuard::extend_until(give_up);
  while (!pred()) {
    if (thread_start_failed_in_this_test())
      return ::testing::AssertionFailure()
             << "gave up waiting for: " << what
             << " (a thread of this test could not be started; see above)";
    if (std::chrono::steady_clock::now() > give_up)
      return ::testing::AssertionFailure() << "never reached: " << what << "\n" << lock_state(sem);
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return ::testing::AssertionSuccess();
}

// ---- starting threads --------------------------------------------------
//
// Tests start their threads through ThreadGroup (or start_detached_n() for
// threads that outlive the test); both go through start_thread(). A few
// tests that start one thread and join it at once use std::thread.

// The stack size of those threads, chosen here and nowhere else.
//
// Why explicit: a thread started without a size gets RLIMIT_STACK (8 MiB on
// most systems). A 32-bit process has 3 GiB of user address space (4 GiB
// under QEMU on a 64-bit host) for its program, heap and every stack, so
// 8 MiB x 300 threads (RwsemCore.WakeBatchIsAtMost256Readers) does not fit
// beside the rest (a 32-bit guest has been seen to fit about 250), and where
// the limit falls moves with the host's ulimit -s.
//
// Why this much: the deepest corpus thread, measured, touches about 16 KiB
// of its stack (a lock call, gtest assertions, some locals, and glibc's
// thread descriptor and static TLS, which share the allocation), plain or
// under TSan or ASan; a race or ASan report printed on the thread fits in
// it as well. 256 KiB leaves a wide margin. Under TSan and ASan, 1 MiB: an
// instrumented frame is larger (ASan's redzones, when the frame is not on
// its fake stack), TSan will not start a thread with less than its TLS +
// 128 KiB, and both run threaded tests on 64-bit targets only (ci/test runs
// 32-bit ASan single-threaded), where 300 x 1 MiB costs nothing.
#if defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define RWSEM_TEST_BIG_STACKS 1
#endif
#endif
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define RWSEM_TEST_BIG_STACKS 1
#endif
#ifdef RWSEM_TEST_BIG_STACKS
inline constexpr std::size_t kThreadStackBytes = std::size_t{1} << 20;  // 1 MiB
#else
inline constexpr std::size_t kThreadStackBytes = std::size_t{256} << 10;  // 256 KiB
#endif
#undef RWSEM_TEST_BIG_STACKS

// Starts a thread running `body` on a stack of `stack_bytes`, joinable (its
// id in *tid) or detached. Returns 0, or the error pthread_create (or the
// attribute it was given) reported; then `body` never runs.
inline int start_thread(std::function<void()> body, std::size_t stack_bytes, bool detached,
                        pthread_t* tid) {
  pthread_attr_t attr;
  int err = pthread_attr_init(&attr);
  if (err != 0) return err;
  err = pthread_attr_setstacksize(&attr, stack_bytes);
  if (err == 0 && detached) err = pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  auto* heap_body = new std::function<void()>(std::move(body));
  pthread_t ignored;
  if (err == 0)
    err = pthread_create(tid ? tid : &ignored, &attr, [](void* p) -> void* {
      std::unique_ptr<std::function<void()>> b(static_cast<std::function<void()>*>(p));
      (*b)();
      return nullptr;
    }, heap_body);
  pthread_attr_destroy(&attr);
  if (err != 0) delete heap_body;
  return err;
}

// The failure message for a thread that could not be started: which one,
// how many of the test's threads were already running, and the error.
inline std::string thread_start_failure(int err, std::size_t index, std::size_t batch,
                                        std::size_t running, std::size_t stack_bytes) {
  std::ostringstream os;
  os << "could not start thread " << index + 1 << " of " << batch << " with " << running
     << " already running: pthread_create: " << std::strerror(err) << " (errno " << err
     << "; stack " << (stack_bytes >> 10) << " KiB)";
  return os.str();
}

namespace internal {

// Which run of which test had a thread start fail (so eventually() can give
// up at once): the test's result object and the moment that run started,
// since a repeated test (--gtest_repeat) reuses the object.
struct TestRun {
  const ::testing::TestResult* result = nullptr;
  ::testing::TimeInMillis start = 0;
  bool operator==(const TestRun& o) const { return result == o.result && start == o.start; }
};
inline TestRun current_test_run() {
  const ::testing::TestInfo* t = ::testing::UnitTest::GetInstance()->current_test_info();
  if (t == nullptr) return {};
  return {t->result(), t->result()->start_timestamp()};
}
struct FailedStart {
  std::atomic<bool> any{false};  // a cheap first check for eventually()'s polls
  std::mutex mu;
  TestRun run;  // guarded by mu
};
inline FailedStart& failed_start() {
  static FailedStart f;
  return f;
}

// Holds a batch of new threads until all of them have started, then lets
// them run their bodies, or sends them home without running anything.
class StartGate {
 public:
  void open(bool go) {
    {
      std::lock_guard<std::mutex> l(mu_);
      state_ = go ? kGo : kCancelled;
    }
    cv_.notify_all();
  }
  bool wait() {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [this] { return state_ != kClosed; });
    return state_ == kGo;
  }

 private:
  enum { kClosed, kGo, kCancelled };
  std::mutex mu_;
  std::condition_variable cv_;
  int state_ = kClosed;
};

inline void note_failed_start() {
  FailedStart& f = failed_start();
  const TestRun now = current_test_run();
  std::lock_guard<std::mutex> l(f.mu);
  f.run = now;
  f.any.store(true);
}

// Starts n threads, joinable (their ids appended to *ids) or detached, that
// run body(0) .. body(n-1) once all n have started. If one cannot be
// started, none runs body: the started ones are released to exit (and
// joined, if joinable), and the result says which thread failed, how many
// were running (`running` from before this batch, plus the batch's), and
// the error.
template <class F>
::testing::AssertionResult start_gated(int n, F body, std::size_t stack_bytes, bool detached,
                                       std::size_t running, std::vector<pthread_t>* ids) {
  auto gate = std::make_shared<StartGate>();
  std::vector<pthread_t> batch;
  batch.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    pthread_t t;
    const int err = start_thread([gate, body, i]() mutable {
      if (gate->wait()) body(i);
    }, stack_bytes, detached, &t);
    if (err != 0) {
      gate->open(false);
      if (!detached)
        for (pthread_t b : batch) pthread_join(b, nullptr);
      return ::testing::AssertionFailure()
             << thread_start_failure(err, running + batch.size(),
                                     running + static_cast<std::size_t>(n), running + batch.size(),
                                     stack_bytes)
             << "; the " << batch.size() << " started of this batch of " << n
             << " exited without running";
    }
    batch.push_back(t);
  }
  if (ids) ids->insert(ids->end(), batch.begin(), batch.end());
  gate->open(true);
  return ::testing::AssertionSuccess();
}

}  // namespace internal

// True once a thread start failed in the running test: whatever the test
// waits for may never happen.
inline bool thread_start_failed_in_this_test() {
  internal::FailedStart& f = internal::failed_start();
  if (!f.any.load()) return false;
  const internal::TestRun now = internal::current_test_run();
  std::lock_guard<std::mutex> l(f.mu);
  return now.result != nullptr && f.run == now;
}

// Joins its threads on destruction, so a failing ASSERT cannot leave
// threads running over a destroyed lock. If they do not finish within the
// hang limit (a failed test returned while they were still blocked on the
// lock), the process fails loudly instead of hanging in join().
//
// A thread that cannot be started fails the test at once with the error and
// the number of threads already running, and starts nothing more:
//  - spawn_n(n, f) starts n threads that run f(0) .. f(n-1) only once all n
//    have started. If one cannot be started, none runs f: those started are
//    joined at once and the result (ASSERT_TRUE it) carries the error. So a
//    test whose threads block on a lock it holds (300 readers behind a
//    writer) ends at once instead of waiting the hang limit for threads
//    that never get the lock. Tests that start threads in a loop use it.
//  - spawn(f) starts one thread, running f at once. If it cannot, it adds
//    the failure itself, refuses later spawns, and eventually() gives up at
//    once for the rest of the test.
class ThreadGroup {
 public:
  explicit ThreadGroup(std::size_t stack_bytes = kThreadStackBytes) : stack_bytes_(stack_bytes) {}
  ThreadGroup(const ThreadGroup&) = delete;
  ThreadGroup& operator=(const ThreadGroup&) = delete;
  ~ThreadGroup() { join(); }

  template <class F>
  bool spawn(F f) {
    if (failed_) return false;
    pthread_t t;
    const int err = start_thread([this, f = std::move(f)]() mutable {
      f();
      done_.fetch_add(1);
    }, stack_bytes_, false, &t);
    if (err != 0) {
      record_failure();
      ADD_FAILURE() << thread_start_failure(err, threads_.size(), threads_.size() + 1,
                                            threads_.size(), stack_bytes_);
      return false;
    }
    threads_.push_back(t);
    return true;
  }

  template <class F>
  [[nodiscard]] ::testing::AssertionResult spawn_n(int n, F f) {
    if (failed_) return ::testing::AssertionFailure() << "an earlier thread start failed";
    std::vector<pthread_t> batch;
    ::testing::AssertionResult started = internal::start_gated(n, [this, f](int i) mutable {
      f(i);
      done_.fetch_add(1);
    }, stack_bytes_, false, threads_.size(), &batch);
    if (!started) {
      record_failure();
      return started;
    }
    threads_.insert(threads_.end(), batch.begin(), batch.end());
    return started;
  }

  void join() {
    const auto give_up = std::chrono::steady_clock::now() + hang_limit();
    HangGuard::extend_until(give_up);
    while (done_.load() < threads_.size()) {
      if (std::chrono::steady_clock::now() > give_up) {
        // The test's own report and gtest's failure messages sit in
        // stdout's buffer, which abort() discards: write them out first.
        std::fflush(stdout);
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
    join_no_limit();
  }

  // Joins without the hang limit: for a caller whose own watchdog bounds
  // the wait (the torture harness, whose runs may be long).
  void join_no_limit() {
    for (pthread_t t : threads_) pthread_join(t, nullptr);
    threads_.clear();
    done_.store(0);
  }

 private:
  void record_failure() {
    failed_ = true;
    internal::note_failed_start();
  }

  const std::size_t stack_bytes_;
  std::vector<pthread_t> threads_;
  std::atomic<std::size_t> done_{0};
  bool failed_ = false;
};

// Starts n detached threads running f(0) .. f(n-1), released together once
// all n have started, as ThreadGroup::spawn_n does: if one cannot be
// started, none runs f and the result (ASSERT_TRUE it) carries the error.
// For threads that stay alive until the process ends.
template <class F>
[[nodiscard]] ::testing::AssertionResult start_detached_n(int n, F f) {
  ::testing::AssertionResult started =
      internal::start_gated(n, std::move(f), kThreadStackBytes, true, 0, nullptr);
  if (!started) internal::note_failed_start();
  return started;
}

}  // namespace rwsem_test

#endif  // RWSEM_CONFORMANCE_TEST_UTIL_H_
