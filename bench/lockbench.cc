// The locking microbenchmark, after the kernel "rwsem microbenchmark" tables:
// threads loop lock / critical section / unlock for a fixed window.
//
//   bazel run -c opt //bench:lockbench -- [--window S] [--reps N] [--quick]
//       [--locks a,b] [--scenarios 1,2] [--threads 2,8] [--out DIR]
//       [--min-time S] [--plan] [--list]
//
// bench/run is the one command that runs the whole comparison and plots it.
//
// Scenarios (thread counts are the defaults; --quick uses fewer):
//   1 mixed        equal readers and writers              2 4 8 16 32 64
//   2 writers      writers only                           1 4 16 64
//   3 readers      readers only                           1 4 16 64
//   4 sleep        writers, 5 us sleeping critical        4 16 64
//                  section (handoff fairness)
//   5 mostly-r     every thread: 10000 reads, 1 write     2 4 8 16 32 64
//   7 mixed-think  scenario 1 with ~250 ns of calibrated  8
//                  work outside the lock between operations
//   6 latency      uncontended lock+unlock (Google Benchmark), read and write,
//                  against atomic floors on one cache line
//
// The headline of a timed run is the balanced rate
//
//   B = n * min over roles (ops by that role's threads / number of them) / T
//
// (roles: readers 'R' and writers 'W' in scenarios 1 and 7; one role in 2, 3
// and 4; in 5 every thread is 'M', mixed, and counts its reads + writes). B is
// the total rate when every role is served equally and falls towards 0 when
// one starves, so starving a role cannot win it. A run passes the gate when
// every role's per-thread ops Min/Max >= 0.25. Every (scenario, threads) cell
// runs --reps times with the lock order rotated (rep r starts at lock r mod
// L), so a drift of the machine does not always hit the same lock; the tables
// give the median B and its min..max. Before each cell the machine's CPU busy
// fraction is measured over 150 ms while the benchmark is idle (the machine
// may be shared: a busy cell is flagged, not retried). Beside B every run
// records reads/s and writes/s, Jain's fairness index, CPU time and context
// switches (getrusage per worker thread) and sampled acquisition waits.
//
// Critical sections. Writers increment four words of protected data on a
// cache line of their own; readers read the four and check they are equal
// (a torn read is counted as a violation: the smoke test requires none).
// There is no work between operations except in scenario 7. In scenario 4
// the writer sleeps 5 us (nanosleep, timer slack set to 1 ns so the sleep is
// not rounded up to the default 50 us) while holding the lock. In scenario 5
// a thread's writes are spread by a per-thread phase so that the threads do
// not write in step.
//
// The physical ceiling of a scenario: one thread runs the scenario's loop
// (same critical sections, same read/write mix, same sleep or think time) on
// the floor lock for one window; B / ceiling says how much of one core's
// uncontended rate the lock keeps under contention.
//
// Exclusive-only locks: see bench/locks.h (readers take the writer path in
// scenarios 1, 5 and 7; scenario 3 and read latency are skipped).
//
// Build with -DRWSEM_LOCK_EVENTS=1 -DRWSEM_BENCH_RWSEM_ONLY=1 (the target
// //bench:lockbench_events) to run only the rwsem entries, named
// "<name>+events", and report the lock event counters of every run. The
// compared entries in //bench:lockbench are built with events off.
#include <benchmark/benchmark.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <new>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/locks.h"
#include "bench/machine.h"
#include "lib/rwsem/lock_events.h"

namespace bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kLine = 64;
constexpr double kGate = 0.25;           // per-role per-thread ops Min/Max
constexpr double kBusyThreshold = 0.10;  // machine CPU busy before a cell
constexpr double kLoadProbe = 0.15;      // seconds the load check listens
constexpr std::uint32_t kSampleEvery = 64;
constexpr std::size_t kSampleCap = 1 << 16;  // wait samples kept per thread
constexpr std::uint64_t kReadsPerWrite = 10000;
constexpr double kThinkNs = 250;
constexpr const char* kMedianRule =
    "the cell's median-B rep fails the gate (even rep counts: the lower middle rep)";

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The whole machine's CPU busy fraction over `seconds`, from /proc/stat's
// aggregate line (idle and iowait count as idle). NAN if unreadable.
double machine_busy(double seconds) {
  const auto sample = [](std::uint64_t& busy, std::uint64_t& total) {
    std::ifstream f("/proc/stat");
    std::string cpu;
    std::uint64_t v[8] = {};  // user nice system idle iowait irq softirq steal
    f >> cpu;
    for (auto& x : v) f >> x;
    total = 0;
    for (auto x : v) total += x;
    busy = total - v[3] - v[4];
    return bool(f) && cpu == "cpu";
  };
  std::uint64_t b0, t0, b1, t1;
  if (!sample(b0, t0)) return NAN;
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  if (!sample(b1, t1) || t1 <= t0) return NAN;
  return double(b1 - b0) / double(t1 - t0);
}

// ---- options -------------------------------------------------------------------

struct Config {
  double window = 1.0;
  int reps = 3;
  bool quick = false;
  bool plan_only = false;
  std::vector<std::string> locks;  // empty = all
  std::vector<int> scenarios = {1, 2, 3, 4, 5, 6, 7};
  std::vector<int> threads;  // empty = per-scenario defaults
  std::string out = "bench-out";
  double min_time = 0.5;  // Google Benchmark, per repetition
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> v;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');)
    if (!x.empty()) v.push_back(x);
  return v;
}

std::vector<int> split_ints(const std::string& s) {
  std::vector<int> v;
  for (const auto& x : split(s)) v.push_back(std::atoi(x.c_str()));
  return v;
}

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "lockbench: %s\n"
               "usage: lockbench [--window S] [--reps N] [--quick] [--locks a,b]\n"
               "                 [--scenarios 1,2] [--threads 2,8] [--out DIR] [--min-time S]\n"
               "                 [--plan] [--list]\n",
               why);
  std::exit(2);
}

// ---- scenarios -----------------------------------------------------------------

enum class Kind { kMixed, kWriters, kReaders, kSleepWriters, kMostlyReaders };

struct Scenario {
  int id;
  Kind kind;
  bool think;  // calibrated work outside the lock between operations
  const char* key;
  const char* title;
  std::vector<int> threads, quick_threads;
};

const std::vector<Scenario>& scenarios() {
  // clang-format off: one scenario per row, not one field per line
  static const std::vector<Scenario> s = {
      {1, Kind::kMixed, false, "mixed", "mixed: equal numbers of readers and writers",
       {2, 4, 8, 16, 32, 64}, {2, 8}},
      {2, Kind::kWriters, false, "writers", "writers only", {1, 4, 16, 64}, {4}},
      {3, Kind::kReaders, false, "readers", "readers only", {1, 4, 16, 64}, {4}},
      {4, Kind::kSleepWriters, false, "sleep-writers",
       "writers only, 5 us sleeping critical section (handoff fairness)", {4, 16, 64}, {4}},
      {5, Kind::kMostlyReaders, false, "mostly-readers",
       "mostly readers: each thread does 10000 reads per write", {2, 4, 8, 16, 32, 64}, {4}},
      {7, Kind::kMixed, true, "mixed-think",
       "mixed with think time: equal readers and writers, calibrated work between operations",
       {8}, {8}},
  };
  // clang-format on
  return s;
}

// The think time: a dependent-register loop, not nanosleep (whose wake-up
// costs microseconds), calibrated once against steady_clock.
struct Think {
  std::uint64_t iters = 0;  // loop iterations per think
  double ns = 0;            // measured length of one think
};

inline void spin(std::uint64_t n) {
  for (std::uint64_t i = 0; i < n; ++i) asm volatile("" : "+r"(i));
}

