// A locktorture-style stress harness over any lock with the rwsem API, and
// the watchdog that turns a hang into a diagnosis.
//
// Replay. Every operation a thread performs is a pure function of (seed,
// thread index, operation index): see op_at(). Two runs with the same seed
// issue the same operations in the same order on every thread; only the
// interleaving between threads differs. A run prints its seed and a digest
// of its schedule; RWSEM_SEED=<seed> replays it, and RWSEM_STRESS_OPS=<n>
// runs a fixed number of operations per thread instead of a time window.
//
// Environment:
//   RWSEM_SEED              seed (default: from the clock; always printed)
//   RWSEM_STRESS_SCALE      multiplies the time window (default 1; CI short,
//                           qualification long)
//   RWSEM_STRESS_OPS        operations per thread instead of a time window
//   RWSEM_WATCHDOG_SECONDS  no-progress limit before the watchdog fires
#ifndef RWSEM_CONFORMANCE_TORTURE_H_
#define RWSEM_CONFORMANCE_TORTURE_H_

#include <atomic>
#include <chrono>
#include <cinttypes>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "arch/cpu.h"
#include "conformance/hang_guard.h"
#include "conformance/lock_types.h"
#include "conformance/test_util.h"
#include "lib/rwsem/internal/platform.h"

namespace rwsem_test {

inline double env_double(const char* name, double dflt) {
  const char* s = std::getenv(name);
  return s && *s ? std::atof(s) : dflt;
}
inline std::uint64_t env_u64(const char* name, std::uint64_t dflt) {
  const char* s = std::getenv(name);
  return s && *s ? std::strtoull(s, nullptr, 0) : dflt;
}

// The seed of this process: RWSEM_SEED, or the clock.
inline std::uint64_t run_seed() {
  static const std::uint64_t seed = env_u64(
      "RWSEM_SEED",
      static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) | 1);
  return seed;
}

// splitmix64: a tiny, well-mixed, stateless generator, so op_at() is pure.
inline std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

enum class OpKind : std::uint8_t {
  kRead,
  kReadTry,
  kReadTimed,
  kWrite,
  kWriteTry,
  kWriteTimed,
  kWriteDowngrade,
};

struct Op {
  OpKind kind;
  std::uint32_t hold_spins;    // cpu_relax() iterations inside the section
  bool long_hold;              // a rare long hold (locktorture's 1 in 2000)
  std::uint32_t timeout_us;    // for the timed forms
};

// Operation k of thread t in the run with this seed.
inline Op op_at(std::uint64_t seed, bool writer, int t, std::uint64_t k) {
  const std::uint64_t r = mix(seed ^ mix((std::uint64_t(t) << 40) ^ k));
  const unsigned pick = r % 100;
  Op op{};
  if (writer) {
    op.kind = pick < 55   ? OpKind::kWrite
              : pick < 70 ? OpKind::kWriteTry
              : pick < 85 ? OpKind::kWriteTimed
                          : OpKind::kWriteDowngrade;
  } else {
    op.kind = pick < 70 ? OpKind::kRead : pick < 85 ? OpKind::kReadTry : OpKind::kReadTimed;
  }
  op.hold_spins = static_cast<std::uint32_t>((r >> 8) % 64);
  op.long_hold = ((r >> 16) % 2000) == 0;
  op.timeout_us = static_cast<std::uint32_t>((r >> 32) % 200);
  return op;
}

// A digest of the first n operations of every thread: equal digests mean
// equal schedules.
inline std::uint64_t schedule_digest(std::uint64_t seed, int readers, int writers,
                                     std::uint64_t n = 1000) {
  std::uint64_t h = 0;
  for (int t = 0; t < readers + writers; ++t)
    for (std::uint64_t k = 0; k < n; ++k) {
      const Op op = op_at(seed, t >= readers, t, k);
      h = mix(h ^ (std::uint64_t(op.kind) | std::uint64_t(op.hold_spins) << 8 |
                   std::uint64_t(op.long_hold) << 16 | std::uint64_t(op.timeout_us) << 24));
    }
  return h;
}

