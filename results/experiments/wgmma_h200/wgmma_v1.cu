// Stage 15 (WIP): Hopper's warpgroup MMA. Stage 14's pipeline with the tensor-core work moved to
// wgmma.mma_async (sm_90a): operands read from shared memory through matrix descriptors.
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "conv_params.hpp"
#include "cuda_check.hpp"
#include "device.hpp"
#include "lib/conv_pool_general.cuh"
#include "lib/fused_partials.cuh"
#include "lib/kernel_width.cuh"
#include "lib/mma_pipeline.cuh"
#include "lib/register_stage.hpp"
#include "todo.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define LADDER_HAS_WGMMA 1
#else
#define LADDER_HAS_WGMMA 0
#endif

namespace ladder {
namespace {

constexpr int kWgRows = 2;                      // m64 rows (64 pixels each) per warpgroup
constexpr int kWarpgroups = kThreads / 128;     // 2
constexpr int kOutRows = kWgRows * kWarpgroups; // 4 output rows per tile
constexpr int kOutCols = 64;                    // one m64 = 64 pixels of one row
constexpr int kCo = 128;                        // n128
constexpr int kStagePitch = 72;                 // staging row: 18 vectors of 16 bytes
constexpr int kKPitch = kOutCols + kMaxKernelW - 1;  // K-major patch columns (68)

struct WgArgs {
  ConvParams p;
  const float* x;
  const float* wt;
  float* partials;
  FusedGrid g;
  int tiles_w, patch_rows, shift, vec_cols, stages, vec16;
};

__device__ inline uint32_t smem_addr(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

/// Shared-memory matrix descriptor, no swizzle (PTX ISA, "Matrix Descriptor Format"): start
/// address, leading (K) and stride (M/N) byte offsets between 8x16-byte core matrices, >> 4.
__device__ inline uint64_t wgmma_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return uint64_t((addr >> 4) & 0x3FFF) | (uint64_t((lbo >> 4) & 0x3FFF) << 16) | (uint64_t((sbo >> 4) & 0x3FFF) << 32);
}

__device__ __forceinline__ void wgmma_m64n128k8(float (&d)[64], uint64_t a, uint64_t b) {
#if LADDER_HAS_WGMMA
  asm volatile(
      "{\n"
      "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, 1, 1, 1;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(a), "l"(b));
#else
  __trap();
  (void)d, (void)a, (void)b;
#endif
}
__device__ __forceinline__ void wgmma_fence() {
#if LADDER_HAS_WGMMA
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#if LADDER_HAS_WGMMA
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_wait_all() {
#if LADDER_HAS_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#endif
}
/// Makes this thread's ordinary shared-memory writes visible to the async proxy (wgmma's reads).
__device__ __forceinline__ void fence_proxy_async() {
#if LADDER_HAS_WGMMA
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

/// wt[group][chunk][co_tile][tap][khalf][128 co][4] = tf32(weight[group ci = chunk*8 + khalf*4 + e, co_tile*128 + co, tap]).
__global__ void tf32_weight_kmajor(ConvParams p, const float* weight, float* wt, int chunks, int co_tiles, int64_t total) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= total) return;
  const int taps = p.kernel_h * p.kernel_w;
  const int el = int(e % 4), co = int(e / 4 % kCo), khalf = int(e / (4 * kCo) % 2);
  int64_t rest = e / (8 * kCo);
  const int tap = int(rest % taps);
  rest /= taps;
  const int co_tile = int(rest % co_tiles);
  rest /= co_tiles;
  const int chunk = int(rest % chunks), group = int(rest / chunks);
  const int ci = chunk * kCiChunk + khalf * 4 + el, co_g = co_tile * kCo + co;
  float v = 0.0f;
  if (ci < p.in_per_group && co_g < p.out_per_group)
    v = weight[(int64_t(group * p.in_per_group + ci) * p.out_per_group + co_g) * taps + tap];
  wt[e] = __uint_as_float(tf32_bits(v));
}

template <int KW>
__global__ void __launch_bounds__(kThreads, 1) conv_pool_wgmma(WgArgs a) {
  extern __shared__ __align__(128) float smem[];
  __shared__ float warp_pool[kWarps][kCo];
  const ConvParams& p = a.p;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, wg = warp / 4, q = warp % 4;
  const int g = lane / 4, t = lane % 4;
  const BlockCoords bc = block_coords(a.g);
  const int co_count = min(kCo, p.out_per_group - bc.co_base);
  const int tile_begin = part_begin(a.g, bc.part), tile_end = part_begin(a.g, bc.part + 1);
  const int ci_group = bc.group * p.in_per_group;
  const int chunks = (p.in_per_group + kCiChunk - 1) / kCiChunk;
  const int steps = (tile_end - tile_begin) * chunks;
  const int taps = p.kernel_h * KW;
  const int rows = a.patch_rows;
  const int stage_x = kCiChunk * rows * kStagePitch;
  const int weight_floats = taps * 2 * kCo * 4;
  const int stage_floats = stage_x + weight_floats;
  const int kbuf_floats = 2 * rows * kKPitch * 4;
  float* kbuf = smem + a.stages * stage_floats;  // 2 K-major x buffers
  const int64_t in_plane = int64_t(p.in_h) * p.in_w;
  const float* x_n = a.x + bc.n * p.in_channels * in_plane;
  const float* wt_block = a.wt + int64_t(bc.group * chunks * a.g.co_tiles_per_group + bc.co_base / kCo) * weight_floats;

  auto tile_origin = [&](int step, int& ih0, int& iw_al, int& chunk) {
    const int tile = tile_begin + step / chunks;
    chunk = step - (step / chunks) * chunks;
    const int th = tile / a.tiles_w, tw = tile - th * a.tiles_w;
    ih0 = th * kOutRows + p.padding_h - (p.kernel_h - 1) * p.dilation_h;
    iw_al = tw * kOutCols + p.padding_w - (KW - 1) - a.shift;
  };
  // Staging copy: warp w copies channel w: rows lane/16, +2, ...; vector columns lane%16 and +16.
  auto load_step = [&](int step, int buf) {
    float* xs = smem + buf * stage_floats;
    int ih0, iw_al, chunk;
    tile_origin(step, ih0, iw_al, chunk);
    const int ci = chunk * kCiChunk + warp;
    const bool ch_ok = ci < p.in_per_group;
    const float* x_c = x_n + int64_t(ch_ok ? ci_group + ci : 0) * in_plane;
    for (int r = lane / 16; r < rows; r += 2) {
      const int ih = ih0 + r;
      const bool row_ok = ch_ok && ih >= 0 && ih < p.in_h;
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int vc = lane % 16 + 16 * j;
        if (vc >= a.vec_cols) continue;
        const int iw = iw_al + 4 * vc;
        float* dst = xs + (warp * rows + r) * kStagePitch + 4 * vc;
        if (a.vec16) {
          const bool ok = row_ok && iw >= 0 && iw < p.in_w;
          cp_async_16_or_zero(dst, ok ? x_c + int64_t(ih) * p.in_w + iw : a.x, ok);
        } else {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const bool ok = row_ok && iw + e >= 0 && iw + e < p.in_w;
            cp_async_f32(dst + e, ok ? x_c + int64_t(ih) * p.in_w + iw + e : a.x, ok);
          }
        }
      }
    }
    const float* w_src = wt_block + int64_t(chunk) * a.g.co_tiles_per_group * weight_floats;
    float* ws = xs + stage_x;
    for (int qv = tid * 4; qv < weight_floats; qv += kThreads * 4) cp_async_16(ws + qv, w_src + qv);
  };
  // Staging (channel planes) -> K-major buffer [khalf][row][col][4 channels], rounded to TF32.
  // Warp w: khalf w & 1, rows w >> 1, +4, ...; lane: columns lane, +32, +64.
  const int kcols = kOutCols + KW - 1;
  auto transpose = [&](int buf, int kb) {
    const float* xs = smem + buf * stage_floats;
    float* kd = kbuf + kb * kbuf_floats;
    const int khalf = warp & 1;
    for (int r = warp >> 1; r < rows; r += kWarps / 2) {
#pragma unroll
      for (int c0 = 0; c0 < kKPitch; c0 += 32) {
        const int c = c0 + lane;
        if (c >= kcols) continue;
        const float* src = xs + ((khalf * 4) * rows + r) * kStagePitch + a.shift + c;
        float4 v;
        v.x = __uint_as_float(tf32_bits(src[0]));
        v.y = __uint_as_float(tf32_bits(src[rows * kStagePitch]));
        v.z = __uint_as_float(tf32_bits(src[2 * rows * kStagePitch]));
        v.w = __uint_as_float(tf32_bits(src[3 * rows * kStagePitch]));
        *reinterpret_cast<float4*>(kd + ((khalf * rows + r) * kKPitch + c) * 4) = v;
      }
    }
    fence_proxy_async();
  };