// Best (shortest) of several timings: the least disturbed by preemption.
double best_ns_per_call(std::uint64_t iters, int calls) {
  double best = INFINITY;
  for (int k = 0; k < 5; ++k) {
    const auto t0 = Clock::now();
    for (int c = 0; c < calls; ++c) spin(iters);
    best = std::min(best, std::chrono::duration<double, std::nano>(Clock::now() - t0).count());
  }
  return best / calls;
}

// A long probe gives the loop's speed; one correction at the target length
// takes out the call overhead the probe does not see.
Think calibrate_think(double target_ns) {
  constexpr std::uint64_t kProbe = 1 << 20;
  constexpr int kCalls = 20000;
  Think t;
  t.iters =
      std::max<std::uint64_t>(1, std::llround(target_ns * kProbe / best_ns_per_call(kProbe, 1)));
  t.ns = best_ns_per_call(t.iters, kCalls);
  t.iters = std::max<std::uint64_t>(1, std::llround(t.iters * target_ns / t.ns));
  t.ns = best_ns_per_call(t.iters, kCalls);
  return t;
}

std::string title_of(const Scenario& sc, const Think& think) {
  if (!sc.think) return sc.title;
  char b[64];
  std::snprintf(b, sizeof b, " (%.0f ns measured)", think.ns);
  return sc.title + std::string(b);
}

// What every thread of one run does.
struct Workload {
  const Scenario* sc = nullptr;
  std::string roles;               // per thread: 'R', 'W' or 'M'
  std::uint64_t period = 0;        // 'M' threads: one write in `period` operations
  bool sleep_in_write = false;     // scenario 4
  std::uint64_t think_iters = 0;   // scenario 7
};

Workload workload_of(const Scenario& sc, int threads, const Think& think) {
  Workload w;
  w.sc = &sc;
  w.sleep_in_write = sc.kind == Kind::kSleepWriters;
  w.think_iters = sc.think ? think.iters : 0;
  w.period = kReadsPerWrite + 1;
  for (int t = 0; t < threads; ++t) switch (sc.kind) {
      case Kind::kMixed: w.roles += t % 2 ? 'W' : 'R'; break;
      case Kind::kWriters:
      case Kind::kSleepWriters: w.roles += 'W'; break;
      case Kind::kReaders: w.roles += 'R'; break;
      case Kind::kMostlyReaders: w.roles += 'M'; break;
    }
  return w;
}

// The ceiling's single thread: the scenario's loop with its read/write mix
// in one thread (scenarios 1 and 7 alternate one read, one write).
Workload ceiling_workload_of(const Scenario& sc, const Think& think) {
  Workload w = workload_of(sc, 1, think);
  if (sc.kind == Kind::kMixed) {
    w.roles = "M";
    w.period = 2;
  }
  return w;
}

// ---- per-thread measurement -------------------------------------------------------

// Acquisition waits of every kSampleEvery-th operation of a thread. The
// unsampled path costs one counter test; the clock reads live out of line.
// Past kSampleCap samples, reservoir sampling keeps a uniform sample of the
// whole window rather than its start. A wait still running when the window
// closes is recorded when it ends, so a starved thread's wait shows.
class Sampler {
 public:
  explicit Sampler(std::uint64_t seed) : rng_(seed * 0x9e3779b97f4a7c15ull | 1) {
    ns_.reserve(kSampleCap);
  }
  template <class Lock>
  void acquire(Lock&& lock) {
    if (__builtin_expect(++tick_ % kSampleEvery != 0, 1)) {
      lock();
      return;
    }
    timed(lock);
  }
  std::vector<std::uint64_t>& samples() { return ns_; }

 private:
  template <class Lock>
  [[gnu::noinline]] void timed(Lock& lock) {
    const auto t0 = Clock::now();
    lock();
    const auto t1 = Clock::now();
    keep(static_cast<std::uint64_t>(std::chrono::nanoseconds(t1 - t0).count()));
  }
  void keep(std::uint64_t ns) {
    ++seen_;
    if (ns_.size() < kSampleCap) {
      ns_.push_back(ns);
      return;
    }
    rng_ ^= rng_ << 13;  // xorshift64
    rng_ ^= rng_ >> 7;
    rng_ ^= rng_ << 17;
    if (const std::uint64_t j = rng_ % seen_; j < kSampleCap) ns_[j] = ns;
  }
  std::uint32_t tick_ = 0;
  std::uint64_t seen_ = 0, rng_;
  std::vector<std::uint64_t> ns_;
};

// CPU time (user + system) and context switches (voluntary + involuntary)
// of the calling thread so far.
struct Usage {
  double cpu_s = 0;
  std::uint64_t switches = 0;
  Usage operator-(const Usage& o) const { return {cpu_s - o.cpu_s, switches - o.switches}; }
};

Usage thread_usage() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  const auto sec = [](const timeval& tv) { return double(tv.tv_sec) + tv.tv_usec * 1e-6; };
  return {sec(u.ru_utime) + sec(u.ru_stime), static_cast<std::uint64_t>(u.ru_nvcsw + u.ru_nivcsw)};
}

struct ThreadResult {
  std::uint64_t reads = 0, writes = 0, violations = 0;
  Usage usage;
  std::vector<std::uint64_t> waits;
};

// ---- results -------------------------------------------------------------------

struct Spread {
  std::uint64_t min = 0, max = 0, sum = 0;
  int n = 0;
  double mean() const { return n ? double(sum) / n : 0; }
  // 0 when the whole group was starved (0/0): the worst fairness there is.
  double min_max() const { return !n ? NAN : max ? double(min) / double(max) : 0.0; }
};

struct Waits {
  std::size_t samples = 0;
  double p50 = NAN, p99 = NAN, p999 = NAN;  // ns, nearest rank
};

Waits percentiles(std::vector<std::uint64_t> v) {
  Waits w;
  w.samples = v.size();
  if (v.empty()) return w;
  std::sort(v.begin(), v.end());
  const auto at = [&](double p) {
    const auto rank = static_cast<std::size_t>(std::ceil(p * double(v.size())));
    return double(v[std::clamp<std::size_t>(rank, 1, v.size()) - 1]);
  };
  w.p50 = at(0.50);
  w.p99 = at(0.99);
  w.p999 = at(0.999);
  return w;
}

// The distinct characters of s, in order of first appearance.
std::string distinct(const std::string& s) {
  std::string d;
  for (char c : s)
    if (d.find(c) == std::string::npos) d += c;
  return d;
}

struct RunResult {
  std::string lock;
  int scenario = 0, threads = 0;
  int rep = 0, order = 0;  // order: the lock's position in its rep
  bool exclusive_only = false;
  bool skipped = false;  // exclusive-only lock in a reader-only scenario
  double window = 0, elapsed = 0;
  std::string roles;  // per thread
  std::vector<std::uint64_t> reads, writes;
  std::vector<double> cpu_s;  // per thread: CPU time in the window
  std::uint64_t violations = 0;
  Usage usage;                  // summed over the worker threads
  std::map<char, Waits> waits;  // per role
  rwsem::LockEventSnapshot events;

