// The locking microbenchmark (GitHub issue 8), after the kernel "rwsem
// microbenchmark" tables in the seed series: threads loop lock / critical
// section / unlock for a fixed window, and we report per-thread iteration
// spread (Min/Mean/Max) for readers and writers and the total locking rate.
//
//   bazel run -c opt //bench:lockbench -- [--window S] [--quick]
//       [--locks a,b] [--scenarios 1,2] [--threads 2,8] [--out DIR]
//       [--min-time S] [--repetitions N]
//
// bench/run is the one command that runs the whole comparison and plots it.
//
// Scenarios (thread counts are the defaults; --quick uses fewer):
//   1 mixed     equal readers and writers           2 4 8 16 32 64
//   2 writers   writers only                        1 4 16 64
//   3 readers   readers only                        1 4 16 64
//   4 sleep     writers, 5 us sleeping critical     4 16 64
//               section (handoff fairness)
//   5 mostly-r  every thread: 10000 reads, 1 write  2 8 32
//   6 latency   uncontended lock+unlock (Google Benchmark), read and write,
//               against the bare-atomic floor on one cache line
//
// Critical sections. Writers increment four words of protected data on a
// cache line of their own; readers read the four and check they are equal
// (a torn read is counted as a violation: the smoke test requires none).
// There is no work between iterations: every thread hammers the lock. In
// scenario 4 the writer sleeps 5 us (nanosleep, timer slack set to 1 ns so
// the sleep is not rounded up to the default 50 us) while holding the lock.
// In scenario 5 a thread's writes are spread by a per-thread phase so that
// the threads do not write in step.
//
// Exclusive-only locks: see bench/locks.h (readers take the writer path in
// scenarios 1 and 5; scenario 3 and read latency are skipped).
//
// Build with -DRWSEM_LOCK_EVENTS=1 -DRWSEM_BENCH_RWSEM_ONLY=1 (the target
// //bench:lockbench_events) to run only the rwsem entries, named
// "<name>+events", and report the lock event counters of every run. The
// compared entries in //bench:lockbench are built with events off.
#include <benchmark/benchmark.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

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
#include "lib/rwsem/lock_events.h"

namespace bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kLine = 64;

// ---- machine description -------------------------------------------------------

struct Machine {
  std::string cpu, kernel, compiler, date;
  long cores = 0;
  std::string line() const {
    std::ostringstream os;
    os << cpu << ", " << cores << " cores, Linux " << kernel << ", " << compiler << ", "
       << date;
    return os.str();
  }
};

Machine describe_machine() {
  Machine m;
  std::ifstream f("/proc/cpuinfo");
  for (std::string l; std::getline(f, l);)
    if (l.rfind("model name", 0) == 0) {
      m.cpu = l.substr(l.find(':') + 2);
      break;
    }
  if (m.cpu.empty()) m.cpu = "unknown CPU";
  m.cores = sysconf(_SC_NPROCESSORS_ONLN);
  utsname u{};
  uname(&u);
  m.kernel = u.release;
  m.compiler = std::string("clang ") + __clang_version__;
  // "clang 19.1.7 (...)" -> drop the parenthesised build tag.
  if (auto p = m.compiler.find(" ("); p != std::string::npos) m.compiler.resize(p);
  while (!m.compiler.empty() && m.compiler.back() == ' ') m.compiler.pop_back();
  char buf[64];
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", &tm);
  m.date = buf;
  return m;
}

// ---- options -------------------------------------------------------------------

struct Config {
  double window = 5.0;
  bool quick = false;
  std::vector<std::string> locks;  // empty = all
  std::vector<int> scenarios = {1, 2, 3, 4, 5, 6};
  std::vector<int> threads;  // empty = per-scenario defaults
  std::string out = "bench-out";
  double min_time = 0.5;  // Google Benchmark, per repetition
  int repetitions = 3;
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
               "usage: lockbench [--window S] [--quick] [--locks a,b] [--scenarios 1,2]\n"
               "                 [--threads 2,8] [--out DIR] [--min-time S] "
               "[--repetitions N] [--list]\n",
               why);
  std::exit(2);
}

