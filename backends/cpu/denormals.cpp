// backends/cpu/denormals.cpp: FTZ/DAZ on the calling thread and the OpenMP team.
#include "backends/cpu/denormals.h"

#include <omp.h>

#if defined(__SSE__) || defined(__x86_64__)
#include <xmmintrin.h>
#define TBD_HAVE_MXCSR 1
#endif

namespace tbd::cpu {
namespace {

#ifdef TBD_HAVE_MXCSR
constexpr unsigned kFtzDaz = 0x8040;  // MXCSR bits 15 (FTZ) and 6 (DAZ)

void apply(bool flush) {
  const unsigned csr = _mm_getcsr();
  _mm_setcsr(flush ? (csr | kFtzDaz) : (csr & ~kFtzDaz));
}
#endif

}  // namespace

std::string set_denormals(bool flush) {
#ifdef TBD_HAVE_MXCSR
  apply(flush);
  int threads = 1;
#pragma omp parallel
  {
    apply(flush);
#pragma omp single
    threads = omp_get_num_threads();
  }
  return flush ? "flushed to zero (FTZ+DAZ on " + std::to_string(threads) + " threads)"
               : "kept (IEEE)";
#else
  (void)flush;
  return "kept (no MXCSR on this architecture)";
#endif
}

}  // namespace tbd::cpu
