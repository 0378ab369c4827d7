// Force-included into every CUDA source of a GGML_CUDA build (CMakeLists.txt).
//
// ggml turns on programmatic dependent launch (PDL) from CUDA 11.8 on, but the 11.8 runtime
// headers (Debian's nvidia-cuda-toolkit among them) do not declare its two device functions; CUDA
// 12 defines them as the sm_90 PTX instructions below, which 11.8's ptxas knows (PTX ISA 7.8).
#pragma once
#include <cuda_runtime.h>

#if defined(__CUDACC__) && defined(CUDART_VERSION) && CUDART_VERSION < 12000
static __device__ __forceinline__ void cudaGridDependencySynchronize() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
static __device__ __forceinline__ void cudaTriggerProgrammaticLaunchCompletion() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}
#endif
