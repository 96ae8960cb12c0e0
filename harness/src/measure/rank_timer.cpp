// The timer of an experiment across MPI ranks (runner_detail.hpp): every rank starts together,
// times the run, and the sample is the slowest rank's time.
#include <fmt/format.h>

#include <exception>
#include <limits>
#include <memory>

#include "concurdl/core/errors.hpp"
#include "concurdl/core/ranks.hpp"
#include "runner_detail.hpp"

#ifdef CONCURDL_WITH_MPI
#include "concurdl/core/ranks_mpi.hpp"
#endif

namespace concurdl::runner_detail {

namespace {

class MaxOverRanks final : public Timer {
 public:
  explicit MaxOverRanks(std::shared_ptr<Timer> inner) : inner_(std::move(inner)) {}
  std::string name() const override { return fmt::format("max_over_ranks({})", inner_->name()); }
  double time(const std::function<void()>& run) override {
#ifdef CONCURDL_WITH_MPI
    // Start together, so that the slowest rank's time is the configuration's time.
    if (MPI_Comm c = ranks::comm(); c != MPI_COMM_NULL) CDL_MPI_CHECK(MPI_Barrier(c));
#endif
    // A rank whose run throws contributes infinity, so every rank fails this repetition
    // together and they stay in step; the thrower rethrows its own error.
    std::exception_ptr failed;
    double t = 0;
    try {
      t = inner_->time(run);
    } catch (...) {
      failed = std::current_exception();
      t = std::numeric_limits<double>::infinity();
    }
    t = ranks::max_over(t);
    if (failed) std::rethrow_exception(failed);
    return t;
  }

 private:
  std::shared_ptr<Timer> inner_;
};

}  // namespace

std::shared_ptr<Timer> max_over_ranks_timer(std::shared_ptr<Timer> inner) {
  return std::make_shared<MaxOverRanks>(std::move(inner));
}

}  // namespace concurdl::runner_detail