  std::uint64_t ops(std::size_t t) const { return reads[t] + writes[t]; }
  std::uint64_t total() const {
    std::uint64_t s = 0;
    for (std::size_t t = 0; t < roles.size(); ++t) s += ops(t);
    return s;
  }
  std::string role_set() const { return distinct(roles); }
  Spread spread(char role) const {
    Spread s;
    for (std::size_t t = 0; t < roles.size(); ++t) {
      if (roles[t] != role) continue;
      const std::uint64_t x = ops(t);
      s.min = s.n ? std::min(s.min, x) : x;
      s.max = std::max(s.max, x);
      s.sum += x;
      ++s.n;
    }
    return s;
  }
  // Min/Max over the role's threads of the CPU time each got in the window.
  // Beside the ops Min/Max it tells a thread the lock kept waiting (ops low,
  // CPU time not) from one the scheduler ran less (both low).
  double cpu_min_max(char role) const {
    double lo = INFINITY, hi = 0;
    for (std::size_t t = 0; t < roles.size(); ++t) {
      if (roles[t] != role) continue;
      lo = std::min(lo, cpu_s[t]);
      hi = std::max(hi, cpu_s[t]);
    }
    return hi > 0 ? lo / hi : NAN;
  }
  double kops(std::uint64_t ops) const { return elapsed > 0 ? ops / elapsed / 1000.0 : 0; }
  double rate_kops() const { return kops(total()); }
  double read_kops() const { return kops(sum(reads)); }
  double write_kops() const { return kops(sum(writes)); }
  double balanced_kops() const {
    double least = INFINITY;
    for (char c : role_set()) least = std::min(least, spread(c).mean());
    return roles.empty() || elapsed <= 0 ? 0 : threads * least / elapsed / 1000.0;
  }
  bool gate() const {
    for (char c : role_set())
      if (!(spread(c).min_max() >= kGate)) return false;
    return true;
  }
  // Jain's index (sum x)^2 / (n sum x^2) over every thread's ops: 1 when all
  // threads did the same, 1/n when one thread did everything.
  double jain() const {
    double s = 0, s2 = 0;
    for (std::size_t t = 0; t < roles.size(); ++t) {
      s += double(ops(t));
      s2 += double(ops(t)) * double(ops(t));
    }
    return s2 > 0 ? s * s / (double(roles.size()) * s2) : 0;
  }
  static std::uint64_t sum(const std::vector<std::uint64_t>& v) {
    std::uint64_t s = 0;
    for (auto x : v) s += x;
    return s;
  }
};

struct LatencyResult {
  std::string lock;
  double read_ns = NAN, write_ns = NAN;          // median over repetitions
  double read_min_ns = NAN, write_min_ns = NAN;  // best repetition
};

// ---- the timed window ------------------------------------------------------------

struct alignas(kLine) Protected {
  long v[4] = {};
};

inline void write_cs(Protected& d) {
  for (long& x : d.v) ++x;
}

inline bool read_cs(const Protected& d) {
  const long a = d.v[0];
  return d.v[1] == a && d.v[2] == a && d.v[3] == a;
}

struct alignas(kLine) Flags {
  std::atomic<int> ready{0};
  alignas(kLine) std::atomic<bool> go{false};
  alignas(kLine) std::atomic<bool> stop{false};
};

void sleep_5us() {
  timespec ts{0, 5000};
  nanosleep(&ts, nullptr);
}

template <class A>
struct alignas(kLine) Holder {
  A lock;
};

// One thread's loop. An operation counts if it completed inside the window:
// the stop flag is read after the unlock, once per operation as a loop test
// would be. A thread starved for the whole window thus reports 0, not the
// one acquisition it gets when everybody else has stopped.
template <class A>
class Worker {
 public:
  Worker(A& lk, Protected& d, const Flags& f, const Workload& w, int t)
      : lk_(lk),
        d_(d),
        f_(f),
        w_(w),
        role_(w.roles[t]),
        sampler_(t + 1),
        // 'M' threads start at different points of the write period.
        until_write_(1 + std::uint64_t(t) * w.period / w.roles.size()) {}

  void run(ThreadResult& out) {
    const Usage u0 = thread_usage();
    switch (role_) {
      case 'W': loop([this] { return write(); }); break;
      case 'R': loop([this] { return read(); }); break;
      default:
        loop([this] { return --until_write_ ? read() : (until_write_ = w_.period, write()); });
    }
    out.usage = thread_usage() - u0;
    out.reads = reads_;
    out.writes = writes_;
    out.violations = violations_;
    out.waits = std::move(sampler_.samples());
  }

 private:
  template <class Op>
  void loop(Op op) {
    const std::uint64_t think = w_.think_iters;
    while (op())
      if (think) spin(think);
  }
  bool write() {
    sampler_.acquire([this] { lk_.lock(ctx_); });
    write_cs(d_);
    if (w_.sleep_in_write) sleep_5us();
    lk_.unlock(ctx_);
    if (stopped()) return false;
    ++writes_;
    return true;
  }
  bool read() {
    sampler_.acquire([this] { lk_.lock_shared(ctx_); });
    violations_ += !read_cs(d_);
    lk_.unlock_shared(ctx_);
    if (stopped()) return false;
    ++reads_;
    return true;
  }
  bool stopped() const { return f_.stop.load(std::memory_order_relaxed); }

  A& lk_;
  typename A::Ctx ctx_;
  Protected& d_;
  const Flags& f_;
  const Workload& w_;
  const char role_;
  Sampler sampler_;
  std::uint64_t until_write_;
  std::uint64_t reads_ = 0, writes_ = 0, violations_ = 0;
};

// Per role, the wait samples of its threads merged.
std::map<char, Waits> waits_by_role(const std::string& roles, std::vector<ThreadResult>& per) {
  std::map<char, std::vector<std::uint64_t>> merged;
  for (std::size_t t = 0; t < per.size(); ++t) {
    auto& m = merged[roles[t]];
    m.insert(m.end(), per[t].waits.begin(), per[t].waits.end());
    per[t].waits = {};
  }
  std::map<char, Waits> w;
  for (auto& [role, v] : merged) w[role] = percentiles(std::move(v));
  return w;
}

template <class A>
RunResult run_window(const char* name, const Workload& w, double window) {
  RunResult r;
  r.lock = name;
  r.scenario = w.sc->id;
  r.threads = static_cast<int>(w.roles.size());
  r.exclusive_only = A::kExclusiveOnly;
  r.window = window;
  r.roles = w.roles;
  if (A::kExclusiveOnly && w.sc->kind == Kind::kReaders) {
    r.skipped = true;
    return r;
  }

  auto holder = std::make_unique<Holder<A>>();
  auto data = std::make_unique<Protected>();
  auto flags = std::make_unique<Flags>();
  Flags& f = *flags;
  std::vector<ThreadResult> per(r.threads);

  const auto body = [&](int t) {
    if (w.sleep_in_write) prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
    Worker<A> worker(holder->lock, *data, f, w, t);
    f.ready.fetch_add(1);
    while (!f.go.load(std::memory_order_acquire)) sched_yield();
    worker.run(per[t]);
  };

  std::vector<std::thread> ts;
  ts.reserve(r.threads);
  for (int t = 0; t < r.threads; ++t) ts.emplace_back(body, t);
  while (f.ready.load() < r.threads) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const auto ev0 = rwsem::lock_events_snapshot();
  const auto t0 = Clock::now();
  f.go.store(true, std::memory_order_release);
  std::this_thread::sleep_for(std::chrono::duration<double>(window));
  f.stop.store(true, std::memory_order_relaxed);
  r.elapsed = seconds_since(t0);
  for (auto& th : ts) th.join();
  r.events = rwsem::lock_events_snapshot() - ev0;
  for (const auto& p : per) {
    r.reads.push_back(p.reads);
    r.writes.push_back(p.writes);
    r.cpu_s.push_back(p.usage.cpu_s);
    r.violations += p.violations;
    r.usage.cpu_s += p.usage.cpu_s;
    r.usage.switches += p.usage.switches;
  }
  r.waits = waits_by_role(r.roles, per);
  return r;
}

// ---- floors: what a lock cannot beat --------------------------------------------

