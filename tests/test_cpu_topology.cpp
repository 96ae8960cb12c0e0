// cpu_topology::placement_pairs on captured topologies: this project's 2-vCPU KVM guest (two
// cores, one L3, no SMT), a 4-CPU SMT box, a 2-CCD box, a single CPU, and lists that are
// missing or broken; then the live reading on this machine, and binding a thread to one CPU.
#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "concurdl/core/hardware.hpp"
#include "concurdl/harness/cpu_topology.hpp"

using namespace concurdl::cpu_topology;

namespace {

// `lists[i]` is CPU `first + i`'s list: sysfs's files, one per CPU.
std::map<int, std::string> per_cpu(std::vector<std::string> lists, int first = 0) {
  std::map<int, std::string> out;
  for (std::size_t i = 0; i < lists.size(); ++i) out[first + static_cast<int>(i)] = lists[i];
  return out;
}

}  // namespace

TEST(CpuTopology, TwoVcpuGuestHasSeparateCoresUnderOneL3) {
  // This project's EPYC 9005 guest: each vCPU its own core, both under one L3.
  const PlacementPairs p = placement_pairs({0, 1}, per_cpu({"0", "1"}), per_cpu({"0-1", "0-1"}));
  EXPECT_FALSE(p.smt_siblings);
  EXPECT_EQ(p.same_l3, (CpuPair{0, 1}));
  EXPECT_FALSE(p.other_l3);
  EXPECT_EQ(p.why_missing.size(), 2u);
  EXPECT_NE(p.why_missing.at("smt_siblings").find("no SMT siblings"), std::string::npos);
  EXPECT_NE(p.why_missing.at("other_l3").find("one L3"), std::string::npos);
  EXPECT_EQ(p.pair("same_l3"), p.same_l3);
  EXPECT_FALSE(p.pair("os"));
}

TEST(CpuTopology, SmtBoxPairsSiblingsAndSeparateCores) {
  // Linux numbers the second hardware thread of each core after all the first ones: cores
  // {0,2} and {1,3}, one L3.
  const PlacementPairs p = placement_pairs({0, 1, 2, 3}, per_cpu({"0,2", "1,3", "0,2", "1,3"}),
                                           per_cpu({"0-3", "0-3", "0-3", "0-3"}));
  EXPECT_EQ(p.smt_siblings, (CpuPair{0, 2}));
  EXPECT_EQ(p.same_l3, (CpuPair{0, 1}));  // the lowest pair on two cores
  EXPECT_FALSE(p.other_l3);
  EXPECT_EQ(p.why_missing.count("smt_siblings"), 0u);
  EXPECT_EQ(p.why_missing.count("other_l3"), 1u);
}

TEST(CpuTopology, TwoCcdBoxHasSameAndOtherL3) {
  // Two CCDs of four cores, one L3 each, no SMT.
  const std::vector<std::string> l3 = {"0-3", "0-3", "0-3", "0-3", "4-7", "4-7", "4-7", "4-7"};
  const PlacementPairs p = placement_pairs(
      {0, 1, 2, 3, 4, 5, 6, 7}, per_cpu({"0", "1", "2", "3", "4", "5", "6", "7"}), per_cpu(l3));
  EXPECT_FALSE(p.smt_siblings);
  EXPECT_EQ(p.same_l3, (CpuPair{0, 1}));
  EXPECT_EQ(p.other_l3, (CpuPair{0, 4}));
  EXPECT_EQ(p.why_missing.size(), 1u);
  EXPECT_EQ(p.why_missing.count("smt_siblings"), 1u);

  // The affinity mask decides, not the machine: one CPU on each CCD (taskset -c 2,5).
  const PlacementPairs apart =
      placement_pairs({5, 2}, per_cpu({"0", "1", "2", "3", "4", "5"}), per_cpu(l3));
  EXPECT_FALSE(apart.same_l3);
  EXPECT_EQ(apart.other_l3, (CpuPair{2, 5}));
  EXPECT_NE(apart.why_missing.at("same_l3").find("share an L3"), std::string::npos);
}

TEST(CpuTopology, TwoCcdSmtBoxHasAllThree) {
  // 16 CPUs: two CCDs of four cores with two hardware threads each, siblings n and n+8.
  std::vector<int> cpus;
  std::map<int, std::string> siblings, l3;
  for (int c = 0; c < 16; ++c) {
    cpus.push_back(c);
    siblings[c] = std::to_string(c % 8) + "," + std::to_string(c % 8 + 8);
    l3[c] = c % 8 < 4 ? "0-3,8-11" : "4-7,12-15";
  }
  const PlacementPairs p = placement_pairs(cpus, siblings, l3);
  EXPECT_EQ(p.smt_siblings, (CpuPair{0, 8}));
  EXPECT_EQ(p.same_l3, (CpuPair{0, 1}));
  EXPECT_EQ(p.other_l3, (CpuPair{0, 4}));
  EXPECT_TRUE(p.why_missing.empty());
}

