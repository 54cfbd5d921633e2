// models/memory_plan.h: the static memory planner behind a graph's activation memory.
//
// A step is a fixed sequence of time steps (forward nodes, backward nodes, the optimizer), and
// every planned buffer is live over one interval of them: from the step that first writes it to
// the last step that reads it, both inclusive. plan_memory() gives each buffer an offset into
// one arena such that no two buffers live at a common step overlap, as a static planner does
// (TensorFlow Lite's "greedy by size": the largest buffers are placed first, each at the lowest
// offset where it fits beside the already placed buffers whose intervals meet its own). The
// arena is then one allocation, and a buffer is a view into it.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace tbd {

struct PlanRequest {
  std::size_t bytes = 0;
  int first = 0;  // first step it is live at (written)
  int last = 0;   // last step it is live at (read); >= first
};

struct MemoryPlan {
  std::vector<std::size_t> offsets;  // per request, a multiple of the alignment
  std::size_t arena_bytes = 0;       // max over requests of offset + bytes (0 when none)
  std::size_t peak_live_bytes = 0;   // max over steps of the bytes live at that step
  std::size_t total_bytes = 0;       // sum of bytes: the arena without reuse
};

// Offsets for `reqs` in one arena; every offset aligned to `alignment` bytes (a power of two).
// Deterministic: the same requests give the same plan.
MemoryPlan plan_memory(const std::vector<PlanRequest>& reqs, std::size_t alignment = 64);

// Checks a plan against its requests: every buffer lies inside the arena and no two buffers
// live at a common step share a byte. Returns "" when it holds, else the first conflict in
// words ("buffers 3 and 7 overlap at bytes [64, 128) and are both live at step 5").
std::string check_memory_plan(const std::vector<PlanRequest>& reqs, const MemoryPlan& plan);

}  // namespace tbd