// One atomic word on its own cache line with the orderings a lock needs.
// Readers: fetch_add (acquire) / fetch_sub (release). Writers: compare-exchange
// 0 -> 1 (acquire) / fetch_sub (release): the same-class floor, because a
// sleeping lock's unlock must be an RMW to see the WAITERS bit a sleeper set.
// Readers ignore the writer bit: only ever used by one thread (the ceiling and
// scenario 6).
struct FloorLock {
  struct Ctx {};
  static constexpr bool kExclusiveOnly = false;
  void lock(Ctx&) {
    long expected = 0;
    while (!word.compare_exchange_strong(expected, 1, std::memory_order_acquire,
                                         std::memory_order_relaxed))
      expected = 0;
  }
  void unlock(Ctx&) { word.fetch_sub(1, std::memory_order_release); }
  void lock_shared(Ctx&) { word.fetch_add(2, std::memory_order_acquire); }
  void unlock_shared(Ctx&) { word.fetch_sub(2, std::memory_order_release); }
  std::atomic<long> word{0};
};

// The bare pair: the writer releases with a plain store, which only a lock
// whose waiters never sleep can afford.
struct BarePairLock : FloorLock {
  void unlock(Ctx&) { word.store(0, std::memory_order_release); }
};

// ---- scenario 6: uncontended latency with Google Benchmark ----------------------

template <class A>
void bm_read(benchmark::State& state) {
  auto h = std::make_unique<Holder<A>>();
  typename A::Ctx ctx;
  for (auto _ : state) {
    h->lock.lock_shared(ctx);
    h->lock.unlock_shared(ctx);
  }
}

template <class A>
void bm_write(benchmark::State& state) {
  auto h = std::make_unique<Holder<A>>();
  typename A::Ctx ctx;
  for (auto _ : state) {
    h->lock.lock(ctx);
    h->lock.unlock(ctx);
  }
}

constexpr const char* kBareFloor = "atomic-floor";    // read floor, bare write pair
constexpr const char* kClassFloor = "atomic-floor-rmw";  // same-class write floor

// Collects every repetition (CPU ns per iteration) by benchmark name and
// passes the runs on to the console reporter (which prints to stderr). CPU
// time, not wall time: the loop is single-threaded and never blocks, so the
// two agree on an idle machine, but on a shared one wall time also counts
// the periods the thread was preempted (seen: 26 ns wall vs 9.7 ns CPU).
class Collector : public benchmark::ConsoleReporter {
 public:
  Collector() : ConsoleReporter(OO_None) {}  // no colour codes in logs
  std::map<std::string, std::vector<double>> ns;
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& run : runs)
      if (run.run_type == Run::RT_Iteration && !run.error_occurred && run.iterations > 0)
        ns[run.run_name.function_name].push_back(run.cpu_accumulated_time * 1e9 /
                                                 static_cast<double>(run.iterations));
    ConsoleReporter::ReportRuns(runs);
  }
};

double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double minimum(const std::vector<double>& v) {
  return v.empty() ? NAN : *std::min_element(v.begin(), v.end());
}

// ---- the lock table, instantiated ---------------------------------------------

struct Entry {
  std::string name;
  const char* description;
  bool exclusive_only;
  RunResult (*run)(const char*, const Workload&, double);
  void (*bm_read)(benchmark::State&);
  void (*bm_write)(benchmark::State&);
};

std::vector<Entry> all_entries() {
  const std::string suffix = rwsem::kLockEventsEnabled ? "+events" : "";
  std::vector<Entry> v;
#define RWSEM_BENCH_ENTRY(A, name, desc)                                                         \
  v.push_back({std::string(name) + suffix, desc, A::kExclusiveOnly, &run_window<A>, &bm_read<A>, \
               &bm_write<A>});
  RWSEM_BENCH_LOCKS(RWSEM_BENCH_ENTRY)
#undef RWSEM_BENCH_ENTRY
  return v;
}

// Scenario 6 with every floor and lock; median and best repetition each.
std::vector<LatencyResult> run_latency(const std::vector<Entry>& locks, const Config& cfg,
                                       const char* argv0) {
  benchmark::RegisterBenchmark((std::string(kBareFloor) + "/read").c_str(), bm_read<BarePairLock>);
  benchmark::RegisterBenchmark((std::string(kBareFloor) + "/write").c_str(),
                               bm_write<BarePairLock>);
  benchmark::RegisterBenchmark((std::string(kClassFloor) + "/write").c_str(), bm_write<FloorLock>);
  for (const auto& l : locks) {
    if (!l.exclusive_only) benchmark::RegisterBenchmark((l.name + "/read").c_str(), l.bm_read);
    benchmark::RegisterBenchmark((l.name + "/write").c_str(), l.bm_write);
  }
  std::string mt = "--benchmark_min_time=" + std::to_string(cfg.min_time);
  std::string rp = "--benchmark_repetitions=" + std::to_string(cfg.reps);
  // Repetitions of different locks interleaved, as the timed reps rotate.
  std::string il = "--benchmark_enable_random_interleaving=true";
  std::string color = "--benchmark_color=false";
  std::string a0 = argv0;
  char* bargv[] = {a0.data(), mt.data(), rp.data(), il.data(), color.data(), nullptr};
  int bargc = 5;
  benchmark::Initialize(&bargc, bargv);
  Collector col;
  col.SetOutputStream(&std::cerr);
  col.SetErrorStream(&std::cerr);
  benchmark::RunSpecifiedBenchmarks(&col);
  benchmark::Shutdown();
  const auto get = [&](const std::string& name, bool best) {
    auto it = col.ns.find(name);
    if (it == col.ns.end()) return double(NAN);
    return best ? minimum(it->second) : median(it->second);
  };
  std::vector<std::string> names = {kBareFloor, kClassFloor};
  for (const auto& l : locks) names.push_back(l.name);
  std::vector<LatencyResult> lat;
  for (const auto& n : names)
    lat.push_back({n, get(n + "/read", false), get(n + "/write", false), get(n + "/read", true),
                   get(n + "/write", true)});
  return lat;
}

// ---- reps of one cell, summarised ---------------------------------------------------

struct Summary {
  int scenario = 0, threads = 0;
  std::string lock;
  bool skipped = false;
  int reps = 0;
  const RunResult* median = nullptr;  // the rep with the median B
  double median_b = NAN, min_b = NAN, max_b = NAN;
  double ceiling_ratio = NAN;
  bool starves() const { return median && !median->gate(); }
};

Summary summarize(const std::vector<RunResult>& runs, int scenario, const std::string& lock,
                  int threads, double ceiling_kops) {
  Summary s;
  s.scenario = scenario;
  s.lock = lock;
  s.threads = threads;
  std::vector<const RunResult*> reps;
  for (const auto& r : runs)
    if (r.scenario == scenario && r.lock == lock && r.threads == threads) {
      s.skipped |= r.skipped;
      if (!r.skipped) reps.push_back(&r);
    }
  s.reps = static_cast<int>(reps.size());
  if (reps.empty()) return s;
  std::sort(reps.begin(), reps.end(), [](const RunResult* a, const RunResult* b) {
    return a->balanced_kops() < b->balanced_kops();
  });
  s.median = reps[(reps.size() - 1) / 2];
  s.median_b = s.median->balanced_kops();
  s.min_b = reps.front()->balanced_kops();
  s.max_b = reps.back()->balanced_kops();
  s.ceiling_ratio = ceiling_kops > 0 ? s.median_b / ceiling_kops : NAN;
  return s;
}

// Machine load measured before one (scenario, threads) cell.
struct Cell {
  int scenario = 0, threads = 0;
  double busy = NAN;
  bool suspect() const { return busy > kBusyThreshold; }
};

