#include <pthread.h>
#include <sched.h>
#include <sys/auxv.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "arch/futex.h"
#include "lib/rwsem/config.h"
#include "lib/rwsem/internal/platform.h"
#include "lib/rwsem/internal/runtime.h"
#include "lib/rwsem/internal/time_slice.h"

// Where glibc (2.35 and later) registered the calling thread's rseq area:
// at the thread pointer plus __rseq_offset, __rseq_size > 0 once registered.
// Weak, so that the library links against a C library without them (then
// the extension is off).
extern "C" {
extern const std::ptrdiff_t __rseq_offset __attribute__((weak));
extern const unsigned int __rseq_size __attribute__((weak));
}

namespace rwsem {
namespace {

std::atomic<std::int64_t> g_default_handoff_ns{kDefaultHandoffTimeout.count()};
std::atomic<std::int64_t> g_default_spin_ns{kDefaultSpinBudget.count()};
// nullptr = the real monotonic clock. Written only by tests
// (set_handoff_clock_override()).
std::atomic<const std::atomic<std::int64_t>*> g_clock_override{nullptr};

// Into [0, kMaxDefaultTunable] (config.h says why): the lock adds these to
// a clock reading, and a signed overflow there is undefined behaviour.
std::int64_t clamp_tunable(std::chrono::nanoseconds d) {
  if (d.count() < 0) return 0;
  return d > kMaxDefaultTunable ? kMaxDefaultTunable.count() : d.count();
}

}  // namespace

void set_default_handoff_timeout(std::chrono::nanoseconds timeout) {
  g_default_handoff_ns.store(clamp_tunable(timeout), std::memory_order_relaxed);
}

std::chrono::nanoseconds default_handoff_timeout() {
  return std::chrono::nanoseconds(g_default_handoff_ns.load(std::memory_order_relaxed));
}

void set_default_spin_budget(std::chrono::nanoseconds budget) {
  g_default_spin_ns.store(clamp_tunable(budget), std::memory_order_relaxed);
}

std::chrono::nanoseconds default_spin_budget() {
  return std::chrono::nanoseconds(g_default_spin_ns.load(std::memory_order_relaxed));
}

namespace internal {

std::int64_t default_spin_budget_ns() { return g_default_spin_ns.load(std::memory_order_relaxed); }

std::int64_t default_handoff_timeout_ns() {
  return g_default_handoff_ns.load(std::memory_order_relaxed);
}

std::int64_t handoff_clock_now() {
  // acquire pairs with the release in set_handoff_clock_override(), so a
  // thread that sees the override also sees its initial time.
  const std::atomic<std::int64_t>* clock = g_clock_override.load(std::memory_order_acquire);
  // relaxed: the clock's value orders nothing; a test advances it while the
  // waiters it means to time out are queued, and they read it under the
  // wait lock.
  return clock != nullptr ? clock->load(std::memory_order_relaxed) : arch::monotonic_now_ns();
}

bool set_handoff_clock_override(const std::atomic<std::int64_t>* clock) {
  if (clock == nullptr) {
    // relaxed: a reader that sees nullptr dereferences nothing, so there is
    // nothing to publish. The override's owner removes it only after every
    // thread that locks has stopped (FakeHandoffClock's contract), so no
    // reader still holds the old pointer.
    g_clock_override.store(nullptr, std::memory_order_relaxed);
    return true;
  }
  const std::atomic<std::int64_t>* expected = nullptr;
  // release pairs with the acquire in handoff_clock_now().
  return g_clock_override.compare_exchange_strong(expected, clock, std::memory_order_release,
                                                  std::memory_order_relaxed);
}

namespace {

// The never-freed pool of thread records (see thread_record.h).
//
// Records come in chunks of kSize, never freed. A record is taken from the
// free list (records returned by exited threads) or, when that is empty,
// is the newest chunk's next record never handed out; a new chunk is made
// when the newest is used up. The chunks form a list that only grows at
// its head, so for_each_thread_record() walks it without the pool's lock:
// all of every older chunk, and the newest chunk's records handed out so
// far.
//
// fork(): the child is a copy of one thread, so a pool lock held by another
// parent thread at the fork would stay held in the child for ever. The
// pool's lock is therefore taken around fork() (pthread_atfork) and
// released in both processes, so a child can always get records for the
// threads it starts. The records of the parent's other threads are simply
// never returned in the child; the child clears their `unlocking` marks,
// since those threads will never finish the releases they announce.
struct RecordChunk {
  static constexpr int kSize = 64;
  ThreadRecord records[kSize];
  RecordChunk* older = nullptr;  // written before the chunk is published
  // records[0, handed_out) have been handed out at least once. Grows, by
  // one, only under the pool's lock.
  std::atomic<int> handed_out{0};
};

class RecordPool {
 public:
  RecordPool() {
    pthread_atfork([] { pool().mu_.lock(); }, [] { pool().mu_.unlock(); },
                   [] { pool().after_fork_in_child(); });
    // Records go back to the pool from this key's destructor. glibc runs
    // key destructors after all C++ thread_local destructors, so a
    // thread_local destructor that locks still has the thread's record.
    // A lock taken even later (another key's destructor) gets a fresh
    // record, returned in the next destructor round.
    if (pthread_key_create(&key_, [](void* r) {
      t_current_record = nullptr;
      pool().give_back(static_cast<ThreadRecord*>(r));
    }) != 0) {
      std::fprintf(stderr, "rwsem: pthread_key_create failed\n");
      std::abort();
    }
  }

