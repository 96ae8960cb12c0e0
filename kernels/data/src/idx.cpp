// IDX reading through zlib's gzread, which also reads uncompressed files as they are.
#include "concurdl/data/idx.hpp"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "concurdl/data/error.hpp"

namespace concurdl::data {

namespace {

// A gzip (or plain) file read front to back; offsets count decompressed bytes.
class GzReader {
 public:
  explicit GzReader(const std::filesystem::path& path) : path_(path.string()) {
    errno = 0;
    gz_ = gzopen(path_.c_str(), "rb");
    if (gz_ == nullptr)
      throw DataError(path_, 0,
                      fmt::format("cannot be opened: {}",
                                  errno != 0 ? std::strerror(errno) : "out of memory in zlib"));
    gzbuffer(gz_, 1u << 17);
  }
  ~GzReader() {
    if (gz_ != nullptr) gzclose(gz_);
  }
  GzReader(const GzReader&) = delete;
  GzReader& operator=(const GzReader&) = delete;

  const std::string& path() const { return path_; }
  std::uint64_t offset() const { return offset_; }

  // Exactly n bytes, or a DataError at the offset where the data ran out or went bad.
  void read_exact(void* dst, std::size_t n, const std::string& what) {
    std::size_t got = 0;
    while (got < n) {
      const auto chunk = static_cast<unsigned>(std::min<std::size_t>(n - got, 1u << 30));
      const int r = gzread(gz_, static_cast<char*>(dst) + got, chunk);
      if (r < 0)
        throw DataError(path_, offset_ + got,
                        fmt::format("corrupt gzip data while reading {}: {}", what, zlib_error()));
      if (r == 0) {
        int code = Z_OK;
        gzerror(gz_, &code);
        throw DataError(path_, offset_ + got,
                        fmt::format("truncated: {} needs {} bytes from byte {}, the data ends "
                                    "after {}{}",
                                    what, n, offset_, got,
                                    code != Z_OK ? " (" + zlib_error() + ")" : std::string()));
      }
      got += static_cast<std::size_t>(r);
    }
    offset_ += n;
  }

  std::uint32_t read_be32(const std::string& what) {
    unsigned char b[4];
    read_exact(b, 4, what);
    return (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) | (std::uint32_t{b[2]} << 8) |
           b[3];
  }

  // The file must end here: trailing bytes mean the header's counts are wrong.
  void expect_end(const std::string& what) {
    char c;
    const int r = gzread(gz_, &c, 1);
    if (r > 0)
      throw DataError(path_, offset_,
                      fmt::format("unexpected data after the last {} (the header's counts say "
                                  "the file ends here)",
                                  what));
    if (r < 0)
      throw DataError(path_, offset_,
                      fmt::format("corrupt gzip data at the end: {}", zlib_error()));
  }

 private:
  std::string zlib_error() {
    int code = Z_OK;
    const char* msg = gzerror(gz_, &code);
    return msg != nullptr && *msg != '\0' ? msg : "zlib error " + std::to_string(code);
  }

