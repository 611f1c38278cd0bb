// A model checker for the lock's own code: a deterministic scheduler and an
// emulation of the C++ memory model, driven through the lock's platform
// policy (lib/rwsem/internal/platform.h; ModelPlatform in
// model_platform.h). Test-only.
//
// What it is for
// ==============
// Native runs and ThreadSanitizer see the orderings of the host (x86: TSO),
// and QEMU runs every guest with the host's ordering too. TSan reports a
// race on plain data that no happens-before edge orders, but an ordering
// bug *between atomics* (two sides of a store-buffering protocol, a
// hand-over that guards only atomics) or a lost wake-up that x86's locked
// instructions hide is invisible to both. Here every atomic operation, fence
// and futex call of the lock is a step of a scheduler that runs one thread
// at a time, and every load may return any store the C++ memory model lets
// it return.
//
// Threads
// -------
// Model threads are coroutines on one OS thread (ucontext): thread 0 runs
// the scenario's set-up and final checks, threads 1..N the bodies it
// spawns. A thread runs until its next visible operation (atomic access,
// fence, futex call, clock read is *not* one), where the scheduler may
// switch. futex_wait blocks the thread in the scheduler; futex_wake makes
// blocked threads runnable, and the woken thread's return happens after the
// wake (Linux orders them through the futex hash bucket's lock; spurious
// wake-ups and timeouts carry no such edge); a timed wait may time out at
// any scheduling point (virtual time then jumps to its deadline). Both
// futex calls are seq_cst fences, as the system call is. futex_wait reads
// the word; futex_wake names it only by address and is not an access (it
// may follow the object's destruction). When no thread can run
// and none has a deadline, the execution is reported as a deadlock or lost
// wake-up, with every thread's state and the scenario's decoded lock state.
//
// Virtual time: every visible operation advances a global clock by 1 ns, a
// spin hint (cpu_relax) by 50 ns and a yield by 1 us, so spin budgets and
// handoff timeouts expire after a bounded number of steps.
//
// Memory model
// ------------
// Each atomic location keeps its last kHistory stores in modification order
// (mo). A thread's vector clock is its happens-before (hb) view.
//  - A load may read any store from a floor up to the newest. The floor is
//    the newest store that (a) the thread has read or written itself or that
//    another thread read or wrote in an event that happens before the load
//    (coherence: CoRR, CoWR, CoRW), (b) was written before a seq_cst fence
//    that precedes one of this thread's seq_cst fences in the single total
//    order S, or a seq_cst store that precedes such a fence, (c) for a
//    seq_cst load, the newest seq_cst store and every store written before
//    a seq_cst fence that precedes the load in S.
//  - An acquire load of a release store (or of an RMW in its release
//    sequence) joins the store's clock; a relaxed load remembers it for the
//    thread's next acquire fence; a release fence gives later relaxed stores
//    the clock of the fence.
//  - Read-modify-writes read the newest store. A compare-exchange that fails
//    is a load and may read an older store whose value is not `expected`.
//  - Store buffers: a relaxed store may stay in its thread's buffer (the
//    thread itself reads it; nobody else does) and enter mo later, after
//    stores that executed after it. The thread's release operations,
//    seq_cst fences, futex calls and its RMWs on the same location drain
//    its buffer first; so does its end.
//  - Initialising and destroying an atomic are plain writes: an access
//    that the initialisation does not happen before (an object published
//    without release/acquire) is a data race, so is a destruction that an
//    earlier access by another thread does not happen before, and an access
//    after the destructor ran is a use after free.
// Known gaps (it under-approximates; it never reports an execution that
// C++ with Linux's futex ordering forbids): a store never enters mo before
// a store that is already there except through the buffer above, so load
// buffering and some store-store reorderings across threads are not
// produced; a seq_cst load never reads a store older than the newest
// seq_cst store; compare_exchange_weak never fails spuriously; mixed-size
// accesses (the queued rwlock's writer byte) are modelled as a store of the
// whole word computed from its newest value; and the hardware's own
// behaviour beyond the C++ model is not modelled (a target's compiler maps
// C++'s orders onto it; that mapping is the compiler's to get right).
// One way it can report what cannot happen: a timed wait past its deadline
// is not made to time out while another thread can run, so a thread that
// spins without end (yielding) keeps a due sleeper asleep, and the
// execution ends as a livelock where a real timer would have fired. A
// scenario whose holders sleep while its waiters spin (the queued rwlock
// with sleeping sections, explored exhaustively) meets this; none of the
// scenarios does.
//
// Exploration
// -----------
//  - Exhaustive (Mode::kExhaustive): depth-first over every choice (which
//    thread runs, which store a load reads, whether a store is buffered and
//    when it drains, when a timed wait times out), bounded by preemptions
//    (switching away from a thread that could go on), by stale reads and by
//    buffered stores per execution. A spin hint (cpu_relax, yield) hands
//    over to the next runnable thread in turn without a choice (a fair
//    yield, as in CHESS): spin loops would otherwise multiply the schedules
//    at every iteration; the orders they leave out are reached through
//    preemptions. Stateless: a choice sequence is replayed from the start,
//    so the code under test must be deterministic.
//  - In both modes a spinning thread lets every other runnable thread go
//    first, and an execution longer than Options::max_steps is reported as
//    a livelock.
//  - Random (Mode::kRandom): PCT-style priorities (random priorities, d-1
//    random points where the running thread drops to the lowest; a thread
//    that gives a spin hint drops to the lowest too), random
//    stale reads, buffered stores and timeouts, spurious futex wake-ups.
//    Execution i runs with seed `seed + i`, printed on failure; set
//    RWSEM_MC_SEED to replay it alone, with its trace.
// A failure prints the interleaving: step, thread, operation, location,
// memory order, the value read and the store it came from (with the newest
// store when a load read an older one).
//
// An atomic object is retired by its destructor; its memory stays (the
// checker owns every stack), so a late access is seen, not undefined.
//
// Plain data of the test goes in Cell<T>, and the lock's own plain shared
// data (its wait queue, the fields of a waiter that wakers write) in
// Plain<T> (ModelPlatform::Plain): every access is checked against
// happens-before, so an access that is not ordered after the last
// conflicting one is reported as a data race even where the host would
// have hidden it.
#ifndef RWSEM_CONFORMANCE_MODEL_MODEL_H_
#define RWSEM_CONFORMANCE_MODEL_MODEL_H_