  float acc[kWgRows][64];
#pragma unroll
  for (int r = 0; r < kWgRows; ++r)
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[r][i] = 0.0f;
  float pool[16][2] = {};

  const uint32_t a_lbo = uint32_t(rows * kKPitch * 16), b_lbo = kCo * 16;
  for (int s = 0; s < a.stages - 1; ++s) {
    if (s < steps) load_step(s, s);
    cp_async_commit();
  }
  if (steps > 0) {
    cp_async_wait_dynamic(a.stages - 2);
    __syncthreads();
    transpose(0, 0);
  }
  int buf = 0;  // ring slot of step s
  for (int step = 0; step < steps; ++step) {
    // x of step+1 (slot buf+1) must have landed for this step's transpose
    cp_async_wait_dynamic(a.stages - 3 < 0 ? 0 : a.stages - 3);
    fence_proxy_async();  // the weights this thread copied -> wgmma
    __syncthreads();
    {
      const int nxt = step + a.stages - 1;
      int slot = buf + a.stages - 1;
      if (slot >= a.stages) slot -= a.stages;
      if (nxt < steps) load_step(nxt, slot);
      cp_async_commit();
    }
    const uint32_t kb_addr = smem_addr(kbuf + (step & 1) * kbuf_floats);
    const uint32_t ws_addr = smem_addr(smem + buf * stage_floats + stage_x);
    wgmma_fence();
    for (int kh = 0; kh < p.kernel_h; ++kh) {
      const int row_shift = (p.kernel_h - 1 - kh) * p.dilation_h;
#pragma unroll
      for (int kw = 0; kw < KW; ++kw) {
        const uint64_t bd = wgmma_desc(ws_addr + uint32_t((kh * KW + kw) * 2 * kCo * 16), b_lbo, 128);
#pragma unroll
        for (int r = 0; r < kWgRows; ++r) {
          const int prow = wg * kWgRows + r + row_shift;
          const uint64_t ad = wgmma_desc(kb_addr + uint32_t((prow * kKPitch + (KW - 1 - kw)) * 16), a_lbo, 128);
          wgmma_m64n128k8(acc[r], ad, bd);
        }
      }
    }
    wgmma_commit();
    int nbuf = buf + 1 == a.stages ? 0 : buf + 1;
    if (step + 1 < steps) transpose(nbuf, (step + 1) & 1);
    wgmma_wait_all();
    buf = nbuf;

    if (step % chunks == chunks - 1) {
      const int tile = tile_begin + step / chunks;
      const int th = tile / a.tiles_w, tw = tile - th * a.tiles_w;
      const int ow_lo = tw * kOutCols + 16 * q + g, ow_hi = ow_lo + 8;
#pragma unroll
      for (int r = 0; r < kWgRows; ++r) {
        const int oh = th * kOutRows + wg * kWgRows + r;
        const bool in_lo = oh < p.out_h && ow_lo < p.out_w, in_hi = oh < p.out_h && ow_hi < p.out_w;
#pragma unroll
        for (int j = 0; j < 16; ++j) {
          pool[j][0] += (in_lo ? acc[r][4 * j] : 0.0f) + (in_hi ? acc[r][4 * j + 2] : 0.0f);
          pool[j][1] += (in_lo ? acc[r][4 * j + 1] : 0.0f) + (in_hi ? acc[r][4 * j + 3] : 0.0f);
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[r][4 * j + e] = 0.0f;
        }
      }
    }
  }
  cp_async_wait<0>();
#pragma unroll
  for (int j = 0; j < 16; ++j)
#pragma unroll
    for (int e = 0; e < 2; ++e)
#pragma unroll
      for (int s = 4; s < 32; s *= 2) pool[j][e] += __shfl_xor_sync(0xffffffffu, pool[j][e], s);
  if (g == 0)
#pragma unroll
    for (int j = 0; j < 16; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) warp_pool[warp][8 * j + 2 * t + e] = pool[j][e];
  __syncthreads();
  if (tid < co_count) {
    float s = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) s += warp_pool[w][tid];
    *partial_slot(a.partials, a.g, bc.n, bc.part, p.out_channels, bc.group * p.out_per_group + bc.co_base + tid) = s;
  }
}

