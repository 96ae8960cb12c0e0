// Helpers for the data tests: a temporary directory, and files written byte by byte (plain or
// gzip) so that every kind of damage can be made on purpose.
#pragma once

#include <stdlib.h>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace data_test {

class ScratchDir {
 public:
  ScratchDir() {
    const char* t = std::getenv("TMPDIR");
    std::string templ =
        std::string(t != nullptr && *t != '\0' ? t : "/tmp") + "/concurdl-data-XXXXXX";
    if (::mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = templ;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

using Bytes = std::vector<unsigned char>;

inline void put_be32(Bytes& b, std::uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<unsigned char>(v >> s));
}

inline Bytes idx_images(std::uint32_t count, std::uint32_t rows, std::uint32_t cols) {
  Bytes b;
  put_be32(b, 2051);
  put_be32(b, count);
  put_be32(b, rows);
  put_be32(b, cols);
  for (std::uint32_t i = 0; i < count * rows * cols; ++i)
    b.push_back(static_cast<unsigned char>(i * 7));
  return b;
}

inline Bytes idx_labels(std::uint32_t count) {
  Bytes b;
  put_be32(b, 2049);
  put_be32(b, count);
  for (std::uint32_t i = 0; i < count; ++i) b.push_back(static_cast<unsigned char>(i % 10));
  return b;
}

inline void write_plain(const std::filesystem::path& p, const Bytes& b) {
  std::ofstream(p, std::ios::binary)
      .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

inline void write_gz(const std::filesystem::path& p, const Bytes& b) {
  gzFile f = gzopen(p.c_str(), "wb");
  if (f == nullptr) throw std::runtime_error("gzopen for writing failed");
  if (!b.empty()) gzwrite(f, b.data(), static_cast<unsigned>(b.size()));
  gzclose(f);
}

inline Bytes read_all(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

}  // namespace data_test
