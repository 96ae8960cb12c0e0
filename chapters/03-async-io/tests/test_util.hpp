// Shared by chapter 03's tests: small synthetic data sets in temporary directories, and the
// check that a sequence of batches is one complete epoch (every sample exactly once, with the
// right label and features).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "concurdl/async_io/file.hpp"
#include "concurdl/async_io/loader.hpp"
#include "concurdl/data/synthetic.hpp"

namespace ch03_test {

using namespace concurdl::async_io;
namespace data = concurdl::data;

// A data set written once per test binary (records not a multiple of the batch size, several
// shards), removed when the binary exits.
struct SharedDataset {
  data::SyntheticSpec spec;
  TempDir dir{"concurdl-ch03-test"};
  std::filesystem::path path;
  explicit SharedDataset(data::SyntheticSpec s, std::uint64_t per_shard) : spec(s) {
    path = dir.path() / "ds";
    data::write_synthetic_dataset(path, spec, per_shard);
  }
};

inline const SharedDataset& small_dataset() {
  static const SharedDataset ds({.records = 1000, .payload_bytes = 40, .classes = 10, .seed = 7},
                                /*per_shard=*/400);
  return ds;
}

// The expected normalised features of sample `id`.
inline std::vector<float> expected_features(const data::SyntheticSpec& spec, std::uint64_t id,
                                            const Normalization& norm) {
  std::vector<std::uint8_t> px(spec.payload_bytes);
  data::synthetic_payload(spec, id, px);
  std::vector<float> f(px.size());
  for (std::size_t j = 0; j < px.size(); ++j) f[j] = (px[j] / 255.0f - norm.mean) / norm.std;
  return f;
}

// Per-sample counters plus a sum and an xor over the ids: a sample lost, delivered twice or
// replaced by another shows in at least one of them.
struct EpochTally {
  std::vector<int> hits;
  std::uint64_t sum = 0, xr = 0;
  std::size_t batches = 0;
  std::vector<std::uint64_t> batch_order;
  explicit EpochTally(std::uint64_t n) : hits(n, 0) {}
};

inline ::testing::AssertionResult check_batch(const Batch& b, const data::SyntheticSpec& spec,
                                              const Normalization& norm, EpochTally& t) {
  if (b.feature_count != spec.payload_bytes)
    return ::testing::AssertionFailure() << "feature_count " << b.feature_count;
  if (b.labels.size() != b.size() || b.features.size() != b.size() * b.feature_count)
    return ::testing::AssertionFailure() << "batch " << b.index << ": inconsistent sizes";
  for (std::size_t k = 0; k < b.size(); ++k) {
    const std::uint64_t id = b.ids[k];
    if (id >= t.hits.size()) return ::testing::AssertionFailure() << "sample id " << id;
    ++t.hits[id];
    t.sum += id;
    t.xr ^= id;
    if (b.labels[k] != static_cast<std::int32_t>(data::synthetic_label(spec, id)))
      return ::testing::AssertionFailure() << "sample " << id << ": wrong label " << b.labels[k];
    const std::vector<float> f = expected_features(spec, id, norm);
    for (std::size_t j = 0; j < f.size(); ++j)
      if (std::fabs(b.features[k * b.feature_count + j] - f[j]) > 1e-5f)
        return ::testing::AssertionFailure()
               << "sample " << id << ": feature " << j << " is "
               << b.features[k * b.feature_count + j] << ", not " << f[j];
  }
  ++t.batches;
  t.batch_order.push_back(b.index);
  return ::testing::AssertionSuccess();
}

inline ::testing::AssertionResult complete_epoch(const EpochTally& t) {
  const std::uint64_t n = t.hits.size();
  std::uint64_t xr = 0;
  for (std::uint64_t i = 0; i < n; ++i) xr ^= i;
  for (std::uint64_t i = 0; i < n; ++i)
    if (t.hits[i] != 1)
      return ::testing::AssertionFailure()
             << "sample " << i << " delivered " << t.hits[i] << " times";
  if (t.sum != n * (n - 1) / 2 || t.xr != xr)
    return ::testing::AssertionFailure() << "id sum/xor " << t.sum << "/" << t.xr;
  return ::testing::AssertionSuccess();
}

}  // namespace ch03_test
