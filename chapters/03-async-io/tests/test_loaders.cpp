// Every loader (the table in loaders.hpp, and the student loaders of exercises 3.1 and 3.3)
// through one typed suite: every sample exactly once per epoch at 1, 2, 4 and 8 workers (counted
// per sample, plus a sum and an xor of the ids), labels and features right, plan order for the
// ordered loaders, stopping mid-epoch neither hangs nor leaks (run the asan build), a worker's
// exception reaches the consumer and names the file and offset of the bad record.
//   ch03_tests --gtest_filter='LoaderTyped*'
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <type_traits>

#include "concurdl/async_io/loaders.hpp"
#include "concurdl/async_io/loaders_uring.hpp"
#include "concurdl/async_io/uring.hpp"
#include "concurdl/core/testing.hpp"
#include "exercises/student_prefetch.hpp"
#include "exercises/student_reorder.hpp"
#include "test_util.hpp"

namespace {

using namespace ch03_test;
using concurdl::testing::within_seconds;

// One row per loader: how to make it, whether it keeps plan order, whether it can run here.
template <class L, bool Ordered>
struct Kind {
  static constexpr bool ordered = Ordered;
  static bool available(std::string*) { return true; }
  static std::unique_ptr<Loader> make(const RecordStore& s, const LoaderOptions& o) {
    return std::make_unique<L>(s, o);
  }
};
// ahead(opt): the most batches a loader may have read beyond the one the consumer holds.
struct SyncKind : Kind<SyncLoader, true> {
  static std::size_t ahead(const LoaderOptions&) { return 0; }
};
struct PrefetchKind : Kind<PrefetchLoader, true> {
  // the queue, plus the batch in the producer's hands while it waits for room
  static std::size_t ahead(const LoaderOptions& o) { return o.prefetch + 1; }
};
struct UnorderedKind : Kind<UnorderedWorkerLoader, false> {
  static std::size_t ahead(const LoaderOptions& o) { return o.workers * (o.prefetch + 1); }
  static std::unique_ptr<Loader> make(const RecordStore& s, const LoaderOptions& o) {
    return std::make_unique<UnorderedWorkerLoader>(s, o, "workers_unordered");
  }
};
struct OrderedKind : Kind<OrderedWorkerLoader, true> {
  static std::size_t ahead(const LoaderOptions& o) { return o.workers * (o.prefetch + 1); }
  static std::unique_ptr<Loader> make(const RecordStore& s, const LoaderOptions& o) {
    return std::make_unique<OrderedWorkerLoader>(s, o, "workers_ordered");
  }
};
#if CONCURDL_HAVE_URING
struct UringKind : Kind<UringLoader, true> {
  // the queue, plus the batch slots being read (loaders_uring.cpp)
  static std::size_t ahead(const LoaderOptions& o) {
    return o.prefetch + o.prefetch + 1 + (o.workers + o.batch_size - 1) / o.batch_size;
  }
  static bool available(std::string* why) { return uring_available(why); }
};
#endif
struct StudentPrefetchKind : Kind<StudentPrefetchLoader, true> {
  static std::size_t ahead(const LoaderOptions& o) { return o.prefetch + 1; }
};
struct StudentOrderedKind : Kind<WorkerLoader<StudentReorderBuffer<Batch>>, true> {
  static std::size_t ahead(const LoaderOptions& o) { return o.workers * (o.prefetch + 1); }
  static std::unique_ptr<Loader> make(const RecordStore& s, const LoaderOptions& o) {
    return std::make_unique<WorkerLoader<StudentReorderBuffer<Batch>>>(s, o, "student_ordered");
  }
};

struct KindNames {
  template <class T>
  static std::string GetName(int) {
    if (std::is_same_v<T, SyncKind>) return "sync";
    if (std::is_same_v<T, PrefetchKind>) return "prefetch";
    if (std::is_same_v<T, UnorderedKind>) return "workers_unordered";
    if (std::is_same_v<T, OrderedKind>) return "workers_ordered";
    if (std::is_same_v<T, StudentPrefetchKind>) return "student_prefetch";
    if (std::is_same_v<T, StudentOrderedKind>) return "student_ordered";
    return "uring";
  }
};

template <class K>
class LoaderTyped : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string why; !K::available(&why)) GTEST_SKIP() << why;
  }
};
using Kinds = ::testing::Types<SyncKind, PrefetchKind, UnorderedKind, OrderedKind,
#if CONCURDL_HAVE_URING
                               UringKind,
#endif
                               StudentPrefetchKind, StudentOrderedKind>;
TYPED_TEST_SUITE(LoaderTyped, Kinds, KindNames);

