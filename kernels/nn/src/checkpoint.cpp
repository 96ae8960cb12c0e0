// Checkpoints (checkpoint.hpp): built whole in memory, checksummed, written atomically; read
// whole, and every check passed before anything in the model or optimiser is touched.
#include "concurdl/nn/checkpoint.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <bit>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <limits>
#include <string_view>
#include <vector>

namespace concurdl::nn {

namespace {

static_assert(std::endian::native == std::endian::little,
              "checkpoints are little-endian and written with memcpy: a big-endian port must swap");

constexpr char kMagic[8] = {'C', 'D', 'L', 'C', 'K', 'P', 'T', '1'};
constexpr std::size_t kPrefixBytes = sizeof kMagic + 4 + 4;  // magic, version, header length
constexpr std::size_t kMinBytes = kPrefixBytes + 8 + 4;      // ... count, CRC

using Bytes = std::vector<unsigned char>;

[[noreturn]] void fail(const std::filesystem::path& path, const std::string& problem) {
  throw CheckpointError(fmt::format("checkpoint '{}': {}", path.string(), problem));
}

std::string errno_text(int err) { return std::strerror(err); }

template <class T>
void put(Bytes& b, T v) {
  const auto* p = reinterpret_cast<const unsigned char*>(&v);
  b.insert(b.end(), p, p + sizeof v);
}

template <class T>
T get(const Bytes& b, std::size_t at) {
  T v;
  std::memcpy(&v, b.data() + at, sizeof v);
  return v;
}

std::uint32_t crc32_of(const unsigned char* data, std::size_t n) {
  uLong crc = crc32(0L, Z_NULL, 0);
  while (n > 0) {  // zlib's length is a uInt: feed it in pieces that fit
    const uInt piece = static_cast<uInt>(std::min<std::size_t>(n, 1u << 30));
    crc = crc32(crc, data, piece);
    data += piece;
    n -= piece;
  }
  return static_cast<std::uint32_t>(crc);
}

// Closes the descriptor it holds; unlinks the temporary it names unless released.
class TempFile {
 public:
  TempFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!path_.empty()) ::unlink(path_.c_str());
  }
  int fd() const { return fd_; }
  int close_fd() {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc;
  }
  void keep() { path_.clear(); }

 private:
  int fd_;
  std::string path_;
};

// Temporary file in the same directory (so rename is atomic), write, fsync, rename over the
// target, fsync the directory (so the rename itself survives a crash).
void write_file_atomic(const std::filesystem::path& path, const Bytes& bytes) {
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : ".";
  std::string name = ".";  // built piecewise: GCC 12 warns falsely (-Wrestrict) on "." + string
  name += path.filename().string();
  name += ".tmp-XXXXXX";
  std::string templ = (dir / name).string();
  const int fd = ::mkstemp(templ.data());
  if (fd < 0)
    fail(path, "cannot create a temporary file in '" + dir.string() + "': " + errno_text(errno));
  TempFile tmp(fd, templ);
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t w = ::write(tmp.fd(), bytes.data() + done, bytes.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) fail(path, "write failed: " + errno_text(errno));
    done += static_cast<std::size_t>(w);
  }
  if (::fsync(tmp.fd()) != 0) fail(path, "fsync failed: " + errno_text(errno));
  if (tmp.close_fd() != 0) fail(path, "close failed: " + errno_text(errno));
  if (::rename(templ.c_str(), path.c_str()) != 0) fail(path, "rename failed: " + errno_text(errno));
  tmp.keep();
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {  // best effort: the file is complete either way
    ::fsync(dfd);
    ::close(dfd);
  }
}

Bytes read_whole(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    fail(path, err == ENOENT ? std::string("no such file") : "cannot open: " + errno_text(err));
  }
  TempFile guard(fd, "");  // only closes
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail(path, "cannot stat: " + errno_text(errno));
  if (!S_ISREG(st.st_mode)) fail(path, "not a regular file");
  Bytes b(static_cast<std::size_t>(st.st_size));
  std::size_t done = 0;
  while (done < b.size()) {
    const ssize_t r = ::read(fd, b.data() + done, b.size() - done);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) fail(path, "read failed: " + errno_text(errno));
    if (r == 0) break;  // shrank under us: judged as truncated below
    done += static_cast<std::size_t>(r);
  }
  b.resize(done);
  return b;
}

