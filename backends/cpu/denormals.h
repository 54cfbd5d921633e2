// backends/cpu/denormals.h: flushing denormal floats on the CPU threads.
//
// x86 executes arithmetic on denormal floats (|x| < 1.2e-38) in microcode, tens to hundreds of
// times slower. Backward passes produce them readily: ResNet-50's training step at batch 1,
// whose late batchnorms normalise 49 values per channel, measured 7.05 s with denormals kept
// and 0.22 s with them flushed on this suite's CPU (Xeon, AVX-512), the same step. TensorFlow
// sets FTZ and DAZ on its CPU threads for this reason; PyTorch leaves it to
// torch.set_flush_denormal. tbd_bench flushes by default and records it in the context
// (`denormals`); --tbd_denormals=keep measures IEEE behaviour.
#pragma once

#include <string>

namespace tbd::cpu {

// Sets (flush) or clears FTZ (results flushed to zero) and DAZ (denormal inputs read as zero)
// in the MXCSR of the calling thread and of every thread of the OpenMP team, which oneDNN and
// tbd's own loops run on. Returns what is now in effect, for the context.
std::string set_denormals(bool flush);

}  // namespace tbd::cpu