#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <type_traits>

namespace rwsem {
namespace mc {

inline constexpr int kMaxThreads = 8;   // thread 0 (set-up) + 7 spawned
inline constexpr int kHistory = 8;      // stores kept per location

// A vector clock over the model threads.
struct VClock {
  std::uint32_t c[kMaxThreads] = {};
  void join(const VClock& o) {
    for (int i = 0; i < kMaxThreads; ++i)
      if (o.c[i] > c[i]) c[i] = o.c[i];
  }
};

// One store in a location's modification order.
struct StoreRec {
  std::uint64_t value = 0;
  std::uint32_t id = 0;        // global store number (the step that made it)
  std::uint8_t tid = 0;        // writer
  bool sc = false;             // a seq_cst store (or seq_cst RMW)
  std::uint32_t epoch = 0;     // writer's clock at the store
  std::uint64_t sc_index = 0;  // place in S if sc
  VClock rel;                  // what an acquire load of this store gets
  std::uint32_t seen[kMaxThreads] = {};  // first epoch each thread observed it
};

// The type-erased state of one atomic object.
class Location {
 public:
  Location(const void* addr, int size, std::uint64_t init);
  // Stores 0..count()-1 in mo; the oldest kHistory are kept.
  std::uint64_t count() const { return n_; }
  std::uint64_t oldest() const { return n_ > kHistory ? n_ - kHistory : 0; }
  StoreRec& at(std::uint64_t i) { return hist_[i % kHistory]; }
  const StoreRec& at(std::uint64_t i) const { return hist_[i % kHistory]; }
  StoreRec& newest() { return at(n_ - 1); }
  StoreRec& append() { return at(n_++); }
  const void* addr() const { return addr_; }
  int size() const { return size_; }
  // Who initialised the object, and when: initialisation is a plain write,
  // so an access that it does not happen before is a data race.
  std::uint8_t init_tid() const { return init_tid_; }
  std::uint32_t init_epoch() const { return init_epoch_; }
  // The object was destroyed; any later access is a use after free.
  bool dead() const { return dead_; }
  void retire() { dead_ = true; }
  // Each thread's clock at its latest access (0: never accessed).
  std::uint32_t last_access(int tid) const { return last_[tid]; }
  void accessed(int tid, std::uint32_t epoch) { last_[tid] = epoch; }
  std::uint64_t mask() const { return size_ >= 8 ? ~0ull : (1ull << (8 * size_)) - 1; }