  ThreadRecord* take() {
    std::lock_guard<std::mutex> g(mu_);
    if (!free_.empty()) {
      ThreadRecord* r = free_.back();
      free_.pop_back();
      return r;
    }
    // relaxed: the head and handed_out change only under mu_, which we hold.
    RecordChunk* c = newest_.load(std::memory_order_relaxed);
    int i = c != nullptr ? c->handed_out.load(std::memory_order_relaxed) : RecordChunk::kSize;
    if (i == RecordChunk::kSize) {
      RecordChunk* chunk = new RecordChunk;  // never deleted
      chunk->older = c;
      // release pairs with the acquire in for_each(): a walker that finds
      // the chunk sees it built.
      newest_.store(chunk, std::memory_order_release);
      c = chunk;
      i = 0;
    }
    // relaxed: a walker that must see this record (one destroying a lock the
    // new thread will release) is ordered after the thread's use of it, and
    // so after this store; other walkers may see either value.
    c->handed_out.store(i + 1, std::memory_order_relaxed);
    return &c->records[i];
  }
  void give_back(ThreadRecord* r) {
    std::lock_guard<std::mutex> g(mu_);
    free_.push_back(r);
  }
  void for_each(void (*f)(ThreadRecord&, void*), void* ctx) {
    // acquire pairs with the release in take().
    for (RecordChunk* c = newest_.load(std::memory_order_acquire); c != nullptr; c = c->older) {
      // relaxed: see take().
      const int n = c->handed_out.load(std::memory_order_relaxed);
      for (int i = 0; i < n; ++i) f(c->records[i], ctx);
    }
  }
  pthread_key_t key() const { return key_; }

  void after_fork_in_child() {
    mu_.unlock();
    // relaxed: the child has one thread, this one.
    for_each([](ThreadRecord& r, void*) { r.unlocking.store(nullptr, std::memory_order_relaxed); },
             nullptr);
  }

  static RecordPool& pool() {
    static RecordPool* p = new RecordPool;  // outlives every thread's exit
    return *p;
  }

