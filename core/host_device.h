#pragma once
// Marks a function callable from both host and device code; plain C++ where no CUDA compiler
// reads the header.
#if defined(__CUDACC__)
#define FC_HOST_DEVICE __host__ __device__
#else
#define FC_HOST_DEVICE
#endif
