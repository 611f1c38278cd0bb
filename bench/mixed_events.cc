// A small mixed reader/writer run that prints throughput and the lock event
// counters, with optimistic spinning on and off, for equal numbers of reader
// and writer threads. (The full benchmark with the other locks is bench/run,
// a later piece of work.)
//
//   bazel run -c opt //bench:mixed_events -- [seconds] [threads...]
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "arch/cpu.h"
#include "lib/rwsem/rwsem.h"

namespace {

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

struct Spread {
  std::uint64_t min = UINT64_MAX, max = 0, sum = 0;
  int n = 0;
  void add(std::uint64_t v) { min = std::min(min, v); max = std::max(max, v); sum += v; ++n; }
};

void run(int threads, double seconds, bool spin) {
  rwsem::Options o;
  if (!spin) o.spin_budget = std::chrono::nanoseconds(0);
  rwsem::RwSemaphore sem(o);
  long data[4] = {};
  std::atomic<bool> stop{false};
  std::vector<std::uint64_t> iters(threads, 0);
  const auto before = rwsem::lock_events_snapshot();
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      const bool writer = t % 2 == 1;
      std::uint64_t n = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        if (writer) {
          sem.down_write();
          for (long& d : data) d++;
          sem.up_write();
        } else {
          sem.down_read();
          long s = 0;
          for (long d : data) s += d;
          if (s < 0) std::abort();
          sem.up_read();
        }
        ++n;
      }
      iters[t] = n;
    });
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& th : ts) th.join();
  const auto ev = rwsem::lock_events_snapshot() - before;
  Spread r, w;
  for (int t = 0; t < threads; ++t) (t % 2 ? w : r).add(iters[t]);
  std::printf("threads=%d (%d readers, %d writers) spin=%s  rate=%.0f kops/s\n", threads, r.n,
              w.n, spin ? "on " : "off", (r.sum + w.sum) / seconds / 1000);
  std::printf("  readers Iterations Min/Mean/Max = %llu/%llu/%llu\n",
              (unsigned long long)r.min, (unsigned long long)(r.sum / r.n),
              (unsigned long long)r.max);
  std::printf("  writers Iterations Min/Mean/Max = %llu/%llu/%llu\n",
              (unsigned long long)w.min, (unsigned long long)(w.sum / w.n),
              (unsigned long long)w.max);
  std::printf("  events: ");
  for (int i = 0; i < static_cast<int>(rwsem::LockEvent::kCount); ++i)
    if (ev.counts[i]) std::printf("%s=%llu ", rwsem::lock_event_name(static_cast<rwsem::LockEvent>(i)),
                                  (unsigned long long)ev.counts[i]);
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 2.0;
  std::vector<int> counts;
  for (int i = 2; i < argc; ++i) counts.push_back(std::atoi(argv[i]));
  if (counts.empty()) counts = {2, 8};
  utsname u{};
  uname(&u);
  std::printf("machine: %s, %ld cores, %s %s; target %s, layout %s, window %.1f s\n",
              cpu_model().c_str(), sysconf(_SC_NPROCESSORS_ONLN), u.sysname, u.release,
              rwsem::arch::kTarget.name, rwsem::DefaultLayout::kName, seconds);
  if (!rwsem::kLockEventsEnabled) std::printf("(lock events compiled out)\n");
  for (int n : counts)
    for (bool spin : {true, false}) run(n, seconds, spin);
}
