// What destroying a rwsem costs. The destructor of a lock that ever had a
// waiter walks every thread record the process has handed out, waiting for
// any up_read() that still names the lock (lib/rwsem/rwsem.h, "Lifetime");
// a lock that never had a waiter skips the walk. This measures both, with
// a given number of threads that have used a lock (each holds a record),
// idle (asleep) or busy (read-locking their own lock in a loop, so their
// records' cache lines are written on the other cores).
//
//   bazel run -c opt //bench:destroybench -- [--threads 1,8,64] [--locks N] [--reps R]
//
// Per cell: R reps, each destroying N locks in a row (constructed and
// prepared beforehand, outside the timing); prints ns per destruction,
// min / mean / max over the reps.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "bench/machine.h"
#include "lib/rwsem/rwsem.h"

namespace {

using Lock = rwsem::RwSemaphore;
using Clock = std::chrono::steady_clock;

std::vector<int> parse_list(const char* s) {
  std::vector<int> v;
  for (const char* p = s; *p != '\0';) {
    char* end = nullptr;
    const long x = std::strtol(p, &end, 10);
    if (end == p || x < 1) {
      std::fprintf(stderr, "destroybench: bad number list '%s'\n", s);
      std::exit(2);
    }
    v.push_back(static_cast<int>(x));
    p = *end == ',' ? end + 1 : end;
  }
  return v;
}

// Locks of one rep, in one aligned buffer, so that the timed loop runs only
// destructors (no free()).
class LockArray {
 public:
  explicit LockArray(int n) : n_(n) {
    const std::size_t bytes = (sizeof(Lock) * static_cast<std::size_t>(n) + 63) / 64 * 64;
    buf_ = static_cast<Lock*>(std::aligned_alloc(64, bytes));
    if (buf_ == nullptr) {
      std::fprintf(stderr, "destroybench: out of memory\n");
      std::exit(1);
    }
    rwsem::Options o;
    o.spin_budget = std::chrono::nanoseconds(0);  // a timed-out try queues at once
    for (int i = 0; i < n; ++i) new (&buf_[i]) Lock(o);
  }
  ~LockArray() { std::free(buf_); }
  Lock& operator[](int i) { return buf_[i]; }
  // Destroys every lock; returns ns per destruction.
  double destroy_all() {
    const auto t0 = Clock::now();
    for (int i = 0; i < n_; ++i) buf_[i].~Lock();
    const auto t1 = Clock::now();
    return std::chrono::duration<double, std::nano>(t1 - t0).count() / n_;
  }

 private:
  int n_;
  Lock* buf_;
};

// Gives a lock a waiter that has come and gone: this thread holds the
// write lock while its own timed read lock queues and times out.
void make_waited_on(Lock& l) {
  l.down_write();
  if (l.down_read_timeout(std::chrono::microseconds(1))) {
    std::fprintf(stderr, "destroybench: a read lock was granted beside the write lock\n");
    std::exit(1);
  }
  l.up_write();
}

struct Helpers {
  Helpers(int n, bool busy) {
    for (int i = 0; i < n; ++i)
      threads.emplace_back([this, busy] {
        Lock own;
        own.down_read();
        own.up_read();
        ready.fetch_add(1);
        while (!stop.load(std::memory_order_relaxed)) {
          if (busy) {
            own.down_read();
            own.up_read();
          } else {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
          }
        }
      });
    while (ready.load() < n) std::this_thread::yield();
  }
  ~Helpers() {
    stop.store(true);
    for (auto& t : threads) t.join();
  }
  std::atomic<bool> stop{false};
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> thread_counts = {1, 8, 64};
  int locks = 20000, reps = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) thread_counts = parse_list(argv[++i]);
    else if (a == "--locks" && i + 1 < argc) locks = std::max(1, std::atoi(argv[++i]));
    else if (a == "--reps" && i + 1 < argc) reps = std::max(1, std::atoi(argv[++i]));
    else {
      std::fprintf(stderr, "usage: destroybench [--threads 1,8,64] [--locks N] [--reps R]\n");
      return 2;
    }
  }
  std::printf("destroybench: %s\n", bench::describe_machine().line().c_str());
  std::printf("ns per destruction, min / mean / max over %d reps of %d locks\n", reps, locks);
  std::printf("%-8s %-7s %-14s %s\n", "threads", "others", "lock history", "min / mean / max");
  // The main thread takes its record first, so "threads" counts it.
  {
    Lock warm;
    warm.down_read();
    warm.up_read();
  }
  for (const int threads : thread_counts) {
    for (const bool busy : {false, true}) {
      if (threads == 1 && busy) continue;
      Helpers helpers(threads - 1, busy);
      for (const bool waited : {false, true}) {
        double lo = 1e300, hi = 0, sum = 0;
        for (int r = 0; r < reps; ++r) {
          LockArray a(locks);
          if (waited)
            for (int i = 0; i < locks; ++i) make_waited_on(a[i]);
          const double ns = a.destroy_all();
          lo = std::min(lo, ns);
          hi = std::max(hi, ns);
          sum += ns;
        }
        std::printf("%-8d %-7s %-14s %.1f / %.1f / %.1f\n", threads,
                    threads == 1 ? "-"
                    : busy       ? "busy"
                                 : "idle",
                    waited ? "had a waiter" : "never queued", lo, sum / reps, hi);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