// ---- scenarios -----------------------------------------------------------------

enum class Kind { kMixed, kWriters, kReaders, kSleepWriters, kMostlyReaders };

struct Scenario {
  int id;
  Kind kind;
  const char* key;
  const char* title;
  std::vector<int> threads, quick_threads;
};

const std::vector<Scenario>& scenarios() {
  static const std::vector<Scenario> s = {
      {1, Kind::kMixed, "mixed", "mixed: equal numbers of readers and writers",
       {2, 4, 8, 16, 32, 64}, {2, 8}},
      {2, Kind::kWriters, "writers", "writers only", {1, 4, 16, 64}, {4}},
      {3, Kind::kReaders, "readers", "readers only", {1, 4, 16, 64}, {4}},
      {4, Kind::kSleepWriters, "sleep-writers",
       "writers only, 5 us sleeping critical section (handoff fairness)", {4, 16, 64}, {4}},
      {5, Kind::kMostlyReaders, "mostly-readers",
       "mostly readers: each thread does 10000 reads per write", {2, 8, 32}, {4}},
  };
  return s;
}

constexpr std::uint64_t kReadsPerWrite = 10000;

// ---- results -------------------------------------------------------------------

struct Spread {
  std::uint64_t min = 0, max = 0, sum = 0;
  int n = 0;
  double mean() const { return n ? double(sum) / n : 0; }
};

Spread spread_of(const std::vector<std::uint64_t>& v) {
  Spread s;
  if (v.empty()) return s;
  s.min = *std::min_element(v.begin(), v.end());
  s.max = *std::max_element(v.begin(), v.end());
  for (auto x : v) s.sum += x;
  s.n = static_cast<int>(v.size());
  return s;
}

struct RunResult {
  std::string lock;
  int scenario = 0;
  int threads = 0;
  bool exclusive_only = false;
  bool skipped = false;  // exclusive-only lock in a reader-only scenario
  double window = 0, elapsed = 0;
  // Per thread: reads and writes completed. Role: 'R', 'W' or 'M' (mixed ops).
  std::vector<std::uint64_t> reads, writes;
  std::vector<char> role;
  std::uint64_t violations = 0;
  rwsem::LockEventSnapshot events;

