// The ways a concurdl command fails, and the exit code each maps to:
//   UsageError       bad usage or bad input (a flag, a parameter, a results file)  -> exit 2
//   ValidationError  an experiment produced a wrong result                          -> exit 1
//   LibraryError     a CUDA, NCCL or MPI call failed (CDL_*_CHECK below)            -> exit 1
//   NotImplemented   an exercise stub that the student has not filled in (CDL_TODO) -> a skip
//   Unavailable      a configuration this machine or placement cannot run (a pair of ranks on
//                    one host when every rank is alone on its own) -> the row is left out, with
//                    the reason in the run's provenance; the rest is measured
#pragma once

#include <stdexcept>
#include <string>

namespace concurdl {

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ValidationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Unavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "file.cu:42: cudaMalloc(&p, bytes) failed: out of memory (CUDA error 2)". Thrown, not
// exit()ed, so a test reports it and, across ranks, the runner can fail the configuration on
// every rank together instead of one rank leaving the others waiting (as nccl-tests does).
class LibraryError : public std::runtime_error {
 public:
  LibraryError(std::string library, int code, const std::string& what)
      : std::runtime_error(what), library_(std::move(library)), code_(code) {}
  const std::string& library() const { return library_; }
  int code() const { return code_; }

 private:
  std::string library_;
  int code_;
};

namespace detail {
[[noreturn]] inline void throw_library_error(const char* library, const char* expr,
                                             const char* file, int line, int code,
                                             const std::string& message) {
  throw LibraryError(library, code,
                     std::string(file) + ":" + std::to_string(line) + ": " + expr + " failed: " +
                         message + " (" + library + " error " + std::to_string(code) + ")");
}
}  // namespace detail

class NotImplemented : public std::logic_error {
 public:
  explicit NotImplemented(const std::string& exercise)
      : std::logic_error("exercise " + exercise + " not attempted"), exercise_(exercise) {}
  const std::string& exercise() const { return exercise_; }

 private:
  std::string exercise_;
};

}  // namespace concurdl

// In an exercise stub: CDL_TODO("2.3 ticket lock"). Tests turn it into a skip that says
// "exercise 2.3 ticket lock not attempted"; `concurdl exercise` reports it the same way.
#define CDL_TODO(exercise) throw ::concurdl::NotImplemented(exercise)

// Checks for library calls; each names the call, the file and the line, and the library's own
// message, and throws LibraryError. They expand where they are used, so only code that already
// includes <cuda_runtime.h>, <nccl.h> or <mpi.h> can use them; this header includes none.
// After a kernel launch: CDL_CUDA_CHECK(cudaGetLastError()).
#define CDL_CUDA_CHECK(expr)                                                     \
  do {                                                                           \
    const cudaError_t cdl_cuda_rc = (expr);                                      \
    if (cdl_cuda_rc != cudaSuccess)                                              \
      ::concurdl::detail::throw_library_error("CUDA", #expr, __FILE__, __LINE__, \
                                              static_cast<int>(cdl_cuda_rc),     \
                                              cudaGetErrorString(cdl_cuda_rc));  \
  } while (0)

#define CDL_NCCL_CHECK(expr)                                                     \
  do {                                                                           \
    const ncclResult_t cdl_nccl_rc = (expr);                                     \
    if (cdl_nccl_rc != ncclSuccess)                                              \
      ::concurdl::detail::throw_library_error("NCCL", #expr, __FILE__, __LINE__, \
                                              static_cast<int>(cdl_nccl_rc),     \
                                              ncclGetErrorString(cdl_nccl_rc));  \
  } while (0)

// MPI's default error handler aborts every rank before a code comes back: communicators the
// suite uses are set to MPI_ERRORS_RETURN (ranks.hpp does it for its own).
#define CDL_MPI_CHECK(expr)                                                        \
  do {                                                                             \
    const int cdl_mpi_rc = (expr);                                                 \
    if (cdl_mpi_rc != MPI_SUCCESS) {                                               \
      char cdl_mpi_text[MPI_MAX_ERROR_STRING];                                     \
      int cdl_mpi_len = 0;                                                         \
      if (MPI_Error_string(cdl_mpi_rc, cdl_mpi_text, &cdl_mpi_len) != MPI_SUCCESS) \
        cdl_mpi_len = 0;                                                           \
      ::concurdl::detail::throw_library_error(                                     \
          "MPI", #expr, __FILE__, __LINE__, cdl_mpi_rc,                            \
          std::string(cdl_mpi_text, static_cast<std::size_t>(cdl_mpi_len)));       \
    }                                                                              \
  } while (0)
