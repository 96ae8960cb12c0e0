// OpenBLAS kernels on machines whose CPU it does not recognise (see openblas_env.hpp).
#include "concurdl/harness/openblas_env.hpp"

#include <cblas.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace concurdl {

namespace {

// The kernels a DYNAMIC_ARCH OpenBLAS falls back to when it cannot place the CPU.
bool generic_core(const char* name) {
  for (const char* g : {"Prescott", "Core2", "Katmai", "Banias", "Northwood"})
    if (std::strcmp(name, g) == 0) return true;
  return false;
}

}  // namespace

const char* openblas_core_for_this_cpu() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
    return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  return nullptr;
}

void reexec_for_openblas_kernels(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") || std::getenv("CONCURDL_OPENBLAS_REEXEC")) return;
  if (const char* auto_ = std::getenv("CONCURDL_OPENBLAS_AUTO"); auto_ && std::string(auto_) == "0")
    return;
  const char* core = openblas_get_corename();
  if (!core || !generic_core(core)) return;
  const char* want = openblas_core_for_this_cpu();
  if (!want) return;
  ::setenv("OPENBLAS_CORETYPE", want, 1);
  ::setenv("CONCURDL_OPENBLAS_REEXEC", core, 1);  // once only; also says what was detected
  ::execv("/proc/self/exe", argv);
  // execv failed (no /proc): go on with the generic kernels; provenance shows which ran.
  ::unsetenv("OPENBLAS_CORETYPE");
}

std::string openblas_core() {
  const char* c = openblas_get_corename();
  return c ? c : "";
}

}  // namespace concurdl
