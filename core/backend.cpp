// core/backend.cpp: what every backend shares (timers, checked allocation).
#include "core/backend.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"

namespace tbd {

const char* to_string(MathMode m) {
  switch (m) {
    case MathMode::kFp32:
      return "fp32";
    case MathMode::kTf32:
      return "tf32";
    case MathMode::kBf16:
      return "bf16";
  }
  return "?";
}

void Backend::set_math_mode(MathMode m) {
  TBD_CHECK(m == MathMode::kFp32, "math mode ", to_string(m), " is not available on the ",
            to_string(kind()), " backend (strict fp32 only)");
}

std::unique_ptr<WorkerScope> Backend::enter_worker(int) {
  TBD_FAIL("the ", to_string(kind()), " backend cannot run concurrent workers (its layers share ",
           "one execution stream and one set of library handles); run one worker");
}

PeakRate Backend::peak_flops(MathMode m) {
  return {0, std::string("unknown: the ") + to_string(kind()) + " backend does not say its " +
                 to_string(m) + " peak"};
}

PeakRate Backend::peak_bandwidth() {
  return {0, std::string("unknown: the ") + to_string(kind()) +
                 " backend does not say its "
                 "memory bandwidth"};
}

static int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void Backend::start_timer() {
  synchronize();
  timer_start_ns_ = steady_ns();
}

double Backend::stop_timer() {
  synchronize();
  return static_cast<double>(steady_ns() - timer_start_ns_) * 1e-9;
}

void Backend::mark_start() {
  mark_start_ns_ = steady_ns();
  std::fill(mark_ns_.begin(), mark_ns_.end(), int64_t{-1});
}

void Backend::mark(std::size_t slot) {
  if (slot >= mark_ns_.size()) mark_ns_.resize(slot + 1, -1);
  mark_ns_[slot] = steady_ns();
}

double Backend::marked_s(std::size_t slot) {
  if (slot >= mark_ns_.size() || mark_ns_[slot] < 0) return -1;
  return static_cast<double>(mark_ns_[slot] - mark_start_ns_) * 1e-9;
}

Tensor Backend::empty(const TensorDesc& desc, MemCategory category) {
  for (int64_t d : desc.shape.dims()) {
    TBD_CHECK(d > 0, "Backend::empty: every dim must be positive, got ", desc.shape.to_string());
  }
  if (desc.layout == Layout::kNChw16c) {
    TBD_CHECK(desc.shape.rank() == 4 && desc.shape[1] % 16 == 0,
              "Backend::empty: nChw16c needs a 4-D shape with C % 16 == 0, got ",
              desc.shape.to_string());
  }
  if (desc.layout == Layout::kNhwc) {
    TBD_CHECK(desc.shape.rank() == 4, "Backend::empty: nhwc needs a 4-D shape, got ",
              desc.shape.to_string());
  }
  TBD_CHECK((desc.layout == Layout::kPacked) == (desc.packing != nullptr),
            "Backend::empty: a packed tensor needs its packing (and only it has one), got ",
            desc.to_string());
  return Tensor(desc, kind(), allocator_.allocate(desc.bytes(), category));
}

}  // namespace tbd
