#include <mma.h>
using namespace nvcuda;

__global__ void copy4(const float4* __restrict__ a, float4* __restrict__ b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float4 v = a[i];
    b[i] = v;
  }
}

__global__ void block_sum(const float* in, float* out) {
  __shared__ float tile[256];
  tile[threadIdx.x] = in[blockIdx.x * 256 + threadIdx.x];
  __syncthreads();
  float v = tile[255 - threadIdx.x];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o);
  if (threadIdx.x % 32 == 0) atomicAdd(out, v);
}

__global__ void wmma_tile(const half* a, const half* b, float* c) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
  wmma::fill_fragment(fc, 0.0f);
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, b, 16);
  wmma::mma_sync(fc, fa, fb, fc);
  wmma::store_matrix_sync(c, fc, 16, wmma::mem_row_major);
}

__global__ void wgmma_tile(float* out, unsigned long long desc_a, unsigned long long desc_b) {
  float d0 = 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f;
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
      "wgmma.fence.sync.aligned;\n"
      "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0, %1, %2, %3}, %4, %5, p, 1, 1, 0, 0;\n"
      "wgmma.commit_group.sync.aligned;\nwgmma.wait_group.sync.aligned 0;\n}\n"
      : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
      : "l"(desc_a), "l"(desc_b), "r"(1));
  out[threadIdx.x * 4 + 0] = d0;
  out[threadIdx.x * 4 + 1] = d1;
  out[threadIdx.x * 4 + 2] = d2;
  out[threadIdx.x * 4 + 3] = d3;
}