// ---------------------------------------------------------------------------
// Watchdog: fails the process, with every registered lock's state, when no
// registered thread makes progress for the limit. Progress is a per-thread
// counter the workload bumps after each operation.
// ---------------------------------------------------------------------------
class Watchdog {
 public:
  Watchdog(std::string context, std::chrono::milliseconds limit)
      : context_(std::move(context)), limit_(limit) {
    HangGuard::extend_until(std::chrono::steady_clock::now() + limit_);
    thread_ = std::thread([this] { run(); });
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> g(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  // Register before the workers start. Under mu_: the watchdog thread reads
  // the list when it fires.
  void add_lock(std::string name, std::function<std::string()> dump) {
    std::lock_guard<std::mutex> g(mu_);
    locks_.push_back({std::move(name), std::move(dump)});
  }
  // relaxed: a progress counter orders nothing.
  void progress() { ticks_.fetch_add(1, std::memory_order_relaxed); }

  static std::chrono::milliseconds default_limit() {
    return std::chrono::milliseconds(
        static_cast<long>(1000 * env_double("RWSEM_WATCHDOG_SECONDS", 60)));
  }

 private:
  void run() {
    std::uint64_t last = ticks_.load(std::memory_order_relaxed);
    auto last_change = std::chrono::steady_clock::now();
    std::unique_lock<std::mutex> g(mu_);
    while (!stop_) {
      cv_.wait_for(g, std::chrono::milliseconds(50));
      const std::uint64_t now_ticks = ticks_.load(std::memory_order_relaxed);
      const auto now = std::chrono::steady_clock::now();
      if (now_ticks != last) {
        last = now_ticks;
        last_change = now;
        // This watchdog diagnoses a stall itself: the whole-binary guard
        // waits for it.
        HangGuard::extend_until(now + limit_);
      } else if (now - last_change > limit_) {
        fire(now - last_change);
      }
    }
  }

  [[noreturn]] void fire(std::chrono::steady_clock::duration stuck) {
    std::fflush(stdout);  // what the run printed so far; abort() would drop it
    std::fprintf(stderr,
                 "\nWATCHDOG: no progress for %.1f s in %s\n  seed: %" PRIu64
                 " (replay with RWSEM_SEED=%" PRIu64 ")\n",
                 std::chrono::duration<double>(stuck).count(), context_.c_str(), run_seed(),
                 run_seed());
    for (const auto& l : locks_)
      std::fprintf(stderr, "  lock %s:\n    %s\n", l.name.c_str(), l.dump().c_str());
    std::fflush(stderr);
    std::abort();
  }

  struct Entry {
    std::string name;
    std::function<std::string()> dump;
  };
  const std::string context_;
  const std::chrono::milliseconds limit_;
  std::vector<Entry> locks_;  // guarded by mu_
  std::atomic<std::uint64_t> ticks_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

// ---------------------------------------------------------------------------
// The stress run.
// ---------------------------------------------------------------------------
struct TortureParams {
  int readers = 4;
  int writers = 2;
  double seconds = 1.0;         // before RWSEM_STRESS_SCALE
  std::uint64_t ops = 0;        // per thread; 0 = use the time window
  int words = 8;                // size of the protected non-atomic data
};

struct TortureStats {
  std::uint64_t writes_total = 0, writes_max = 0, writes_min = UINT64_MAX, write_fail = 0;
  std::uint64_t reads_total = 0, reads_max = 0, reads_min = UINT64_MAX, read_fail = 0;
  std::uint64_t try_failed = 0, timed_out = 0, downgrades = 0;
  // Sections whose thread's record said it was asleep in one of the
  // library's waits (Torture::note_running()).
  std::uint64_t parked_holder = 0;

  // locktorture's statistics lines; "???" flags an unfair spread (max/2 >
  // min), "!!!" a violation.
  std::string summary() const {
    char buf[512];
    auto line = [](char* out, std::size_t n, const char* tag, std::uint64_t total, std::uint64_t mx,
                   std::uint64_t mn, std::uint64_t fail) {
      std::snprintf(out, n,
                    "%s:  Total: %" PRIu64 "  Max/Min: %" PRIu64 "/%" PRIu64 " %s  Fail: %" PRIu64
                    " %s",
                    tag, total, mx, mn, mx / 2 > mn ? "???" : "", fail, fail ? "!!!" : "");
    };
    char w[240], r[240];
    line(w, sizeof w, "Writes", writes_total, writes_max, writes_min, write_fail);
    line(r, sizeof r, "Reads ", reads_total, reads_max, reads_min, read_fail);
    std::snprintf(buf, sizeof buf,
                  "%s\n%s\n(try failed %" PRIu64 ", timed out %" PRIu64 ", downgrades %" PRIu64
                  ", holders marked parked %" PRIu64 "%s)",
                  w, r, try_failed, timed_out, downgrades, parked_holder,
                  parked_holder ? " !!!" : "");
    return buf;
  }
};

template <class Lock>
class Torture {
 public:
  Torture(Lock& lock, TortureParams p, std::string name)
      : lock_(lock), p_(p), name_(std::move(name)), data_(p.words, 0) {}

  TortureStats run(Watchdog& dog) {
    const std::uint64_t seed = run_seed();
    const double scale = env_double("RWSEM_STRESS_SCALE", 1.0);
    const std::uint64_t ops = env_u64("RWSEM_STRESS_OPS", p_.ops);
    const auto window = std::chrono::duration<double>(p_.seconds * scale);
    std::printf("[torture %s] seed=%" PRIu64
                " readers=%d writers=%d %s words=%d "
                "schedule=0x%016" PRIx64 "\n",
                name_.c_str(), seed, p_.readers, p_.writers,
                ops ? (std::to_string(ops) + " ops/thread").c_str()
                    : (std::to_string(window.count()) + "s").c_str(),
                p_.words, schedule_digest(seed, p_.readers, p_.writers));
    std::fflush(stdout);

    const int n = p_.readers + p_.writers;
    std::vector<std::uint64_t> done(n, 0);
    std::atomic<bool> stop{false};
    ThreadGroup threads;
    const ::testing::AssertionResult started = threads.spawn_n(n, [&](int t) {
      const bool writer = t >= p_.readers;
      std::uint64_t acquired = 0;  // locktorture counts acquisitions
      for (std::uint64_t k = 0; ops ? k < ops : !stop.load(std::memory_order_relaxed); ++k) {
        if (!do_op(op_at(seed, writer, t, k))) continue;
        ++acquired;
        dog.progress();
      }
      done[t] = acquired;
    });
    if (!started) {
      ADD_FAILURE() << "[torture " << name_ << "] " << started.message();
      return TortureStats{};
    }
    if (!ops) {
      std::this_thread::sleep_for(window);
      stop.store(true, std::memory_order_relaxed);
    }
    // No time limit: a run may be long (RWSEM_STRESS_OPS), and the watchdog
    // fails it when it stops making progress.
    threads.join_no_limit();

    TortureStats s;
    for (int t = 0; t < n; ++t) {
      const bool writer = t >= p_.readers;
      (writer ? s.writes_total : s.reads_total) += done[t];
      auto& mx = writer ? s.writes_max : s.reads_max;
      auto& mn = writer ? s.writes_min : s.reads_min;
      mx = std::max(mx, done[t]);
      mn = std::min(mn, done[t]);
    }
    if (p_.readers == 0) s.reads_min = 0;
    if (p_.writers == 0) s.writes_min = 0;
    s.write_fail = write_fail_.load();
    s.read_fail = read_fail_.load();
    s.try_failed = try_failed_.load();
    s.timed_out = timed_out_.load();
    s.downgrades = downgrades_.load();
    s.parked_holder = parked_holder_.load();
    EXPECT_EQ(s.parked_holder, 0u)
        << "[torture " << name_ << "] a thread inside its critical section had its record "
        << "marked parked: spinners stop spinning on such an owner";
    std::printf("[torture %s]\n%s\n", name_.c_str(), s.summary().c_str());
    std::fflush(stdout);
    return s;
  }

 private:
  // Inside the write section: exactly one writer, no reader; the data goes
  // from one consistent pattern to the next, a word at a time, so a reader
  // let in early sees a torn pattern.
  void write_section(const Op& op) {
    note_running();
    // relaxed: these counters detect overlap; they must not add ordering
    // that would hide a missing acquire/release from TSan.
    if (writers_in_.fetch_add(1, std::memory_order_relaxed) != 0 ||
        readers_in_.load(std::memory_order_relaxed) != 0)
      write_fail_.fetch_add(1, std::memory_order_relaxed);
    const std::uint64_t v = data_[0] + 1;
    for (auto& word : data_) {
      word = v;
      spin(op.hold_spins / p_.words);
    }
    hold(op);
    writers_in_.fetch_sub(1, std::memory_order_relaxed);
  }

  void read_section(const Op& op) {
    note_running();
    readers_in_.fetch_add(1, std::memory_order_relaxed);
    if (writers_in_.load(std::memory_order_relaxed) != 0)
      read_fail_.fetch_add(1, std::memory_order_relaxed);
    check_pattern();
    hold(op);
    check_pattern();
    readers_in_.fetch_sub(1, std::memory_order_relaxed);
  }

  // A thread in its critical section runs, so its thread record must not
  // say it sleeps in one of the library's waits (`parked`, thread_record.h):
  // a spinner that reads the flag set on a running owner stops spinning on
  // it, so a flag left set (a new record starting parked, a wait that does
  // not clear it on the way out) turns spinning off unseen. The thread's
  // own flag: relaxed, it orders nothing.
  void note_running() {
    if (rwsem::internal::current_thread().parked.load(std::memory_order_relaxed))
      parked_holder_.fetch_add(1, std::memory_order_relaxed);
  }

  void check_pattern() {
    const std::uint64_t v = data_[0];
    for (std::uint64_t word : data_)
      if (word != v) read_fail_.fetch_add(1, std::memory_order_relaxed);
  }

  static void spin(std::uint32_t n) {
    for (std::uint32_t i = 0; i < n; ++i) rwsem::arch::cpu_relax();
  }
  static void hold(const Op& op) {
    spin(op.hold_spins);
    if (op.long_hold) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }

  // Returns true if the operation got the lock.
  bool do_op(const Op& op) {
    const auto timeout = std::chrono::microseconds(op.timeout_us);
    // The adapters (lock_types.h) map each operation onto what the lock
    // has: a mutex runs reader operations exclusively, a lock without timed
    // tries blocks instead, one without downgrade stays exclusive.
    switch (op.kind) {
      case OpKind::kRead: read_lock(lock_); break;
      case OpKind::kReadTry:
        if (!read_try_lock(lock_)) return fail(try_failed_);
        break;
      case OpKind::kReadTimed:
        if (!read_lock_for(lock_, timeout)) return fail(timed_out_);
        break;
      case OpKind::kWrite: lock_.lock(); break;
      case OpKind::kWriteTry:
        if (!lock_.try_lock()) return fail(try_failed_);
        break;
      case OpKind::kWriteTimed:
      case OpKind::kWriteDowngrade:
        if (!write_lock_for(lock_, timeout)) return fail(timed_out_);
        break;
    }
    switch (op.kind) {
      case OpKind::kRead:
      case OpKind::kReadTry:
      case OpKind::kReadTimed:
        read_section(op);
        read_unlock(lock_);
        break;
      case OpKind::kWriteDowngrade: {
        write_section(op);
        const std::uint64_t mine = data_[0];
        const bool downgraded = downgrade(lock_);
        if (downgraded) downgrades_.fetch_add(1, std::memory_order_relaxed);
        read_section(op);
        if (data_[0] != mine) read_fail_.fetch_add(1, std::memory_order_relaxed);
        unlock_after_downgrade(lock_, downgraded);
        break;
      }
      default: write_section(op); lock_.unlock();
    }
    return true;
  }

  static bool fail(std::atomic<std::uint64_t>& counter) {
    counter.fetch_add(1, std::memory_order_relaxed);
    return false;
  }

  Lock& lock_;
  const TortureParams p_;
  const std::string name_;
  std::vector<std::uint64_t> data_;  // protected by lock_, deliberately plain
  std::atomic<int> writers_in_{0}, readers_in_{0};
  std::atomic<std::uint64_t> write_fail_{0}, read_fail_{0};
  std::atomic<std::uint64_t> try_failed_{0}, timed_out_{0}, downgrades_{0}, parked_holder_{0};
};

}  // namespace rwsem_test

#endif  // RWSEM_CONFORMANCE_TORTURE_H_