struct WgPlan {
  bool fast = false;
  int kernel_w = 0, patch_rows = 0, tiles_w = 0, shift = 0, vec_cols = 0, stages = 0;
  size_t smem_bytes = 0;
  FusedGrid g{};
};

WgPlan make_wg_plan(const Problem& pr) {
  pr.validate();
  WgPlan q;
  const int64_t rows = kOutRows + (pr.kernel_size.h - 1) * pr.dilation.h;
  const int64_t taps = pr.kernel_size.h * pr.kernel_size.w;
  const int64_t stage_bytes = 4 * (kCiChunk * rows * kStagePitch + taps * 2 * kCo * 4);
  const int64_t kbuf_bytes = 2 * 4 * (2 * rows * kKPitch * 4);
  const int64_t limit = int64_t(shared_memory_per_block_limit()) - 8 * 1024;
  const int64_t stages = std::min<int64_t>(4, (limit - kbuf_bytes) / stage_bytes);
  int dev = 0, major = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  q.fast = pr.stride.h == 1 && pr.stride.w == 1 && pr.dilation.w == 1 && pr.kernel_size.w <= kMaxKernelW &&
           rows <= 32 && stages >= 3 && major == 9;
  if (!q.fast) {
    q.g = general_grid(pr);
    return q;
  }
  q.kernel_w = int(pr.kernel_size.w);
  q.patch_rows = int(rows);
  q.shift = int(((pr.padding.w - (pr.kernel_size.w - 1)) % 4 + 4) % 4);
  q.vec_cols = int(ceil_div(q.shift + kOutCols + pr.kernel_size.w - 1, 4));
  q.stages = int(stages);
  q.smem_bytes = size_t(stages * stage_bytes + kbuf_bytes);
  q.tiles_w = int(ceil_div(pr.out_w(), kOutCols));
  const int64_t units = ceil_div(pr.out_h(), kOutRows) * q.tiles_w;
  const int64_t co_tiles = pr.groups * ceil_div(pr.out_per_group(), kCo);
  const int64_t chunks = ceil_div(pr.in_per_group(), kCiChunk);
  const int64_t min_parts = ceil_div(units * chunks, 2147483647 - chunks);
  const int64_t parts = std::max(ceil_div(kTargetBlocks, pr.batch * co_tiles), min_parts);
  q.g = make_fused_grid(pr, units, kCo, parts, "conv_pool_wgmma");
  return q;
}