struct Results {
  std::vector<RunResult> runs;
  std::vector<Cell> cells;
  std::map<int, RunResult> ceilings;  // by scenario
  std::vector<Summary> summaries;
  std::vector<LatencyResult> latency;
  int suspect_cells() const {
    return static_cast<int>(
        std::count_if(cells.begin(), cells.end(), [](const Cell& c) { return c.suspect(); }));
  }
  const Summary* summary(int scenario, const std::string& lock, int threads) const {
    for (const auto& s : summaries)
      if (s.scenario == scenario && s.lock == lock && s.threads == threads) return &s;
    return nullptr;
  }
};

// ---- text output ----------------------------------------------------------------

// 1234567 -> "1,234,567", like the seed tables.
std::string commas(std::uint64_t x) {
  std::string s = std::to_string(x);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(i, ",");
  return s;
}

// "-" for a rate or time that was not measured (NaN): llround of NaN is
// unspecified, and printed as 9,223,372,036,854,775,808 here.
std::string kops_str(double k) {
  return std::isfinite(k) ? commas(static_cast<std::uint64_t>(std::llround(k))) : "-";
}

std::string fixed(double x, int prec) {
  if (std::isnan(x)) return "-";
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", prec, x);
  return b;
}

std::string percent(double f) { return std::isnan(f) ? "?%" : fixed(100 * f, 0) + "%"; }

std::string mmm(const Spread& s) {
  return commas(s.min) + "/" + commas(static_cast<std::uint64_t>(std::llround(s.mean()))) + "/" +
         commas(s.max);
}

std::string pad(const std::string& s, std::size_t w, bool right = true) {
  if (s.size() >= w) return s;
  return right ? std::string(w - s.size(), ' ') + s : s + std::string(w - s.size(), ' ');
}

const char* role_name(char role, bool plural) {
  switch (role) {
    case 'R': return plural ? "readers" : "reader";
    case 'W': return plural ? "writers" : "writer";
    default: return plural ? "threads" : "thread";
  }
}

// One line per run: B and the gate, then what stands beside B.
std::string run_line(const RunResult& r) {
  std::ostringstream os;
  os << "B " << kops_str(r.balanced_kops()) << " kops/s (total " << kops_str(r.rate_kops())
     << ": reads " << kops_str(r.read_kops()) << " + writes " << kops_str(r.write_kops())
     << "), Min/Max";
  for (char c : r.role_set()) os << " " << c << " " << fixed(r.spread(c).min_max(), 3);
  os << (r.gate() ? "" : " STARVES") << ", Jain " << fixed(r.jain(), 3) << ", CPU "
     << fixed(r.usage.cpu_s, 2) << " s, " << commas(r.usage.switches) << " context switches";
  if (r.violations) os << "  TORN READS: " << r.violations;
  return os.str();
}

std::string role_line(const RunResult& r, char c) {
  const Spread s = r.spread(c);
  const Waits& w = r.waits.at(c);
  std::ostringstream os;
  os << pad(std::to_string(s.n), 3) << " " << role_name(c, true)
     << ", Iterations Min/Mean/Max = " << mmm(s);
  if (w.samples)
    os << ", wait p50/p99/p99.9 = " << kops_str(w.p50) << "/" << kops_str(w.p99) << "/"
       << kops_str(w.p999) << " ns (" << commas(w.samples) << " samples)";
  else os << ", wait: no acquisition sampled";
  os << ", CPU time Min/Max " << fixed(r.cpu_min_max(c), 2);
  return os.str();
}

class Table {
 public:
  Table(std::ostream& os, const std::vector<Entry>& locks, std::size_t min_width)
      : os_(os), locks_(locks), w_(min_width) {
    for (const auto& l : locks) w_ = std::max(w_, l.name.size() + 2);
  }
  void print(const std::string& caption, const std::vector<int>& counts,
             const std::function<std::string(const Entry&, int)>& cell) {
    os_ << "   " << caption << "\n   # of Threads";
    for (const auto& l : locks_) os_ << pad(l.name, w_);
    os_ << "\n   ------------";
    for (const auto& l : locks_) os_ << pad(std::string(l.name.size(), '-'), w_);
    os_ << "\n";
    for (int n : counts) {
      os_ << pad(std::to_string(n), 15);
      for (const auto& l : locks_) os_ << pad(cell(l, n), w_);
      os_ << "\n";
    }
    os_ << "\n";
  }

 private:
  std::ostream& os_;
  const std::vector<Entry>& locks_;
  std::size_t w_;
};

void print_scenario(std::ostream& os, const Scenario& sc, const std::string& title,
                    const std::vector<Entry>& locks, const Results& res,
                    const std::vector<int>& counts, const Config& cfg) {
  os << "\n== Scenario " << sc.id << ": " << title << " ==\n";
  os << "   window " << fixed(cfg.window, 2) << " s per run, " << cfg.reps
     << " reps per cell, lock order rotated between reps\n"
     << "   B = n x min over roles (ops per thread of that role) / T\n"
     << "   gate: every role's per-thread ops Min/Max >= " << kGate << " in a rep;\n"
     << "   \"starves\": " << kMedianRule << "\n";
  const auto ceil_it = res.ceilings.find(sc.id);
  const double ceiling = ceil_it == res.ceilings.end() ? NAN : ceil_it->second.rate_kops();
  os << "   physical ceiling (1 thread, floor lock, same loop): " << kops_str(ceiling)
     << " kops/s\n   machine busy before each cell:";
  for (const auto& c : res.cells)
    if (c.scenario == sc.id)
      os << " " << c.threads << "t " << percent(c.busy) << (c.suspect() ? " (SUSPECT)" : "");
  os << "\n\n";

  const auto cell = [&](const std::function<std::string(const Summary&)>& f) {
    return [&res, &sc, f](const Entry& l, int n) -> std::string {
      const Summary* s = res.summary(sc.id, l.name, n);
      return !s ? "" : s->skipped ? "excl" : !s->median ? "-" : f(*s);
    };
  };
  const auto gated = [](const std::function<std::string(const Summary&)>& f) {
    return [f](const Summary& s) { return s.starves() ? std::string("starves") : f(s); };
  };
  Table t(os, locks, 14);
  t.print("Balanced rate B (kops/s), median of reps", counts,
          cell(gated([](const Summary& s) { return kops_str(s.median_b); })));
  Table(os, locks, 20).print("B over reps, min..max (kops/s)", counts, cell([](const Summary& s) {
    return std::to_string(std::llround(s.min_b)) + ".." + std::to_string(std::llround(s.max_b));
  }));
  t.print("B / physical ceiling (median B)", counts,
          cell(gated([](const Summary& s) { return fixed(s.ceiling_ratio, 3); })));
  for (char c : distinct(workload_of(sc, 2, Think{}).roles))
    t.print(std::string("Fairness: ") + role_name(c, false) + " Iterations Min/Max (median rep)",
            counts,
            cell([c](const Summary& s) { return fixed(s.median->spread(c).min_max(), 3); }));
  t.print("Total locking rate (kops/s, median rep)", counts,
          cell([](const Summary& s) { return kops_str(s.median->rate_kops()); }));

  os << "   Median rep of each cell:\n";
  for (const auto& l : locks)
    for (int n : counts) {
      const Summary* s = res.summary(sc.id, l.name, n);
      if (!s) continue;
      os << "   " << l.name << ", " << n << " threads";
      if (s->skipped) {
        os << ": skipped (exclusive-only lock)\n";
        continue;
      }
      if (!s->median) {
        os << ": no runs\n";
        continue;
      }
      const RunResult& r = *s->median;
      os << ", rep " << r.rep + 1 << " of " << s->reps << ", " << fixed(r.elapsed, 2) << " s"
         << (r.exclusive_only ? " (exclusive-only: readers take the writer path)" : "") << ":\n"
         << "     " << run_line(r) << "\n";
      for (char c : r.role_set()) os << "     " << role_line(r, c) << "\n";
      if (sc.kind == Kind::kMostlyReaders)
        os << "     reads " << commas(RunResult::sum(r.reads)) << ", writes "
           << commas(RunResult::sum(r.writes)) << "\n";
      if (rwsem::kLockEventsEnabled) os << "     events: " << r.events << "\n";
    }
}

