// Checks shared by the threads tests and the MPI tests: each runs one collective on the calling
// rank and returns how many elements are wrong (nccl-tests' #wrong), so that every rank does
// the same calls whatever it finds and a failed check never leaves another rank waiting.
// Inputs are small integers, so every sum is exact in float, whatever the order of additions.
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <ostream>
#include <vector>

#include "concurdl/dp/algorithms.hpp"
#include "concurdl/dp/communicator.hpp"

namespace concurdl::dp {
// GoogleTest prints a row by its name (not its address), so test names are the same every build.
inline void PrintTo(const AllReduceVariant* row, std::ostream* os) { *os << row->name; }
}  // namespace concurdl::dp

namespace concurdl::dp::testing {

inline constexpr std::size_t kSizes[] = {0, 1, 7, 1000, (std::size_t{1} << 16) + 3};
inline constexpr float kPoison = -12345.0f;

// Rank r's element i: an integer in -8..8 that differs between ranks and positions.
inline float value(int rank, std::size_t i) {
  return static_cast<float>(
      static_cast<int>((i * 7 + static_cast<std::size_t>(rank) * 13 + i / 5) % 17) - 8);
}
inline float sum_over_ranks(int n, std::size_t i) {
  float s = 0;
  for (int r = 0; r < n; ++r) s += value(r, i);
  return s;
}
inline std::vector<float> input(int rank, std::size_t count) {
  std::vector<float> v(count);
  for (std::size_t i = 0; i < count; ++i) v[i] = value(rank, i);
  return v;
}

// An all-reduce (a row of the table), in place or out of place; out of place, `in` must come
// back unchanged.
inline std::size_t wrong_all_reduce(Communicator& comm, AllReduceFn fn, std::size_t count,
                                    bool in_place, const AlgoOptions& opts = {}) {
  const int n = comm.size(), r = comm.rank();
  std::vector<float> in = input(r, count);
  std::vector<float> out(count, kPoison);
  std::size_t wrong = 0;
  if (in_place) {
    fn(comm, in, in, opts);
    for (std::size_t i = 0; i < count; ++i) wrong += in[i] != sum_over_ranks(n, i);
  } else {
    fn(comm, in, out, opts);
    for (std::size_t i = 0; i < count; ++i)
      wrong += (out[i] != sum_over_ranks(n, i)) + (in[i] != value(r, i));
  }
  return wrong;
}

// The ring's reduce-scatter alone: block r of rank r is the sum.
inline std::size_t wrong_reduce_scatter_ring(Communicator& comm, std::size_t count,
                                             const AlgoOptions& opts = {}) {
  const int n = comm.size(), r = comm.rank();
  std::vector<float> data = input(r, count);
  reduce_scatter_ring(comm, data, opts);
  const Block b = block_of(count, n, r);
  std::size_t wrong = 0;
  for (std::size_t i = b.offset; i < b.offset + b.count; ++i)
    wrong += data[i] != sum_over_ranks(n, i);
  return wrong;
}

// The ring's all-gather alone: each rank starts with only its block (the rest poisoned).
inline std::size_t wrong_all_gather_ring(Communicator& comm, std::size_t count,
                                         const AlgoOptions& opts = {}) {
  const int n = comm.size(), r = comm.rank();
  std::vector<float> data(count, kPoison);
  const Block b = block_of(count, n, r);
  for (std::size_t i = b.offset; i < b.offset + b.count; ++i) data[i] = value(0, i) + 100;
  all_gather_ring(comm, data, opts);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i) wrong += data[i] != value(0, i) + 100;
  return wrong;
}

inline std::size_t wrong_broadcast_tree(Communicator& comm, std::size_t count, int root) {
  std::vector<float> data =
      comm.rank() == root ? input(root, count) : std::vector<float>(count, kPoison);
  broadcast_tree(comm, data, root, {});
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i) wrong += data[i] != value(root, i);
  return wrong;
}

inline std::size_t wrong_reduce_tree(Communicator& comm, std::size_t count, int root) {
  std::vector<float> data = input(comm.rank(), count);
  reduce_tree(comm, data, root, {});
  std::size_t wrong = 0;
  if (comm.rank() == root)
    for (std::size_t i = 0; i < count; ++i) wrong += data[i] != sum_over_ranks(comm.size(), i);
  return wrong;
}

// --- the native collectives ---

inline std::size_t wrong_native_broadcast(Communicator& comm, std::size_t count, int root) {
  std::vector<float> data =
      comm.rank() == root ? input(root, count) : std::vector<float>(count, kPoison);
  comm.broadcast(data, root);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i) wrong += data[i] != value(root, i);
  return wrong;
}

// Rank r's out is block r of the sum; blocks of `count` floats.
inline std::size_t wrong_native_reduce_scatter(Communicator& comm, std::size_t count) {
  const int n = comm.size(), r = comm.rank();
  std::vector<float> in = input(r, count * static_cast<std::size_t>(n));
  std::vector<float> out(count, kPoison);
  comm.reduce_scatter(in, out);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i)
    wrong += out[i] != sum_over_ranks(n, static_cast<std::size_t>(r) * count + i);
  return wrong;
}

