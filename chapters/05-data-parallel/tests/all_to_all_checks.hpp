// All-to-all checks shared by the threads tests and the MPI tests: each runs one all-to-all on
// the calling rank and returns how many received elements are wrong, so that every rank makes
// the same calls whatever it finds. Each element names its sender, its receiver and its place
// (a small integer, exact in float), so a block from the wrong rank or at the wrong offset shows.
#pragma once

#include <cstddef>
#include <ostream>
#include <vector>

#include "concurdl/dp/all_to_all.hpp"
#include "concurdl/dp/communicator.hpp"

namespace concurdl::dp {
inline void PrintTo(const AllToAllVariant* row, std::ostream* os) { *os << row->name; }
}  // namespace concurdl::dp

namespace concurdl::dp::testing {

// The i-th float that rank `from` sends to rank `to`.
inline float a2a_value(int from, int to, std::size_t i) {
  return static_cast<float>(
      (static_cast<std::size_t>(from) * 131 + static_cast<std::size_t>(to) * 17 + i * 7) % 8191);
}

// Equal blocks of `block` floats through `fn`; the send buffer must come back unchanged.
inline std::size_t wrong_all_to_all(Communicator& comm, AllToAllFn fn, std::size_t block) {
  const int n = comm.size(), r = comm.rank();
  const auto un = static_cast<std::size_t>(n);
  std::vector<float> send(un * block), recv(un * block, -1.0f);
  for (std::size_t j = 0; j < un; ++j)
    for (std::size_t i = 0; i < block; ++i)
      send[j * block + i] = a2a_value(r, static_cast<int>(j), i);
  const std::vector<float> sent = send;
  fn(comm, send, recv, {});
  std::size_t wrong = send != sent ? 1 : 0;
  for (std::size_t j = 0; j < un; ++j)
    for (std::size_t i = 0; i < block; ++i)
      wrong += recv[j * block + i] != a2a_value(static_cast<int>(j), r, i);
  return wrong;
}

// How many floats rank `from` sends to rank `to` in round `round`: uneven, some zero (as tokens
// to experts are).
inline std::size_t a2a_count(int from, int to, int round) {
  return static_cast<std::size_t>(
      (from * 7 + to * 3 + round * 5) % 11 == 0 ? 0 : (from * 5 + to * 11 + round * 3) % 97);
}

// Variable blocks: the counts exchanged first (exchange_counts), then the data by the native
// all_to_all_v or the hand-written pairwise one.
inline std::size_t wrong_all_to_all_v(Communicator& comm, bool native, int round) {
  const int n = comm.size(), r = comm.rank();
  const auto un = static_cast<std::size_t>(n);
  std::vector<std::size_t> send_counts(un);
  for (std::size_t j = 0; j < un; ++j) send_counts[j] = a2a_count(r, static_cast<int>(j), round);
  const std::vector<std::size_t> recv_counts = exchange_counts(comm, send_counts);
  std::size_t wrong = 0;
  for (std::size_t j = 0; j < un; ++j)
    wrong += recv_counts[j] != a2a_count(static_cast<int>(j), r, round);
  if (wrong != 0) return wrong;  // every rank still took part in the exchange
  std::vector<float> send, recv;
  for (std::size_t j = 0; j < un; ++j)
    for (std::size_t i = 0; i < send_counts[j]; ++i)
      send.push_back(a2a_value(r, static_cast<int>(j), i));
  std::size_t total = 0;
  for (std::size_t c : recv_counts) total += c;
  recv.assign(total, -1.0f);
  if (native)
    comm.all_to_all_v(send, send_counts, recv, recv_counts);
  else
    all_to_all_v_pairwise(comm, send, send_counts, recv, recv_counts);
  std::size_t at = 0;
  for (std::size_t j = 0; j < un; ++j)
    for (std::size_t i = 0; i < recv_counts[j]; ++i)
      wrong += recv[at++] != a2a_value(static_cast<int>(j), r, i);
  return wrong;
}

}  // namespace concurdl::dp::testing
