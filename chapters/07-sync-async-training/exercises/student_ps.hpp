// Exercise 7.1 (chapter 07, exercises.md): a parameter server's pull and push, with versions.
// The reference is ParameterServer in include/concurdl/asgd/parameter_server.hpp and
// src/parameter_server.cpp: try first, read after.
// Check it:  concurdl exercise ch07 7.1     (tests, then a timing against the reference)
// or faster: ch07_tests --gtest_filter='PushPullEx7_1/student.*'
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <stdexcept>
#include <vector>

#include "concurdl/core/errors.hpp"
#include "concurdl/nn/sgd.hpp"

namespace concurdl::asgd {

// Exercise 7.1: the server of asynchronous SGD. It holds the parameters and SGD's momentum;
// workers pull() a copy of the parameters, compute a gradient on it and push() it; the server
// applies every push at once as one SGD step, however old the copy it was computed on.
// Every method may be called from any number of threads at once.
//
//   constructor     `initial` parameters, nn::Sgd's options, `shards` ranges of about equal size
//                   (the reference's shard s of k is [n*s/k, n*(s+1)/k)), each with its own
//                   lock and its own momentum, so that pushes in different shards go on together.
//                   std::invalid_argument when shards < 1 or shards > initial.size().
//   size()          the number of parameters; shards(): the number of shards
//   pull(out)       copies the parameters into `out` and returns the version they are at: the
//                   number of pushes applied in full before the copy began (every element of
//                   the copy holds at least that many pushes; with one shard the copy is one
//                   moment's, with several a later push may land in some shards during the
//                   copy, and that is allowed)
//   push(g, seen)   applies gradient `g` as one SGD step, shard by shard, and returns its
//                   staleness: the pushes counted in the version since `seen` (what the pull
//                   behind `g` returned), not counting this one; 0 for a `seen` from the future.
//                   A push is counted in the version only once all of it is in.
//   version()       the pushes applied so far
//   set_lr(lr)      the learning rate of the pushes that follow, in every shard
//   `out` or `g` not size() floats: std::invalid_argument.
// One push, alone, must be exactly nn::Sgd's step, bit for bit, whatever the shard count: keep
// one nn::Sgd per shard (its step() takes the shard's subspans of parameters and gradient), or
// write nn::Sgd's loop with the same expression in the same order (kernels/nn/src/sgd.cpp).
// Think about: which lock guards what; whether pull must hold every shard's lock at once; where
// pull reads the version and where push counts itself (before or after its update, and what a
// worker that pulls would then believe); what a push's staleness is when several race.
class StudentParameterServer {
 public:
  StudentParameterServer([[maybe_unused]] std::span<const float> initial,
                         [[maybe_unused]] nn::SgdOptions sgd, [[maybe_unused]] int shards = 1) {
    CDL_TODO("7.1 parameter server");
  }

  std::size_t size() const { CDL_TODO("7.1 parameter server"); }
  int shards() const { CDL_TODO("7.1 parameter server"); }

  std::uint64_t pull([[maybe_unused]] std::span<float> out) const {
    CDL_TODO("7.1 parameter server");
  }
  std::uint64_t push([[maybe_unused]] std::span<const float> gradient,
                     [[maybe_unused]] std::uint64_t version_seen) {
    CDL_TODO("7.1 parameter server");
  }
  std::uint64_t version() const { CDL_TODO("7.1 parameter server"); }

  void set_lr([[maybe_unused]] float lr) { CDL_TODO("7.1 parameter server"); }

 private:
  // Yours: the parameters, the shards (a range, a lock and an optimiser each), the version.
};

}  // namespace concurdl::asgd