  std::uint64_t total() const {
    std::uint64_t t = 0;
    for (auto x : reads) t += x;
    for (auto x : writes) t += x;
    return t;
  }
  double rate_kops() const { return elapsed > 0 ? total() / elapsed / 1000.0 : 0; }
  // Iterations per thread of the reader threads ('R'), of the writer threads
  // ('W'); for mixed-op threads ('M') "readers" are their reads, "writers"
  // their writes, and all() their total.
  Spread readers() const {
    std::vector<std::uint64_t> v;
    for (std::size_t i = 0; i < role.size(); ++i)
      if (role[i] != 'W') v.push_back(reads[i]);
    return spread_of(v);
  }
  Spread writers() const {
    std::vector<std::uint64_t> v;
    for (std::size_t i = 0; i < role.size(); ++i)
      if (role[i] != 'R') v.push_back(writes[i]);
    return spread_of(v);
  }
  Spread all() const {
    std::vector<std::uint64_t> v;
    for (std::size_t i = 0; i < role.size(); ++i) v.push_back(reads[i] + writes[i]);
    return spread_of(v);
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

template <class A>
RunResult run_window(const char* name, const Scenario& sc, int threads, double window) {
  RunResult r;
  r.lock = name;
  r.scenario = sc.id;
  r.threads = threads;
  r.exclusive_only = A::kExclusiveOnly;
  r.window = window;
  r.reads.assign(threads, 0);
  r.writes.assign(threads, 0);
  r.role.assign(threads, 'R');
  for (int t = 0; t < threads; ++t) {
    switch (sc.kind) {
      case Kind::kMixed: r.role[t] = t % 2 ? 'W' : 'R'; break;
      case Kind::kWriters:
      case Kind::kSleepWriters: r.role[t] = 'W'; break;
      case Kind::kReaders: r.role[t] = 'R'; break;
      case Kind::kMostlyReaders: r.role[t] = 'M'; break;
    }
  }
  if (A::kExclusiveOnly && sc.kind == Kind::kReaders) {
    r.skipped = true;
    return r;
  }

  auto holder = std::make_unique<Holder<A>>();
  auto data = std::make_unique<Protected>();
  auto flags = std::make_unique<Flags>();
  std::atomic<std::uint64_t> violations{0};
  A& lk = holder->lock;
  Protected& d = *data;
  Flags& f = *flags;

  const auto body = [&](int t) {
    typename A::Ctx ctx;
    if (sc.kind == Kind::kSleepWriters) prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
    std::uint64_t reads = 0, writes = 0, bad = 0;
    f.ready.fetch_add(1);
    while (!f.go.load(std::memory_order_acquire)) sched_yield();
    // An iteration counts if it completed inside the window: the stop flag
    // is read after the unlock, once per iteration as the loop test would
    // be. A thread starved for the whole window thus reports 0, not the one
    // acquisition it gets when everybody else has stopped.
    const auto stopped = [&f] { return f.stop.load(std::memory_order_relaxed); };
    switch (sc.kind) {
      case Kind::kMixed:
      case Kind::kWriters:
      case Kind::kReaders:
        if (r.role[t] == 'W') {
          for (;;) {
            lk.lock(ctx);
            write_cs(d);
            lk.unlock(ctx);
            if (stopped()) break;
            ++writes;
          }
        } else {
          for (;;) {
            lk.lock_shared(ctx);
            bad += !read_cs(d);
            lk.unlock_shared(ctx);
            if (stopped()) break;
            ++reads;
          }
        }
        break;
      case Kind::kSleepWriters:
        for (;;) {
          lk.lock(ctx);
          write_cs(d);
          sleep_5us();
          lk.unlock(ctx);
          if (stopped()) break;
          ++writes;
        }
        break;
      case Kind::kMostlyReaders: {
        std::uint64_t i = static_cast<std::uint64_t>(t) * (kReadsPerWrite + 1) / threads;
        for (;;) {
          if (++i % (kReadsPerWrite + 1) == 0) {
            lk.lock(ctx);
            write_cs(d);
            lk.unlock(ctx);
            if (stopped()) break;
            ++writes;
          } else {
            lk.lock_shared(ctx);
            bad += !read_cs(d);
            lk.unlock_shared(ctx);
            if (stopped()) break;
            ++reads;
          }
        }
        break;
      }
    }
    r.reads[t] = reads;
    r.writes[t] = writes;
    violations.fetch_add(bad);
  };

  std::vector<std::thread> ts;
  ts.reserve(threads);
  for (int t = 0; t < threads; ++t) ts.emplace_back(body, t);
  while (f.ready.load() < threads) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const auto ev0 = rwsem::lock_events_snapshot();
  const auto t0 = Clock::now();
  f.go.store(true, std::memory_order_release);
  std::this_thread::sleep_for(std::chrono::duration<double>(window));
  f.stop.store(true, std::memory_order_relaxed);
  const auto t1 = Clock::now();
  for (auto& th : ts) th.join();
  r.events = rwsem::lock_events_snapshot() - ev0;
  r.elapsed = std::chrono::duration<double>(t1 - t0).count();
  r.violations = violations.load();
  return r;
}

// ---- scenario 6: uncontended latency with Google Benchmark ----------------------

// The physical floor: one atomic word on its own cache line, with the same
// orderings a lock needs. Read: fetch_add (acquire) / fetch_sub (release).
// Write: compare_exchange 0 -> 1 (acquire) / store 0 (release).
struct alignas(kLine) Floor {
  std::atomic<long> word{0};
};

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

void bm_floor_read(benchmark::State& state) {
  auto f = std::make_unique<Floor>();
  for (auto _ : state) {
    f->word.fetch_add(1, std::memory_order_acquire);
    f->word.fetch_sub(1, std::memory_order_release);
  }
}

void bm_floor_write(benchmark::State& state) {
  auto f = std::make_unique<Floor>();
  for (auto _ : state) {
    long expected = 0;
    while (!f->word.compare_exchange_strong(expected, 1, std::memory_order_acquire,
                                            std::memory_order_relaxed))
      expected = 0;
    f->word.store(0, std::memory_order_release);
  }
}

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
  RunResult (*run)(const char*, const Scenario&, int, double);
  void (*bm_read)(benchmark::State&);
  void (*bm_write)(benchmark::State&);
};

std::vector<Entry> all_entries() {
  const std::string suffix = rwsem::kLockEventsEnabled ? "+events" : "";
  std::vector<Entry> v;
#define RWSEM_BENCH_ENTRY(A, name, desc) \
  v.push_back({std::string(name) + suffix, desc, A::kExclusiveOnly, &run_window<A>, &bm_read<A>, &bm_write<A>});
  RWSEM_BENCH_LOCKS(RWSEM_BENCH_ENTRY)
#undef RWSEM_BENCH_ENTRY
  return v;
}

// ---- text output ----------------------------------------------------------------

// 1234567 -> "1,234,567", like the seed tables.
std::string commas(std::uint64_t x) {
  std::string s = std::to_string(x);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(i, ",");
  return s;
}

std::string fixed(double x, int prec) {
  if (std::isnan(x)) return "-";
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", prec, x);
  return b;
}

std::string mmm(const Spread& s) {
  return commas(s.min) + "/" + commas(static_cast<std::uint64_t>(std::llround(s.mean()))) +
         "/" + commas(s.max);
}

std::string pad(const std::string& s, std::size_t w, bool right = true) {
  if (s.size() >= w) return s;
  return right ? std::string(w - s.size(), ' ') + s : s + std::string(w - s.size(), ' ');
}

// Min/Max of the per-thread iterations; 0 when every thread of the group was
// starved for the whole window (0/0), the worst fairness there is.
double ratio(const Spread& s) {
  if (!s.n) return NAN;
  return s.max ? double(s.min) / double(s.max) : 0.0;
}

void print_scenario(std::ostream& os, const Scenario& sc, const std::vector<Entry>& locks,
                    const std::vector<RunResult>& runs, const std::vector<int>& counts,
                    double window) {
  auto find = [&](const std::string& lock, int n) -> const RunResult* {
    for (const auto& r : runs)
      if (r.scenario == sc.id && r.lock == lock && r.threads == n) return &r;
    return nullptr;
  };
  os << "\n== Scenario " << sc.id << ": " << sc.title << " ==\n";
  os << "   window " << fixed(window, 2) << " s per run; iterations counted per thread\n\n";
  std::size_t w = 14;
  for (const auto& l : locks) w = std::max(w, l.name.size() + 2);
  auto table = [&](const char* caption, const std::function<std::string(const RunResult&)>& cell) {
    os << "   " << caption << "\n";
    os << "   # of Threads";
    for (const auto& l : locks) os << pad(l.name, w);
    os << "\n   ------------";
    for (const auto& l : locks) os << pad(std::string(l.name.size(), '-'), w);
    os << "\n";
    for (int n : counts) {
      os << pad(std::to_string(n), 15);
      for (const auto& l : locks) {
        const RunResult* r = find(l.name, n);
        os << pad(!r ? "" : r->skipped ? "excl" : cell(*r), w);
      }
      os << "\n";
    }
    os << "\n";
  };
  table("Total locking rate (kops/s)",
        [](const RunResult& r) { return commas(static_cast<std::uint64_t>(std::llround(r.rate_kops()))); });
  if (sc.kind == Kind::kMixed)
    table("Writer fairness: writer Iterations Min/Max",
          [](const RunResult& r) { return fixed(ratio(r.writers()), 3); });
  if (sc.kind == Kind::kMixed || sc.kind == Kind::kReaders)
    table("Reader fairness: reader Iterations Min/Max",
          [](const RunResult& r) { return fixed(ratio(r.readers()), 3); });
  if (sc.kind == Kind::kWriters || sc.kind == Kind::kSleepWriters)
    table("Fairness: Iterations Min/Max",
          [](const RunResult& r) { return fixed(ratio(r.writers()), 3); });
  if (sc.kind == Kind::kMostlyReaders) {
    table("Fairness: per-thread operations Min/Max",
          [](const RunResult& r) { return fixed(ratio(r.all()), 3); });
    table("Writes completed (all threads)",
          [](const RunResult& r) { return commas(r.writers().sum); });
  }
  os << "   Per-thread iterations:\n";
  for (const auto& l : locks)
    for (int n : counts) {
      const RunResult* r = find(l.name, n);
      if (!r) continue;
      os << "   " << l.name << ", " << n << " threads, " << fixed(r->elapsed, 2) << " s";
      if (r->skipped) {
        os << ": skipped (exclusive-only lock)\n";
        continue;
      }
      os << ", " << commas(static_cast<std::uint64_t>(std::llround(r->rate_kops()))) << " kops/s";
      if (r->exclusive_only) os << " (exclusive-only: readers take the writer path)";
      if (r->violations) os << "  TORN READS: " << r->violations;
      os << "\n";
      const Spread rd = r->readers(), wr = r->writers();
      if (sc.kind == Kind::kMostlyReaders) {
        os << "     " << pad(std::to_string(n), 3) << " threads, Iterations Min/Mean/Max = "
           << mmm(r->all()) << "  (reads " << commas(rd.sum) << ", writes " << commas(wr.sum)
           << ")\n";
      } else {
        if (rd.n)
          os << "     " << pad(std::to_string(rd.n), 3) << " readers, Iterations Min/Mean/Max = "
             << mmm(rd) << "\n";
        if (wr.n)
          os << "     " << pad(std::to_string(wr.n), 3) << " writers, Iterations Min/Mean/Max = "
             << mmm(wr) << "\n";
      }
      if (rwsem::kLockEventsEnabled) os << "     events: " << r->events << "\n";
    }
}

void print_latency(std::ostream& os, const std::vector<LatencyResult>& lat, double min_time,
                   int reps) {
  os << "\n== Scenario 6: uncontended lock+unlock latency (Google Benchmark) ==\n";
  os << "   one thread; CPU ns per lock+unlock, median of " << reps << " repetitions of >= "
     << fixed(min_time, 2) << " s; ratio = lock / bare-atomic floor\n\n";
  const LatencyResult* floor = nullptr;
  for (const auto& l : lat)
    if (l.lock == "atomic-floor") floor = &l;
  os << "   " << pad("lock", 21, false) << pad("read ns", 10) << pad("x floor", 10)
     << pad("write ns", 10) << pad("x floor", 10) << "\n";
  os << "   " << pad("----", 21, false) << pad("-------", 10) << pad("-------", 10)
     << pad("--------", 10) << pad("-------", 10) << "\n";
  for (const auto& l : lat) {
    const bool excl = std::isnan(l.read_ns) && !std::isnan(l.write_ns);
    os << "   " << pad(l.lock, 21, false) << pad(excl ? "excl" : fixed(l.read_ns, 2), 10)
       << pad(floor ? (excl ? "excl" : fixed(l.read_ns / floor->read_ns, 2)) : "-", 10)
       << pad(fixed(l.write_ns, 2), 10)
       << pad(floor ? fixed(l.write_ns / floor->write_ns, 2) : "-", 10) << "\n";
  }
}

// ---- JSON -------------------------------------------------------------------------

std::string jstr(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      o += ' ';
      continue;
    }
    o += c;
  }
  return o + "\"";
}

