// Memory, counted where it is allocated: a MemoryAccount keeps the bytes a rank holds by kind,
// now and at the peak, and every buffer of the training stack that is given one (through
// kernels::LineAllocator, aligned.hpp) adds its bytes when it is allocated and removes them when
// it is freed. So a peak read from an account is what the buffers held, not what a schedule or a
// formula says they should hold.
//
// The process's own view, as the kernel keeps it (resident_memory: VmRSS and VmHWM from
// /proc/self/status, reset_resident_peak: writing 5 to /proc/self/clear_refs), is the witness
// an account is checked against: it sees everything (the allocator's rounding and pools, the
// program's baseline, buffers nobody counted), so the two agree only within what those explain.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace concurdl {

enum class MemoryKind : int {
  parameters,     // weights and biases (and their 16-bit copies)
  gradients,      // weight and bias gradients (and their 16-bit copies)
  optimizer,      // the optimiser's state (SGD's momentum)
  activations,    // what backward needs from forward: layer outputs, the inputs kept, the
                  // output gradients a deferred weight gradient waits on
  communication,  // messages: send and receive buffers, a collective's staging
  workspace,      // scratch a computation needs while it runs (backward's ping-pong gradients)
};
inline constexpr std::size_t kMemoryKinds = 6;
inline constexpr std::array<std::string_view, kMemoryKinds> kMemoryKindNames = {
    "parameters", "gradients", "optimizer", "activations", "communication", "workspace"};

struct MemoryBytes {
  std::array<std::uint64_t, kMemoryKinds> bytes{};
  std::uint64_t operator[](MemoryKind k) const { return bytes[static_cast<std::size_t>(k)]; }
  std::uint64_t total() const;
};

// Bytes held per kind, now and at the peak since construction or reset_peak(). Thread-safe: any
// thread may allocate or free through it (a communication thread frees what it has reduced).
// An account with a parent adds to and removes from the parent too, so that a step's own
// account measures the step's buffers while the rank's account sees the rank's whole state.
class MemoryAccount {
 public:
  MemoryAccount() = default;
  explicit MemoryAccount(MemoryAccount* parent) : parent_(parent) {}
  MemoryAccount(const MemoryAccount&) = delete;
  MemoryAccount& operator=(const MemoryAccount&) = delete;

  void add(MemoryKind k, std::size_t bytes);
  void remove(MemoryKind k, std::size_t bytes);
  MemoryBytes current() const;
  // Per kind, the most it held at once; and the most all kinds held at once (peak_total).
  MemoryBytes peak() const;
  std::uint64_t peak_total() const { return peak_total_.load(std::memory_order_relaxed); }
  void reset_peak();  // the peaks start again from what is held now (not the parent's)
  // Allocations and frees counted since construction: a test's evidence that buffers came and
  // went, not only that the totals match.
  std::uint64_t allocations() const { return allocations_.load(std::memory_order_relaxed); }
  std::uint64_t frees() const { return frees_.load(std::memory_order_relaxed); }

 private:
  MemoryAccount* parent_ = nullptr;
  std::array<std::atomic<std::uint64_t>, kMemoryKinds> now_{}, peak_{};
  std::atomic<std::uint64_t> total_{0}, peak_total_{0}, allocations_{0}, frees_{0};
};

// This process's resident memory as the kernel reports it (/proc/self/status): VmRSS now and
// VmHWM, the most it has held since the process started or since reset_resident_peak().
// std::nullopt where /proc is not there (not Linux).
struct ResidentMemory {
  std::uint64_t rss_bytes = 0, hwm_bytes = 0;
};
std::optional<ResidentMemory> resident_memory();
// Resets VmHWM to the current VmRSS (Linux >= 4.0: "5" into /proc/self/clear_refs), after
// handing the pages malloc holds free back to the kernel (glibc's malloc_trim), so the peak that
// follows counts what is used from then on. False where the reset is refused; the peak then
// runs from the process's start.
bool reset_resident_peak();

}  // namespace concurdl
