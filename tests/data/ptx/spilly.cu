__global__ void heavy(const float* __restrict__ in, float* __restrict__ out) {
  float acc[64];
  #pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = in[threadIdx.x + i * 128];
  #pragma unroll
  for (int r = 0; r < 8; ++r)
    #pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = acc[i] * acc[(i + r + 1) % 64] + 1.0f;
  float s = 0.f;
  #pragma unroll
  for (int i = 0; i < 64; ++i) s += acc[i];
  out[threadIdx.x] = s;
}
