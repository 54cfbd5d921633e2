// layers/positional_encoding.cpp: the sinusoid table.
#include "layers/positional_encoding.h"

#include <cmath>

namespace tbd {

double sinusoid(int64_t t, int64_t d, int64_t dim) {
  double freq = std::pow(10000.0, -static_cast<double>(2 * (d / 2)) / static_cast<double>(dim));
  return d % 2 == 0 ? std::sin(t * freq) : std::cos(t * freq);
}

}  // namespace tbd
