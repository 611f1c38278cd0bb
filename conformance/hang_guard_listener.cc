// Links the whole-binary hang guard into a test binary: registers its
// listener before main() (gtest keeps listeners appended before
// InitGoogleTest). See hang_guard.h.
#include "conformance/hang_guard.h"

namespace rwsem_test {
namespace {

const bool kInstalled = [] {
  HangGuard::install();
  return true;
}();

}  // namespace
}  // namespace rwsem_test