void print_latency(std::ostream& os, const std::vector<LatencyResult>& lat, const Config& cfg) {
  os << "\n== Scenario 6: uncontended lock+unlock latency (Google Benchmark) ==\n";
  os << "   one thread; CPU ns per lock+unlock, median of " << cfg.reps
     << " repetitions of >= " << fixed(cfg.min_time, 2) << " s (interleaved)\n"
     << "   floors, one atomic word on its cache line: read = fetch_add acquire / fetch_sub\n"
     << "   release; write, same class = CAS acquire / fetch_sub release (" << kClassFloor
     << ": a sleeping\n   lock's unlock must be an RMW to see WAITERS); write, bare = CAS acquire"
     << " / store release\n   (" << kBareFloor << ")\n\n";
  const LatencyResult *bare = nullptr, *cls = nullptr;
  for (const auto& l : lat) {
    if (l.lock == kBareFloor) bare = &l;
    if (l.lock == kClassFloor) cls = &l;
  }
  const auto over = [](double x, const LatencyResult* floor, double LatencyResult::* f) {
    return floor ? fixed(x / floor->*f, 2) : "-";
  };
  os << "   " << pad("lock", 21, false) << pad("read ns", 10) << pad("x floor", 10)
     << pad("write ns", 10) << pad("x class", 10) << pad("x bare", 10) << "\n";
  os << "   " << pad("----", 21, false) << pad("-------", 10) << pad("-------", 10)
     << pad("--------", 10) << pad("-------", 10) << pad("------", 10) << "\n";
  for (const auto& l : lat) {
    const bool no_read = std::isnan(l.read_ns);
    const std::string none = l.lock == kClassFloor ? "-" : "excl";
    os << "   " << pad(l.lock, 21, false) << pad(no_read ? none : fixed(l.read_ns, 2), 10)
       << pad(no_read ? none : over(l.read_ns, bare, &LatencyResult::read_ns), 10)
       << pad(fixed(l.write_ns, 2), 10) << pad(over(l.write_ns, cls, &LatencyResult::write_ns), 10)
       << pad(over(l.write_ns, bare, &LatencyResult::write_ns), 10) << "\n";
  }
}

// ---- JSON -------------------------------------------------------------------------
// nlohmann/json (Debian's nlohmann-json3-dev); ordered_json keeps each record's
// fields in the order written here.

using Json = nlohmann::ordered_json;

// A measured number; NaN and infinities (a ratio without its floor) are null.
Json jnum(double x) { return std::isfinite(x) ? Json(x) : Json(nullptr); }

template <class T, class F>
Json jarr(const std::vector<T>& v, F&& item) {
  Json a = Json::array();
  for (const T& x : v) a.push_back(item(x));
  return a;
}

Json json_machine(const Machine& m) {
  return {{"cpu", m.cpu},       {"cores", std::uint64_t(m.cores)},
          {"kernel", m.kernel}, {"compiler", m.compiler},
          {"date", m.date},     {"line", m.line()}};
}

Json json_config(const Config& cfg, const Think& think) {
  return {{"window_s", jnum(cfg.window)},
          {"reps", std::uint64_t(cfg.reps)},
          {"quick", cfg.quick},
          {"lock_events", rwsem::kLockEventsEnabled},
          {"gbench_min_time_s", jnum(cfg.min_time)},
          {"gate_min_max", jnum(kGate)},
          {"median_rule", kMedianRule},
          {"busy_threshold", jnum(kBusyThreshold)},
          {"load_probe_s", jnum(kLoadProbe)},
          {"wait_sample_every", std::uint64_t(kSampleEvery)},
          {"wait_sample_cap", std::uint64_t(kSampleCap)},
          {"think_ns_target", jnum(kThinkNs)},
          {"think_ns", jnum(think.ns)},
          {"think_iters", std::uint64_t(think.iters)}};
}

Json json_lock(const Entry& l) {
  return {{"name", l.name}, {"description", l.description}, {"exclusive_only", l.exclusive_only}};
}

Json json_scenario(int id, const std::string& key, const std::string& title) {
  return {{"id", std::uint64_t(id)}, {"key", key}, {"title", title}};
}

Json json_spread(const Spread& s) {
  return {{"n", std::uint64_t(s.n)},     {"min", std::uint64_t(s.min)},
          {"mean", jnum(s.mean())},      {"max", std::uint64_t(s.max)},
          {"sum", std::uint64_t(s.sum)}, {"min_max", jnum(s.min_max())}};
}

Json json_waits(const Waits& w) {
  return {{"samples", std::uint64_t(w.samples)},
          {"p50", jnum(w.p50)},
          {"p99", jnum(w.p99)},
          {"p999", jnum(w.p999)}};
}

Json json_events(const rwsem::LockEventSnapshot& ev) {
  Json o = Json::object();
  for (int e = 0; e < static_cast<int>(rwsem::LockEvent::kCount); ++e)
    o[rwsem::lock_event_name(static_cast<rwsem::LockEvent>(e))] = std::uint64_t(ev.counts[e]);
  return o;
}

// Role-keyed object of f(role) for every role of the run.
template <class F>
Json json_by_role(const RunResult& r, F&& f) {
  Json o = Json::object();
  for (char c : r.role_set()) o[std::string(1, c)] = f(c);
  return o;
}

Json json_run(const RunResult& r) {
  Json o = {{"scenario", std::uint64_t(r.scenario)}, {"lock", r.lock},
            {"threads", std::uint64_t(r.threads)},   {"rep", std::uint64_t(r.rep)},
            {"order", std::uint64_t(r.order)},       {"skipped", r.skipped},
            {"exclusive_only", r.exclusive_only},    {"window_s", jnum(r.window)}};
  if (r.skipped) return o;
  o["elapsed_s"] = jnum(r.elapsed);
  o["total_ops"] = std::uint64_t(r.total());
  o["balanced_kops"] = jnum(r.balanced_kops());
  o["gate"] = r.gate();
  o["rate_kops"] = jnum(r.rate_kops());
  o["read_kops"] = jnum(r.read_kops());
  o["write_kops"] = jnum(r.write_kops());
  o["jain"] = jnum(r.jain());
  o["cpu_s"] = jnum(r.usage.cpu_s);
  o["ctx_switches"] = std::uint64_t(r.usage.switches);
  o["violations"] = std::uint64_t(r.violations);
  o["by_role"] = json_by_role(r, [&](char c) {
    Json j = json_spread(r.spread(c));
    j["cpu_min_max"] = jnum(r.cpu_min_max(c));
    return j;
  });
  o["wait_ns"] = json_by_role(r, [&](char c) { return json_waits(r.waits.at(c)); });
  o["roles"] = r.roles;
  o["reads"] = r.reads;
  o["writes"] = r.writes;
  o["thread_cpu_s"] = r.cpu_s;
  if (rwsem::kLockEventsEnabled) o["events"] = json_events(r.events);
  return o;
}

Json json_summary(const Summary& s) {
  Json o = {{"scenario", std::uint64_t(s.scenario)},
            {"lock", s.lock},
            {"threads", std::uint64_t(s.threads)},
            {"skipped", s.skipped},
            {"reps", std::uint64_t(s.reps)}};
  if (!s.median) return o;
  o["median_balanced_kops"] = jnum(s.median_b);
  o["min_balanced_kops"] = jnum(s.min_b);
  o["max_balanced_kops"] = jnum(s.max_b);
  o["median_rep"] = std::uint64_t(s.median->rep);
  o["starves"] = s.starves();
  o["ceiling_ratio"] = jnum(s.ceiling_ratio);
  o["median_min_max"] =
      json_by_role(*s.median, [&](char c) { return jnum(s.median->spread(c).min_max()); });
  return o;
}

