// core/allocator.h: the tracking allocator every buffer of the suite comes from.
//
// Each allocation is tagged with a MemCategory; current and peak bytes are kept per category
// and in total, so a model's peak memory and its breakdown are exact (llm.c style arenas, but
// per buffer). The allocation counter lets tests prove that a steady-state training step
// allocates nothing. The device-specific part (malloc, cudaMallocAsync) is a RawAllocator.
//
// Thread-safe: several host threads (A3C's actor-learners) may allocate and free buffers of one
// backend at once. One mutex guards the statistics and the raw allocator (allocation is never
// on a timed path: a training step allocates nothing), and stats() returns a copy taken under
// it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

#include "core/tensor.h"

namespace tbd {

class RawAllocator {
 public:
  virtual ~RawAllocator() = default;
  virtual void* allocate(std::size_t bytes) = 0;  // nullptr when the device is out of memory
  virtual void deallocate(void* ptr, std::size_t bytes) = 0;
  virtual std::size_t capacity_bytes() const = 0;  // device memory, for OOM messages
};

struct MemoryStats {
  std::array<std::size_t, kNumMemCategories> current{};
  std::array<std::size_t, kNumMemCategories> peak{};
  std::size_t total_current = 0;
  std::size_t total_peak = 0;
  uint64_t num_allocations = 0;  // allocate() calls since construction

  std::size_t current_of(MemCategory c) const { return current[static_cast<int>(c)]; }
  std::size_t peak_of(MemCategory c) const { return peak[static_cast<int>(c)]; }
};

class TrackingAllocator {
 public:
  explicit TrackingAllocator(std::unique_ptr<RawAllocator> raw);
  TrackingAllocator(const TrackingAllocator&) = delete;
  TrackingAllocator& operator=(const TrackingAllocator&) = delete;

  // Throws OutOfMemory ("out of memory: needs X GiB, have Y GiB") when the request does not fit
  // under the limit or the device refuses it.
  std::shared_ptr<Buffer> allocate(std::size_t bytes, MemCategory category);
  void deallocate(void* ptr, std::size_t bytes, MemCategory category);

  // A snapshot of the statistics (a copy: other threads may allocate meanwhile).
  MemoryStats stats() const;
  // Peaks restart from the current values (used before a measured step).
  void reset_peak();
  // Upper bound on total live bytes (0 = the device capacity). Lets tests and users emulate
  // a smaller device; the default is what the device has.
  void set_limit_bytes(std::size_t limit);
  std::size_t limit_bytes() const;

 private:
  std::size_t limit_locked() const;  // limit_bytes() with mutex_ held

  mutable std::mutex mutex_;  // guards everything below
  std::unique_ptr<RawAllocator> raw_;
  MemoryStats stats_;
  std::size_t limit_ = 0;
};

std::unique_ptr<RawAllocator> make_host_raw_allocator();

}  // namespace tbd
