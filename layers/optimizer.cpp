// layers/optimizer.cpp: FLOP and byte counts of the optimizers (shared by all backends; the
// per-element counts are documented on the configs in layers/optimizer.h).
#include "layers/optimizer.h"

namespace tbd {
namespace {

double numel_of(const std::vector<Param*>& params) {
  double n = 0;
  for (const Param* p : params) n += static_cast<double>(p->value.stored_numel());
  return n;
}

// Sum over parameters of numel * (base + decay_extra where the parameter decays).
double count_flops(const std::vector<Param*>& params, double base, double decay_extra) {
  double f = 0;
  for (const Param* p : params) {
    f += static_cast<double>(p->value.stored_numel()) * (base + (p->decay ? decay_extra : 0.0));
  }
  return f;
}

// Sum over parameters of `arrays` f32 arrays of the parameter's size, each read or written
// once (weight decay changes no count: the update reads w anyway).
double count_bytes(const std::vector<Param*>& params, double arrays) {
  return bytes_of(arrays * numel_of(params));
}

}  // namespace

void check_grad_clip(const char* kind, const GradClip& clip) {
  // Written so that NaN fails too.
  TBD_CHECK(clip.value >= 0, kind, ": clip.value must be >= 0 (0: no element-wise clipping), got ",
            clip.value);
  TBD_CHECK(clip.max_norm >= 0, kind,
            ": clip.max_norm must be >= 0 (0: no global-norm clipping), got ", clip.max_norm);
}

double grad_clip_flops(const GradClip& clip, const std::vector<Param*>& params) {
  return numel_of(params) * ((clip.max_norm > 0 ? 3 : 0) + (clip.value > 0 ? 2 : 0));
}

double grad_clip_bytes(const GradClip& clip, const std::vector<Param*>& params) {
  return clip.max_norm > 0 ? bytes_of(numel_of(params)) : 0.0;  // the norm's read of g
}

double sgd_flops(const SgdConfig& cfg, const std::vector<Param*>& params) {
  return count_flops(params, 2 + (cfg.momentum != 0 ? 2 : 0), cfg.weight_decay != 0 ? 2 : 0) +
         grad_clip_flops(cfg.clip, params);
}

double sgd_bytes(const SgdConfig& cfg, const std::vector<Param*>& params) {
  // read w, g [, v]; write w [, v]
  return count_bytes(params, cfg.momentum != 0 ? 5 : 3) + grad_clip_bytes(cfg.clip, params);
}

double adam_flops(const AdamConfig& cfg, const std::vector<Param*>& params) {
  return count_flops(params, 12, cfg.weight_decay != 0 ? 2 : 0) + grad_clip_flops(cfg.clip, params);
}

double adam_bytes(const AdamConfig& cfg, const std::vector<Param*>& params) {
  // read w, g, m, v; write w, m, v
  return count_bytes(params, 7) + grad_clip_bytes(cfg.clip, params);
}

double rmsprop_flops(const RmspropConfig& cfg, const std::vector<Param*>& params) {
  return count_flops(params, 8 + (cfg.momentum != 0 ? 2 : 0), cfg.weight_decay != 0 ? 2 : 0) +
         grad_clip_flops(cfg.clip, params);
}

double rmsprop_bytes(const RmspropConfig& cfg, const std::vector<Param*>& params) {
  // read w, g, sq [, buf]; write w, sq [, buf]
  return count_bytes(params, cfg.momentum != 0 ? 7 : 5) + grad_clip_bytes(cfg.clip, params);
}

std::vector<Tensor> state_arena(Backend& be, const std::vector<Param*>& params) {
  int64_t total = 0;
  for (const Param* p : params) total += p->value.stored_numel();
  std::vector<Tensor> views;
  if (total == 0) return views;
  Tensor arena = be.empty(Shape{total}, MemCategory::kOptimizerState);
  be.fill(arena, 0.f);
  std::size_t off = 0;
  for (const Param* p : params) {
    const TensorDesc d{Shape{p->value.stored_numel()}};  // element-wise: flat, in the value's order
    views.push_back(arena.slice(off, d));
    off += d.bytes();
  }
  return views;
}

}  // namespace tbd