Json json_cell(const Cell& c) {
  return {{"scenario", std::uint64_t(c.scenario)},
          {"threads", std::uint64_t(c.threads)},
          {"busy", jnum(c.busy)},
          {"suspect", c.suspect()}};
}

Json json_ceiling(const RunResult& r) {
  return {{"scenario", std::uint64_t(r.scenario)},
          {"roles", r.roles},
          {"elapsed_s", jnum(r.elapsed)},
          {"reads", std::uint64_t(RunResult::sum(r.reads))},
          {"writes", std::uint64_t(RunResult::sum(r.writes))},
          {"rate_kops", jnum(r.rate_kops())}};
}

Json json_latency(const LatencyResult& l, const LatencyResult* bare, const LatencyResult* cls) {
  const auto over = [](double x, const LatencyResult* floor, double LatencyResult::* f) {
    return floor ? x / floor->*f : NAN;
  };
  return {{"lock", l.lock},
          {"read_ns", jnum(l.read_ns)},
          {"write_ns", jnum(l.write_ns)},
          {"read_min_ns", jnum(l.read_min_ns)},
          {"write_min_ns", jnum(l.write_min_ns)},
          {"read_ratio", jnum(over(l.read_ns, bare, &LatencyResult::read_ns))},
          {"write_ratio", jnum(over(l.write_ns, bare, &LatencyResult::write_ns))},
          {"write_class_ratio", jnum(over(l.write_ns, cls, &LatencyResult::write_ns))}};
}

void write_json(const std::string& path, const Machine& m, const Config& cfg, const Think& think,
                const std::vector<Entry>& locks, const std::vector<const Scenario*>& timed,
                const Results& res) {
  Json scen = Json::array();
  for (const Scenario* sc : timed)
    scen.push_back(json_scenario(sc->id, sc->key, title_of(*sc, think)));
  if (std::find(cfg.scenarios.begin(), cfg.scenarios.end(), 6) != cfg.scenarios.end())
    scen.push_back(json_scenario(6, "latency", "uncontended lock+unlock latency"));
  Json ceilings = Json::array();
  for (const auto& [id, r] : res.ceilings) ceilings.push_back(json_ceiling(r));
  const LatencyResult *bare = nullptr, *cls = nullptr;
  for (const auto& l : res.latency) {
    if (l.lock == kBareFloor) bare = &l;
    if (l.lock == kClassFloor) cls = &l;
  }
  const Json out = {
      {"machine", json_machine(m)},
      {"config", json_config(cfg, think)},
      {"locks", jarr(locks, json_lock)},
      {"scenarios", scen},
      {"cells", jarr(res.cells, json_cell)},
      {"suspect_cells", res.suspect_cells()},
      {"ceilings", ceilings},
      {"summaries", jarr(res.summaries, json_summary)},
      {"runs", jarr(res.runs, json_run)},
      {"latency",
       jarr(res.latency, [&](const LatencyResult& l) { return json_latency(l, bare, cls); })},
  };
  // Indented as bench/report.py rewrites it; invalid UTF-8 in a machine
  // string (uname, /proc/cpuinfo) is replaced, not a reason to lose the run.
  std::ofstream(path) << out.dump(1, ' ', false, Json::error_handler_t::replace) << "\n";
}

// ---- the plan, with an honest ETA --------------------------------------------------

std::string eta(double s) {
  const long t = std::lround(s);
  char b[32];
  std::snprintf(b, sizeof b, "%ldm%02lds", t / 60, t % 60);
  return b;
}

struct Step {
  enum Type { kLoad, kCeiling, kRun, kLatency } type;
  const Scenario* sc = nullptr;
  int threads = 0, rep = 0, order = 0;
  const Entry* lock = nullptr;
  double cost = 0;  // planned seconds
};

// Planned seconds of one timed run: the window plus starting, draining and
// joining the threads (about 20 ms + 1 ms per thread here).
double run_cost(const Config& cfg, int threads) { return cfg.window + 0.02 + 0.001 * threads; }

std::vector<Step> make_plan(const Config& cfg, const std::vector<const Scenario*>& timed,
                            const std::vector<Entry>& locks,
                            const std::function<std::vector<int>(const Scenario&)>& counts) {
  std::vector<Step> plan;
  const int L = static_cast<int>(locks.size());
  for (const Scenario* sc : timed) {
    plan.push_back({Step::kCeiling, sc, 1, 0, 0, nullptr, run_cost(cfg, 1)});
    for (int n : counts(*sc)) {
      plan.push_back({Step::kLoad, sc, n, 0, 0, nullptr, kLoadProbe + 0.01});
      for (int rep = 0; rep < cfg.reps; ++rep)
        for (int k = 0; k < L; ++k) {
          const Entry& l = locks[(rep + k) % L];
          const bool skip = l.exclusive_only && sc->kind == Kind::kReaders;
          plan.push_back({Step::kRun, sc, n, rep, k, &l, skip ? 0 : run_cost(cfg, n)});
        }
    }
  }
  if (std::find(cfg.scenarios.begin(), cfg.scenarios.end(), 6) != cfg.scenarios.end()) {
    // Google Benchmark: 3 floors + read and write per lock; each repetition
    // runs a little past min_time after its calibration runs.
    const int n_bm = static_cast<int>(2 * locks.size() + 3);
    plan.push_back(
        {Step::kLatency, nullptr, 0, 0, 0, nullptr, n_bm * cfg.reps * (cfg.min_time + 0.05) * 1.3});
  }
  return plan;
}

// Remaining planned seconds, scaled by how far actual time has run over or
// under the plan so far.
double eta_left(const std::vector<Step>& plan, std::size_t next, double spent) {
  double done = 0, left = 0;
  for (std::size_t i = 0; i < plan.size(); ++i) (i < next ? done : left) += plan[i].cost;
  return done > 1 ? left * spent / done : left;
}

void print_progress_run(const Step& s, const RunResult& r, std::size_t i, std::size_t n, int reps,
                        double busy, const std::string& timing) {
  std::fprintf(stderr, "[%3zu/%zu] scenario %d %-14s threads=%-3d rep %d/%d  %-16s load %-4s %s\n",
               i + 1, n, s.sc->id, s.sc->key, s.threads, s.rep + 1, reps, s.lock->name.c_str(),
               percent(busy).c_str(), timing.c_str());
  if (r.skipped) {
    std::fprintf(stderr, "          skipped: exclusive-only lock\n");
    return;
  }
  std::fprintf(stderr, "          %s\n", run_line(r).c_str());
  if (rwsem::kLockEventsEnabled) {
    std::ostringstream ev;
    ev << r.events;
    std::fprintf(stderr, "          events: %s\n", ev.str().c_str());
  }
}

Cell check_load(const Step& s) {
  Cell c{s.sc->id, s.threads, machine_busy(kLoadProbe)};
  if (c.suspect())
    std::fprintf(stderr,
                 "WARNING: machine busy (%s) before scenario %d threads %d: numbers are suspect\n",
                 percent(c.busy).c_str(), c.scenario, c.threads);
  return c;
}

