// The lock types the corpus runs over. A new layout (or, later, a new lock
// type) joins every typed test by being added here.
#ifndef RWSEM_CONFORMANCE_LOCK_TYPES_H_
#define RWSEM_CONFORMANCE_LOCK_TYPES_H_

#include <gtest/gtest.h>

#include <string>

#include "arch/count_layouts.h"

namespace rwsem_test {

using AllLayouts = ::testing::Types<rwsem::Generic64Layout,
                                    rwsem::Generic32Layout,
                                    rwsem::MergedOwnerLayout>;

// Names typed tests by layout ("RwsemCore/generic32.WakeBatch") instead of
// by index, so a failure names the layout.
struct LayoutNames {
  template <class L>
  static std::string GetName(int) {
    return L::kName;
  }
};

}  // namespace rwsem_test

#endif  // RWSEM_CONFORMANCE_LOCK_TYPES_H_