constexpr unsigned kWorkers[] = {1, 2, 4, 8};

TYPED_TEST(LoaderTyped, EverySampleExactlyOncePerEpoch) {
  const SharedDataset& ds = small_dataset();
  for (unsigned workers : kWorkers) {
    SCOPED_TRACE(::testing::Message() << workers << " workers");
    CDL_TRY_EXERCISE(within_seconds(60, [&] {
      RecordStore store(ds.path);
      LoaderOptions opt;
      opt.batch_size = 64;
      opt.workers = workers;
      opt.prefetch = 2;
      opt.seed = 11;
      std::unique_ptr<Loader> loader = TypeParam::make(store, opt);
      for (std::uint64_t epoch = 0; epoch < 2; ++epoch) {
        SCOPED_TRACE(::testing::Message() << "epoch " << epoch);
        EpochTally tally(ds.spec.records);
        const EpochPlan plan(store.size(), opt, epoch);
        loader->start_epoch(epoch);
        while (std::optional<Batch> b = loader->next_batch()) {
          ASSERT_EQ(b->epoch, epoch);
          ASSERT_LT(b->index, plan.batches());
          const auto ids = plan.batch(b->index);
          ASSERT_TRUE(std::equal(ids.begin(), ids.end(), b->ids.begin(), b->ids.end()))
              << "batch " << b->index << " holds other samples than the plan's";
          ASSERT_TRUE(check_batch(*b, ds.spec, opt.norm, tally));
        }
        EXPECT_EQ(tally.batches, plan.batches());
        EXPECT_TRUE(complete_epoch(tally));
        if (TypeParam::ordered) {
          for (std::size_t i = 0; i < tally.batch_order.size(); ++i)
            ASSERT_EQ(tally.batch_order[i], i) << "batches out of plan order";
        } else {
          const std::set<std::uint64_t> distinct(tally.batch_order.begin(),
                                                 tally.batch_order.end());
          EXPECT_EQ(distinct.size(), plan.batches());
        }
        EXPECT_EQ(loader->next_batch(), std::nullopt) << "a batch after the end of the epoch";
      }
    }));
  }
}

TYPED_TEST(LoaderTyped, UnshuffledDropLast) {
  const SharedDataset& ds = small_dataset();
  CDL_TRY_EXERCISE(within_seconds(60, [&] {
    RecordStore store(ds.path);
    LoaderOptions opt;
    opt.workers = 3;
    opt.shuffle = false;
    opt.drop_last = true;
    opt.batch_size = 300;  // 1000 records: 3 whole batches, 100 dropped
    std::unique_ptr<Loader> loader = TypeParam::make(store, opt);
    loader->start_epoch(0);
    std::uint64_t count = 0;
    while (std::optional<Batch> b = loader->next_batch()) {
      EXPECT_EQ(b->size(), 300u);
      if (TypeParam::ordered) {
        EXPECT_EQ(b->ids.front(), b->index * 300);
      }
      count += b->size();
    }
    EXPECT_EQ(count, 900u);
  }));
}

// Backpressure: with a consumer that takes one batch and then waits, a loader reads only a
// bounded number of batches ahead (its queue or window), never the whole epoch.
TYPED_TEST(LoaderTyped, ReadsOnlyABoundedDistanceAhead) {
  const SharedDataset& ds = small_dataset();
  for (unsigned workers : {1u, 2u}) {
    SCOPED_TRACE(::testing::Message() << workers << " workers");
    CDL_TRY_EXERCISE(within_seconds(30, [&] {
      RecordStore store(ds.path);
      LoaderOptions opt;
      opt.batch_size = 16;  // 63 batches: far more than any loader may read ahead
      opt.workers = workers;
      opt.prefetch = 2;
      std::unique_ptr<Loader> loader = TypeParam::make(store, opt);
      loader->start_epoch(0);
      ASSERT_TRUE(loader->next_batch().has_value());
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // a slow training step
      const std::uint64_t limit = (1 + TypeParam::ahead(opt)) * opt.batch_size;
      EXPECT_LE(store.reads(), limit) << "read " << store.reads() / opt.batch_size
                                      << " batches while the consumer held one: no backpressure";
      loader->stop();
    }));
  }
}

