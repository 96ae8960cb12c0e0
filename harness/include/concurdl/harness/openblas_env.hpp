// OpenBLAS is the peer the suite's GEMM is measured against, so it must run the kernels this
// CPU deserves. Debian's OpenBLAS is a DYNAMIC_ARCH build that picks its kernels from the CPU's
// family and model when it loads. Virtual machines that hide the model (cpuid says just
// "Intel(R) Xeon(R) Processor") make it fall back to its SSE3 "Prescott" kernels: 4-6x slower
// than the machine can do (measured: 23-32 vs 146-153 GFLOP/s at n = 1024 on an AVX-512 VM),
// an unfair peer and a slow training stack.
//
// So `concurdl` starts with reexec_for_openblas_kernels(argv): when OpenBLAS chose a generic
// core and the CPU has AVX-512 (or AVX2 + FMA), it re-executes itself once with
// OPENBLAS_CORETYPE=SkylakeX (or Haswell), which OpenBLAS reads at load. A user's own
// OPENBLAS_CORETYPE always wins; CONCURDL_OPENBLAS_AUTO=0 turns this off. The provenance records
// the OPENBLAS_* environment, CONCURDL_OPENBLAS_REEXEC (the core detected first) and OpenBLAS's
// configuration, which names the core that ran (libraries.openblas).
#pragma once

#include <string>

namespace concurdl {

// Returns only when no re-execution is needed (or it failed); call first thing in main().
void reexec_for_openblas_kernels(char** argv);
// "SkylakeX", "Haswell", or nullptr: the OpenBLAS core this CPU's instruction set supports.
const char* openblas_core_for_this_cpu();
// The core OpenBLAS runs ("SkylakeX", "Prescott", ...).
std::string openblas_core();

}  // namespace concurdl
