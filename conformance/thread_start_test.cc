// The corpus's thread starts (test_util.h): a thread that cannot be started
// fails the test at once, with the error and the number of threads already
// running, instead of leaving the test to hang on threads that never came.
//
// The failures here are real pthread_create failures: a stack larger than
// the address space, and (where the limit can be imposed) an address space
// that runs out part-way through a batch, as a 32-bit guest's does when a
// test starts hundreds of threads with large stacks.
#include <errno.h>
#include <gmock/gmock.h>
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "conformance/test_util.h"
#include "lib/rwsem/rwsem.h"

namespace rwsem_test {
namespace {

using Clock = std::chrono::steady_clock;
using ::testing::AnyOf;
using ::testing::HasSubstr;

// More than the whole address space, page-aligned: pthread_create cannot
// map it on any target.
constexpr std::size_t kNoSuchStack = ~std::size_t{0} - (std::size_t{1} << 20) + 1;

// A start failure names the error pthread_create gave: glibc reports a
// stack it cannot map as EAGAIN; EINVAL and ENOMEM are the other answers
// POSIX and the kernel allow.
::testing::Matcher<const std::string&> NamesTheError() {
  return AnyOf(HasSubstr(std::strerror(EAGAIN)), HasSubstr(std::strerror(EINVAL)),
               HasSubstr(std::strerror(ENOMEM)));
}

// "Prompt": far below the hang limit the old behaviour waited out, with
// room for a slow emulated start.
constexpr auto kPrompt = std::chrono::seconds(10);

// The 300-reader shape: readers that would block behind a write lock the
// test holds. The batch cannot start, so none of them may run, and the
// failure must come back at once with the error.
TEST(ThreadStart, FailedBatchFailsAtOnceWithTheError) {
  rwsem::RwSemaphore sem;
  sem.down_write();
  std::atomic<int> ran{0};
  ThreadGroup readers(kNoSuchStack);
  const auto t0 = Clock::now();
  const ::testing::AssertionResult started = readers.spawn_n(300, [&](int) {
    ran.fetch_add(1);
    sem.down_read();
    sem.up_read();
  });
  const auto took = Clock::now() - t0;
  sem.up_write();
  readers.join();
  ASSERT_FALSE(started) << "a batch whose threads cannot be started reported success";
  const std::string msg = started.message();
  EXPECT_THAT(msg, HasSubstr("could not start thread 1 of 300 with 0 already running"));
  EXPECT_THAT(msg, HasSubstr("pthread_create: "));
  EXPECT_THAT(msg, NamesTheError());
  EXPECT_EQ(ran.load(), 0) << "a thread of a failed batch ran its body";
  EXPECT_LT(took, kPrompt);
  // The group starts nothing more.
  EXPECT_FALSE(readers.spawn_n(1, [&](int) { ran.fetch_add(1); }));
  EXPECT_EQ(ran.load(), 0);
}

// spawn() adds the failure itself (a caller that ignores its result cannot
// hide it), refuses later spawns, and eventually() then gives up at once
// instead of waiting the hang limit for a thread that never started.
TEST(ThreadStart, FailedSpawnAddsTheFailureAndEndsTheWaits) {
  ThreadGroup g(kNoSuchStack);
  bool started = true;
  EXPECT_NONFATAL_FAILURE(started = g.spawn([] {}), "could not start thread 1 of 1");
  EXPECT_FALSE(started);
  EXPECT_FALSE(g.spawn([] {})) << "the group started a thread after a failed start";

  rwsem::RwSemaphore sem;
  const auto t0 = Clock::now();
  const ::testing::AssertionResult reached =
      eventually(sem, [] { return false; }, "a thread that was never started");
  EXPECT_LT(Clock::now() - t0, kPrompt);
  EXPECT_FALSE(reached);
  EXPECT_THAT(reached.message(), HasSubstr("could not be started"));
}

TEST(ThreadStart, FailedSpawnReportsTheError) {
  ThreadGroup g(kNoSuchStack);
  ::testing::TestPartResultArray failures;
  {
    ::testing::ScopedFakeTestPartResultReporter catcher(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &failures);
    (void)g.spawn([] {});
  }
  ASSERT_EQ(failures.size(), 1);
  EXPECT_TRUE(failures.GetTestPartResult(0).nonfatally_failed());
  EXPECT_THAT(std::string(failures.GetTestPartResult(0).message()), NamesTheError());
}

#if defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define THREAD_START_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define THREAD_START_SANITIZED 1
#endif

// The address space runs out part-way through a batch, as a 32-bit guest's
// does: the threads already started are released without running, and the
// failure says how many there were.
TEST(ThreadStart, AddressSpaceRunsOutPartWayThroughABatch) {
#ifdef THREAD_START_SANITIZED
  GTEST_SKIP() << "the sanitizer runtimes abort when their own mappings hit the limit";
#else
  const bool under_qemu = std::getenv("RWSEM_UNDER_QEMU") != nullptr;
  constexpr std::size_t kStack = std::size_t{64} << 20;  // 64 MiB
  constexpr int kThreads = 200;                          // 12.5 GiB in all
  struct rlimit saved{};
  bool limited = false;
  if (under_qemu) {
    // QEMU keeps RLIMIT_AS to itself; a 32-bit guest has 4 GiB anyway.
    if (sizeof(void*) > 4)
      GTEST_SKIP() << "a 64-bit guest has room for every stack, and QEMU does not pass "
                      "RLIMIT_AS on";
  } else {
    // The address space in use now, plus 1 GiB: about 16 of the stacks.
    long pages = 0;
    if (FILE* f = std::fopen("/proc/self/statm", "r")) {
      if (std::fscanf(f, "%ld", &pages) != 1) pages = 0;
      std::fclose(f);
    }
    ASSERT_GT(pages, 0) << "cannot read /proc/self/statm";
    ASSERT_EQ(getrlimit(RLIMIT_AS, &saved), 0) << std::strerror(errno);
    struct rlimit lim = saved;
    lim.rlim_cur =
        static_cast<rlim_t>(pages) * static_cast<rlim_t>(sysconf(_SC_PAGESIZE)) + (rlim_t{1} << 30);
    if (saved.rlim_cur != RLIM_INFINITY && saved.rlim_cur < lim.rlim_cur)
      lim.rlim_cur = saved.rlim_cur;
    ASSERT_EQ(setrlimit(RLIMIT_AS, &lim), 0) << std::strerror(errno);
    limited = true;
  }

  rwsem::RwSemaphore sem;
  sem.down_write();
  std::atomic<int> ran{0};
  ThreadGroup readers(kStack);
  const auto t0 = Clock::now();
  const ::testing::AssertionResult started = readers.spawn_n(kThreads, [&](int) {
    ran.fetch_add(1);
    sem.down_read();
    sem.up_read();
  });
  const auto took = Clock::now() - t0;
  if (limited) setrlimit(RLIMIT_AS, &saved);
  sem.up_write();
  readers.join();

  ASSERT_FALSE(started) << kThreads << " stacks of 64 MiB fitted in the address space";
  const std::string msg = started.message();
  EXPECT_THAT(msg, HasSubstr("pthread_create: "));
  EXPECT_THAT(msg, NamesTheError());
  unsigned index = 0, of = 0, running = 0;
  ASSERT_EQ(std::sscanf(msg.c_str(), "could not start thread %u of %u with %u already running",
                        &index, &of, &running),
            3)
      << msg;
  EXPECT_EQ(of, unsigned{kThreads});
  EXPECT_EQ(index, running + 1);
  EXPECT_GT(running, 0u) << "the limit left no room for even one stack: " << msg;
  EXPECT_LT(running, unsigned{kThreads});
  EXPECT_THAT(msg, HasSubstr("the " + std::to_string(running) + " started of this batch of " +
                             std::to_string(kThreads) + " exited without running"));
  EXPECT_EQ(ran.load(), 0) << "a thread of a failed batch ran its body";
  EXPECT_LT(took, kPrompt);
  std::printf("[thread start] %u stacks of 64 MiB started before: %s\n", running, msg.c_str());
#endif
}

// A batch that can start runs every body exactly once, each with its index.
TEST(ThreadStart, BatchRunsEveryIndexOnce) {
  constexpr int kThreads = 300;
  std::atomic<int> seen[kThreads] = {};
  ThreadGroup g;
  ASSERT_TRUE(g.spawn_n(kThreads, [&](int i) { seen[i].fetch_add(1); }));
  g.join();
  for (int i = 0; i < kThreads; ++i) EXPECT_EQ(seen[i].load(), 1) << "thread " << i;
}

}  // namespace
}  // namespace rwsem_test
