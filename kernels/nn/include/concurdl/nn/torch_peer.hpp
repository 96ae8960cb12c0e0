// PyTorch as a peer measured in the same run: kernels/nn/scripts/torch_peer.py runs the suite's
// MLP on the same batch, data and optimiser, as a plain loop on T threads, eager or under
// torch.compile (kernels/train_throughput's `pytorch*` rows), or as DDP over N processes
// (ch05/dp_train's `pytorch_ddp`); kernels/nn/scripts/torch_all_to_all.py runs
// torch.distributed.all_to_all_single over gloo in N processes (ch05/all_to_all's
// `pytorch_gloo`). The interpreters that may run them are /usr/bin/python3 (Debian's
// python3-torch) unless CONCURDL_TORCH_PYTHON names others, comma-separated: a
// virtual environment's `bin/python` with a current torch from pip, say, beside Debian's.
// Optional: without torch the rows are left out and the reason is recorded.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace concurdl::nn {

inline constexpr const char* kPeerPython = "/usr/bin/python3";
inline constexpr const char* kPeerPythonEnv = "CONCURDL_TORCH_PYTHON";

// One interpreter named for the peer, and what its torch is, judged from the files its package
// installed (torch/version.py), without starting Python: it is asked at start-up of every
// concurdl, when the experiments' variant lists are made.
struct TorchPython {
  std::string python;   // as named: "/usr/bin/python3", "/opt/torch-venv/bin/python"
  std::string version;  // torch.__version__ as the package records it: "1.13.1", "2.9.1+cu128"
  std::string why_not;  // "" when it has torch; else why not
  // Its rows of kernels/train_throughput: the first interpreter's are `pytorch` and, from torch
  // 2.0, `pytorch_compiled`; another's carry its version, `pytorch_2.9`, `pytorch_2.9_compiled`.
  std::string row;
  bool can_compile() const;  // torch 2.0 or later: torch.compile exists
};

// Every interpreter named (CONCURDL_TORCH_PYTHON, else /usr/bin/python3), in that order;
// computed once.
const std::vector<TorchPython>& torch_pythons();
// The one a row names (`pytorch_2.9_compiled` -> the interpreter whose row is `pytorch_2.9`),
// and whether the row is compiled; nullptr when none.
const TorchPython* torch_python_of_row(const std::string& row, bool& compiled);
// The torch version a directory's torch package records ("" when none): dir/torch/version.py.
std::string torch_version_in(const std::filesystem::path& site_packages);

std::filesystem::path torch_peer_script();        // in the source tree
std::filesystem::path torch_all_to_all_script();  // beside it
// "" when the first interpreter named has torch; else why not ("/usr/bin/python3 has no torch
// (apt-get install python3-torch)"). Computed once.
const std::string& torch_why_not();
// Runs the script under `python` (the first interpreter named when empty) with `flags` (its
// own: "--plain --threads 2 --batch 64 ..."), one compute thread per process unless the flags
// say otherwise, and returns the JSON line it prints last. Throws std::runtime_error naming the
// command and the start of its output when it fails.
nlohmann::json run_torch_peer(const std::string& flags, const std::string& python = "");
// The same for another of the scripts (torch_all_to_all_script()).
nlohmann::json run_torch_script(const std::filesystem::path& script, const std::string& flags,
                                const std::string& python = "");

}  // namespace concurdl::nn