Results execute(const std::vector<Step>& plan, const Config& cfg, const Think& think,
                const std::vector<Entry>& locks, const char* argv0) {
  Results res;
  const auto start = Clock::now();
  for (std::size_t i = 0; i < plan.size(); ++i) {
    const Step& s = plan[i];
    const double spent = seconds_since(start);
    const std::string timing = "elapsed " + eta(spent) + "  ETA " + eta(eta_left(plan, i, spent));
    switch (s.type) {
      case Step::kLoad:
        res.cells.push_back(check_load(s));
        std::fprintf(stderr, "[cell] scenario %d %s threads=%d: machine %s busy  %s\n", s.sc->id,
                     s.sc->key, s.threads, percent(res.cells.back().busy).c_str(), timing.c_str());
        break;
      case Step::kCeiling: {
        RunResult r = run_window<FloorLock>("floor", ceiling_workload_of(*s.sc, think), cfg.window);
        std::fprintf(stderr,
                     "[ceiling] scenario %d %s: 1 thread on the floor lock, %s kops/s  %s\n",
                     s.sc->id, s.sc->key, kops_str(r.rate_kops()).c_str(), timing.c_str());
        res.ceilings[s.sc->id] = std::move(r);
        break;
      }
      case Step::kRun: {
        RunResult r =
            s.lock->run(s.lock->name.c_str(), workload_of(*s.sc, s.threads, think), cfg.window);
        r.rep = s.rep;
        r.order = s.order;
        print_progress_run(s, r, i, plan.size(), cfg.reps, res.cells.back().busy, timing);
        res.runs.push_back(std::move(r));
        break;
      }
      case Step::kLatency:
        std::fprintf(stderr, "[latency] Google Benchmark, %d x %.2f s per benchmark  %s\n",
                     cfg.reps, cfg.min_time, timing.c_str());
        res.latency = run_latency(locks, cfg, argv0);
        break;
    }
  }
  return res;
}

void summarize_all(Results& res, const std::vector<const Scenario*>& timed,
                   const std::vector<Entry>& locks,
                   const std::function<std::vector<int>(const Scenario&)>& counts) {
  for (const Scenario* sc : timed) {
    const auto c = res.ceilings.find(sc->id);
    const double ceiling = c == res.ceilings.end() ? NAN : c->second.rate_kops();
    for (const auto& l : locks)
      for (int n : counts(*sc))
        res.summaries.push_back(summarize(res.runs, sc->id, l.name, n, ceiling));
  }
}

std::string load_summary(const Results& res) {
  std::ostringstream os;
  os << "machine load: " << res.suspect_cells() << " of " << res.cells.size()
     << " cells started with the machine more than " << percent(kBusyThreshold) << " busy"
     << (res.suspect_cells() ? " (numbers there are suspect)" : "");
  return os.str();
}

}  // namespace
}  // namespace bench

int main(int argc, char** argv) {
  using namespace bench;
  Config cfg;
  bool window_set = false, reps_set = false, list = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) usage(("missing value for " + a).c_str());
      return argv[++i];
    };
    if (a == "--window") cfg.window = std::atof(val().c_str()), window_set = true;
    else if (a == "--reps") cfg.reps = std::atoi(val().c_str()), reps_set = true;
    else if (a == "--quick") cfg.quick = true;
    else if (a == "--locks") cfg.locks = split(val());
    else if (a == "--scenarios") cfg.scenarios = split_ints(val());
    else if (a == "--threads") cfg.threads = split_ints(val());
    else if (a == "--out") cfg.out = val();
    else if (a == "--min-time") cfg.min_time = std::atof(val().c_str());
    else if (a == "--plan") cfg.plan_only = true;
    else if (a == "--list") list = true;
    else usage(("unknown option " + a).c_str());
  }
  if (cfg.quick) {
    if (!window_set) cfg.window = 0.3;
    if (!reps_set) cfg.reps = 1;
    cfg.min_time = std::min(cfg.min_time, 0.05);
  }
  if (cfg.window <= 0) usage("--window must be > 0");
  if (cfg.reps < 1) usage("--reps must be >= 1");

  std::vector<Entry> locks;
  for (auto& e : all_entries()) {
    const std::string base = e.name.substr(0, e.name.find('+'));
    if (cfg.locks.empty() ||
        std::find(cfg.locks.begin(), cfg.locks.end(), e.name) != cfg.locks.end() ||
        std::find(cfg.locks.begin(), cfg.locks.end(), base) != cfg.locks.end())
      locks.push_back(e);
  }
  if (list || locks.empty()) {
    for (auto& e : all_entries())
      std::printf("%-16s %s%s\n", e.name.c_str(), e.description,
                  e.exclusive_only ? " [exclusive-only]" : "");
    return list ? 0 : (std::fprintf(stderr, "lockbench: --locks matched nothing\n"), 2);
  }

  const auto wanted = [&](int id) {
    return std::find(cfg.scenarios.begin(), cfg.scenarios.end(), id) != cfg.scenarios.end();
  };
  const std::function<std::vector<int>(const Scenario&)> counts = [&](const Scenario& sc) {
    return !cfg.threads.empty() ? cfg.threads : cfg.quick ? sc.quick_threads : sc.threads;
  };
  std::vector<const Scenario*> timed;
  for (const auto& sc : scenarios())
    if (wanted(sc.id)) timed.push_back(&sc);

  const Machine m = describe_machine();
  const Think think = calibrate_think(kThinkNs);
  const std::vector<Step> plan = make_plan(cfg, timed, locks, counts);
  const auto runs =
      std::count_if(plan.begin(), plan.end(), [](const Step& s) { return s.type == Step::kRun; });
  std::fprintf(stderr, "lockbench: %s\n", m.line().c_str());
  std::fprintf(stderr,
               "lockbench: %zu locks, %ld timed runs of %.2f s (%d reps per cell), %zu ceilings, "
               "think time %.0f ns (%llu iterations); estimated %s\n",
               locks.size(), long(runs), cfg.window, cfg.reps, timed.size(), think.ns,
               (unsigned long long)think.iters, eta(eta_left(plan, 0, 0)).c_str());
  if (cfg.plan_only) return 0;

  const auto start = Clock::now();
  Results res = execute(plan, cfg, think, locks, argv[0]);
  summarize_all(res, timed, locks, counts);

  // Text tables: stdout and bench-out/results.txt.
  std::ostringstream txt;
  txt << "rwsem locking microbenchmark" << (rwsem::kLockEventsEnabled ? " (lock events on)" : "")
      << "\nmachine: " << m.line() << "\n"
      << load_summary(res) << "\nlocks:\n";
  for (const auto& l : locks)
    txt << "   " << pad(l.name, 21, false) << " " << l.description
        << (l.exclusive_only ? " [exclusive-only]" : "") << "\n";
  for (const Scenario* sc : timed)
    print_scenario(txt, *sc, title_of(*sc, think), locks, res, counts(*sc), cfg);
  if (wanted(6)) print_latency(txt, res.latency, cfg);
  std::cout << txt.str() << std::flush;

  std::error_code ec;
  std::filesystem::create_directories(cfg.out, ec);
  if (ec) {
    std::fprintf(stderr, "lockbench: cannot create %s: %s\n", cfg.out.c_str(),
                 ec.message().c_str());
    return 1;
  }
  const std::string stem = rwsem::kLockEventsEnabled ? "/events" : "/results";
  std::ofstream(cfg.out + stem + ".txt") << txt.str();
  write_json(cfg.out + stem + ".json", m, cfg, think, locks, timed, res);
  std::fprintf(stderr, "lockbench: %s\n", load_summary(res).c_str());
  std::fprintf(stderr, "lockbench: wrote %s%s.{txt,json} in %s\n", cfg.out.c_str(), stem.c_str(),
               eta(seconds_since(start)).c_str());
  std::uint64_t torn = 0;
  for (const auto& r : res.runs) torn += r.violations;
  if (torn) {
    std::fprintf(stderr, "lockbench: %llu torn reads: a lock failed to exclude\n",
                 (unsigned long long)torn);
    return 1;
  }
  return 0;
}