std::string jnum(double x) {
  if (std::isnan(x) || std::isinf(x)) return "null";
  char b[64];
  std::snprintf(b, sizeof b, "%.6g", x);
  return b;
}

std::string jspread(const Spread& s) {
  if (!s.n) return "null";
  return "{\"n\": " + std::to_string(s.n) + ", \"min\": " + std::to_string(s.min) +
         ", \"mean\": " + jnum(s.mean()) + ", \"max\": " + std::to_string(s.max) +
         ", \"sum\": " + std::to_string(s.sum) + "}";
}

void write_json(const std::string& path, const Machine& m, const Config& cfg,
                const std::vector<Entry>& locks, const std::vector<RunResult>& runs,
                const std::vector<LatencyResult>& lat) {
  std::ofstream o(path);
  o << "{\n  \"machine\": {\"cpu\": " << jstr(m.cpu) << ", \"cores\": " << m.cores
    << ", \"kernel\": " << jstr(m.kernel) << ", \"compiler\": " << jstr(m.compiler)
    << ", \"date\": " << jstr(m.date) << ", \"line\": " << jstr(m.line()) << "},\n";
  o << "  \"config\": {\"window_s\": " << jnum(cfg.window) << ", \"quick\": "
    << (cfg.quick ? "true" : "false") << ", \"lock_events\": "
    << (rwsem::kLockEventsEnabled ? "true" : "false") << ", \"gbench_min_time_s\": "
    << jnum(cfg.min_time) << ", \"gbench_repetitions\": " << cfg.repetitions << "},\n";
  o << "  \"locks\": [";
  for (std::size_t i = 0; i < locks.size(); ++i)
    o << (i ? ",\n    " : "\n    ") << "{\"name\": " << jstr(locks[i].name)
      << ", \"description\": " << jstr(locks[i].description)
      << ", \"exclusive_only\": " << (locks[i].exclusive_only ? "true" : "false") << "}";
  o << "\n  ],\n  \"scenarios\": [";
  bool first = true;
  for (const auto& sc : scenarios()) {
    if (std::find(cfg.scenarios.begin(), cfg.scenarios.end(), sc.id) == cfg.scenarios.end())
      continue;
    o << (first ? "\n    " : ",\n    ") << "{\"id\": " << sc.id << ", \"key\": " << jstr(sc.key)
      << ", \"title\": " << jstr(sc.title) << "}";
    first = false;
  }
  if (std::find(cfg.scenarios.begin(), cfg.scenarios.end(), 6) != cfg.scenarios.end())
    o << (first ? "\n    " : ",\n    ")
      << "{\"id\": 6, \"key\": \"latency\", \"title\": \"uncontended lock+unlock latency\"}";
  o << "\n  ],\n  \"runs\": [";
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const RunResult& r = runs[i];
    o << (i ? ",\n    " : "\n    ") << "{\"scenario\": " << r.scenario << ", \"lock\": "
      << jstr(r.lock) << ", \"threads\": " << r.threads << ", \"skipped\": "
      << (r.skipped ? "true" : "false") << ", \"exclusive_only\": "
      << (r.exclusive_only ? "true" : "false") << ", \"window_s\": " << jnum(r.window)
      << ", \"elapsed_s\": " << jnum(r.elapsed) << ", \"total_ops\": " << r.total()
      << ", \"rate_kops\": " << jnum(r.rate_kops()) << ", \"violations\": " << r.violations
      << ",\n     \"readers\": " << jspread(r.readers()) << ",\n     \"writers\": "
      << jspread(r.writers()) << ",\n     \"per_thread\": " << jspread(r.all())
      << ",\n     \"roles\": \"" << std::string(r.role.begin(), r.role.end()) << "\"";
    o << ", \"reads\": [";
    for (std::size_t t = 0; t < r.reads.size(); ++t) o << (t ? ", " : "") << r.reads[t];
    o << "], \"writes\": [";
    for (std::size_t t = 0; t < r.writes.size(); ++t) o << (t ? ", " : "") << r.writes[t];
    o << "]";
    if (rwsem::kLockEventsEnabled) {
      o << ", \"events\": {";
      bool f1 = true;
      for (int e = 0; e < static_cast<int>(rwsem::LockEvent::kCount); ++e) {
        o << (f1 ? "" : ", ") << jstr(rwsem::lock_event_name(static_cast<rwsem::LockEvent>(e)))
          << ": " << r.events.counts[e];
        f1 = false;
      }
      o << "}";
    }
    o << "}";
  }
  o << "\n  ],\n  \"latency\": [";
  const LatencyResult* floor = nullptr;
  for (const auto& l : lat)
    if (l.lock == "atomic-floor") floor = &l;
  for (std::size_t i = 0; i < lat.size(); ++i) {
    const auto& l = lat[i];
    o << (i ? ",\n    " : "\n    ") << "{\"lock\": " << jstr(l.lock) << ", \"read_ns\": "
      << jnum(l.read_ns) << ", \"write_ns\": " << jnum(l.write_ns) << ", \"read_min_ns\": "
      << jnum(l.read_min_ns) << ", \"write_min_ns\": " << jnum(l.write_min_ns)
      << ", \"read_ratio\": " << jnum(floor ? l.read_ns / floor->read_ns : NAN)
      << ", \"write_ratio\": " << jnum(floor ? l.write_ns / floor->write_ns : NAN) << "}";
  }
  o << "\n  ]\n}\n";
}

