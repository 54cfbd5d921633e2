// core/host_device.h: TBD_HOST_DEVICE marks functions that CUDA kernels call too (host and
// device code under nvcc, plain host functions elsewhere).
#pragma once

#if defined(__CUDACC__)
#define TBD_HOST_DEVICE __host__ __device__
#else
#define TBD_HOST_DEVICE
#endif
