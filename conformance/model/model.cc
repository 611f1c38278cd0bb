// The model checker's scheduler and memory model (model.h has the design).
#include "conformance/model/model.h"

#include <ucontext.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <new>
#include <sstream>
#include <vector>

#include "conformance/model/model_platform.h"

namespace rwsem {
namespace mc {
namespace {

using Record = ModelPlatform::Record;
constexpr std::int64_t kForever = INT64_MAX;
constexpr std::size_t kStackSize = 256 * 1024;

bool has_acquire(std::memory_order mo) {
  return mo == std::memory_order_acquire || mo == std::memory_order_acq_rel ||
         mo == std::memory_order_seq_cst || mo == std::memory_order_consume;
}
bool has_release(std::memory_order mo) {
  return mo == std::memory_order_release || mo == std::memory_order_acq_rel ||
         mo == std::memory_order_seq_cst;
}
const char* mo_name(std::memory_order mo) {
  switch (mo) {
    case std::memory_order_relaxed: return "relaxed";
    case std::memory_order_consume: return "consume";
    case std::memory_order_acquire: return "acquire";
    case std::memory_order_release: return "release";
    case std::memory_order_acq_rel: return "acq_rel";
    case std::memory_order_seq_cst: return "seq_cst";
  }
  return "?";
}

std::uint64_t splitmix(std::uint64_t& x) {
  std::uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// One line of the interleaving.
struct Event {
  long step;
  int tid;
  const char* what;
  const void* addr;
  std::memory_order mo;
  std::uint64_t value;      // read (loads) or written (stores)
  std::uint64_t value2;     // RMW/CAS: the value written
  long from = -1;           // the store read: its id
  int from_tid = -1;
  long newest = -1;         // when an older store was read: the newest id
  std::string note = {};
};

struct Pending {
  Location* loc;
  std::uint64_t value;
  std::uint32_t epoch;
  long id;
  VClock rel;  // the clock of the thread's last release fence
};

struct Thread {
  enum State { kUnused, kRunnable, kBlocked, kJoining, kFinished };
  State state = kUnused;
  ucontext_t ctx;
  std::unique_ptr<char[]> stack;
  std::function<void()> body;
  Record* record = nullptr;
  std::uint32_t record_epoch = 0;  // this thread's clock when it built `record`
  VClock clk, frel, facq, scv;
  std::uint64_t last_sc_fence = 0;
  bool yielded = false;
  // futex wait
  const Location* futex_loc = nullptr;
  std::int64_t deadline = kForever;
  long blocked_seq = 0;
  int wake_reason = 0;  // 0 woken (or value changed), ETIMEDOUT
  std::vector<Pending> buf;
  int priority = 0;
};

enum class OptKind { kRun, kTimeout, kCommit };
struct Opt {
  OptKind kind;
  int tid;
  int index = 0;  // kCommit: index in the thread's buffer
};

struct Choice {
  int chosen;
  int n;
};

class Explorer {
 public:
  Explorer(const Options& o, const Scenario& s) : opts(o), scenario(s) {
    for (int i = 0; i < kMaxThreads; ++i) {
      threads[i].stack.reset(new char[kStackSize]);
      records[i] =
          static_cast<Record*>(::operator new(sizeof(Record), std::align_val_t(alignof(Record))));
      new (records[i]) Record();
    }
  }
  ~Explorer() {
    for (int i = 0; i < kMaxThreads; ++i) {
      records[i]->~Record();
      ::operator delete(records[i], std::align_val_t(alignof(Record)));
    }
  }

  const Options& opts;
  const Scenario& scenario;
  Thread threads[kMaxThreads];
  Record* records[kMaxThreads];
  int nthreads = 0;  // including thread 0
  int cur = 0;
  bool active = false;     // an execution is running
  bool reporting = false;  // building a failure report: loads peek
  bool rebuilding = false; // destroying a record of the previous execution
  ucontext_t host;
  // execution state
  long step = 0;
  long store_ids = 0;
  std::int64_t now = 0;
  std::uint64_t sc_counter = 0;
  VClock sc_fence_clock;
  long blocked_seq = 0;
  int preemptions = 0, stale_reads = 0, buffered = 0;
  std::vector<Event> trace;
  std::vector<std::function<std::string()>> describers;
  struct Region {
    const char* base;
    std::size_t size;
    std::string name;
  };
  std::vector<Region> regions;
  std::vector<std::pair<const void*, std::function<void(std::uint64_t)>>> watches;
  std::vector<std::function<std::string()>> quiescent_checks;
  bool failed = false;
  std::string failure;
  // exploration state
  std::vector<Choice> choices;
  std::size_t replay_len = 0;
  std::size_t pos = 0;
  bool nondeterministic = false;
  std::uint64_t rng = 0;
  std::vector<long> change_points;

  Thread& me() { return threads[cur]; }

  // ---- choices ---------------------------------------------------------------

  int choose(int n) {
    if (n <= 1) return 0;
    if (opts.mode == Mode::kExhaustive) {
      if (pos < replay_len) {
        Choice& c = choices[pos++];
        if (c.n != n) {
          nondeterministic = true;
          fail_now("the scenario is not deterministic: a replayed choice point offers " +
                   std::to_string(n) + " options, not " + std::to_string(c.n));
        }
        return c.chosen;
      }
      choices.push_back({0, n});
      ++pos;
      return 0;
    }
    return static_cast<int>(splitmix(rng) % static_cast<std::uint64_t>(n));
  }
  bool coin(double p) {
    return static_cast<double>(splitmix(rng) >> 11) * (1.0 / 9007199254740992.0) < p;
  }

  // ---- the scheduler -----------------------------------------------------------

  void switch_to(int t) {
    if (t == cur) return;
    const int from = cur;
    threads[from].yielded = false;
    cur = t;
    swapcontext(&threads[from].ctx, &threads[t].ctx);
  }

  // A scheduling point before a visible operation of the current thread
  // (can_continue), or after it blocked or finished (!can_continue).
  void sched(bool can_continue) {
    if (++step > opts.max_steps)
      fail_now("livelock: the execution passed " + std::to_string(opts.max_steps) +
               " steps without finishing (a thread spins on a condition nobody will make true)");
    for (;;) {
      Thread& t = me();
      const bool cur_ok = can_continue && t.state == Thread::kRunnable;
      int others = 0;
      for (int u = 0; u < nthreads; ++u)
        if (u != cur && threads[u].state == Thread::kRunnable) ++others;
      // A thread that gave a spin hint lets every other runnable thread go
      // first: free, not a preemption.
      const bool cur_eligible = cur_ok && !(t.yielded && others > 0);
      if (!cur_eligible && others == 0) {
        // Nobody can run: the earliest timed wait times out, or deadlock.
        int best = -1;
        for (int u = 0; u < nthreads; ++u)
          if (threads[u].state == Thread::kBlocked && threads[u].deadline != kForever &&
              (best < 0 || threads[u].deadline < threads[best].deadline))
            best = u;
        if (cur_ok) {  // only the yielding thread itself
          t.yielded = false;
          return;
        }
        if (best < 0) fail_now(deadlock_text());
        for (auto& check : quiescent_checks) {
          reporting = true;  // the check reads the lock's state: not steps
          const std::string why = check();
          reporting = false;
          if (!why.empty())
            fail_now(
                "a wake-up lost and hidden by a timeout: no thread can run, the earliest "
                "timed wait (T" +
                std::to_string(best) + ") would end it, and " + why);
        }
        time_out(best);
        switch_to(best);
        return;
      }
      // Exhaustive mode: a spin hint hands over to the next runnable thread
      // in turn, without a choice. A spin loop would otherwise multiply the
      // schedules by the threads it could yield to at every iteration
      // (CHESS's fair yield); the interleavings it leaves out are reached
      // through preemptions.
      if (this->opts.mode == Mode::kExhaustive && cur_ok && !cur_eligible) {
        int next = cur;
        do next = (next + 1) % nthreads;
        while (threads[next].state != Thread::kRunnable);
        switch_to(next);
        return;
      }
      std::vector<Opt> opts_list;
      if (cur_eligible) opts_list.push_back({OptKind::kRun, cur});
      const bool may_preempt = !cur_eligible || preemptions < this->opts.preemption_bound ||
                               this->opts.mode == Mode::kRandom;
      for (int u = 0; u < nthreads; ++u)
        if (u != cur && threads[u].state == Thread::kRunnable && may_preempt)
          opts_list.push_back({OptKind::kRun, u});
      for (int u = 0; u < nthreads; ++u)
        for (int i = 0; i < static_cast<int>(threads[u].buf.size()); ++i)
          if (commit_eligible(threads[u], i)) opts_list.push_back({OptKind::kCommit, u, i});
      for (int u = 0; u < nthreads; ++u)
        if (threads[u].state == Thread::kBlocked && threads[u].deadline != kForever && may_preempt)
          opts_list.push_back({OptKind::kTimeout, u});

      Opt pick;
      if (this->opts.mode == Mode::kExhaustive) {
        pick = opts_list[choose(static_cast<int>(opts_list.size()))];
      } else {
        pick = random_pick(opts_list, cur_eligible);
      }
      switch (pick.kind) {
        case OptKind::kCommit:
          commit(threads[pick.tid], pick.index, "drains");
          continue;  // then choose again
        case OptKind::kTimeout:
          if (cur_eligible) ++preemptions;
          time_out(pick.tid);
          switch_to(pick.tid);
          return;
        case OptKind::kRun:
          if (pick.tid != cur && cur_eligible) ++preemptions;
          if (pick.tid == cur) t.yielded = false;
          switch_to(pick.tid);
          return;
      }
    }
  }

  Opt random_pick(const std::vector<Opt>& list, bool cur_eligible) {
    // Drain buffered stores now and then; time out or spuriously wake a
    // blocked thread rarely; otherwise PCT: the runnable thread with the
    // highest priority, the running one dropping to the lowest at the
    // change points.
    for (const Opt& o : list)
      if (o.kind == OptKind::kCommit && coin(0.25)) return o;
    for (const Opt& o : list)
      if (o.kind == OptKind::kTimeout && coin(0.02)) return o;
    for (int u = 0; u < nthreads; ++u)
      if (threads[u].state == Thread::kBlocked && coin(0.003)) {
        wake(u, 0, "spurious futex wake-up");
      }
    for (long cp : change_points)
      if (cp == step) threads[cur].priority = -static_cast<int>(step);
    int best = -1;
    for (const Opt& o : list)
      if (o.kind == OptKind::kRun && (best < 0 || threads[o.tid].priority > threads[best].priority))
        best = o.tid;
    if (best < 0) {  // only commits/timeouts offered
      for (const Opt& o : list)
        if (o.kind != OptKind::kRun) return o;
    }
    (void)cur_eligible;
    return {OptKind::kRun, best};
  }

  void time_out(int u) {
    Thread& t = threads[u];
    if (now < t.deadline) now = t.deadline;
    wake(u, ETIMEDOUT, "times out");
  }

  void wake(int u, int reason, const char* why) {
    Thread& t = threads[u];
    t.state = Thread::kRunnable;
    t.wake_reason = reason;
    trace.push_back({step, u, why, t.futex_loc ? t.futex_loc->addr() : nullptr,
                     std::memory_order_relaxed, 0, 0});
    t.futex_loc = nullptr;
    t.deadline = kForever;
  }

  // ---- thread lifecycle ----------------------------------------------------------

  static void trampoline(int tid) {
    Explorer* e = g_explorer;
    Thread& t = e->threads[tid];
    if (tid == 0) {
      Execution x;
      e->scenario(x);
      e->drain_all(t);
      t.state = Thread::kFinished;
      e->trace.push_back({e->step, 0, "scenario done", nullptr, std::memory_order_relaxed, 0, 0});
      swapcontext(&t.ctx, &e->host);
      std::abort();  // never resumed
    }
    t.body();
    e->drain_all(t);
    t.state = Thread::kFinished;
    e->trace.push_back({e->step, tid, "exits", nullptr, std::memory_order_relaxed, 0, 0});
    bool all = true;
    for (int u = 1; u < e->nthreads; ++u)
      if (e->threads[u].state != Thread::kFinished) all = false;
    if (all && e->threads[0].state == Thread::kJoining) {
      Thread& main = e->threads[0];
      for (int u = 1; u < e->nthreads; ++u) main.clk.join(e->threads[u].clk);
      main.state = Thread::kRunnable;
    }
    e->sched(false);
    std::abort();  // a finished thread is never resumed
  }

  void start_thread(int tid) {
    Thread& t = threads[tid];
    getcontext(&t.ctx);
    t.ctx.uc_stack.ss_sp = t.stack.get();
    t.ctx.uc_stack.ss_size = kStackSize;
    t.ctx.uc_link = nullptr;
    makecontext(&t.ctx, reinterpret_cast<void (*)()>(&Explorer::trampoline), 1, tid);
  }

  void reset_thread(int tid) {
    Thread& t = threads[tid];
    t.state = Thread::kUnused;
    t.body = nullptr;
    t.clk = VClock();
    t.frel = VClock();
    t.facq = VClock();
    t.scv = VClock();
    t.last_sc_fence = 0;
    t.yielded = false;
    t.futex_loc = nullptr;
    t.deadline = kForever;
    t.wake_reason = 0;
    t.buf.clear();
    t.priority = 0;
    t.record = nullptr;
  }

  // A thread's record is built by the thread itself at its first use, as
  // the native pool hands one out: whoever follows an owner id to it must
  // be ordered after that (thread_record.h, "Publication").
  Record* record_of_current() {
    Thread& t = me();
    if (t.record == nullptr) {
      Record* r = records[cur];
      rebuilding = true;  // the last execution's record: not this one's object
      r->~Record();
      rebuilding = false;
      new (r) Record();
      r->tid = static_cast<std::uint32_t>(cur);
      t.record = r;
      t.record_epoch = t.clk.c[cur];
      ++t.clk.c[cur];
    }
    return t.record;
  }

  // An access to an atomic object its initialisation does not happen
  // before.
  void check_init(Location& l, const char* what) {
    l.accessed(cur, me().clk.c[cur]);
    if (l.dead())
      fail_now(std::string("use after free: T") + std::to_string(cur) + " " + what + " " +
               loc_name(l.addr()) + " after the object was destroyed");
    const int it = l.init_tid();
    if (it != cur && l.init_epoch() > me().clk.c[it])
      fail_now(std::string("data race: T") + std::to_string(cur) + " " + what + " " +
               loc_name(l.addr()) + " before its initialisation by T" + std::to_string(it) +
               " happens before (an object published without release/acquire)");
  }

  // Runs one execution; returns false on failure.
  bool run_one(std::uint64_t seed) {
    step = 0;
    store_ids = 0;
    now = 1000000;  // 1 ms: deadlines computed as "now + x" stay positive
    sc_counter = 0;
    sc_fence_clock = VClock();
    blocked_seq = 0;
    preemptions = stale_reads = buffered = 0;
    trace.clear();
    describers.clear();
    regions.clear();
    watches.clear();
    quiescent_checks.clear();
    failed = false;
    failure.clear();
    pos = 0;
    rng = seed;
    change_points.clear();
    for (int i = 0; i + 1 < opts.pct_depth; ++i)
      change_points.push_back(
          1 + static_cast<long>(splitmix(rng) % static_cast<std::uint64_t>(opts.pct_horizon)));
    nthreads = 1;
    cur = 0;
    // Records are rebuilt (fresh histories) before thread 0 runs, as the
    // set-up of the execution, not as steps of it.
    for (int i = 0; i < kMaxThreads; ++i) reset_thread(i);
    for (int i = 0; i < kMaxThreads; ++i) name_record(i);
    active = true;
    threads[0].state = Thread::kRunnable;
    threads[0].clk.c[0] = 1;
    start_thread(0);
    swapcontext(&host, &threads[0].ctx);
    active = false;
    return !failed;
  }

  void name_record(int i) {
    Record* r = records[i];
    const std::string t = "T" + std::to_string(i);
    auto field = [&](const void* p, std::size_t n, const char* f) {
      regions.push_back({static_cast<const char*>(p), n, t + "." + f});
    };
    field(&r->sleep, sizeof r->sleep, "sleep");
    field(&r->parked, sizeof r->parked, "parked");
    field(&r->osq.next, sizeof r->osq.next, "osq.next");
    field(&r->osq.prev, sizeof r->osq.prev, "osq.prev");
    field(&r->osq.locked, sizeof r->osq.locked, "osq.locked");
    field(&r->osq.place, sizeof r->osq.place, "osq.place");
    field(&r->unlocking, sizeof r->unlocking, "unlocking");
  }

  // ---- failures ----------------------------------------------------------------

  [[noreturn]] void fail_now(const std::string& what) {
    if (!failed) {
      failed = true;
      failure = what;
    }
    trace.push_back(
        {step, cur, "FAILS", nullptr, std::memory_order_relaxed, 0, 0, -1, -1, -1, what});
    swapcontext(&me().ctx, &host);
    std::abort();  // an execution that failed is never resumed
  }

  std::string deadlock_text() {
    std::ostringstream os;
    os << "deadlock or lost wake-up: no thread can run and none waits with a deadline";
    return os.str();
  }

  std::string loc_name(const void* a) const {
    if (a == nullptr) return "";
    const char* p = static_cast<const char*>(a);
    for (auto it = regions.rbegin(); it != regions.rend(); ++it)
      if (p >= it->base && p < it->base + it->size) {
        const std::size_t off = static_cast<std::size_t>(p - it->base);
        return off == 0 ? it->name : it->name + "+" + std::to_string(off);
      }
    for (int i = 0; i < nthreads; ++i) {
      const char* s = threads[i].stack.get();
      if (p >= s && p < s + kStackSize)
        return "T" + std::to_string(i) + ".stack-" + std::to_string(s + kStackSize - p);
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, "%p", a);
    return buf;
  }

  std::string state_text() {
    std::ostringstream os;
    static const char* names[] = {"unused", "runnable", "blocked", "joining", "finished"};
    for (int i = 0; i < nthreads; ++i) {
      const Thread& t = threads[i];
      os << "  T" << i << " " << names[t.state];
      if (t.state == Thread::kBlocked) {
        os << " in futex_wait on " << loc_name(t.futex_loc->addr());
        if (t.deadline != kForever) os << " until " << t.deadline;
      }
      if (!t.buf.empty()) os << ", " << t.buf.size() << " buffered store(s)";
      os << "\n";
    }
    reporting = true;
    for (auto& d : describers) os << "  lock: " << d() << "\n";
    reporting = false;
    return os.str();
  }

  std::string trace_text(std::size_t max_lines = 400) {
    std::ostringstream os;
    std::size_t first = trace.size() > max_lines ? trace.size() - max_lines : 0;
    if (first > 0) os << "  ... " << first << " earlier events left out\n";
    for (std::size_t i = first; i < trace.size(); ++i) {
      const Event& e = trace[i];
      char buf[160];
      std::snprintf(buf, sizeof buf, "  %6ld T%d %-14s", e.step, e.tid, e.what);
      os << buf;
      if (e.addr != nullptr) os << " " << loc_name(e.addr);
      const std::string w = e.what;
      if (w == "load" || w == "rmw" || w == "cas ok" || w == "cas fails" || w == "store" ||
          w == "store(buffered)" || w == "fence" || w == "futex_wait" || w == "store_byte")
        os << " " << mo_name(e.mo);
      if (w == "load" || w == "cas fails") {
        std::snprintf(buf, sizeof buf, " -> 0x%" PRIx64, e.value);
        os << buf;
      } else if (w == "rmw" || w == "cas ok") {
        std::snprintf(buf, sizeof buf, " 0x%" PRIx64 " -> 0x%" PRIx64, e.value, e.value2);
        os << buf;
      } else if (w.rfind("store", 0) == 0 || w == "drains") {
        std::snprintf(buf, sizeof buf, " = 0x%" PRIx64, e.value);
        os << buf;
      } else if (w == "futex_wait") {
        std::snprintf(buf, sizeof buf, " (word 0x%" PRIx64 ", expected 0x%" PRIx64 ")", e.value,
                      e.value2);
        os << buf;
      }
      if (e.from >= 0) {
        os << "  from store #" << e.from << " (T" << e.from_tid << ")";
        if (e.newest >= 0) os << " [older than the newest, #" << e.newest << "]";
      }
      if (!e.note.empty()) os << "  " << e.note;
      os << "\n";
    }
    return os.str();
  }

  // ---- memory model ------------------------------------------------------------

  void tick() {
    Thread& t = me();
    ++t.clk.c[cur];
    ++now;
  }

  // The oldest store of `l` the current thread may still read.
  std::uint64_t floor_of(const Location& l, bool sc_load) {
    const Thread& t = me();
    const std::uint64_t lo = l.oldest();
    for (std::uint64_t i = l.count(); i-- > lo;) {
      const StoreRec& s = l.at(i);
      for (int u = 0; u < nthreads; ++u)
        if (s.seen[u] != 0 && s.seen[u] <= t.clk.c[u]) return i;
      if (t.scv.c[s.tid] >= s.epoch) return i;
      if (s.sc && s.sc_index < t.last_sc_fence) return i;
      if (sc_load && (s.sc || sc_fence_clock.c[s.tid] >= s.epoch)) return i;
    }
    return lo;
  }

  void observe(StoreRec& s) {
    if (s.seen[cur] == 0) s.seen[cur] = me().clk.c[cur];
  }

  void acquire_from(const StoreRec& s, std::memory_order mo) {
    if (has_acquire(mo)) me().clk.join(s.rel);
    else me().facq.join(s.rel);
  }

  StoreRec& append(Location& l, std::uint64_t v, std::uint32_t epoch, const VClock& rel, bool sc,
                   long id) {
    StoreRec& s = l.append();
    s = StoreRec();
    s.value = v & l.mask();
    s.id = static_cast<std::uint32_t>(id);
    s.tid = static_cast<std::uint8_t>(cur);
    s.epoch = epoch;
    s.rel = rel;
    s.sc = sc;
    if (sc) s.sc_index = ++sc_counter;
    s.seen[cur] = epoch;
    for (auto& w : watches)
      if (w.first == l.addr()) w.second(s.value);
    return s;
  }

  bool commit_eligible(const Thread& t, int i) const {
    for (int j = 0; j < i; ++j)
      if (t.buf[j].loc == t.buf[i].loc) return false;
    return true;
  }

  // A buffered store enters mo (at its end). Its writer's clock entry is
  // the epoch it had when it executed.
  void commit(Thread& t, int i, const char* why) {
    Pending p = t.buf[i];
    t.buf.erase(t.buf.begin() + i);
    const int saved = cur;
    cur = static_cast<int>(&t - threads);
    append(*p.loc, p.value, p.epoch, p.rel, false, p.id);
    trace.push_back({step, cur, why, p.loc->addr(), std::memory_order_relaxed, p.value, 0, -1, -1,
                     -1, "(buffered store #" + std::to_string(p.id) + " enters memory)"});
    cur = saved;
  }

  void drain_loc(Thread& t, const Location& l) {
    for (std::size_t i = 0; i < t.buf.size();)
      if (t.buf[i].loc == &l) commit(t, static_cast<int>(i), "drains");
      else ++i;
  }
  void drain_all(Thread& t) {
    while (!t.buf.empty()) commit(t, 0, "drains");
  }

  // The value the current thread reads from its own buffer, if any.
  const Pending* forwarded(const Location& l) {
    const Thread& t = me();
    for (auto it = t.buf.rbegin(); it != t.buf.rend(); ++it)
      if (it->loc == &l) return &*it;
    return nullptr;
  }

  std::uint64_t load(Location& l, std::memory_order mo, const char* what = "load") {
    if (!active || reporting) return peek(l);
    sched(true);
    tick();
    check_init(l, "loads");
    if (const Pending* p = forwarded(l)) {
      trace.push_back(
          {step, cur, what, l.addr(), mo, p->value, 0, p->id, cur, -1, "(its own buffered store)"});
      ++me().clk.c[cur];
      return p->value;
    }
    const std::uint64_t lo = floor_of(l, mo == std::memory_order_seq_cst);
    const std::uint64_t n = l.count();
    int options = 1;
    const bool may_stale =
        opts.mode == Mode::kRandom ? coin(0.3) : stale_reads < opts.stale_read_bound;
    if (may_stale) options = static_cast<int>(n - lo);
    int k = opts.mode == Mode::kRandom && options > 1
                ? 1 + static_cast<int>(splitmix(rng) % static_cast<std::uint64_t>(options - 1))
                : choose(options);
    StoreRec& s = l.at(n - 1 - static_cast<std::uint64_t>(k));
    if (k > 0) ++stale_reads;
    observe(s);
    acquire_from(s, mo);
    trace.push_back({step, cur, what, l.addr(), mo, s.value, 0, s.id, s.tid,
                     k > 0 ? static_cast<long>(l.newest().id) : -1});
    ++me().clk.c[cur];
    return s.value;
  }

  std::uint64_t peek(Location& l) {
    if (active && !reporting)
      if (const Pending* p = forwarded(l)) return p->value;
    return l.newest().value;
  }

  // A store; with byte_offset >= 0, a store to that byte of the word,
  // modelled as a store of the whole word made from its newest value.
  void store(Location& l, std::uint64_t v, std::memory_order mo, const char* what = "store",
             int byte_offset = -1) {
    if (!active || reporting) {
      if (byte_offset < 0) direct_store(l, v);
      else fail_outside("store_byte");
      return;
    }
    sched(true);
    tick();
    check_init(l, "stores to");
    Thread& t = me();
    const long id = ++store_ids;
    if (byte_offset >= 0) {
      drain_loc(t, l);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
      const std::uint64_t shift = 8 * static_cast<std::uint64_t>(l.size() - 1 - byte_offset);
#else
      const std::uint64_t shift = 8 * static_cast<std::uint64_t>(byte_offset);
#endif
      v = (l.newest().value & ~(0xffull << shift)) | ((v & 0xff) << shift);
    }
    // A relaxed store may wait in the buffer. (One after a release fence
    // carries the fence's clock; the fence drained every older store, so
    // it may still enter mo after younger ones.)
    bool bufferable = byte_offset < 0 && !has_release(mo);
    bool buffer = false;
    if (bufferable) {
      if (opts.mode == Mode::kRandom) {
        buffer = t.buf.size() < 4 && coin(0.2);
      } else if (buffered < opts.buffered_store_bound) {
        buffer = choose(2) == 1;
      }
    }
    if (buffer) {
      ++buffered;
      t.buf.push_back({&l, v & l.mask(), t.clk.c[cur], id, t.frel});
      trace.push_back(
          {step, cur, "store(buffered)", l.addr(), mo, v & l.mask(), 0, -1, -1, -1,
           "#" + std::to_string(id) + " waits in T" + std::to_string(cur) + "'s buffer"});
    } else {
      if (has_release(mo)) drain_all(t);
      else drain_loc(t, l);
      append(l, v, t.clk.c[cur], has_release(mo) ? t.clk : t.frel, mo == std::memory_order_seq_cst,
             id);
      trace.push_back(
          {step, cur, what, l.addr(), mo, v & l.mask(), 0, -1, -1, -1, "#" + std::to_string(id)});
    }
    ++t.clk.c[cur];
  }

  void direct_store(Location& l, std::uint64_t v) {
    StoreRec& s = l.append();
    s = StoreRec();
    s.value = v & l.mask();
  }

  // The read half of an RMW: the newest store, after our own buffered
  // stores to it drained. `release` drains everything first.
  StoreRec& rmw_read(Location& l, std::memory_order mo) {
    Thread& t = me();
    if (has_release(mo)) drain_all(t);
    else drain_loc(t, l);
    StoreRec& s = l.newest();
    observe(s);
    acquire_from(s, mo);
    return s;
  }

  void rmw_write(Location& l, const StoreRec& read, std::uint64_t v, std::memory_order mo) {
    Thread& t = me();
    VClock rel = has_release(mo) ? t.clk : t.frel;
    rel.join(read.rel);  // the release sequence continues through an RMW
    append(l, v, t.clk.c[cur], rel, mo == std::memory_order_seq_cst, ++store_ids);
  }

  std::uint64_t rmw(Location& l, Rmw op, std::uint64_t arg, std::memory_order mo) {
    if (!active || reporting) fail_outside("read-modify-write");
    sched(true);
    tick();
    check_init(l, "updates");
    StoreRec& s = rmw_read(l, mo);
    const std::uint64_t old = s.value;
    const long from = s.id;
    const int from_tid = s.tid;
    std::uint64_t v = 0;
    switch (op) {
      case Rmw::kXchg: v = arg; break;
      case Rmw::kAdd: v = old + arg; break;
      case Rmw::kSub: v = old - arg; break;
      case Rmw::kOr: v = old | arg; break;
      case Rmw::kAnd: v = old & arg; break;
    }
    v &= l.mask();
    rmw_write(l, s, v, mo);
    trace.push_back({step, cur, "rmw", l.addr(), mo, old, v, from, from_tid});
    ++me().clk.c[cur];
    return old;
  }

  bool cas(Location& l, std::uint64_t& expected, std::uint64_t desired, std::memory_order succ,
           std::memory_order failmo) {
    if (!active || reporting) fail_outside("compare-exchange");
    sched(true);
    tick();
    check_init(l, "compare-exchanges");
    Thread& t = me();
    drain_loc(t, l);
    expected &= l.mask();
    // Options: success if the newest store holds `expected`, then every
    // store the thread may read that does not (a failed CAS is a load).
    const std::uint64_t lo = floor_of(l, failmo == std::memory_order_seq_cst);
    const std::uint64_t n = l.count();
    std::vector<std::uint64_t> fails;  // store indices, newest first
    const bool may_stale =
        opts.mode == Mode::kRandom ? coin(0.3) : stale_reads < opts.stale_read_bound;
    for (std::uint64_t i = n; i-- > lo;) {
      if (i != n - 1 && !may_stale) break;
      if (l.at(i).value != expected) fails.push_back(i);
    }
    const bool can_succeed = l.newest().value == expected;
    const int options = (can_succeed ? 1 : 0) + static_cast<int>(fails.size());
    int k;
    if (opts.mode == Mode::kRandom) {
      k = 0;
      if (options > 1 && !(can_succeed && !coin(0.3)))
        k = (can_succeed ? 1 : 0) +
            static_cast<int>(splitmix(rng) % static_cast<std::uint64_t>(fails.size()));
    } else {
      k = choose(options);
    }
    if (can_succeed && k == 0) {
      StoreRec& s = rmw_read(l, succ);
      rmw_write(l, s, desired, succ);
      trace.push_back(
          {step, cur, "cas ok", l.addr(), succ, s.value, desired & l.mask(), s.id, s.tid});
      ++me().clk.c[cur];
      return true;
    }
    const std::uint64_t idx = fails[static_cast<std::size_t>(k - (can_succeed ? 1 : 0))];
    StoreRec& s = l.at(idx);
    if (idx != n - 1) ++stale_reads;
    observe(s);
    acquire_from(s, failmo);
    expected = s.value;
    trace.push_back({step, cur, "cas fails", l.addr(), failmo, s.value, 0, s.id, s.tid,
                     idx != n - 1 ? static_cast<long>(l.newest().id) : -1});
    ++me().clk.c[cur];
    return false;
  }

  void fence_now(std::memory_order mo) {
    Thread& t = me();
    if (has_acquire(mo)) t.clk.join(t.facq);
    if (has_release(mo)) {
      drain_all(t);
      t.frel = t.clk;
    }
    if (mo == std::memory_order_seq_cst) {
      sc_fence_clock.join(t.clk);
      t.scv.join(sc_fence_clock);
      t.last_sc_fence = ++sc_counter;
    }
  }

  void fence(std::memory_order mo) {
    if (!active || reporting) return;
    sched(true);
    tick();
    fence_now(mo);
    trace.push_back({step, cur, "fence", nullptr, mo, 0, 0});
    ++me().clk.c[cur];
  }

  int futex_wait(Location& l, std::uint32_t expected, std::int64_t deadline) {
    if (!active || reporting) fail_outside("futex_wait");
    sched(true);
    tick();
    check_init(l, "futex-waits on");
    Thread& t = me();
    fence_now(std::memory_order_seq_cst);  // the system call's barriers
    StoreRec& s = l.newest();
    observe(s);
    const std::uint64_t v = s.value;
    trace.push_back({step, cur, "futex_wait", l.addr(), std::memory_order_seq_cst, v, expected});
    ++t.clk.c[cur];
    if (v != expected) {
      trace.back().note = "value differs: returns";
      return 0;
    }
    if (deadline <= now) {
      trace.back().note = "deadline passed: returns ETIMEDOUT";
      return ETIMEDOUT;
    }
    trace.back().note =
        deadline == kForever ? "sleeps" : "sleeps until " + std::to_string(deadline);
    t.state = Thread::kBlocked;
    t.futex_loc = &l;
    t.deadline = deadline;
    t.blocked_seq = ++blocked_seq;
    sched(false);
    return t.wake_reason;
  }

  void futex_wake(Location& l, int n) {
    if (!active || reporting) fail_outside("futex_wake");
    sched(true);
    tick();
    // Not an access to the word: a private futex is keyed by its address
    // alone and FUTEX_WAKE does not read the word, so the call may name an
    // object already destroyed (a mutex's unlock wakes after its releasing
    // exchange, and the lock may be gone by then). Natively, if the address
    // has been reused meanwhile, a sleeper on the new object wakes
    // spuriously; here a retired location has no sleepers.
    fence_now(std::memory_order_seq_cst);
    int woken = 0;
    std::string who;
    while (woken < n) {
      int best = -1;
      for (int u = 0; u < nthreads; ++u)
        if (threads[u].state == Thread::kBlocked && threads[u].futex_loc == &l &&
            (best < 0 || threads[u].blocked_seq < threads[best].blocked_seq))
          best = u;
      if (best < 0) break;
      Thread& b = threads[best];
      // The woken thread returns after the wake-up: Linux orders the two
      // through the futex hash bucket's lock (and a wake-up that wakes a
      // task implies a full barrier), so everything the waker did before
      // futex_wake happens before futex_wait returns. Spurious wake-ups
      // and timeouts give no such edge.
      b.clk.join(me().clk);
      b.state = Thread::kRunnable;
      b.wake_reason = 0;
      b.futex_loc = nullptr;
      b.deadline = kForever;
      who += " T" + std::to_string(best);
      ++woken;
    }
    trace.push_back({step, cur, "futex_wake", l.addr(), std::memory_order_seq_cst, 0, 0, -1, -1, -1,
                     woken ? "wakes" + who : "wakes nobody"});
    ++me().clk.c[cur];
  }

  void spin_hint(bool yield) {
    if (!active || reporting) return;
    Thread& t = me();
    drain_all(t);
    now += yield ? 1000 : 50;
    t.yielded = true;
    // PCT: a spinning thread drops below every other thread, so that the
    // thread it waits for runs (priorities alone would starve it).
    if (opts.mode == Mode::kRandom) {
      int lowest = t.priority;
      for (int u = 0; u < nthreads; ++u)
        if (threads[u].priority < lowest) lowest = threads[u].priority;
      t.priority = lowest - 1;
    }
    sched(true);
  }

  [[noreturn]] void fail_outside(const char* what) {
    std::fprintf(stderr, "model checker: %s outside a model execution (or while reporting)\n",
                 what);
    std::abort();
  }

  // ---- plain data ----------------------------------------------------------------

  void check_read(CellState& c, const void* addr) {
    if (!active || reporting) return;
    Thread& t = me();
    if (c.wepoch != 0 && c.wtid != cur && c.wepoch > t.clk.c[c.wtid])
      fail_now("data race: T" + std::to_string(cur) + " reads " + loc_name(addr) +
               ", written by T" + std::to_string(c.wtid) +
               " with no happens-before edge between the write and this read");
    c.reads[cur] = t.clk.c[cur];
  }

  void check_write(CellState& c, const void* addr) {
    if (!active || reporting) return;
    Thread& t = me();
    if (c.wepoch != 0 && c.wtid != cur && c.wepoch > t.clk.c[c.wtid])
      fail_now("data race: T" + std::to_string(cur) + " writes " + loc_name(addr) +
               ", written by T" + std::to_string(c.wtid) +
               " with no happens-before edge between the writes");
    for (int u = 0; u < nthreads; ++u)
      if (u != cur && c.reads[u] != 0 && c.reads[u] > t.clk.c[u])
        fail_now("data race: T" + std::to_string(cur) + " writes " + loc_name(addr) +
                 ", read by T" + std::to_string(u) +
                 " with no happens-before edge between that read and this write");
    c.wtid = static_cast<std::uint8_t>(cur);
    c.wepoch = t.clk.c[cur];
    for (auto& r : c.reads) r = 0;
  }

  static Explorer* g_explorer;
};

Explorer* Explorer::g_explorer = nullptr;

Explorer& ex() { return *Explorer::g_explorer; }

}  // namespace

// ---- Location --------------------------------------------------------------------

Location::Location(const void* addr, int size, std::uint64_t init) : addr_(addr), size_(size) {
  StoreRec& s = append();
  s.value = init & mask();
  Explorer* e = Explorer::g_explorer;
  if (e != nullptr && e->active) {
    // Initialisation is a plain write by the constructing thread.
    s.tid = static_cast<std::uint8_t>(e->cur);
    s.epoch = e->me().clk.c[e->cur];
    s.seen[e->cur] = s.epoch;
    s.id = static_cast<std::uint32_t>(++e->store_ids);
    init_tid_ = s.tid;
    init_epoch_ = s.epoch;
  }
}

// ---- the operations the platform forwards to ------------------------------------

std::uint64_t op_load(Location& l, std::memory_order mo) { return ex().load(l, mo); }
void op_store(Location& l, std::uint64_t v, std::memory_order mo) { ex().store(l, v, mo); }
std::uint64_t op_rmw(Location& l, Rmw op, std::uint64_t arg, std::memory_order mo) {
  return ex().rmw(l, op, arg, mo);
}
bool op_cas(Location& l, std::uint64_t& expected, std::uint64_t desired, std::memory_order success,
            std::memory_order failure) {
  return ex().cas(l, expected, desired, success, failure);
}
void op_fence(std::memory_order mo) { ex().fence(mo); }
int op_futex_wait(Location& l, std::uint32_t expected, std::int64_t deadline_ns) {
  return ex().futex_wait(l, expected, deadline_ns);
}
void op_futex_wake(Location& l, int n) { ex().futex_wake(l, n); }
void op_spin_hint(bool yield) { ex().spin_hint(yield); }

void op_destroy(Location& l) {
  Explorer* e = Explorer::g_explorer;
  if (e != nullptr && e->active && !e->reporting && !e->rebuilding) {
    const VClock& c = e->me().clk;
    for (int u = 0; u < e->nthreads; ++u)
      if (u != e->cur && l.last_access(u) > c.c[u])
        e->fail_now("data race: T" + std::to_string(e->cur) + " destroys " + e->loc_name(l.addr()) +
                    " while an access to it by T" + std::to_string(u) +
                    " does not happen before the destruction");
  }
  l.retire();
}
std::int64_t now_ns() { return Explorer::g_explorer ? ex().now : 0; }
void* current_record() { return ex().record_of_current(); }
void for_each_record(void (*f)(void* record, void* ctx), void* ctx) {
  Explorer& e = ex();
  for (int u = 0; u < e.nthreads; ++u) {
    const Thread& t = e.threads[u];
    // Only records whose building happens before the caller: reading the
    // others would be a race on their initialisation (natively the pool
    // builds them all before it publishes them, see runtime.cc), and no
    // release the caller is ordered after can have been announced in them.
    if (t.record != nullptr && t.record_epoch <= e.me().clk.c[u]) f(t.record, ctx);
  }
}
unsigned max_spinners() { return ex().opts.max_spinners; }
int wait_lock_spins() { return ex().opts.wait_lock_spins; }

void op_store_byte(Location& l, std::size_t offset, std::uint8_t v, std::memory_order mo) {
  // The whole word, from its newest value, with one byte replaced: the
  // model has no mixed-size accesses (model.h, known gaps).
  ex().store(l, v, mo, "store_byte", static_cast<int>(offset));
}

void check_read(CellState& s, const void* addr) { ex().check_read(s, addr); }
void check_write(CellState& s, const void* addr) { ex().check_write(s, addr); }

void fail(const std::string& what) {
  Explorer* e = Explorer::g_explorer;
  if (e == nullptr || !e->active) {
    std::fprintf(stderr, "model checker: %s\n", what.c_str());
    std::abort();
  }
  e->fail_now(what);
}

// ---- Execution -------------------------------------------------------------------

void Execution::spawn(std::function<void()> body) {
  Explorer& e = ex();
  if (e.nthreads >= kMaxThreads) fail("too many threads for the model (kMaxThreads)");
  Thread& t = e.threads[e.nthreads];
  t.body = std::move(body);
  t.state = Thread::kUnused;
  ++e.nthreads;
}

void Execution::describe(std::function<std::string()> f) {
  ex().describers.push_back(std::move(f));
}

void Execution::watch(const void* p, std::function<void(std::uint64_t)> f) {
  ex().watches.emplace_back(p, std::move(f));
}

void Execution::on_quiescent(std::function<std::string()> f) {
  ex().quiescent_checks.push_back(std::move(f));
}

void Execution::name(const void* p, std::size_t size, std::string n) {
  ex().regions.push_back({static_cast<const char*>(p), size, std::move(n)});
}

void Execution::run() {
  Explorer& e = ex();
  Thread& main = e.threads[0];
  e.drain_all(main);
  ++main.clk.c[0];
  for (int u = 1; u < e.nthreads; ++u) {
    Thread& t = e.threads[u];
    t.clk = main.clk;  // spawn: everything thread 0 did happens before
    t.clk.c[u] = 1;
    t.state = Thread::kRunnable;
    t.priority = 1000 + static_cast<int>(splitmix(e.rng) % 1000);
    e.start_thread(u);
  }
  ++main.clk.c[0];
  main.state = Thread::kJoining;
  e.trace.push_back({e.step, 0, "starts threads", nullptr, std::memory_order_relaxed, 0, 0});
  e.sched(false);
  // All threads finished (trampoline joined their clocks into ours).
  e.trace.push_back({e.step, 0, "joins threads", nullptr, std::memory_order_relaxed, 0, 0});
}

// ---- explore ---------------------------------------------------------------------

Result explore(const Options& opts, const std::string& name, const Scenario& s) {
  auto ex_owner = std::make_unique<Explorer>(opts, s);
  Explorer& e = *ex_owner;
  Explorer::g_explorer = &e;
  Result r;
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  const char* replay = std::getenv("RWSEM_MC_SEED");
  const bool replaying = replay != nullptr && opts.mode == Mode::kRandom;
  std::uint64_t seed = opts.seed;
  if (replaying) seed = std::strtoull(replay, nullptr, 0);
  long limit = opts.mode == Mode::kRandom ? (replaying ? 1 : opts.executions) : opts.max_executions;
  std::uint64_t failing_seed = 0;
  bool stopped_early = false;
  for (long i = 0;; ++i) {
    if (i >= limit || (i > 0 && elapsed() > opts.max_seconds)) {
      stopped_early = opts.mode == Mode::kExhaustive;
      break;
    }
    const std::uint64_t exec_seed =
        opts.mode == Mode::kRandom ? seed + static_cast<std::uint64_t>(i) : 0;
    e.replay_len = e.choices.size();
    const bool ok = e.run_one(exec_seed);
    ++r.executions;
    if (e.step > r.max_steps_seen) r.max_steps_seen = e.step;
    if (!ok) {
      r.ok = false;
      failing_seed = exec_seed;
      std::ostringstream os;
      os << name << ": " << e.failure << "\n";
      if (opts.mode == Mode::kRandom)
        os << "execution " << i << ", seed 0x" << std::hex << failing_seed << std::dec
           << "; replay it alone, with its whole interleaving: RWSEM_MC_SEED=0x" << std::hex
           << failing_seed << std::dec << " and a --gtest_filter naming this test\n";
      else {
        os << "exhaustive execution " << r.executions << ", choices:";
        for (std::size_t k = 0; k < e.pos && k < e.choices.size(); ++k)
          os << " " << e.choices[k].chosen;
        os << "\n";
      }
      os << "threads:\n" << e.state_text();
      os << "interleaving (step, thread, operation, location, order, value, store read):\n"
         << e.trace_text(replaying ? 1000000 : 400);
      r.report = os.str();
      break;
    }
    if (replaying) {
      std::fprintf(stderr, "%s: replayed seed 0x%" PRIx64 ", passed; its interleaving:\n%s",
                   name.c_str(), exec_seed, e.trace_text(100000).c_str());
    }
    if (opts.mode == Mode::kExhaustive) {
      // Next choice sequence: the last choice with options left advances.
      e.choices.resize(e.pos);
      while (!e.choices.empty() && e.choices.back().chosen + 1 >= e.choices.back().n)
        e.choices.pop_back();
      if (e.choices.empty()) {
        r.complete = true;
        break;
      }
      ++e.choices.back().chosen;
    }
  }
  r.seconds = elapsed();
  std::ostringstream sum;
  sum << name << ": " << (opts.mode == Mode::kExhaustive ? "exhaustive" : "random") << ", "
      << r.executions << " executions";
  if (opts.mode == Mode::kExhaustive) {
    sum << " (preemptions <= " << opts.preemption_bound
        << ", stale reads <= " << opts.stale_read_bound
        << ", buffered stores <= " << opts.buffered_store_bound << "; "
        << (r.complete      ? "all explored"
            : stopped_early ? "stopped at the limit"
                            : "stopped at the failure")
        << ")";
  } else {
    // ci/qualify reads this form (ci/testlog.py, MODEL_RANDOM_RE) to check
    // that each random scenario ran from the seed base it was given.
    sum << " (seeds 0x" << std::hex << seed << "..0x"
        << seed + static_cast<std::uint64_t>(r.executions - 1) << std::dec << ", PCT depth "
        << opts.pct_depth << ")";
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, ", longest %ld steps, %.2f s", r.max_steps_seen, r.seconds);
  sum << buf << (r.ok ? "" : ", FAILED");
  r.summary = sum.str();
  Explorer::g_explorer = nullptr;
  return r;
}

}  // namespace mc
}  // namespace rwsem
