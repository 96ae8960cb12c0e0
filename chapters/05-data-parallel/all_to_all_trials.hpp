// Chapter 05's all-to-all trials (all_to_all_trials.cpp), for its registrations
// (experiments_all_to_all.cpp). Private to the chapter's experiments.
#pragma once

#include <string>

#include "concurdl/core/variants.hpp"
#include "concurdl/dp/all_to_all.hpp"
#include "concurdl/harness/experiment.hpp"

namespace concurdl::dp::collectives {

// algbw and busbw (busbw = algbw · (n − 1)/n, nccl-tests' all-to-all factor), and where the
// communicator counted the bytes sent, sent_over_model: those bytes over the row's traffic model.
void derive_all_to_all(const Params& p, const Work&, Record& r);
// One configuration on the threads backend: a sample is the slowest rank's mean time. The row
// kTorchAllToAllRow runs torch_all_to_all_trial instead.
Trial threads_all_to_all_trial(const Params& p, GroupCache& cache);

// PyTorch's torch.distributed.all_to_all_single over gloo, ch05/all_to_all's peer row: `ranks`
// processes of kernels/nn/scripts/torch_all_to_all.py under the first interpreter the peer may
// run (torch_peer.hpp), measured as the threads rows are, its version in the record's notes.
inline constexpr const char* kTorchAllToAllRow = "pytorch_gloo";
// "" when that interpreter has torch and the script is there; else why not. Computed once.
const std::string& torch_all_to_all_why_not();
Trial torch_all_to_all_trial(const Params& p);

#if CONCURDL_HAVE_MPI
// The rows of ch05/all_to_all_mpi: the chapter's algorithms over MPI point to point, MPI's
// own, and Gloo's.
struct MpiAllToAllRow : VariantInfo {
  AllToAllFn run = nullptr;
  bool hand_written = true;  // its bytes are counted by the communicator
  bool gloo = false;         // Gloo's alltoall, not `run`
};
const VariantTable<MpiAllToAllRow>& mpi_all_to_all_variants();
Trial mpi_all_to_all_trial(const Params& p, GroupCache& cache);
#endif

}  // namespace concurdl::dp::collectives
