// What every benchmark of this directory prints first: the machine it ran
// on (CPU model, online cores, kernel, compiler, UTC date), so a reader can
// judge the numbers.
#ifndef RWSEM_BENCH_MACHINE_H_
#define RWSEM_BENCH_MACHINE_H_

#include <sys/utsname.h>
#include <unistd.h>

#include <ctime>
#include <fstream>
#include <sstream>
#include <string>

namespace bench {

struct Machine {
  std::string cpu, kernel, compiler, date;
  long cores = 0;
  std::string line() const {
    std::ostringstream os;
    os << cpu << ", " << cores << " cores, Linux " << kernel << ", " << compiler << ", " << date;
    return os.str();
  }
};

inline Machine describe_machine() {
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

}  // namespace bench

#endif  // RWSEM_BENCH_MACHINE_H_