int64_t wg_layout_floats(const Problem& p, const WgPlan& q) {
  return int64_t(p.groups) * ceil_div(p.in_per_group(), kCiChunk) * q.g.co_tiles_per_group * p.kernel_size.h *
         p.kernel_size.w * kCo * kCiChunk;
}
size_t wg_span(const Problem& p, const WgPlan& q) { return (partials_bytes(p, q.g.parts) + 255) / 256 * 256; }
size_t workspace_bytes(const Problem& p) {
  const WgPlan q = make_wg_plan(p);
  if (!q.fast) return partials_bytes(p, q.g.parts);
  return wg_span(p, q) + size_t(wg_layout_floats(p, q)) * sizeof(float);
}
size_t shared_memory_bytes(const Problem& p) { return make_wg_plan(p).smem_bytes; }
template <typename F>
void with_wg_kernel(const WgPlan& q, F&& f) {
  with_kernel_width(q.kernel_w, [&](auto w) { f(conv_pool_wgmma<decltype(w)::value>); });
}
void prepare(const Problem& p) {
  const WgPlan q = make_wg_plan(p);
  if (!q.fast) return;
  with_wg_kernel(q, [&](auto kernel) {
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(q.smem_bytes)));
  });
}
void run(const GpuStageArgs& a) {
  const Problem& p = a.problem;
  const WgPlan q = make_wg_plan(p);
  float* partials = static_cast<float*>(a.workspace);
  a.marks.begin(Phase::Fused);
  if (!q.fast) {
    launch_conv_pool_general(p, a.in, q.g, partials, a.stream);
  } else {
    const ConvParams cp = conv_params(p);
    float* wt = reinterpret_cast<float*>(static_cast<char*>(a.workspace) + wg_span(p, q));
    const int64_t total = wg_layout_floats(p, q);
    tf32_weight_kmajor<<<blocks_for(total, kThreads, "tf32_weight_kmajor"), kThreads, 0, a.stream>>>(
        cp, a.in.weight, wt, int(ceil_div(p.in_per_group(), kCiChunk)), q.g.co_tiles_per_group, total);
    CUDA_CHECK_LAUNCH("tf32_weight_kmajor");
    const bool vec16 = p.in_w % 4 == 0 && reinterpret_cast<uintptr_t>(a.in.x) % 16 == 0;
    const WgArgs t{cp, a.in.x, wt, partials, q.g, q.tiles_w, q.patch_rows, q.shift, q.vec_cols, q.stages, vec16 ? 1 : 0};
    with_wg_kernel(q, [&](auto kernel) {
      kernel<<<q.g.blocks, kThreads, q.smem_bytes, a.stream>>>(t);
      CUDA_CHECK_LAUNCH("conv_pool_wgmma");
    });
  }
  a.marks.begin(Phase::Epilogue);
  launch_finish_pooled_logsumexp(p, partials, q.g.parts, a.in, a.pooled, a.y, a.stream);
}

}  // namespace

LADDER_REGISTER_STAGE(d) {
  d.changes = {Phase::Conv, Phase::Pool, Phase::Fused};
  d.idea = "wgmma (WIP)";
  d.workspace_bytes = workspace_bytes;
  d.run_gpu = run;
  d.shared_memory_bytes = shared_memory_bytes;
  d.prepare = prepare;
  d.precision = Precision::Tf32;
  d.tensor_cores = true;
  d.deterministic = true;
}

}  // namespace ladder
