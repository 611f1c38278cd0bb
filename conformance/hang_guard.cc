// The whole-binary hang guard: see hang_guard.h.
#include "conformance/hang_guard.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

namespace rwsem_test {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kGrace = std::chrono::seconds(5);

double env_scale(const char* name) {
  const char* s = std::getenv(name);
  const double v = s && *s ? std::atof(s) : 1.0;
  return v > 1.0 ? v : 1.0;
}

class Guard {
 public:
  static Guard& get() {
    static Guard* g = new Guard;  // never destroyed: its thread may outlive main()
    return *g;
  }

  void arm(std::string test) {
    std::lock_guard<std::mutex> l(mu_);
    arm_locked(std::move(test));
  }
  // gtest does not forward test events to listeners in a death-test child,
  // and a "fast" death-test child is a fork without the guard's thread. A
  // test that registers a lock or a seed there arms the guard itself.
  void arm_if_idle_locked() {
    if (armed_ && thread_pid_ == getpid()) return;
    const ::testing::TestInfo* t = ::testing::UnitTest::GetInstance()->current_test_info();
    arm_locked(t ? std::string(t->test_suite_name()) + "." + t->name() : "<no test>");
  }
  void arm_locked(std::string test) {
    start_thread_locked();
    test_ = std::move(test);
    limit_ = HangGuard::test_limit();
    started_ = Clock::now();
    deadline_ = started_ + limit_;
    armed_ = true;
    has_seed_ = false;
  }
  void disarm() {
    std::lock_guard<std::mutex> l(mu_);
    armed_ = false;  // the registered locks stay until their handles go
    has_seed_ = false;
  }
  void extend_until(Clock::time_point t) {
    std::lock_guard<std::mutex> l(mu_);
    deadline_ = std::max(deadline_, t + kGrace);
  }
  void set_seed(std::uint64_t s) {
    std::lock_guard<std::mutex> l(mu_);
    arm_if_idle_locked();
    seed_ = s;
    has_seed_ = true;
  }
  std::uint64_t add(std::string name, std::function<std::string()> dump) {
    std::lock_guard<std::mutex> l(mu_);
    arm_if_idle_locked();
    const std::uint64_t id = ++next_id_;
    locks_.emplace(id, Entry{std::move(name), std::move(dump)});
    return id;
  }
  void remove(std::uint64_t id) {
    std::lock_guard<std::mutex> l(mu_);
    locks_.erase(id);
  }

 private:
  struct Entry {
    std::string name;
    std::function<std::string()> dump;
  };

  // Started at the first test, not before main(): a binary that only lists
  // its tests, or a death-test child that is about to exec, has no guard
  // thread.
  void start_thread_locked() {
    if (thread_pid_ == getpid()) return;
    thread_pid_ = getpid();
    std::thread([this] { run(); }).detach();
  }

  void run() {
    std::unique_lock<std::mutex> l(mu_);
    for (;;) {
      cv_.wait_for(l, std::chrono::milliseconds(100));
      if (armed_ && Clock::now() > deadline_) fire();
    }
  }

  // Writes to fd 2 and, if gtest has redirected fd 2 meanwhile (it
  // captures the parent's stderr while a death test runs), also to the
  // stderr this process started with, so the report is never swallowed.
  void emit(const std::string& text) {
    std::fflush(stderr);
    write_all(2, text);
    struct stat now{}, orig{};
    if (orig_stderr_ >= 0 && fstat(2, &now) == 0 && fstat(orig_stderr_, &orig) == 0 &&
        (now.st_dev != orig.st_dev || now.st_ino != orig.st_ino))
      write_all(orig_stderr_, text);
  }
  static void write_all(int fd, const std::string& s) {
    std::size_t off = 0;
    while (off < s.size()) {
      const ssize_t n = write(fd, s.data() + off, s.size() - off);
      if (n <= 0) return;
      off += static_cast<std::size_t>(n);
    }
  }

  // mu_ held. Each part is written as soon as it is known, so a dump that
  // itself hangs or crashes still leaves the report's head.
  [[noreturn]] void fire() {
    const double ran = std::chrono::duration<double>(Clock::now() - started_).count();
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "\nHANG: %s still running after %.1f s (limit %lld s: "
                  "RWSEM_TEST_HANG_SECONDS x scale); aborting the binary\n",
                  test_.c_str(), ran, static_cast<long long>(limit_.count()));
    std::string head = buf;
    if (has_seed_) {
      std::snprintf(buf, sizeof buf, "  seed=%" PRIu64 " (replay with RWSEM_SEED=%" PRIu64 ")\n",
                    seed_, seed_);
      head += buf;
    } else {
      head += "  seed: none registered by the test\n";
    }
    if (locks_.empty()) head += "  no locks registered by the test\n";
    emit(head);
    for (const auto& kv : locks_) {
      emit("  lock " + kv.second.name + ":\n");
      const std::string state = kv.second.dump();
      std::string out = "    ";  // indent every line of a multi-line state
      for (char c : state) {
        out += c;
        if (c == '\n') out += "    ";
      }
      emit(out + "\n");
    }
    std::fflush(stdout);
    std::abort();
  }

  // The stderr of process start (the guard is built before main()), before
  // any gtest redirection.
  const int orig_stderr_ = fcntl(2, F_DUPFD_CLOEXEC, 100);
  std::mutex mu_;
  std::condition_variable cv_;
  pid_t thread_pid_ = 0;  // the process the guard's thread runs in
  bool armed_ = false;
  std::string test_;
  std::chrono::seconds limit_{0};
  Clock::time_point started_{}, deadline_{};
  bool has_seed_ = false;
  std::uint64_t seed_ = 0;
  std::uint64_t next_id_ = 0;
  std::map<std::uint64_t, Entry> locks_;
};

class Listener : public ::testing::EmptyTestEventListener {
  void OnTestStart(const ::testing::TestInfo& info) override {
    Guard::get().arm(std::string(info.test_suite_name()) + "." + info.name());
  }
  void OnTestEnd(const ::testing::TestInfo&) override { Guard::get().disarm(); }
};

}  // namespace

void HangGuard::install() {
  Guard::get();
  ::testing::UnitTest::GetInstance()->listeners().Append(new Listener);
}

HangGuard::Handle& HangGuard::Handle::operator=(Handle&& o) noexcept {
  if (this != &o) {
    if (id_ != 0) Guard::get().remove(id_);
    id_ = o.id_;
    o.id_ = 0;
  }
  return *this;
}

HangGuard::Handle::~Handle() {
  if (id_ != 0) Guard::get().remove(id_);
}

HangGuard::Handle HangGuard::watch(std::string name, std::function<std::string()> dump) {
  return Handle(Guard::get().add(std::move(name), std::move(dump)));
}

void HangGuard::set_seed(std::uint64_t seed) { Guard::get().set_seed(seed); }

void HangGuard::extend_until(std::chrono::steady_clock::time_point t) {
  Guard::get().extend_until(t);
}

std::chrono::seconds HangGuard::test_limit() {
  const double scale = env_scale("RWSEM_STRESS_SCALE") * env_scale("RWSEM_TIME_SCALE");
  return std::chrono::seconds(static_cast<long long>(hang_limit().count() * scale));
}

}  // namespace rwsem_test
