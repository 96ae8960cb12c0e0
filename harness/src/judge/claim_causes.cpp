// What moves a claim's value from machine to machine (ClaimCause, claims.hpp): each cause's
// name in results.json and the sentence `concurdl check` and the report print as where to look.
#include "concurdl/harness/claims.hpp"

namespace concurdl {

const char* to_string(ClaimCause c) {
  switch (c) {
    case ClaimCause::noise:
      return "noise";
    case ClaimCause::cores_and_smt:
      return "cores_and_smt";
    case ClaimCause::vector_isa:
      return "vector_isa";
    case ClaimCause::caches:
      return "caches";
    case ClaimCause::memory_bandwidth:
      return "memory_bandwidth";
    case ClaimCause::wakeup_latency:
      return "wakeup_latency";
    case ClaimCause::page_cache:
      return "page_cache";
    case ClaimCause::peer_kernels:
      return "peer_kernels";
  }
  return "?";
}

const char* cause_text(ClaimCause c) {
  switch (c) {
    case ClaimCause::noise:
      return "noise: other processes or the hypervisor took CPU time (the run's "
             "activity_before_run, records noted `noisy`); measure again on a quiet machine";
    case ClaimCause::cores_and_smt:
      return "cores and SMT: vCPUs may share one physical core or be moved by the host "
             "(records noted `cores_short` by the probe around their group, "
             "calibration.cores_short: "
             "the FMA peak at 2 threads against 1); compare lscpu's threads per core";
    case ClaimCause::vector_isa:
      return "vector ISA: AVX2 against AVX-512 and the FMA units a core has "
             "(provenance.cpu.flags_used, the calibrated FMA peak)";
    case ClaimCause::caches:
      return "caches: L1/L2/L3 sizes and prefetchers decide which working sets fit "
             "(provenance.cpu.caches)";
    case ClaimCause::memory_bandwidth:
      return "memory bandwidth: what one core and all cores can stream (calibrate/mem_triad)";
    case ClaimCause::wakeup_latency:
      return "wake-up latency: how fast the kernel wakes a sleeping thread (futex, epoll), "
             "which a hypervisor's idle policy and the kernel version change";
    case ClaimCause::page_cache:
      return "page cache: whether the file was cached and what storage is under it "
             "(the record's notes say which)";
    case ClaimCause::peer_kernels:
      return "the peer's kernels: its version and the code paths it picks on this CPU "
             "(provenance.peers names the version)";
  }
  return "?";
}

}  // namespace concurdl
