// The `concurdl ps-worker` command (process_workers.hpp): one worker process of the parameter
// server, on a socket pair (--fd) or a TCP connection to the server on another host (--connect);
// with --shards, it pulls the parameters from and pushes its gradients to the shard processes
// itself, and tells the server only that the batch is done.
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <limits>

#include "concurdl/asgd/process_workers.hpp"
#include "concurdl/core/errors.hpp"
#include "concurdl/data/idx.hpp"
#include "concurdl/kernels/gemm.hpp"
#include "concurdl/kernels/threads.hpp"
#include "concurdl/nn/dataset.hpp"
#include "concurdl/nn/random.hpp"
#include "worker_links.hpp"

namespace concurdl::asgd {

using namespace links;

namespace {

// A connection to one shard process and the range of the parameters it holds.
struct Link {
  std::string where;
  int fd = -1;
  std::size_t offset = 0, count = 0;
  std::uint64_t version = 0;  // what its last pull returned
};

// --shards ADDR:PORT,...: joins each and checks that together they hold every parameter once.
std::vector<Link> join_shards(const std::string& list, int id, std::size_t parameters) {
  std::vector<Link> shards;
  if (list.empty()) return shards;
  std::size_t next = 0;
  for (std::size_t at = 0; at <= list.size();) {
    const std::size_t comma = std::min(list.find(',', at), list.size());
    Link l;
    l.where = list.substr(at, comma - at);
    l.fd = connect_tcp(l.where, "ps-worker: a shard");
    ShardFrame join, reply;
    join.type = kJoin;
    join.from = static_cast<std::uint32_t>(id);
    if (!ask(l.fd, join, reply))
      throw std::runtime_error("ps-worker: the shard at " + l.where + " did not answer");
    l.offset = reply.offset;
    l.count = reply.count;
    if (l.offset != next || l.offset + l.count > parameters)
      throw std::runtime_error(
          fmt::format("ps-worker: the shard at {} holds [{}, {}), not the next range from {} of {}",
                      l.where, l.offset, l.offset + l.count, next, parameters));
    next = l.offset + l.count;
    shards.push_back(l);
    at = comma + 1;
  }
  if (next != parameters)
    throw std::runtime_error(
        fmt::format("ps-worker: the shards hold {} of the {} parameters", next, parameters));
  return shards;
}

// A pull (into `into`), a push (of `from`) or both (kPushPull) on every shard: the requests go
// out to all of them before any answer is read, so the shards serve this worker at the same
// time. A push returns the largest staleness any shard saw in `staleness`.
bool exchange(std::vector<Link>& shards, std::uint32_t type, float* into, const float* from,
              std::uint64_t* staleness) {
  for (Link& l : shards) {
    ShardFrame f;
    f.type = type;
    f.value = l.version;
    if (!send_all(l.fd, &f, sizeof f) ||
        (type != kPull && !send_all(l.fd, from + l.offset, l.count * sizeof(float))))
      return false;
  }
  if (staleness != nullptr) *staleness = 0;
  for (Link& l : shards) {
    ShardFrame reply;
    if (!recv_all(l.fd, &reply, sizeof reply) || reply.type != kReply) {
      std::fprintf(stderr, "ps-worker: the shard at %s is gone\n", l.where.c_str());
      return false;
    }
    if (type != kPull && staleness != nullptr) *staleness = std::max(*staleness, reply.value);
    if (type != kPush) {
      l.version = type == kPull ? reply.value : reply.version;
      if (!recv_all(l.fd, into + l.offset, l.count * sizeof(float))) return false;
    }
  }
  return true;
}

}  // namespace

int ps_worker_main(const std::vector<std::string>& args) {
  int fd = -1, id = 0;
  std::size_t batch = 64, train_limit = 0;
  std::string arch, gemm = "openblas", data, connect, shard_list;
  double straggler = 1.0;
  bool push_pull = false, pulled = false;  // --push-pull: `pulled` once params hold a pull
  for (std::size_t i = 0; i + 1 < args.size(); i += 2) {
    const std::string& k = args[i];
    const std::string& v = args[i + 1];
    if (k == "--fd")
      fd = std::stoi(v);
    else if (k == "--connect")
      connect = v;
    else if (k == "--worker")
      id = std::stoi(v);
    else if (k == "--arch")
      arch = v;
    else if (k == "--batch")
      batch = std::stoul(v);
    else if (k == "--gemm")
      gemm = v;
    else if (k == "--data")
      data = v;
    else if (k == "--train-limit")
      train_limit = std::stoul(v);
    else if (k == "--straggler")
      straggler = std::stod(v);
    else if (k == "--shards")
      shard_list = v;
    else if (k == "--push-pull")
      push_pull = v == "1";
    else
      throw UsageError("ps-worker: unknown option " + k);
  }
  if ((fd < 0) == connect.empty() || arch.empty() || batch == 0 || id < 0)
    throw UsageError("ps-worker: started by `concurdl train --backend processes`, not by hand");
  kernels::set_compute_threads(1);
  nn::MlpSpec spec = nn::MlpSpec::parse(arch);
  kernels::GemmVersion g{};
  if (!kernels::parse_gemm_version(gemm, g)) throw UsageError("ps-worker: unknown --gemm " + gemm);
  const data::FashionMnist fm = data::load_fashion_mnist(
      data.empty() ? data::fashion_mnist_dir() : std::filesystem::path(data));
  const nn::Dataset train = nn::to_dataset(fm.train, train_limit);
  nn::Mlp model(spec, 1, g);  // the server (or the shards) send the parameters with every task
  const std::span<float> params = model.parameters();
  // --server-hosts: a connection to every shard, each of which says which range it holds.
  std::vector<Link> shards = join_shards(shard_list, id, params.size());
  if (!connect.empty())
    fd = connect_tcp(connect,
                     "ps-worker: the server");  // once the data is loaded: then it says hello
  HelloHeader hello;
  hello.worker = static_cast<std::uint32_t>(id);
  hello.parameters = model.parameters().size();
  if (!send_all(fd, &hello, sizeof hello)) return 1;

  std::vector<std::uint32_t> order;
  std::uint64_t order_epoch = std::numeric_limits<std::uint64_t>::max(), order_seed = 0;
  std::vector<float> x(batch * train.dim);
  std::vector<std::uint8_t> y(batch);
  for (;;) {
    TaskHeader t;
    if (!recv_all(fd, &t, sizeof t)) return 0;  // the server is gone: nothing left to do
    if (t.type == kStop) return 0;
    if (t.type == kDie) ::raise(SIGKILL);  // --fail-worker across hosts: a real death
    if (t.type == kTaskFromShards) {
      // With --push-pull the last push brought the parameters this step computes on.
      if (!(push_pull && pulled) && !exchange(shards, kPull, params.data(), nullptr, nullptr))
        return 1;
    } else if (t.type != kTask || !recv_all(fd, params.data(), params.size_bytes())) {
      return 1;
    }
    const auto t0 = Clock::now();
    if (t.epoch != order_epoch || t.seed != order_seed) {
      nn::epoch_permutation(train.n, t.seed, t.epoch, order);
      order_epoch = t.epoch;
      order_seed = t.seed;
    }
    const std::size_t first = t.batch * batch;
    if (first >= train.n) return 1;
    const std::size_t rows = std::min(batch, train.n - first);
    nn::gather_batch(train, order.data() + first, rows, x.data(), y.data());
    std::size_t correct = 0;
    const float loss = model.forward_backward(x.data(), y.data(), rows, &correct);
    nn::straggle(straggler, std::chrono::duration<double>(Clock::now() - t0).count());
    ResultHeader r;
    r.batch = t.batch;
    r.version_seen = t.version;
    r.loss_sum = static_cast<double>(loss) * static_cast<double>(rows);
    r.correct = correct;
    r.rows = rows;
    const auto grads = model.gradients();
    if (t.type == kTaskFromShards) {
      // Every shard has applied its part before the server hears of the result.
      if (!exchange(shards, push_pull ? kPushPull : kPush, params.data(), grads.data(),
                    &r.staleness))
        return 1;
      pulled = push_pull;
      if (!send_all(fd, &r, sizeof r)) return 0;
    } else if (!send_all(fd, &r, sizeof r) || !send_all(fd, grads.data(), grads.size_bytes())) {
      return 0;
    }
  }
}

}  // namespace concurdl::asgd