// "key=value key=value": the value of `key`, or fail.
// The value of `key`, or "" when the header has none (fields added in later versions).
std::string_view header_optional(std::string_view header, std::string_view key) {
  std::size_t at = 0;
  while (at < header.size()) {
    const std::size_t end = std::min(header.find(' ', at), header.size());
    const std::string_view token = header.substr(at, end - at);
    if (token.size() > key.size() && token.substr(0, key.size()) == key && token[key.size()] == '=')
      return token.substr(key.size() + 1);
    at = end + 1;
  }
  return {};
}

std::string_view header_field(const std::filesystem::path& path, std::string_view header,
                              std::string_view key) {
  const std::string_view v = header_optional(header, key);
  if (v.empty()) fail(path, fmt::format("malformed header (no '{}='): \"{}\"", key, header));
  return v;
}

std::uint64_t header_u64(const std::filesystem::path& path, std::string_view header,
                         std::string_view key) {
  const std::string_view text = header_field(path, header, key);
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || end != text.data() + text.size())
    fail(path, fmt::format("malformed header: {}='{}' is not a number", key, text));
  return v;
}

}  // namespace

void save_checkpoint(const std::filesystem::path& path, const Mlp& model, const Sgd& opt,
                     const TrainState& state) {
  save_checkpoint(path, model.spec().describe(), model.parameters(), opt.velocity(), opt.options(),
                  state);
}

void save_checkpoint(const std::filesystem::path& path, const std::string& arch,
                     std::span<const float> params, std::span<const float> velocity,
                     const SgdOptions& o, const TrainState& state) {
  if (velocity.size() != params.size())
    fail(path, fmt::format("cannot save: the model has {} parameters, the optimiser {} velocities",
                           params.size(), velocity.size()));
  std::string header =
      fmt::format("arch={} epoch={} step={} seed={} lr={} momentum={} weight_decay={}", arch,
                  state.epoch, state.step, state.seed, o.lr, o.momentum, o.weight_decay);
  if (!state.mode.empty()) header += fmt::format(" mode={} workers={}", state.mode, state.workers);
  if (!state.moe.empty()) header += fmt::format(" moe={}", state.moe);
  Bytes b;
  b.reserve(kMinBytes + header.size() + 2 * params.size() * sizeof(float));
  b.insert(b.end(), kMagic, kMagic + sizeof kMagic);
  put<std::uint32_t>(b, kCheckpointVersion);
  put<std::uint32_t>(b, static_cast<std::uint32_t>(header.size()));
  b.insert(b.end(), header.begin(), header.end());
  put<std::uint64_t>(b, params.size());
  const auto* pb = reinterpret_cast<const unsigned char*>(params.data());
  b.insert(b.end(), pb, pb + params.size_bytes());
  const auto* vb = reinterpret_cast<const unsigned char*>(velocity.data());
  b.insert(b.end(), vb, vb + velocity.size_bytes());
  put<std::uint32_t>(b, crc32_of(b.data(), b.size()));
  write_file_atomic(path, b);
}

TrainState load_checkpoint(const std::filesystem::path& path, Mlp& model, Sgd& opt,
                           const std::string& mode, std::uint64_t workers) {
  return load_checkpoint(path, model.spec().describe(), model.parameters(), opt.velocity(), mode,
                         workers);
}

