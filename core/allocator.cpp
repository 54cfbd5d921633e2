// core/allocator.cpp: category accounting and host memory.
#include "core/allocator.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace tbd {
namespace {

// A size for people: MiB below a GiB, else GiB.
std::string gib(std::size_t bytes) {
  char buf[32];
  const double b = static_cast<double>(bytes);
  if (bytes < (1ull << 30)) {
    std::snprintf(buf, sizeof(buf), "%.1f MiB", b / (1ull << 20));
  } else {
    std::snprintf(buf, sizeof(buf), "%.2f GiB", b / (1ull << 30));
  }
  return buf;
}

// 64-byte aligned host memory: what AVX-512 loads and oneDNN prefer.
class HostRawAllocator final : public RawAllocator {
 public:
  void* allocate(std::size_t bytes) override {
    std::size_t rounded = (std::max<std::size_t>(bytes, 1) + 63) / 64 * 64;
    return std::aligned_alloc(64, rounded);
  }
  void deallocate(void* ptr, std::size_t) override { std::free(ptr); }
  std::size_t capacity_bytes() const override {
    long pages = sysconf(_SC_PHYS_PAGES);
    long page = sysconf(_SC_PAGE_SIZE);
    return pages > 0 && page > 0 ? static_cast<std::size_t>(pages) * page : 0;
  }
};

}  // namespace

std::unique_ptr<RawAllocator> make_host_raw_allocator() {
  return std::make_unique<HostRawAllocator>();
}

TrackingAllocator::TrackingAllocator(std::unique_ptr<RawAllocator> raw) : raw_(std::move(raw)) {}

MemoryStats TrackingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void TrackingAllocator::set_limit_bytes(std::size_t limit) {
  std::lock_guard<std::mutex> lock(mutex_);
  limit_ = limit;
}

std::size_t TrackingAllocator::limit_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return limit_locked();
}

std::size_t TrackingAllocator::limit_locked() const {
  // Leave an eighth of host memory to the OS and the rest of the process.
  return limit_ ? limit_ : raw_->capacity_bytes() / 8 * 7;
}

std::shared_ptr<Buffer> TrackingAllocator::allocate(std::size_t bytes, MemCategory category) {
  std::unique_lock<std::mutex> lock(mutex_);
  std::size_t limit = limit_locked();
  if (limit && stats_.total_current + bytes > limit) {
    // Where the rounded sizes would read alike ("needs 0.50 GiB, have 0.50 GiB"), the bytes.
    const std::size_t need = stats_.total_current + bytes;
    const bool close = gib(need) == gib(limit);
    auto size = [&](std::size_t b) { return close ? std::to_string(b) + " bytes" : gib(b); };
    throw OutOfMemory("out of memory: needs " + size(need) + " (" + size(stats_.total_current) +
                      " in use + " + size(bytes) + " for " + to_string(category) + "), have " +
                      size(limit));
  }
  void* p = raw_->allocate(bytes);
  if (!p) {
    throw OutOfMemory("out of memory: needs " + gib(stats_.total_current + bytes) +
                      ", the device refused " + gib(bytes) + " for " + to_string(category) + " (" +
                      gib(stats_.total_current) + " in use)");
  }
  int c = static_cast<int>(category);
  stats_.current[c] += bytes;
  stats_.peak[c] = std::max(stats_.peak[c], stats_.current[c]);
  stats_.total_current += bytes;
  stats_.total_peak = std::max(stats_.total_peak, stats_.total_current);
  ++stats_.num_allocations;
  lock.unlock();
  return std::make_shared<Buffer>(this, p, bytes, category);
}

void TrackingAllocator::deallocate(void* ptr, std::size_t bytes, MemCategory category) {
  std::lock_guard<std::mutex> lock(mutex_);
  raw_->deallocate(ptr, bytes);
  stats_.current[static_cast<int>(category)] -= bytes;
  stats_.total_current -= bytes;
}

void TrackingAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak = stats_.current;
  stats_.total_peak = stats_.total_current;
}

}  // namespace tbd
