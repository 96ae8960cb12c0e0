// PyTorch as a peer measured in the same run, where /usr/bin/python3 has it (Debian's
// python3-torch, or a pip install): kernels/nn/scripts/torch_peer.py runs the suite's MLP on the
// same batch, data and optimiser, as a plain loop on T threads (kernels/train_throughput's
// `pytorch` row) or as DDP over N processes (ch05/dp_train's `pytorch_ddp`). Optional: without
// torch the rows are left out and the reason is recorded.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

namespace concurdl::nn {

inline constexpr const char* kPeerPython = "/usr/bin/python3";

std::filesystem::path torch_peer_script();  // in the source tree
// "" when /usr/bin/python3 can import torch, judged without starting Python (it is asked at
// start-up of every concurdl); else why not ("/usr/bin/python3 has no torch (apt-get install
// python3-torch)"). Computed once.
const std::string& torch_why_not();
// Runs the script with `flags` (its own: "--plain --threads 2 --batch 64 ..."), one compute
// thread per process unless the flags say otherwise, and returns the JSON line it prints last.
// Throws std::runtime_error naming the command and the start of its output when it fails.
nlohmann::json run_torch_peer(const std::string& flags);

}  // namespace concurdl::nn