TrainState load_checkpoint(const std::filesystem::path& path, const std::string& arch,
                           std::span<float> params, std::span<float> velocity,
                           const std::string& mode, std::uint64_t workers, const std::string& moe) {
  const Bytes b = read_whole(path);
  const std::size_t size = b.size();
  const std::size_t magic_seen = std::min(size, sizeof kMagic);
  if (magic_seen > 0 && std::memcmp(b.data(), kMagic, magic_seen) != 0)
    fail(path, fmt::format("not a checkpoint (the magic is not \"{}\")",
                           std::string_view(kMagic, sizeof kMagic)));
  if (size < kPrefixBytes)
    fail(path,
         fmt::format("truncated: file is {} bytes, a checkpoint is at least {}", size, kMinBytes));
  const auto version = get<std::uint32_t>(b, 8);
  if (version != kCheckpointVersion)
    fail(path, fmt::format("unsupported format version {} (this build reads version {})", version,
                           kCheckpointVersion));
  const std::size_t header_len = get<std::uint32_t>(b, 12);
  if (size < kPrefixBytes + header_len + 8)
    fail(path, fmt::format("truncated: file is {} bytes, the header says at least {}", size,
                           kPrefixBytes + header_len + 8 + 4));
  const auto count = get<std::uint64_t>(b, kPrefixBytes + header_len);
  // 2 floats (parameter, velocity) per count; a count beyond the file cannot be right, and is
  // kept from overflowing the arithmetic.
  const std::uint64_t expected = count > size ? std::numeric_limits<std::uint64_t>::max()
                                              : kMinBytes + header_len + 2 * sizeof(float) * count;
  if (size != expected)
    fail(path, fmt::format(
                   "{}: file is {} bytes, the header says {}",
                   size < expected ? "truncated" : "trailing bytes", size,
                   count > size ? fmt::format("{} parameters", count) : std::to_string(expected)));
  const std::uint32_t stored = get<std::uint32_t>(b, size - 4);
  const std::uint32_t computed = crc32_of(b.data(), size - 4);
  if (stored != computed)
    fail(path,
         fmt::format("checksum mismatch (stored {:08x}, computed {:08x}): the file is corrupt",
                     stored, computed));

  const std::string_view header(reinterpret_cast<const char*>(b.data()) + kPrefixBytes, header_len);
  MlpSpec spec;
  try {
    spec = MlpSpec::parse(header_field(path, header, "arch"));
  } catch (const std::invalid_argument& e) {
    fail(path, std::string("malformed header: ") + e.what());
  }
  if (spec.describe() != arch)
    fail(path, fmt::format("checkpoint is for {}, the model is {}", spec.describe(), arch));
  const std::string_view saved_moe = header_optional(header, "moe");
  if (saved_moe != moe)
    fail(path, saved_moe.empty() ? fmt::format("checkpoint is of a dense model; the model has a "
                                               "mixture-of-experts block (moe={})",
                                               moe)
               : moe.empty()
                   ? fmt::format("checkpoint has a mixture-of-experts block (moe={}); the model "
                                 "is dense",
                                 saved_moe)
                   : fmt::format("checkpoint's mixture-of-experts block is moe={}, the model's "
                                 "moe={}",
                                 saved_moe, moe));
  if (count != params.size() || count != velocity.size())
    fail(path, fmt::format("holds {} parameters, the model has {} and the optimiser {}", count,
                           params.size(), velocity.size()));
  TrainState state;
  state.epoch = header_u64(path, header, "epoch");
  state.step = header_u64(path, header, "step");
  state.seed = header_u64(path, header, "seed");
  if (const std::string_view mode = header_optional(header, "mode"); !mode.empty()) {
    state.mode = std::string(mode);
    state.workers = header_u64(path, header, "workers");
  }
  state.moe = moe;
  if (!mode.empty() && !state.mode.empty() && (state.mode != mode || state.workers != workers))
    fail(path, fmt::format("checkpoint is of mode {} with {} worker{}; this run is mode {} with {} "
                           "worker{}",
                           state.mode, state.workers, state.workers == 1 ? "" : "s", mode, workers,
                           workers == 1 ? "" : "s"));

  // Every check passed: only now is anything changed.
  const std::size_t at = kPrefixBytes + header_len + 8, bytes = count * sizeof(float);
  std::memcpy(params.data(), b.data() + at, bytes);
  std::memcpy(velocity.data(), b.data() + at + bytes, bytes);
  return state;
}

}  // namespace concurdl::nn