 private:
  const void* addr_;
  int size_;
  std::uint8_t init_tid_ = 0;
  std::uint32_t init_epoch_ = 0;
  bool dead_ = false;
  std::uint32_t last_[kMaxThreads] = {};
  std::uint64_t n_ = 0;
  StoreRec hist_[kHistory];
};

enum class Rmw : std::uint8_t { kXchg, kAdd, kSub, kOr, kAnd };

// The operations the platform policy forwards to. All act for the current
// model thread.
std::uint64_t op_load(Location& l, std::memory_order mo);
void op_store(Location& l, std::uint64_t v, std::memory_order mo);
std::uint64_t op_rmw(Location& l, Rmw op, std::uint64_t arg, std::memory_order mo);
bool op_cas(Location& l, std::uint64_t& expected, std::uint64_t desired, std::memory_order success,
            std::memory_order failure);
void op_fence(std::memory_order mo);
int op_futex_wait(Location& l, std::uint32_t expected, std::int64_t deadline_ns);
void op_futex_wake(Location& l, int n);
void op_spin_hint(bool yield);
// The destructor of an atomic: a plain write, so every earlier access by
// another thread must happen before it; later accesses are uses after free.
void op_destroy(Location& l);
std::int64_t now_ns();
void* current_record();
// f(record, ctx) for every thread's record whose building happens before
// the calling step (ModelPlatform::for_each_record()).
void for_each_record(void (*f)(void* record, void* ctx), void* ctx);
unsigned max_spinners();
int wait_lock_spins();
// The byte at `offset` of the word (host byte order) set to v.
void op_store_byte(Location& l, std::size_t offset, std::uint8_t v, std::memory_order mo);

// Plain-data access checks for Cell.
struct CellState {
  std::uint8_t wtid = 0;
  std::uint32_t wepoch = 0;
  std::uint32_t reads[kMaxThreads] = {};
};
void check_read(CellState& s, const void* addr);
void check_write(CellState& s, const void* addr);

// Fails the current execution with `what` (from any model thread, or from
// the scenario's set-up and final checks).
[[noreturn]] void fail(const std::string& what);

// ---- the atomic type of ModelPlatform --------------------------------------

template <class T>
class Atomic {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>,
                "model atomics hold up to 64-bit trivially copyable values");

 public:
  Atomic() : loc_(this, sizeof(T), 0) {}
  Atomic(T v) : loc_(this, sizeof(T), bits(v)) {}  // NOLINT: as std::atomic
  Atomic(const Atomic&) = delete;
  Atomic& operator=(const Atomic&) = delete;
  ~Atomic() { op_destroy(loc_); }

  T load(std::memory_order mo = std::memory_order_seq_cst) const {
    return value(op_load(loc_, mo));
  }
  void store(T v, std::memory_order mo = std::memory_order_seq_cst) { op_store(loc_, bits(v), mo); }
  T exchange(T v, std::memory_order mo = std::memory_order_seq_cst) {
    return value(op_rmw(loc_, Rmw::kXchg, bits(v), mo));
  }
  bool compare_exchange_strong(T& expected, T desired, std::memory_order success,
                               std::memory_order failure) {
    std::uint64_t e = bits(expected);
    const bool ok = op_cas(loc_, e, bits(desired), success, failure);
    expected = value(e);
    return ok;
  }
  bool compare_exchange_strong(T& expected, T desired,
                               std::memory_order mo = std::memory_order_seq_cst) {
    return compare_exchange_strong(expected, desired, mo, failure_order(mo));
  }
  bool compare_exchange_weak(T& expected, T desired, std::memory_order success,
                             std::memory_order failure) {
    return compare_exchange_strong(expected, desired, success, failure);
  }
  bool compare_exchange_weak(T& expected, T desired,
                             std::memory_order mo = std::memory_order_seq_cst) {
    return compare_exchange_strong(expected, desired, mo, failure_order(mo));
  }
  T fetch_add(T v, std::memory_order mo = std::memory_order_seq_cst) {
    return value(op_rmw(loc_, Rmw::kAdd, bits(v), mo));
  }
  T fetch_sub(T v, std::memory_order mo = std::memory_order_seq_cst) {
    return value(op_rmw(loc_, Rmw::kSub, bits(v), mo));
  }
  T fetch_or(T v, std::memory_order mo = std::memory_order_seq_cst) {
    return value(op_rmw(loc_, Rmw::kOr, bits(v), mo));
  }
  T fetch_and(T v, std::memory_order mo = std::memory_order_seq_cst) {
    return value(op_rmw(loc_, Rmw::kAnd, bits(v), mo));
  }

  Location& location() const { return loc_; }

  // A check's look between two steps of the threads: the newest value in
  // the modification order (a store still in its thread's buffer is not
  // there yet). No thread's access, so neither checked nor recorded.
  T peek() const { return value(loc_.newest().value); }

 private:
  static std::uint64_t bits(T v) {
    std::uint64_t b = 0;
    std::memcpy(&b, &v, sizeof(T));
    return b;
  }
  static T value(std::uint64_t b) {
    T v;
    std::memcpy(&v, &b, sizeof(T));
    return v;
  }
  static constexpr std::memory_order failure_order(std::memory_order mo) {
    return mo == std::memory_order_acq_rel   ? std::memory_order_acquire
           : mo == std::memory_order_release ? std::memory_order_relaxed
                                             : mo;
  }
  mutable Location loc_;
};

// Plain data of a scenario, checked for races against happens-before.
template <class T>
class Cell {
 public:
  explicit Cell(T v = T()) : v_(v) {}
  T read() const {
    check_read(s_, this);
    return v_;
  }
  void write(T v) {
    check_write(s_, this);
    v_ = v;
  }
  // A check's look between two steps of the threads: no thread's access,
  // so neither checked nor recorded.
  T peek() const { return v_; }

