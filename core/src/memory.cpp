// Memory accounts and the process's resident memory (memory.hpp).
#include "concurdl/core/memory.hpp"

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <fstream>
#include <sstream>
#include <string>

namespace concurdl {

namespace {
void raise_to(std::atomic<std::uint64_t>& peak, std::uint64_t value) {
  std::uint64_t seen = peak.load(std::memory_order_relaxed);
  while (value > seen && !peak.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
  }
}
}  // namespace

std::uint64_t MemoryBytes::total() const {
  std::uint64_t t = 0;
  for (const std::uint64_t b : bytes) t += b;
  return t;
}

void MemoryAccount::add(MemoryKind k, std::size_t bytes) {
  const auto i = static_cast<std::size_t>(k);
  raise_to(peak_[i], now_[i].fetch_add(bytes, std::memory_order_relaxed) + bytes);
  raise_to(peak_total_, total_.fetch_add(bytes, std::memory_order_relaxed) + bytes);
  allocations_.fetch_add(1, std::memory_order_relaxed);
  if (parent_ != nullptr) parent_->add(k, bytes);
}

void MemoryAccount::remove(MemoryKind k, std::size_t bytes) {
  now_[static_cast<std::size_t>(k)].fetch_sub(bytes, std::memory_order_relaxed);
  total_.fetch_sub(bytes, std::memory_order_relaxed);
  frees_.fetch_add(1, std::memory_order_relaxed);
  if (parent_ != nullptr) parent_->remove(k, bytes);
}

MemoryBytes MemoryAccount::current() const {
  MemoryBytes m;
  for (std::size_t i = 0; i < kMemoryKinds; ++i)
    m.bytes[i] = now_[i].load(std::memory_order_relaxed);
  return m;
}

MemoryBytes MemoryAccount::peak() const {
  MemoryBytes m;
  for (std::size_t i = 0; i < kMemoryKinds; ++i)
    m.bytes[i] = peak_[i].load(std::memory_order_relaxed);
  return m;
}

void MemoryAccount::reset_peak() {
  for (std::size_t i = 0; i < kMemoryKinds; ++i)
    peak_[i].store(now_[i].load(std::memory_order_relaxed), std::memory_order_relaxed);
  peak_total_.store(total_.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

std::optional<ResidentMemory> resident_memory() {
  std::ifstream in("/proc/self/status");
  if (!in) return std::nullopt;
  ResidentMemory r;
  bool rss = false, hwm = false;
  std::string line;
  while (std::getline(in, line)) {
    const auto field = [&](const char* name, std::uint64_t& out) {
      const std::string prefix = std::string(name) + ":";
      if (line.rfind(prefix, 0) != 0) return false;
      std::istringstream value(line.substr(prefix.size()));
      std::uint64_t kib = 0;
      value >> kib;  // "VmRSS:	  12345 kB"
      out = kib * 1024;
      return static_cast<bool>(value);
    };
    rss = field("VmRSS", r.rss_bytes) || rss;
    hwm = field("VmHWM", r.hwm_bytes) || hwm;
  }
  if (!rss || !hwm) return std::nullopt;
  return r;
}

bool reset_resident_peak() {
#ifdef __GLIBC__
  // The pages malloc keeps after earlier frees go back to the kernel first, so that the peak
  // from here counts what is in use from here (a writer's evaluation before the steps, or a
  // checkpoint's read, would otherwise be the floor of every peak after it).
  (void)::malloc_trim(0);
#endif
  std::ofstream out("/proc/self/clear_refs");
  if (!out) return false;
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

}  // namespace concurdl
