// aligned.hpp's allocators: where their blocks start, and that a large HugePageVector's pages are
// the ones Linux was asked to back with huge pages (the VMA's "hg" flag in /proc/self/smaps: set
// by madvise(MADV_HUGEPAGE), whatever memory Linux then finds for it).
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "concurdl/kernels/aligned.hpp"

namespace concurdl::kernels {
namespace {

std::uintptr_t address(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

// The VmFlags of the mapping of /proc/self/smaps that holds p; empty where none does.
std::string vm_flags_of(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    std::uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = lo <= address(p) && address(p) < hi;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line.substr(8) + " ";
    }
  }
  return "";
}

TEST(HugePageVector, ALargeBlockStartsOnAHugePageAndIsAdvised) {
  HugePageVector<float> big(3 * kHugePage / sizeof(float) + 5, 1.5f);
  EXPECT_EQ(address(big.data()) % kHugePage, 0u);
  EXPECT_EQ(big.front(), 1.5f);
  EXPECT_EQ(big.back(), 1.5f);
  if (!std::filesystem::exists("/sys/kernel/mm/transparent_hugepage/enabled"))
    GTEST_SKIP() << "this kernel has no transparent huge pages";
  const std::string flags = vm_flags_of(big.data());
  ASSERT_FALSE(flags.empty()) << "no mapping in /proc/self/smaps holds the block";
  EXPECT_NE(flags.find(" hg "), std::string::npos) << "VmFlags:" << flags;
  // A control: a block of the same size from LineVector is not advised.
  LineVector<float> plain(big.size(), 1.5f);
  const std::string plain_flags = vm_flags_of(plain.data() + plain.size() / 2);
  EXPECT_EQ(plain_flags.find(" hg "), std::string::npos) << "VmFlags:" << plain_flags;
}

TEST(HugePageVector, ASmallBlockStartsOnACacheLine) {
  for (std::size_t n : {1u, 100u, 1000u}) {
    HugePageVector<std::uint8_t> small(n, 7);
    EXPECT_EQ(address(small.data()) % kCacheLine, 0u) << n;
    EXPECT_EQ(small.back(), 7) << n;
  }
}

}  // namespace
}  // namespace concurdl::kernels
