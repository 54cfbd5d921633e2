// models/memory_plan.cpp: greedy-by-size offset assignment and its checker.
#include "models/memory_plan.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "core/error.h"

namespace tbd {
namespace {

bool meet(const PlanRequest& a, const PlanRequest& b) {
  return a.first <= b.last && b.first <= a.last;
}

std::size_t round_up(std::size_t n, std::size_t a) { return (n + a - 1) / a * a; }

}  // namespace

MemoryPlan plan_memory(const std::vector<PlanRequest>& reqs, std::size_t alignment) {
  TBD_CHECK(alignment > 0 && (alignment & (alignment - 1)) == 0, "plan_memory: alignment ",
            alignment, " is not a power of two");
  MemoryPlan plan;
  plan.offsets.assign(reqs.size(), 0);
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    TBD_CHECK(reqs[i].first <= reqs[i].last, "plan_memory: buffer ", i, " is live from step ",
              reqs[i].first, " to step ", reqs[i].last);
    plan.total_bytes += reqs[i].bytes;
  }
  // Largest first; ties by the earlier first use, then by index (deterministic).
  std::vector<std::size_t> order(reqs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (reqs[a].bytes != reqs[b].bytes) return reqs[a].bytes > reqs[b].bytes;
    return reqs[a].first < reqs[b].first;
  });
  std::vector<std::size_t> placed;                        // indices, in placement order
  std::vector<std::pair<std::size_t, std::size_t>> busy;  // [offset, end) of the ones that meet
  for (std::size_t i : order) {
    const std::size_t need = round_up(std::max<std::size_t>(reqs[i].bytes, 1), alignment);
    busy.clear();
    for (std::size_t j : placed) {
      if (meet(reqs[i], reqs[j]))
        busy.emplace_back(plan.offsets[j], plan.offsets[j] + reqs[j].bytes);
    }
    std::sort(busy.begin(), busy.end());
    // The smallest gap that fits (best fit), else after the last busy range.
    std::size_t at = 0, best = 0, best_gap = SIZE_MAX;
    bool found = false;
    for (const auto& [lo, hi] : busy) {
      if (lo >= at && lo - at >= need && lo - at < best_gap) {
        best = at, best_gap = lo - at, found = true;
      }
      at = std::max(at, round_up(hi, alignment));
    }
    plan.offsets[i] = found ? best : at;
    plan.arena_bytes = std::max(plan.arena_bytes, plan.offsets[i] + reqs[i].bytes);
    placed.push_back(i);
  }
  // The bytes live at each step: the lower bound any plan's arena has.
  std::map<int, long long> delta;
  for (const PlanRequest& r : reqs) {
    delta[r.first] += static_cast<long long>(r.bytes);
    delta[r.last + 1] -= static_cast<long long>(r.bytes);
  }
  long long live = 0;
  for (const auto& [step, d] : delta) {
    live += d;
    plan.peak_live_bytes = std::max(plan.peak_live_bytes, static_cast<std::size_t>(live));
  }
  return plan;
}

std::string check_memory_plan(const std::vector<PlanRequest>& reqs, const MemoryPlan& plan) {
  if (plan.offsets.size() != reqs.size()) {
    return detail::concat("the plan has ", plan.offsets.size(), " offsets for ", reqs.size(),
                          " buffers");
  }
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    if (plan.offsets[i] + reqs[i].bytes > plan.arena_bytes) {
      return detail::concat("buffer ", i, " ends at byte ", plan.offsets[i] + reqs[i].bytes,
                            ", past the arena's ", plan.arena_bytes);
    }
  }
  // Sweep by offset: each buffer against the ones that start before it ends.
  std::vector<std::size_t> order(reqs.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return plan.offsets[a] < plan.offsets[b]; });
  for (std::size_t x = 0; x < order.size(); ++x) {
    const std::size_t i = order[x], end = plan.offsets[i] + reqs[i].bytes;
    for (std::size_t y = x + 1; y < order.size() && plan.offsets[order[y]] < end; ++y) {
      const std::size_t j = order[y];
      if (reqs[j].bytes == 0 || reqs[i].bytes == 0 || !meet(reqs[i], reqs[j])) continue;
      return detail::concat("buffers ", std::min(i, j), " and ", std::max(i, j),
                            " overlap at bytes [", plan.offsets[j], ", ",
                            std::min(end, plan.offsets[j] + reqs[j].bytes),
                            ") and are both live at step ", std::max(reqs[i].first, reqs[j].first));
    }
  }
  return "";
}

}  // namespace tbd