  std::string path_;
  gzFile gz_ = nullptr;
  std::uint64_t offset_ = 0;
};

void check_magic(GzReader& in, std::uint32_t expected, const char* kind) {
  const std::uint32_t magic = in.read_be32("the magic number");
  if (magic != expected)
    throw DataError(in.path(), 0,
                    fmt::format("magic number {} (0x{:08x}) is not {} (0x{:08x}, IDX {}){}", magic,
                                magic, expected, expected, kind,
                                magic == kIdxImagesMagic || magic == kIdxLabelsMagic
                                    ? ": images and labels files swapped?"
                                    : ": not an IDX file, or not gzip"));
}

}  // namespace

IdxImages read_idx_images(const std::filesystem::path& path) {
  GzReader in(path);
  check_magic(in, kIdxImagesMagic, "unsigned-byte images, 3 dimensions");
  IdxImages img;
  img.count = in.read_be32("the image count");
  img.rows = in.read_be32("the row count");
  img.cols = in.read_be32("the column count");
  if (img.rows == 0 || img.cols == 0 || img.rows > 65536 || img.cols > 65536)
    throw DataError(in.path(), img.rows == 0 || img.rows > 65536 ? 8 : 12,
                    fmt::format("implausible image size {} x {}", img.rows, img.cols));
  const std::uint64_t bytes = std::uint64_t{img.count} * img.rows * img.cols;
  if (bytes > (std::uint64_t{1} << 36))
    throw DataError(in.path(), 4,
                    fmt::format("{} images of {} x {} would be {} bytes: implausible", img.count,
                                img.rows, img.cols, bytes));
  img.pixels.resize(bytes);
  in.read_exact(img.pixels.data(), img.pixels.size(),
                fmt::format("{} images of {} x {}", img.count, img.rows, img.cols));
  in.expect_end("image");
  return img;
}

IdxLabels read_idx_labels(const std::filesystem::path& path) {
  GzReader in(path);
  check_magic(in, kIdxLabelsMagic, "unsigned-byte labels, 1 dimension");
  const std::uint32_t count = in.read_be32("the label count");
  IdxLabels lab;
  lab.labels.resize(count);
  in.read_exact(lab.labels.data(), lab.labels.size(), fmt::format("{} labels", count));
  in.expect_end("label");
  return lab;
}

LabelledImages read_labelled_images(const std::filesystem::path& images,
                                    const std::filesystem::path& labels) {
  LabelledImages d{read_idx_images(images), read_idx_labels(labels)};
  if (d.labels.labels.size() != d.images.count)
    throw DataError(labels.string(), 4,
                    fmt::format("holds {} labels, but {} holds {} images", d.labels.labels.size(),
                                images.string(), d.images.count));
  return d;
}

std::filesystem::path fashion_mnist_dir() {
  if (const char* env = std::getenv("CONCURDL_FASHION_MNIST"); env != nullptr && *env != '\0')
    return env;
  return "/usr/share/datasets/fashion-mnist";
}

namespace {
constexpr const char* kFiles[] = {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                                  "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"};

LabelledImages load_split(const std::filesystem::path& dir, const char* images, const char* labels,
                          std::uint32_t expected) {
  LabelledImages d = read_labelled_images(dir / images, dir / labels);
  const std::string ip = (dir / images).string();
  if (d.images.count != expected)
    throw DataError(ip, 4,
                    fmt::format("holds {} images; Fashion-MNIST has {}", d.images.count, expected));
  if (d.images.rows != kFashionMnistSide || d.images.cols != kFashionMnistSide)
    throw DataError(ip, 8,
                    fmt::format("images are {} x {}; Fashion-MNIST's are 28 x 28", d.images.rows,
                                d.images.cols));
  const auto& l = d.labels.labels;
  for (std::size_t i = 0; i < l.size(); ++i)
    if (l[i] >= kFashionMnistClasses)
      throw DataError((dir / labels).string(), 8 + i,
                      fmt::format("label {} of image {} is not a class 0..9", int(l[i]), i));
  return d;
}
}  // namespace

bool fashion_mnist_present(const std::filesystem::path& dir, std::string* why) {
  for (const char* f : kFiles) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(dir / f, ec)) {
      if (why != nullptr)
        *why = fmt::format(
            "Fashion-MNIST not found: {} is missing (apt-get install "
            "dataset-fashion-mnist, or set CONCURDL_FASHION_MNIST)",
            (dir / f).string());
      return false;
    }
  }
  return true;
}

FashionMnist load_fashion_mnist(const std::filesystem::path& dir) {
  return {load_split(dir, kFiles[0], kFiles[1], kFashionMnistTrain),
          load_split(dir, kFiles[2], kFiles[3], kFashionMnistTest)};
}

}  // namespace concurdl::data
