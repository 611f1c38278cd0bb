// The rseq time-slice extension around the wait lock's sections
// (lib/rwsem/internal/time_slice.h).
//
//  - Detection: the library uses the extension on a thread exactly when the
//    kernel accepts it for a thread, asked here directly (prctl) on a thread
//    the library has not touched. On a kernel without it (Linux 6.18 and
//    earlier, QEMU user mode) that is "off"; a detection that turned it on
//    there would fail, one that never turns it on fails on a kernel that
//    has it.
//  - The protocol, against a stand-in for the thread's rseq control (no
//    kernel here grants anything): every wait-lock section requests an
//    extension and withdraws the request when it ends, gives a grant back,
//    and leaves a request of the caller's own alone; the locks' slow paths
//    (which take the wait lock) run inside such sections and end them.
#include <gtest/gtest.h>
#include <sys/auxv.h>
#include <sys/prctl.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "lib/rwsem/internal/count_bits.h"
#include "lib/rwsem/internal/platform.h"
#include "lib/rwsem/internal/time_slice.h"
#include "lib/rwsem/internal/wait_lock.h"
#include "lib/rwsem/mutex.h"
#include "lib/rwsem/rwsem.h"

extern "C" {
extern const unsigned int __rseq_size __attribute__((weak));
}

namespace {

using rwsem::internal::SliceCtrl;
using WaitLock = rwsem::internal::BasicWaitLock<rwsem::internal::NativePlatform>;

// Runs f on a new thread and waits for it: a thread whose slice state the
// library has not looked up yet.
template <class F>
void on_fresh_thread(F f) {
  std::thread t(f);
  t.join();
}

TEST(TimeSliceExtension, OnExactlyWhereTheKernelAcceptsIt) {
  int kernel_errno = 0;
  bool kernel_accepts = false;
  on_fresh_thread([&] {
    // PR_RSEQ_SLICE_EXTENSION (79), PR_RSEQ_SLICE_EXTENSION_SET (2),
    // PR_RSEQ_SLICE_EXT_ENABLE (1). Spelled out here, not taken from
    // runtime.cc, on purpose: a wrong number there must not also be the
    // number this test asks the kernel with.
    kernel_accepts = prctl(79, 2, 1, 0, 0) == 0;
    kernel_errno = kernel_accepts ? 0 : errno;
  });
  bool active = false;
  long enabled_after = -1;
  on_fresh_thread([&] {
    active = rwsem::internal::time_slice_extension_active();
    // PR_RSEQ_SLICE_EXTENSION_GET (1): the thread's current setting.
    if (active) enabled_after = prctl(79, 1, 0, 0, 0);
  });
  std::printf(
      "rseq time-slice extension: kernel rseq feature size %lu, C library rseq size %u, "
      "kernel %s it for a thread%s%s; the library has it %s\n",
      getauxval(27), &__rseq_size != nullptr ? __rseq_size : 0u,
      kernel_accepts ? "enables" : "does not enable", kernel_accepts ? "" : " (",
      kernel_accepts ? "" : (std::string(std::strerror(kernel_errno)) + ")").c_str(),
      active ? "on" : "off");
  EXPECT_EQ(active, kernel_accepts);
  // On: the library really turned it on for its thread.
  if (active) EXPECT_EQ(enabled_after & 1, 1);
}

// A stand-in for the calling thread's rseq control, and for
// rseq_slice_yield(2): counts the grants given back.
thread_local int t_given_back = 0;
void count_give_back() { ++t_given_back; }

struct FakeSlice {
  SliceCtrl ctrl{};
  FakeSlice() {
    t_given_back = 0;
    rwsem::internal::set_time_slice_for_testing(&ctrl, count_give_back);
  }
  ~FakeSlice() { rwsem::internal::set_time_slice_for_testing(nullptr, nullptr); }
};

TEST(TimeSliceExtension, WaitLockSectionRequestsAndWithdraws) {
  FakeSlice fake;
  WaitLock wl;
  for (int i = 0; i < 2; ++i) {  // the first taking, then a taking of a used lock
    wl.lock();
    EXPECT_EQ(fake.ctrl.request, 1) << "taking " << i;
    wl.unlock();
    EXPECT_EQ(fake.ctrl.request, 0) << "taking " << i;
  }
  if (wl.try_lock()) {
    EXPECT_EQ(fake.ctrl.request, 1);
    wl.unlock();
    EXPECT_EQ(fake.ctrl.request, 0);
  } else {
    ADD_FAILURE() << "try_lock() of a free wait lock failed";
  }
  EXPECT_EQ(t_given_back, 0) << "nothing was granted, so nothing is given back";
}

TEST(TimeSliceExtension, GrantIsGivenBackWhenTheSectionEnds) {
  FakeSlice fake;
  WaitLock wl;
  wl.lock();
  // The kernel defers a preemption: it clears the request and grants.
  fake.ctrl.request = 0;
  fake.ctrl.granted = 1;
  EXPECT_EQ(t_given_back, 0);
  wl.unlock();
  EXPECT_EQ(t_given_back, 1);
  EXPECT_EQ(fake.ctrl.request, 0);
}

TEST(TimeSliceExtension, CallersOwnRequestIsLeftAlone) {
  FakeSlice fake;
  WaitLock wl;
  fake.ctrl.request = 1;  // the caller's own section asked first
  wl.lock();
  wl.unlock();
  EXPECT_EQ(fake.ctrl.request, 1) << "the caller's request was withdrawn under it";
  // Granted during our section: the grant is the caller's to give back.
  wl.lock();
  fake.ctrl.request = 0;
  fake.ctrl.granted = 1;
  wl.unlock();
  EXPECT_EQ(t_given_back, 0) << "the caller's grant was given back by the lock";
}

// Whether a waiter is queued on the lock: the WAITERS bit of its word,
// which the waiter sets inside its first wait-lock section.
bool has_queued_waiter(const rwsem::RwSemaphore& m) {
  return rwsem::internal::CountBits<rwsem::RwSemaphore::layout_type>::has_waiters(m.count());
}
bool has_queued_waiter(const rwsem::Mutex& m) {
  return rwsem::MutexOwnerLayout::has_waiters(m.count());
}

// The slow paths that queue take the wait lock; with a kernel that grants
// every request, each of their sections ends by giving the grant back.
// A timed writer queues behind the holder, times out and leaves the queue:
// at least two wait-lock sections, which end with no request left open.
// Whether it queues at all is up to timing: a waiter that spends its whole
// timeout before the queue (spinning on the holder, or preempted on a
// loaded machine, as under QEMU) gives up without a section. So an attempt
// counts only if this thread saw the waiter queued (WAITERS, set inside
// the waiter's first section, while the holder keeps the lock), and the
// timeout doubles (up to about a second) until one does; a waiter that
// never sets WAITERS never counts, and the hang guard ends the test.
template <class Lock>
void slow_paths_run_in_sections() {
  Lock m;
  m.lock();
  using std::chrono::milliseconds;
  for (milliseconds timeout(2);; timeout = std::min(timeout * 2, milliseconds(1024))) {
    std::atomic<bool> done{false};
    int given_back = 0;
    std::uint8_t request_after = 0xff;
    std::thread waiter([&] {
      FakeSlice fake;
      fake.ctrl.granted = 1;
      EXPECT_FALSE(m.try_lock_for(timeout));
      given_back = t_given_back;
      request_after = fake.ctrl.request;
      // relaxed: join() below orders the results before their use.
      done.store(true, std::memory_order_relaxed);
    });
    bool seen_queued = false;
    while (!done.load(std::memory_order_relaxed)) {  // relaxed: see the store
      seen_queued = seen_queued || has_queued_waiter(m);
      std::this_thread::yield();
    }
    waiter.join();
    EXPECT_EQ(request_after, 0) << "a section was left open";
    if (seen_queued) {
      EXPECT_GE(given_back, 2) << "a waiter that queued with a " << timeout.count()
                               << " ms timeout gave back " << given_back << " grants";
      break;
    }
    std::printf("the waiter gave up before it queued, with a %lld ms timeout; again, longer\n",
                static_cast<long long>(timeout.count()));
  }
  m.unlock();
}

TEST(TimeSliceExtension, RwSemaphoreSlowPathsRunInSections) {
  slow_paths_run_in_sections<rwsem::RwSemaphore>();
}

TEST(TimeSliceExtension, MutexSlowPathsRunInSections) {
  slow_paths_run_in_sections<rwsem::Mutex>();
}

}  // namespace
