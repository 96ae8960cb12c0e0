// Chapter 05's collective experiments, shared between their parts: the all-reduce trials on
// each backend (collective_trials.cpp), the α–β fits and figures (collective_figures.cpp), the
// registrations (experiments_collectives.cpp), and the all-to-all's (all_to_all_trials.cpp,
// experiments_all_to_all.cpp). Private to the chapter's experiments.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "concurdl/core/variants.hpp"
#include "concurdl/dp/algorithms.hpp"
#include "concurdl/harness/experiment.hpp"

#if CONCURDL_HAVE_MPI
#include "concurdl/core/ranks_mpi.hpp"
#endif
#if CONCURDL_HAVE_MPI && CONCURDL_HAVE_GLOO
namespace gloo {
class Context;
}
#endif

namespace concurdl::dp::collectives {

// Sizes in bytes, 4 B to 256 MiB by 4x (full), a few of them (quick). 64M is the size the
// lesson quotes.
inline const std::vector<std::string> kBytesFull = {
    "4", "16", "64", "256", "1K", "4K", "16K", "64K", "256K", "1M", "4M", "16M", "64M", "256M"};
inline const std::vector<std::string> kBytesQuick = {"4K", "256K", "4M", "64M"};
inline constexpr std::int64_t kMaxBytes = std::int64_t{1}
                                          << 31;  // an int count of floats for MPI/Gloo
inline constexpr const char* kQuoted = "64M";

inline const std::vector<Metric> kWrongMetric = {
    {"wrong", "", true,
     "elements of any rank's result that differ from the exact sum, plus, out of place, "
     "input elements that changed (nccl-tests' #wrong): must be 0"}};

// Rank counts for the full profile: 2, 4, 8, ... up to twice this machine's CPUs, at most 64.
std::vector<std::string> rank_counts();
// The `bytes` parameter as floats (UsageError when it is not a whole number of them).
std::size_t floats_of(const Params& p);
// Collectives per sample: enough that a small one's sample lasts well past the clock's
// resolution, one for the largest sizes.
int iterations(std::size_t bytes);
// nccl-tests' bus factor 2(n-1)/n, and algbw and busbw derived from a record's median.
double bus_factor(int ranks);
void derive_bandwidths(const Params& p, const Work&, Record& r);
// The axes both experiments share, after the algorithm.
std::vector<Axis> shared_axes(Axis algorithm, Axis ranks);
// The figures both experiments share (busbw and time against size, the projections).
std::vector<Figure> bandwidth_figures(const std::string& backend, bool mpi);
// One configuration on the threads backend, with the all-reduce `fn`.
Trial threads_trial(AllReduceFn fn, const Params& p, GroupCache& cache);

#if CONCURDL_HAVE_MPI && CONCURDL_HAVE_GLOO
// A Gloo context over the ranks of `comm` (a full mesh of TCP pairs; loopback unless
// CONCURDL_GLOO_IFACE names another interface). Collective.
std::shared_ptr<gloo::Context> gloo_context(MPI_Comm comm);
#endif

#if CONCURDL_HAVE_MPI
// How a row runs, where it is not `run` over the communicator: a peer library, the hierarchical
// all-reduce over the hosts' groups (with `run` across them), or an exchange between two ranks.
enum class Peer {
  none,
  gloo_ring,
  gloo_ring_chunked,
  hierarchical,
  exchange_local,
  exchange_cross
};

// The rows of ch05/allreduce_mpi: the chapter's algorithms over MPI point to point, then the
// peers. `native` is the MPI backend's own all-reduce, MPI_Allreduce.
struct MpiAllReduceRow : VariantInfo {
  AllReduceFn run = nullptr;
  Peer peer = Peer::none;
};
const VariantTable<MpiAllReduceRow>& mpi_allreduce_variants();
// One configuration on the mpi backend: this process is one of the ranks.
Trial mpi_trial(const Params& p, GroupCache& cache);
// The same, of `row` (of any table).
Trial mpi_row_trial(const MpiAllReduceRow& row, const Params& p, GroupCache& cache);
#endif

}  // namespace concurdl::dp::collectives
