#pragma once
// Hopper (sm_90a) primitives in PTX: mbarriers, TMA tile loads, and warpgroup MMAs (wgmma)
// with shared-memory matrix descriptors. Only what wgmma-fused uses; each wrapper is one or
// two instructions, named after them.
//
// Shared-memory tiles are panels of 64 half-words a row (128 bytes), written by TMA with its
// 128-byte swizzle: within each 1024-byte group of 8 rows, the 16-byte chunk c of row r sits
// at chunk c ^ (r % 8). A tile of D columns is D / 64 such panels one after another.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace fc::hopper {

__device__ __forceinline__ std::uint32_t smem_address(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// ---- mbarriers (one 8-byte word of shared memory each) ----

__device__ __forceinline__ void barrier_init(std::uint64_t* bar, std::uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_address(bar)), "r"(arrivals) : "memory");
}

// Makes the initialized barriers visible to the async proxy (TMA) before any use.
__device__ __forceinline__ void barrier_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// One arrival that also announces `bytes` of transactions (TMA) the phase waits for.
__device__ __forceinline__ void barrier_arrive_expect(std::uint64_t* bar, std::uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_address(bar)), "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void barrier_arrive(std::uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_address(bar)) : "memory");
}

// Waits until the phase of parity `parity` has completed (a fresh barrier is in phase 0, so
// waiting on parity 1 returns at once: the producer's first pass over empty slots).
__device__ __forceinline__ void barrier_wait(std::uint64_t* bar, std::uint32_t parity) {
  std::uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(smem_address(bar)), "r"(parity)
        : "memory");
  } while (!done);
}

// Named barrier `id` (1 to 15; 0 is __syncthreads) over `threads` threads of the block: sync
// waits for them all, arrive counts this warp's threads and goes on.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// Moves registers between the warpgroups of a block: every thread of the warpgroup that runs
// it gives up registers down to kCount, or waits for the freed ones up to kCount (setmaxnreg).
// The code after it is compiled to the new count.
template <int kCount>
__device__ __forceinline__ void registers_decrease() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kCount));
}
template <int kCount>
__device__ __forceinline__ void registers_increase() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kCount));
}

// ---- TMA ----

// A box of a 3-D tensor map at coordinates (c0 innermost, c1, c2) into shared memory; its
// bytes complete a transaction on `bar`. Elements outside the tensor arrive as zeros.
__device__ __forceinline__ void tma_load_3d(void* smem, const CUtensorMap* map, int c0, int c1, int c2,
                                            std::uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n" ::
          "r"(smem_address(smem)),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(smem_address(bar))
      : "memory");
}

// The same for a 4-D tensor map.
__device__ __forceinline__ void tma_load_4d(void* smem, const CUtensorMap* map, int c0, int c1, int c2, int c3,
                                            std::uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
      "[%6];\n" ::"r"(smem_address(smem)),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_address(bar))
      : "memory");
}

__device__ __forceinline__ void tma_prefetch_descriptor(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<std::uint64_t>(map)) : "memory");
}

// ---- wgmma ----

// Descriptor of a matrix operand in 128-byte-swizzled panels (above), starting at `p`:
//   lead    bytes from one panel to the next along the operand's contiguous dimension, where
//           one instruction spans several (an N-major B wider than 64); unused otherwise
//   stride  bytes from one group of 8 rows to the next: 1024
__device__ __forceinline__ std::uint64_t matrix_descriptor(const void* p, std::uint32_t lead, std::uint32_t stride) {
  const std::uint64_t address = smem_address(p);
  return ((address & 0x3FFFF) >> 4) | (static_cast<std::uint64_t>((lead >> 4) & 0x3FFF) << 16) |
         (static_cast<std::uint64_t>((stride >> 4) & 0x3FFF) << 32) | (std::uint64_t{1} << 62);
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}

// Keeps the compiler from moving reads or writes of accumulator registers across a wgmma
// that is still in flight.
template <int N>
__device__ __forceinline__ void fence_registers(float (&acc)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i) {
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(acc[i][e])::"memory");
  }
}

#define FC_ACC4(a, i) "+f"(a[i][0]), "+f"(a[i][1]), "+f"(a[i][2]), "+f"(a[i][3])
#define FC_ACC32(a) \
  FC_ACC4(a, 0), FC_ACC4(a, 1), FC_ACC4(a, 2), FC_ACC4(a, 3), FC_ACC4(a, 4), FC_ACC4(a, 5), FC_ACC4(a, 6), FC_ACC4(a, 7)
#define FC_ACC64(a)                                                                                                 \
  FC_ACC32(a), FC_ACC4(a, 8), FC_ACC4(a, 9), FC_ACC4(a, 10), FC_ACC4(a, 11), FC_ACC4(a, 12), FC_ACC4(a, 13),      \
      FC_ACC4(a, 14), FC_ACC4(a, 15)
#define FC_REGS32                                                                                                  \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, " \
  "%24, %25, %26, %27, %28, %29, %30, %31}"
#define FC_REGS64                                                                                                   \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, "  \
  "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, " \
  "%46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"

// D[64 x N] (+)= A[64 x 16] B[16 x N], A and B K-major in shared memory (S = Q K^T). The
// accumulator of each warp is its 16 rows as N / 8 m16n8 fragments.
template <class T, int N>
__device__ __forceinline__ void wgmma_ss(float (&d)[N / 8][4], std::uint64_t a, std::uint64_t b, bool accumulate);

// D[64 x N] += A[64 x 16] B[16 x N], A from registers (the m16n8k16 A fragment of each
// warp's 16 rows), B N-major in shared memory (O += P V, V stored [keys][D]).
template <class T, int N>
__device__ __forceinline__ void wgmma_rs(float (&d)[N / 8][4], const unsigned (&a)[4], std::uint64_t b);

// The specializations for one element type (T, its PTX name).
#define FC_WGMMA_FOR(T, TYPE)                                                                                     \
  template <>                                                                                                     \
  __device__ __forceinline__ void wgmma_ss<T, 128>(float (&d)[16][4], std::uint64_t a, std::uint64_t b,           \
                                                   bool accumulate) {                                             \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                                    \
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE " " FC_REGS64                       \
                 ", %64, %65, p, 1, 1, 0, 0;\n}\n"                                                                \
                 : FC_ACC64(d)                                                                                    \
                 : "l"(a), "l"(b), "r"(static_cast<int>(accumulate)));                                            \
  }                                                                                                               \
  template <>                                                                                                     \
  __device__ __forceinline__ void wgmma_rs<T, 64>(float (&d)[8][4], const unsigned (&a)[4], std::uint64_t b) {    \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"                                                    \
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE " " FC_REGS32                        \
                 ", {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"                                                   \
                 : FC_ACC32(d)                                                                                    \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));                                   \
  }                                                                                                               \
  template <>                                                                                                     \
  __device__ __forceinline__ void wgmma_rs<T, 128>(float (&d)[16][4], const unsigned (&a)[4], std::uint64_t b) {  \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"                                                    \
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE " " FC_REGS64                       \
                 ", {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"                                                   \
                 : FC_ACC64(d)                                                                                    \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));                                   \
  }
FC_WGMMA_FOR(__half, "f16")
FC_WGMMA_FOR(__nv_bfloat16, "bf16")
#undef FC_WGMMA_FOR

#undef FC_ACC4
#undef FC_ACC32
#undef FC_ACC64
#undef FC_REGS32
#undef FC_REGS64

}  // namespace fc::hopper