std::string eta(double s) {
  const long t = std::lround(s);
  char b[32];
  std::snprintf(b, sizeof b, "%ldm%02lds", t / 60, t % 60);
  return b;
}

}  // namespace
}  // namespace bench

int main(int argc, char** argv) {
  using namespace bench;
  Config cfg;
  bool window_set = false, list = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) usage(("missing value for " + a).c_str());
      return argv[++i];
    };
    if (a == "--window") cfg.window = std::atof(val().c_str()), window_set = true;
    else if (a == "--quick") cfg.quick = true;
    else if (a == "--locks") cfg.locks = split(val());
    else if (a == "--scenarios") cfg.scenarios = split_ints(val());
    else if (a == "--threads") cfg.threads = split_ints(val());
    else if (a == "--out") cfg.out = val();
    else if (a == "--min-time") cfg.min_time = std::atof(val().c_str());
    else if (a == "--repetitions") cfg.repetitions = std::atoi(val().c_str());
    else if (a == "--list") list = true;
    else usage(("unknown option " + a).c_str());
  }
  if (cfg.quick) {
    if (!window_set) cfg.window = 0.3;
    cfg.min_time = std::min(cfg.min_time, 0.05);
    cfg.repetitions = 1;
  }
  if (cfg.window <= 0) usage("--window must be > 0");
  if (cfg.repetitions < 1) usage("--repetitions must be >= 1");

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

  const Machine m = describe_machine();
  const auto wanted = [&](int id) {
    return std::find(cfg.scenarios.begin(), cfg.scenarios.end(), id) != cfg.scenarios.end();
  };
  auto counts_for = [&](const Scenario& sc) {
    return !cfg.threads.empty() ? cfg.threads : cfg.quick ? sc.quick_threads : sc.threads;
  };

  // The plan, for progress and ETA.
  struct Step {
    const Scenario* sc;
    const Entry* lock;
    int threads;
  };
  std::vector<Step> plan;
  for (const auto& sc : scenarios())
    if (wanted(sc.id))
      for (const auto& l : locks)
        for (int n : counts_for(sc)) plan.push_back({&sc, &l, n});
  const int n_bm = wanted(6) ? static_cast<int>(2 * locks.size() + 2) : 0;
  const double bm_estimate = n_bm * cfg.repetitions * (cfg.min_time + 0.05) * 1.3;
  const double per_run = cfg.window + 0.05;

  std::fprintf(stderr, "lockbench: %s\n", m.line().c_str());
  std::fprintf(stderr, "lockbench: %zu locks, %zu timed runs of %.2f s + %d latency benchmarks; "
               "estimated %s\n", locks.size(), plan.size(), cfg.window, n_bm,
               eta(plan.size() * per_run + bm_estimate).c_str());

  std::vector<RunResult> runs;
  const auto start = Clock::now();
  for (std::size_t i = 0; i < plan.size(); ++i) {
    const Step& s = plan[i];
    const double spent = std::chrono::duration<double>(Clock::now() - start).count();
    const double left = (plan.size() - i) * per_run + bm_estimate;
    std::fprintf(stderr, "[%3zu/%zu] scenario %d %-14s %-16s threads=%-3d  elapsed %s  ETA %s\n",
                 i + 1, plan.size(), s.sc->id, s.sc->key, s.lock->name.c_str(), s.threads,
                 eta(spent).c_str(), eta(left).c_str());
    RunResult r = s.lock->run(s.lock->name.c_str(), *s.sc, s.threads, cfg.window);
    if (r.skipped) {
      std::fprintf(stderr, "          skipped: exclusive-only lock\n");
    } else {
      const Spread rd = r.readers(), wr = r.writers();
      std::fprintf(stderr, "          %d threads, %.2f s, %.0f kops/s", r.threads, r.elapsed,
                   r.rate_kops());
      if (rd.n)
        std::fprintf(stderr, "; %s Min/Mean/Max = %s", s.sc->kind == Kind::kMostlyReaders ? "reads" : "readers",
                     mmm(rd).c_str());
      if (wr.n)
        std::fprintf(stderr, "; %s Min/Mean/Max = %s", s.sc->kind == Kind::kMostlyReaders ? "writes" : "writers",
                     mmm(wr).c_str());
      if (r.violations) std::fprintf(stderr, "; TORN READS %llu", (unsigned long long)r.violations);
      std::fprintf(stderr, "\n");
      if (rwsem::kLockEventsEnabled) {
        std::ostringstream ev;
        ev << r.events;
        std::fprintf(stderr, "          events: %s\n", ev.str().c_str());
      }
    }
    runs.push_back(std::move(r));
  }

  std::vector<LatencyResult> lat;
  if (wanted(6)) {
    std::fprintf(stderr, "[latency] %d Google Benchmark runs, %d x %.2f s each, ETA %s\n", n_bm,
                 cfg.repetitions, cfg.min_time, eta(bm_estimate).c_str());
    benchmark::RegisterBenchmark("atomic-floor/read", bm_floor_read);
    benchmark::RegisterBenchmark("atomic-floor/write", bm_floor_write);
    for (const auto& l : locks) {
      if (!l.exclusive_only) benchmark::RegisterBenchmark((l.name + "/read").c_str(), l.bm_read);
      benchmark::RegisterBenchmark((l.name + "/write").c_str(), l.bm_write);
    }
    std::string mt = "--benchmark_min_time=" + std::to_string(cfg.min_time);
    std::string rp = "--benchmark_repetitions=" + std::to_string(cfg.repetitions);
    std::string color = "--benchmark_color=false";
    char* bargv[] = {argv[0], mt.data(), rp.data(), color.data(), nullptr};
    int bargc = 4;
    benchmark::Initialize(&bargc, bargv);
    Collector col;
    col.SetOutputStream(&std::cerr);
    col.SetErrorStream(&std::cerr);
    benchmark::RunSpecifiedBenchmarks(&col);
    benchmark::Shutdown();
    auto get = [&](const std::string& name, bool use_min) {
      auto it = col.ns.find(name);
      if (it == col.ns.end()) return double(NAN);
      return use_min ? minimum(it->second) : median(it->second);
    };
    std::vector<std::string> names = {"atomic-floor"};
    for (const auto& l : locks) names.push_back(l.name);
    for (const auto& n : names)
      lat.push_back({n, get(n + "/read", false), get(n + "/write", false), get(n + "/read", true),
                     get(n + "/write", true)});
  }

  // Text tables: stdout and bench-out/results.txt.
  std::ostringstream txt;
  txt << "rwsem locking microbenchmark" << (rwsem::kLockEventsEnabled ? " (lock events on)" : "")
      << "\nmachine: " << m.line() << "\n";
  txt << "locks:\n";
  for (const auto& l : locks)
    txt << "   " << pad(l.name, 21, false) << " " << l.description
        << (l.exclusive_only ? " [exclusive-only]" : "") << "\n";
  for (const auto& sc : scenarios())
    if (wanted(sc.id)) print_scenario(txt, sc, locks, runs, counts_for(sc), cfg.window);
  if (wanted(6)) print_latency(txt, lat, cfg.min_time, cfg.repetitions);
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
  write_json(cfg.out + stem + ".json", m, cfg, locks, runs, lat);
  std::fprintf(stderr, "lockbench: wrote %s%s.{txt,json} in %s\n", cfg.out.c_str(), stem.c_str(),
               eta(std::chrono::duration<double>(Clock::now() - start).count()).c_str());
  std::uint64_t torn = 0;
  for (const auto& r : runs) torn += r.violations;
  if (torn) {
    std::fprintf(stderr, "lockbench: %llu torn reads: a lock failed to exclude\n",
                 (unsigned long long)torn);
    return 1;
  }
  return 0;
}