TEST(CpuTopology, OneCoreOfAnSmtBoxHasSiblingsOnly) {
  const PlacementPairs p = placement_pairs({1, 3}, per_cpu({"0,2", "1,3", "0,2", "1,3"}),
                                           per_cpu({"0-3", "0-3", "0-3", "0-3"}));
  EXPECT_EQ(p.smt_siblings, (CpuPair{1, 3}));
  EXPECT_FALSE(p.same_l3);
  EXPECT_FALSE(p.other_l3);
  EXPECT_EQ(p.why_missing.at("same_l3"), "the affinity mask holds one core only");
}

TEST(CpuTopology, SingleCpuHasNoPair) {
  const PlacementPairs p = placement_pairs({0}, per_cpu({"0"}), per_cpu({"0"}));
  EXPECT_FALSE(p.smt_siblings);
  EXPECT_FALSE(p.same_l3);
  EXPECT_FALSE(p.other_l3);
  ASSERT_EQ(p.why_missing.size(), 3u);
  for (const auto& [placement, why] : p.why_missing)
    EXPECT_EQ(why, "the affinity mask has 1 CPU, not two") << placement;
  EXPECT_EQ(placement_pairs({}, {}, {}).why_missing.size(), 3u);
}

TEST(CpuTopology, MissingOrBrokenListsClaimNothing) {
  // No sysfs at all (a container without /sys): two separate cores, but nothing says which L3.
  const PlacementPairs none = placement_pairs({0, 1}, {}, {});
  EXPECT_FALSE(none.smt_siblings);
  EXPECT_FALSE(none.same_l3);
  EXPECT_FALSE(none.other_l3);
  EXPECT_NE(none.why_missing.at("smt_siblings").find("unknown"), std::string::npos);
  EXPECT_NE(none.why_missing.at("other_l3").find("no level-3 cache"), std::string::npos);

  // One CPU's L3 list unreadable: a pair with it is neither same nor other L3.
  const PlacementPairs half =
      placement_pairs({0, 1, 2}, per_cpu({"0", "1", "2"}), per_cpu({"0-1", "0-1", "garbage"}));
  EXPECT_EQ(half.same_l3, (CpuPair{0, 1}));
  EXPECT_FALSE(half.other_l3);

  // A list that names only one side still links the pair (the kernel's are symmetric).
  const PlacementPairs one_sided =
      placement_pairs({0, 1}, per_cpu({"0,1", ""}), per_cpu({"0-1", "1"}));
  EXPECT_EQ(one_sided.smt_siblings, (CpuPair{0, 1}));
}

TEST(CpuTopology, LiveMachineGivesPairsOfAllowedCpusOrReasons) {
  const CpuSharing live = read_cpu_sharing();
  ASSERT_FALSE(live.cpus.empty()) << "sched_getaffinity gave no CPU";
  const PlacementPairs p = placement_pairs(live);
  for (std::string_view name : kPlacements) {
    SCOPED_TRACE(std::string(name));
    const auto pair = p.pair(name);
    if (!pair) {
      EXPECT_EQ(p.why_missing.count(std::string(name)), 1u);
      continue;
    }
    EXPECT_LT(pair->first, pair->second);
    for (int cpu : {pair->first, pair->second})
      EXPECT_TRUE(std::count(live.cpus.begin(), live.cpus.end(), cpu)) << cpu;
  }
}

// CpuBinding: the index-th CPU of the thread's mask, in the mask's order; the thread then runs
// there alone, and its mask is back whole when the scope ends. An index past the mask binds
// nothing. Run in a thread of its own, so a failure cannot leave the test runner bound.
TEST(CpuBinding, BindsTheIndexedCpuOfTheMaskAndGivesTheMaskBack) {
  std::thread([] {
    const auto mask = [] { return read_cpu_sharing().cpus; };  // the calling thread's mask
    const std::vector<int> before = mask();
    ASSERT_FALSE(before.empty());
    for (std::size_t i : {std::size_t{0}, before.size() - 1}) {
      SCOPED_TRACE(i);
      {
        const concurdl::CpuBinding bound(static_cast<unsigned>(i));
        ASSERT_EQ(bound.cpu(), before[i]);
        EXPECT_EQ(mask(), std::vector<int>{before[i]});
        EXPECT_EQ(sched_getcpu(), before[i]) << "a thread bound to one CPU runs there";
      }
      EXPECT_EQ(mask(), before);
    }
    const concurdl::CpuBinding past(static_cast<unsigned>(before.size()));
    EXPECT_EQ(past.cpu(), -1);
    EXPECT_EQ(mask(), before);
  }).join();
}
