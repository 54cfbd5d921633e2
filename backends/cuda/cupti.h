// backends/cuda/cupti.h: what the CUPTI counter session exposes beyond CounterSession
// (core/counters.h). No CUDA or CUPTI header here.
#pragma once

namespace tbd::cuda {

// The factor that turns sm__ops_path_tensor_src_tf32_dst_fp32 into FLOPs (to be calibrated on a
// GPU: tests/cuda/cupti_cuda_test.cpp prints it).
double cupti_tf32_flop_per_tensor_op();

}  // namespace tbd::cuda