// Slow storage (2 ms per record, 16 records per batch): stopping must not wait for the epoch.
// Checked by what was read, not by how long stop() took (a loaded machine can stall either
// way): when stop() returns, the store has served no more records than the consumer's batch
// and the loader's read-ahead bound (its backpressure), far fewer than the epoch's 1000, which a
// stop() that drained the epoch would have read; and no thread reads on after stop() returns.
// ASan (the asan build) checks nothing leaks.
TYPED_TEST(LoaderTyped, StopMidEpochNeitherHangsNorLeaks) {
  const SharedDataset& ds = small_dataset();
  for (unsigned workers : kWorkers) {
    SCOPED_TRACE(::testing::Message() << workers << " workers");
    CDL_TRY_EXERCISE(within_seconds(30, [&] {
      RecordStore store(ds.path, {.storage = {.latency_s = 0.002}});
      LoaderOptions opt;
      opt.workers = workers;
      opt.batch_size = 16;  // 8 workers' read-ahead, (1 + 8 * 3) * 16 = 400, is under the epoch
      opt.prefetch = 2;
      std::unique_ptr<Loader> loader = TypeParam::make(store, opt);
      loader->start_epoch(0);
      ASSERT_TRUE(loader->next_batch().has_value());
      loader->stop();
      const std::uint64_t read_at_stop = store.reads();
      const std::uint64_t limit = (1 + TypeParam::ahead(opt)) * opt.batch_size;
      ASSERT_LT(limit, ds.spec.records);
      EXPECT_LE(read_at_stop, limit) << "stop() waited for the epoch: read " << read_at_stop
                                     << " of " << ds.spec.records << " records";
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // 10 reads' latency
      EXPECT_EQ(store.reads(), read_at_stop) << "a thread went on reading after stop()";
      EXPECT_EQ(loader->next_batch(), std::nullopt) << "a batch after stop()";
      loader->stop();  // idempotent
      // Restart after a stop: a whole epoch again.
      RecordStore fast(ds.path);
      std::unique_ptr<Loader> again = TypeParam::make(fast, opt);
      again->start_epoch(1);
      ASSERT_TRUE(again->next_batch().has_value());
      again->start_epoch(2);  // abandons epoch 1 mid-way
      EpochTally tally(ds.spec.records);
      while (std::optional<Batch> b = again->next_batch())
        ASSERT_TRUE(check_batch(*b, ds.spec, opt.norm, tally));
      EXPECT_TRUE(complete_epoch(tally));
      // Destroyed mid-epoch without stop(): the destructor stops.
      std::unique_ptr<Loader> dropped = TypeParam::make(store, opt);
      dropped->start_epoch(0);
    }));
  }
}

// A corrupt record (one payload byte flipped on disk): the worker's DataError reaches the
// consumer, naming the shard file and the record's byte offset.
TYPED_TEST(LoaderTyped, WorkerExceptionReachesTheConsumer) {
  const data::SyntheticSpec spec{.records = 300, .payload_bytes = 40, .classes = 10, .seed = 3};
  TempDir dir("concurdl-ch03-corrupt");
  const auto info = data::write_synthetic_dataset(dir.path() / "ds", spec, 100);
  const std::uint64_t bad_id = 150;
  const data::RecordLocation loc = data::locate(info, bad_id);
  {
    UniqueFd fd = data::open_file(info.shards[loc.shard].path, O_RDWR);
    const std::byte flip{0xFF};
    ASSERT_EQ(::pwrite(fd.get(), &flip, 1, static_cast<off_t>(loc.offset + 20)), 1);
  }
  for (unsigned workers : kWorkers) {
    SCOPED_TRACE(::testing::Message() << workers << " workers");
    CDL_TRY_EXERCISE(within_seconds(30, [&] {
      RecordStore store(dir.path() / "ds");
      LoaderOptions opt;
      opt.batch_size = 16;
      opt.workers = workers;
      std::unique_ptr<Loader> loader = TypeParam::make(store, opt);
      loader->start_epoch(0);
      try {
        while (loader->next_batch()) {
        }
        ADD_FAILURE() << "the corrupt record went unnoticed";
      } catch (const data::DataError& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find(info.shards[loc.shard].path.filename().string()), std::string::npos)
            << what;
        EXPECT_NE(what.find("byte " + std::to_string(loc.offset)), std::string::npos) << what;
        EXPECT_EQ(e.offset(), loc.offset);
      }
      loader->stop();
    }));
  }
}

TEST(LoaderTable, EveryKindIsListedOnce) {
  std::set<std::string> names;
  for (const LoaderKind& k : loader_kinds()) {
    EXPECT_TRUE(names.insert(std::string(k.name)).second) << k.name;
    EXPECT_EQ(loader_kinds().lookup(k.name), &k);
  }
  for (const char* n : {"sync", "prefetch", "workers_unordered", "workers_ordered", "uring"})
    EXPECT_TRUE(names.count(n)) << n;
  EXPECT_EQ(loader_kinds().lookup("nope"), nullptr);
  EXPECT_EQ(loader_kinds().axis_name(), "loader");
}

}  // namespace