 private:
  std::mutex mu_;
  std::vector<ThreadRecord*> free_;
  std::atomic<RecordChunk*> newest_{nullptr};
  pthread_key_t key_;
};

}  // namespace

void for_each_thread_record(void (*f)(ThreadRecord&, void*), void* ctx) {
  RecordPool::pool().for_each(f, ctx);
}

ThreadRecord& current_thread_slow() {
  RecordPool& pool = RecordPool::pool();
  ThreadRecord* r = pool.take();
  const auto addr = reinterpret_cast<std::uintptr_t>(r);
  const std::uint64_t id = static_cast<std::uint64_t>(addr) >> kOwnerIdShift;
  if (id == 0 || (addr & ((std::uintptr_t{1} << kOwnerIdShift) - 1)) != 0 ||
      thread_from_owner_id<NativePlatform>(id) != r) {
    std::fprintf(stderr,
                 "rwsem: thread record %p is not %d-byte aligned; owner ids "
                 "would not round-trip\n",
                 static_cast<void*>(r), 1 << kOwnerIdShift);
    std::abort();
  }
  r->tid = static_cast<std::uint32_t>(syscall(SYS_gettid));
  r->parked.store(false, std::memory_order_relaxed);
  r->sleep.store(ThreadRecord::kAwake, std::memory_order_relaxed);
  if (pthread_setspecific(pool.key(), r) != 0) {
    std::fprintf(stderr, "rwsem: pthread_setspecific failed\n");
    std::abort();
  }
  t_current_record = r;
  return *r;
}

// ---- the rseq time-slice extension (time_slice.h) ---------------------------

namespace {

// The kernel's ABI numbers (include/uapi/linux/prctl.h, auxvec.h and the
// syscall tables). rseq_slice_yield is 471 in the common numbering every
// architecture this project builds for uses since Linux 5.1, offset by
// the ABI's base on MIPS; a C library's own number wins.
constexpr int kPrRseqSliceExtension = 79;
constexpr unsigned long kPrRseqSliceExtensionSet = 2;
constexpr unsigned long kPrRseqSliceExtEnable = 1;
constexpr unsigned long kAtRseqFeatureSize = 27;
#if defined(__NR_rseq_slice_yield)
constexpr long kSysRseqSliceYield = __NR_rseq_slice_yield;
#elif defined(__mips__)
constexpr long kSysRseqSliceYield = __NR_Linux + 471;
#else
constexpr long kSysRseqSliceYield = 471;
#endif

void rseq_slice_yield() { syscall(kSysRseqSliceYield); }

// Does the kernel know the slice control field of the rseq area the C
// library registered? Asked once: both answers hold for the whole process.
bool process_may_extend_slices() {
  static const bool may = [] {
    if (&__rseq_size == nullptr || &__rseq_offset == nullptr || __rseq_size == 0) return false;
    return getauxval(kAtRseqFeatureSize) >= kSliceCtrlOffset + sizeof(SliceCtrl);
  }();
  return may;
}

}  // namespace

void time_slice_lookup(TimeSliceState& s) {
  s.looked_up = true;
  s.ctrl = nullptr;
  if (!process_may_extend_slices()) return;
  // Per thread: the kernel turns the extension on for the calling thread.
  if (prctl(kPrRseqSliceExtension, kPrRseqSliceExtensionSet, kPrRseqSliceExtEnable, 0, 0) != 0)
    return;
  s.ctrl = reinterpret_cast<SliceCtrl*>(static_cast<char*>(__builtin_thread_pointer()) +
                                        __rseq_offset + kSliceCtrlOffset);
  s.give_back = rseq_slice_yield;
}

bool time_slice_extension_active() { return this_thread_time_slice().ctrl != nullptr; }

void set_time_slice_for_testing(SliceCtrl* ctrl, void (*give_back)()) {
  TimeSliceState& s = t_time_slice;
  s = TimeSliceState{};
  if (ctrl == nullptr) {
    time_slice_lookup(s);
    return;
  }
  s.looked_up = true;
  s.ctrl = ctrl;
  s.give_back = give_back;
}

// sched_getscheduler() is a system call, and the spin and handoff paths ask
// on every slow-path entry (measured: 4% of CPU with 32 threads on 2 cores).
// A thread's policy rarely changes, so the answer is kept per thread for
// 1 ms: a thread that changes its policy is treated by the new one within a
// millisecond.
bool current_thread_is_realtime() {
  thread_local std::int64_t checked_ns = -1;  // monotonic time is never negative
  thread_local bool rt = false;
  const std::int64_t now = arch::monotonic_now_ns();
  if (checked_ns < 0 || now - checked_ns > 1000000 || now < checked_ns) {
    const int policy = sched_getscheduler(0);
    rt = policy == SCHED_FIFO || policy == SCHED_RR;
    checked_ns = now;
  }
  return rt;
}

unsigned max_spinners() {
  static const unsigned n = [] {
    cpu_set_t set;
    long cpus = 0;
    // The process's CPUs, read from its main thread (tid == pid), not from
    // whichever thread asks first: a thread pinned to one CPU must not turn
    // spinning off for the whole process.
    if (sched_getaffinity(getpid(), sizeof set, &set) == 0) cpus = CPU_COUNT(&set);
    if (cpus <= 0) cpus = sysconf(_SC_NPROCESSORS_ONLN);
    return cpus > 1 ? static_cast<unsigned>(cpus - 1) : 0u;
  }();
  return n;
}

void debug_fail(const char* what, const void* lock, const std::string& decoded_state) {
  std::fprintf(stderr,
               "rwsem DEBUG: %s\n  lock:   %p\n  count:  %s\n  thread: tid %ld "
               "(owner id 0x%llx)\n",
               what, lock, decoded_state.c_str(), static_cast<long>(syscall(SYS_gettid)),
               static_cast<unsigned long long>(current_thread().owner_id()));
  std::fflush(stderr);
  std::abort();
}

void append_format(std::string* out, const char* fmt, ...) {
  char buf[256];
  std::va_list ap;
  va_start(ap, fmt);
  const int n = std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n > 0) out->append(buf, std::min<std::size_t>(static_cast<std::size_t>(n), sizeof buf - 1));
}

}  // namespace internal
}  // namespace rwsem