 private:
  T v_;
  mutable CellState s_;
};

// Plain data of the code under test (ModelPlatform::Plain<T>): a Cell
// that reads and writes like a T, so the lock's own code keeps its syntax.
// Reading converts, assigning writes; `->` reads a pointer. Construction
// is not an access (an object's fields start out written by nobody).
template <class T>
class Plain : public Cell<T> {
 public:
  Plain(T v = T()) : Cell<T>(v) {}  // NOLINT: converts, as the T it stands for
  Plain(const Plain& o) : Cell<T>(o.read()) {}
  Plain& operator=(const Plain& o) { return *this = o.read(); }
  Plain& operator=(T v) {
    this->write(v);
    return *this;
  }
  operator T() const { return this->read(); }  // NOLINT: converts, as the T it stands for
  T operator->() const { return this->read(); }
};

// ---- exploring a scenario ----------------------------------------------------

enum class Mode { kExhaustive, kRandom };

struct Options {
  Mode mode = Mode::kRandom;
  // Exhaustive: bounds per execution.
  int preemption_bound = 2;
  int stale_read_bound = 2;
  int buffered_store_bound = 1;
  // Random: how many executions, the base seed, PCT depth.
  long executions = 2000;
  std::uint64_t seed = 1;
  int pct_depth = 3;
  // PCT: the change points fall in the first pct_horizon steps. Fixed, not
  // learnt from earlier executions, so that a seed alone replays one.
  long pct_horizon = 300;
  // Either mode: give up (unexplored rest reported) after this many
  // executions or seconds.
  long max_executions = 200000;
  double max_seconds = 60;
  // Steps after which an execution counts as a livelock.
  long max_steps = 200000;
  // What ModelPlatform::max_spinners() returns.
  unsigned max_spinners = 2;
  // What ModelPlatform::wait_lock_spins() returns. Natively 100; here each
  // spin hint lets the other threads run first, the holder too, so with
  // 100 a contender never found the wait lock still held and never slept
  // on it. With 1 it does whenever the holder is preempted in between.
  int wait_lock_spins = 1;
};

struct Result {
  bool ok = true;
  bool complete = false;  // exhaustive: every execution within the bounds ran
  long executions = 0;
  long max_steps_seen = 0;
  double seconds = 0;
  std::string report;     // the failure, with its interleaving
  std::string summary;    // one line: what ran, how many, how long
};

class Execution;
using Scenario = std::function<void(Execution&)>;

// The scenario's handle inside one execution. The scenario function runs as
// model thread 0: it builds the lock and cells (locals are fine), spawns
// threads, calls run(), then checks the final state with check().
class Execution {
 public:
  // A thread to start at run(); at most kMaxThreads - 1.
  void spawn(std::function<void()> body);
  // Decoded lock state for failure reports (deadlock, livelock, checks).
  void describe(std::function<std::string()> f);
  // Names the atomic locations inside [p, p + size) in traces.
  void name(const void* p, std::size_t size, std::string name);
  // Calls f(value) for every store that enters the modification order of
  // the atomic at p (buffered stores when they drain). For coverage: a
  // scenario counts how often the protocol state it is about was reached.
  void watch(const void* p, std::function<void(std::uint64_t)> f);
  // Calls f() whenever no thread can run and some wait with a deadline,
  // just before the earliest of them times out; f returns what is wrong
  // with that state, or "" if nothing is. Nothing changes there until the
  // timeout, so a thread asleep waiting for something already true (the
  // lock it wants is free) lost its wake-up; the deadlock check cannot see
  // that when the sleeper's deadline (its own timeout, a handoff timer)
  // ends the wait. f must not do visible operations.
  void on_quiescent(std::function<std::string()> f);
  // Starts the spawned threads and returns when all have finished
  // (thread 0 then happens-after all of them).
  void run();
};

// Fails the execution unless `cond`.
#define MC_CHECK(cond, what)                                                               \
  do {                                                                                     \
    if (!(cond)) ::rwsem::mc::fail(std::string("check failed: ") + #cond + ": " + (what)); \
  } while (0)

Result explore(const Options& opts, const std::string& name, const Scenario& s);

}  // namespace mc
}  // namespace rwsem

#endif  // RWSEM_CONFORMANCE_MODEL_MODEL_H_
