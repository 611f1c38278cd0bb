// A deliberate data race: two threads increment a plain int with no
// synchronisation. //conformance:tsan_detects_race_test runs this binary and
// passes only if ThreadSanitizer reports the race, proving that the TSan
// build, its runtime and (for cross targets) the QEMU runner really work.
// Outside a TSan build the program just runs and exits 0.
#include <cstdio>
#include <thread>

namespace {

int g_counter = 0;  // unprotected on purpose

void Bump() {
  for (int i = 0; i < 1000; ++i) {
    g_counter = g_counter + 1;
  }
}

}  // namespace

int main() {
  std::thread a(Bump);
  std::thread b(Bump);
  a.join();
  b.join();
  std::printf("planted_race: counter=%d\n", g_counter);
  return 0;
}
