#include "concurdl/async_io/loader.hpp"

#include <fmt/format.h>

#include <stdexcept>

#include "concurdl/async_io/sampler.hpp"
#include "concurdl/core/trace.hpp"
#include "concurdl/data/records.hpp"

namespace concurdl::async_io {

EpochPlan::EpochPlan(std::uint64_t records, const LoaderOptions& opt, std::uint64_t epoch)
    : epoch_(epoch), batch_size_(opt.batch_size) {
  if (opt.batch_size == 0) throw std::invalid_argument("LoaderOptions: batch_size must be >= 1");
  order_ = epoch_order(records, opt.shuffle, opt.seed, epoch);
  batches_ =
      opt.drop_last ? order_.size() / batch_size_ : (order_.size() + batch_size_ - 1) / batch_size_;
}

std::span<const std::uint64_t> EpochPlan::batch(std::size_t b) const {
  if (b >= batches_) throw std::out_of_range(fmt::format("batch {} of {}", b, batches_));
  const std::size_t start = b * batch_size_;
  return {order_.data() + start, std::min(batch_size_, order_.size() - start)};
}

Batch BatchAssembler::empty_batch(const EpochPlan& plan, std::size_t b) const {
  const std::size_t n = plan.batch(b).size();
  Batch batch;
  batch.epoch = plan.epoch();
  batch.index = b;
  batch.feature_count = store_.record_size() - data::kRecordHeaderBytes;
  batch.ids.resize(n);
  batch.labels.resize(n);
  batch.features.resize(n * batch.feature_count);
  return batch;
}

void BatchAssembler::decode_one(Batch& batch, std::size_t slot, std::span<const std::byte> record,
                                std::uint64_t id) const {
  if (opt_.verify) {
    if (const std::string bad = data::check_record(record, id); !bad.empty())
      throw data::DataError(store_.shard_path(id), store_.offset(id),
                            fmt::format("record {}: {}", id, bad));
  }
  const data::RecordHeader h = data::decode_record_header(record);
  batch.ids[slot] = h.id;
  batch.labels[slot] = static_cast<std::int32_t>(h.label);
  // (p / 255 - mean) / std as one multiply-add per pixel.
  const float scale = 1.0f / (255.0f * opt_.norm.std), bias = -opt_.norm.mean / opt_.norm.std;
  const std::span<const std::uint8_t> px = data::record_payload(record);
  float* out = batch.features.data() + slot * batch.feature_count;
  for (std::size_t j = 0; j < px.size(); ++j) out[j] = static_cast<float>(px[j]) * scale + bias;
}

std::optional<Batch> BatchAssembler::make(const EpochPlan& plan, std::size_t b,
                                          std::stop_token stop) const {
  // A --trace timeline shows each batch's read and decode on the thread that made it.
  trace::Span span(trace::recording() ? fmt::format("batch {}", b) : std::string(),
                   "read + decode");
  Batch batch = empty_batch(plan, b);
  const std::span<const std::uint64_t> ids = plan.batch(b);
  std::vector<std::byte> record(store_.record_size());
  for (std::size_t k = 0; k < ids.size(); ++k) {
    if (stop.stop_requested()) return std::nullopt;
    store_.read(ids[k], record);
    decode_one(batch, k, record, ids[k]);
  }
  return batch;
}

Batch BatchAssembler::decode(const EpochPlan& plan, std::size_t b,
                             std::span<const std::byte> raw) const {
  // The io_uring loader's reads are in flight together, not a span of one thread: its row of a
  // --trace timeline shows the decode of each batch as its reads complete.
  trace::Span span(trace::recording() ? fmt::format("batch {}", b) : std::string(), "decode");
  Batch batch = empty_batch(plan, b);
  const std::span<const std::uint64_t> ids = plan.batch(b);
  const std::size_t rs = store_.record_size();
  if (raw.size() < ids.size() * rs)
    throw std::invalid_argument("BatchAssembler::decode: fewer bytes than records");
  for (std::size_t k = 0; k < ids.size(); ++k)
    decode_one(batch, k, raw.subspan(k * rs, rs), ids[k]);
  return batch;
}

}  // namespace concurdl::async_io
