// core/roofline.h: the roofline model the counters, the console table and the per-layer
// breakdown share (one place, so they cannot disagree about what "bound" means).
//
// A piece of work with F FLOPs that moves B bytes has arithmetic intensity I = F / B
// (FLOP/byte). On a device with peak compute P (FLOP/s) and peak memory bandwidth W (bytes/s)
// it cannot run faster than min(P, I * W) FLOP/s, the roof: it is memory-bound when
// I * W < P (I below the ridge point P / W), compute-bound otherwise. Roofline utilization is
// the achieved FLOP/s over that roof. B is the analytic lower bound of each layer's traffic
// (layers/layer.h) and W the measured DRAM bandwidth, so work whose data stays in cache
// between iterations can run above its memory roof (utilization > 1): then DRAM does not bind.
#pragma once

#include <algorithm>

namespace tbd {

struct Roofline {
  double peak_flops = 0;        // FLOP/s; 0: unknown
  double peak_bytes_per_s = 0;  // bytes/s; 0: unknown

  bool known() const { return peak_flops > 0 && peak_bytes_per_s > 0; }
  // The attainable FLOP/s at intensity `flop_per_byte`: min(P, I * W).
  double roof(double flop_per_byte) const {
    return std::min(peak_flops, flop_per_byte * peak_bytes_per_s);
  }
  // Below the ridge point P / W: the memory roof binds.
  bool memory_bound(double flop_per_byte) const {
    return flop_per_byte * peak_bytes_per_s < peak_flops;
  }
};

}  // namespace tbd