inline std::size_t wrong_native_all_gather(Communicator& comm, std::size_t count) {
  const int n = comm.size(), r = comm.rank();
  std::vector<float> in = input(r, count);
  std::vector<float> out(count * static_cast<std::size_t>(n), kPoison);
  comm.all_gather(in, out);
  std::size_t wrong = 0;
  for (int q = 0; q < n; ++q)
    for (std::size_t i = 0; i < count; ++i)
      wrong += out[static_cast<std::size_t>(q) * count + i] != value(q, i);
  return wrong;
}

// Many collectives back to back: sizes, algorithms and tags change every iteration, and the
// native all-reduce runs between them. Returns the wrong elements over all iterations.
inline std::size_t wrong_back_to_back(Communicator& comm, int iterations) {
  constexpr std::size_t kStressSizes[] = {0, 1, 7, 1000, 3, 129, 64};
  std::size_t wrong = 0;
  for (int it = 0; it < iterations; ++it) {
    const std::size_t count = kStressSizes[static_cast<std::size_t>(it) % std::size(kStressSizes)];
    const AllReduceVariant& row =
        kAllReduceVariants[static_cast<std::size_t>(it) % kAllReduceVariants.size()];
    AlgoOptions opts;
    opts.tag = 1 + it % 11;
    opts.segment_floats = 1 + static_cast<std::size_t>(it) % 300;
    wrong += wrong_all_reduce(comm, row.run, count, it % 2 == 0, opts);
    if (it % 5 == 0) wrong += wrong_native_all_gather(comm, count % 17);
  }
  return wrong;
}

// split: for every group count g (colour rank % g, key -rank: the new ranks in reverse order),
// each group has the members and order MPI_Comm_split gives; a native all-reduce and a ring of
// sends on the group sum and pass its members' values only; the parent's own all-reduce, run
// between the groups' collectives, is untouched by them; and each group split again in two
// (a communicator of a communicator) all-reduces its members' values.
inline std::size_t wrong_split(Communicator& comm) {
  const int n = comm.size(), me = comm.rank();
  std::size_t wrong = 0;
  for (int groups = 1; groups <= std::min(n, 3); ++groups) {
    const int colour = me % groups;
    std::vector<int> members;  // parent ranks of my colour, by key -rank
    for (int r = n - 1; r >= 0; --r)
      if (r % groups == colour) members.push_back(r);
    const std::unique_ptr<Communicator> sub = comm.split(colour, -me);
    const int k = static_cast<int>(members.size());
    if (sub->size() != k) ++wrong;
    if (sub->rank() !=
        static_cast<int>(std::find(members.begin(), members.end(), me) - members.begin()))
      ++wrong;
    // The group's native all-reduce of value(parent rank, i).
    constexpr std::size_t kCount = 1000;
    std::vector<float> data = input(me, kCount);
    sub->all_reduce(data);
    for (std::size_t i = 0; i < kCount; ++i) {
      float want = 0;
      for (int r : members) want += value(r, i);
      if (data[i] != want) ++wrong;
    }
    // The parent's all-reduce in between, with the same tag space and sizes.
    std::vector<float> all = input(me, 7);
    comm.all_reduce(all);
    for (std::size_t i = 0; i < all.size(); ++i)
      if (all[i] != sum_over_ranks(n, i)) ++wrong;
    // A ring of sends on the group: each passes its parent rank to the next.
    const int sr = sub->rank();
    std::vector<float> out = {static_cast<float>(me)}, in = {-1.0f};
    sub->sendrecv((sr + 1) % k, out, (sr + k - 1) % k, in, 3);
    if (in[0] != static_cast<float>(members[static_cast<std::size_t>((sr + k - 1) % k)])) ++wrong;
    // The group split again: halves by its own rank's parity.
    const std::unique_ptr<Communicator> half = sub->split(sr % 2, sr);
    std::vector<float> one = {static_cast<float>(me)};
    half->all_reduce(one);
    float want = 0;
    for (int q = 0; q < k; ++q)
      if (q % 2 == sr % 2) want += static_cast<float>(members[static_cast<std::size_t>(q)]);
    if (one[0] != want) ++wrong;
    comm.barrier();
  }
  return wrong;
}

// The hierarchical all-reduce with the world cut into every whole number of hosts (host =
// rank / ranks-per-host), in place and out of place, with the ring and the native collective
// across hosts, at every size of kSizes: the world's sum, and `in` untouched out of place.
inline std::size_t wrong_hierarchical(Communicator& comm) {
  const int n = comm.size(), r = comm.rank();
  std::size_t wrong = 0;
  for (int hosts = 1; hosts <= n; ++hosts) {
    if (n % hosts != 0) continue;
    HostGroups g = host_groups(comm, r / (n / hosts));
    if (g.local->size() != n / hosts || g.cross->size() != hosts) ++wrong;
    for (const std::size_t count : kSizes)
      for (const AllReduceFn cross : {AllReduceFn{nullptr}, AllReduceFn{&allreduce_native}})
        for (const bool in_place : {true, false}) {
          std::vector<float> in = input(r, count), out(count, kPoison);
          allreduce_hierarchical(g, in, in_place ? std::span<float>(in) : std::span<float>(out),
                                 cross);
          const std::vector<float>& got = in_place ? in : out;
          for (std::size_t i = 0; i < count; ++i) {
            wrong += got[i] != sum_over_ranks(n, i);
            if (!in_place) wrong += in[i] != value(r, i);
          }
        }
  }
  return wrong;
}

}  // namespace concurdl::dp::testing
