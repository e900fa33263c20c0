// Rung 12: 3xTF32, held to the FP32 bound on tensor cores. Rung 10's kernel (the sub-pixel
// classes as implicit GEMMs on mma.sync.m16n8k8, the KernelBench geometry family only, rung 04's
// epilogue from the fragments), with each operand split instead of rounded, as the main ladder's
// stage 11 does to stage 10:
//  - every A and B value v becomes big = tf32(v) plus small = tf32(v - big), which carries the
//    bits TF32 dropped, and each mma becomes three, small*big + big*small + big*big
//    (small*small, about 2^-22 of the product, is left out), into the same FP32 accumulators;
//  - the split happens in registers after the 8-byte fragment loads: shared memory keeps the
//    staged x as it is (no cvt.rna at staging), and the weight layout kernel
//    (fragment_weight_layout) writes the weights unrounded, in rung 10's layout.
// Why one unrounded FP32 plane of weights rather than a big and a small plane: the plane stays
// rung 10's (the same workspace, the same 27 KB block per chunk, the same copy loop), while two
// planes would take w_s to 55 KB, past the 48 KB of static shared memory a block may have
// (dynamic shared memory and an opt-in for it), and double the loads per B fragment. The split
// costs two cvt.rna and one subtraction per value: per chunk a thread splits its 16 A values once
// a shift (each serves all the taps that read the shift) and its 4 B values once a tap (each
// serves both m16 tiles).
// Registers: the split fragments need twice rung 10's fragment registers (A 16 a shift, B 4 per
// n8 tile a tap) next to the accumulators, and three mma per (m16, n8) pair on rung 10's warp
// tile (2 m16 x 2 n8 tiles for all 8 classes: 128 accumulators) do not fit: ptxas (sm_90) then
// uses 254 registers and spills 40 bytes, where rung 10 runs at 216 without spilling. So a warp
// owns 1 n8 tile instead of 2 (64 accumulators): the block covers 16 output channels instead of
// 32 (twice the blocks, each staging the same x patch and half rung 10's weights), and the
// kernel uses 228 registers without spilling (one 256-thread block per SM, as rung 10). Halving
// the channels rather than the cells keeps each B split serving both m16 tiles and keeps the
// staged bytes per output low (the x patch is the smaller of the two copies).
// The result is as accurate as FP32 FMAs: the rung is held to the FP32 bound (tolerance.hpp,
// Precision::Fp32), for three times rung 10's tensor-core work. Exact inputs (small dyadic
// numbers) are TF32 values: their small parts are 0 and the result must still be exact. GPUs
// (or code) below sm_80 (tf32_mma_in) take rung 03's fused forward (device/forward_fused.cuh):
// a rung calls no other rung.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "../../device/forward_chain.cuh"
#include "../../device/forward_fused.cuh"  // launch_fused_forward: rung 03's kernel, below sm_80
#include "../../device/forward_pool.cuh"
#include "../../rung.hpp"
#include "common/toolkit/mma_tf32.cuh"  // mma_tf32, tf32_bits, tf32_mma_in
#include "todo.cuh"                     // ladder_todo: the handout's stubs
#include "rung_id.hpp"                  // LADDER_RUNG_ID, LADDER_RUNG_NAME, LADDER_RUNG_SYMBOL

namespace ladder::p74 {
namespace {

constexpr int kThreads = 256;
constexpr int kWarpsM = 4, kWarpsN = 2;  // 8 warps: warp w = (wm, wn) = (w % 4, w / 4)
constexpr int kMTiles = 2;               // m16 tiles per warp (cells)
constexpr int kNTiles = 1;               // n8 tiles per warp (channels): 2 in rung 10 spill here
constexpr int kClasses = 8;              // window positions = parity classes
constexpr int kTaps = 27;
constexpr int kCiChunk = 8;  // input channels per step = the mma's k
// The block's cells: a TD x TH x TW box of pooling windows, one m16 tile per (d, h) row of 16
// windows along w; 8 rows = kWarpsM * kMTiles m16 tiles. Its channels: kCoTile.
constexpr int kTD = 2, kTH = 4, kTW = 16;
constexpr int kCoTile = kWarpsN * kNTiles * 8;                  // 16
constexpr int kPatchPixels = (kTD + 1) * (kTH + 1) * (kTW + 1);  // inputs {q, q+1} of every cell: 255
constexpr int kWeightFloats = kTaps * kCoTile * kCiChunk;       // one (chunk, channel tile) of wt: 3456
static_assert(kTD * kTH == kWarpsM * kMTiles && kTW == 16, "one m16 tile = one row of 16 windows along w");
static_assert(kThreads == 32 * kWarpsM * kWarpsN && kThreads % kCiChunk == 0, "copy roles: channel tid % 8");
static_assert(kWeightFloats % 4 == 0, "the weight block is copied 16 bytes at a time");

// The three (phase, tap, input shift) pairs of one axis (rung 04): conv position 2q + phase reads
// input q + shift through tap k.
__host__ __device__ constexpr int pair_phase(int e) { return e == 0 ? 0 : 1; }
__host__ __device__ constexpr int pair_tap(int e) { return e == 0 ? 1 : e == 1 ? 0 : 2; }
__host__ __device__ constexpr int pair_shift(int e) { return e == 1 ? 1 : 0; }

/// Where input channel cl (0..7) of a chunk sits among a pixel's (or a weight row's) 8 slots:
/// channels t and t+4 side by side (order 0 4 1 5 2 6 3 7), so the k pair (t, t+4) of a thread's
/// a0/a2 (and b0/b1) registers is one 8-byte load at slot 2t (the main ladder's channel_slot).
__host__ __device__ constexpr int channel_slot(int cl) { return 2 * (cl % 4) + cl / 4; }

/// The block tiling (host-computed): tiles of kTD x kTH x kTW pooling windows per axis, channel
/// tiles of kCoTile, chunks of kCiChunk input channels.
struct TileGrid {
  int tiles_d, tiles_h, tiles_w, co_tiles, chunks;
};

TileGrid tile_grid(const Geometry& g) {
  return {(g.out[0] + kTD - 1) / kTD, (g.out[1] + kTH - 1) / kTH, (g.out[2] + kTW - 1) / kTW,
          (g.out_channels + kCoTile - 1) / kCoTile, (g.in_channels + kCiChunk - 1) / kCiChunk};
}

/// The 3xTF32 split of two FP32 values (bit patterns in v): big = tf32(v), small = tf32(v - big).
/// big + small equals v to about 2^-22 relative (common/toolkit/tf32.hpp emulates it: split_tf32).
__device__ inline void split_tf32(const uint2& v, uint2& big, uint2& small) {
  // BEGIN SOLUTION p74-12
  // STUB: // TODO(p74-12.3): split_tf32, big = tf32(v) (cvt.rna) and small = tf32(v - big)
  // STUB: big = small = v;  // no ladder_todo: it would print at every split of thread 0
  big = make_uint2(tf32_bits(__uint_as_float(v.x)), tf32_bits(__uint_as_float(v.y)));
  small = make_uint2(tf32_bits(__uint_as_float(v.x) - __uint_as_float(big.x)),
                     tf32_bits(__uint_as_float(v.y) - __uint_as_float(big.y)));
  // END SOLUTION
}

/// The weights as the B fragments want them, in FP32 (not rounded: the kernel splits them), one
/// thread per element:
///   wt[chunk][co_tile][tap 27][co 16][slot 8] = weight[chunk*8 + cl, co_tile*16 + co, tap]
/// with slot = channel_slot(cl), 0 past in_channels or out_channels. Each (chunk, co_tile) block of
/// kWeightFloats floats is then one contiguous copy. weight (in_channels, out_channels, 3, 3, 3).
__global__ void fragment_weight_layout(Geometry g, TileGrid tg, const float* __restrict__ weight,
                                       float* __restrict__ wt) {
  // BEGIN SOLUTION p74-10
  // STUB: ladder_todo("p74-12.1", "fragment_weight_layout (as rung 10's, unrounded): wt[e] = weight of its slot");
  // STUB: ladder_unused(g, tg, weight, wt);
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= int64_t(tg.chunks) * tg.co_tiles * kWeightFloats) return;
  const int slot = int(e % kCiChunk), co = int(e / kCiChunk % kCoTile), tap = int(e / (kCiChunk * kCoTile) % kTaps);
  const int64_t block = e / kWeightFloats;
  const int co_tile = int(block % tg.co_tiles), chunk = int(block / tg.co_tiles);
  const int cl = slot / 2 + 4 * (slot % 2);  // channel_slot's inverse
  const int ci = chunk * kCiChunk + cl, c = co_tile * kCoTile + co;
  const float v = ci < g.in_channels && c < g.out_channels
                      ? weight[(int64_t(ci) * g.out_channels + c) * kTaps + tap]
                      : 0.f;
  wt[e] = v;
  // END SOLUTION
}

/// 1-D grid, block b = (n*tiles + tile)*co_tiles + co_tile with tile = (td*tiles_h + th)*tiles_w
/// + tw: sample n, pooling windows (td*2 + 0..1, th*4 + 0..3, tw*16 + 0..15), output channels
/// co_tile*16 + 0..15. Writes out, argmax (window offset (rd*2 + rh)*2 + rw, int32) and y_saved,
/// all (batch, out_channels, pooled D, H, W), for the windows and channels that exist (tails are
/// computed on zeros and not written). x (batch, in_channels, D, H, W); wt: fragment_weight_layout's.
///
/// Per chunk of 8 input channels the block stages, in FP32 (not rounded):
///   x_s  (3, 5, 17, 8):(680, 136, 8, 1)        inputs {q, q+1}^3 of its cells; slot = channel_slot(cl)
///   w_s  (27, 16, 8):(128, 8, 1)               taps x channels x slots: a block of wt, copied as is
/// Warp (wm, wn) owns m16 tiles mi = 2*wm + i (i < 2), the row (d, h) = (mi / 4, mi % 4) of 16
/// windows, and n8 tile wn, channels 8*wn .. + 7. Fragments, lane = 4g + t:
///   a_lo, a_hi  uint2 x (2 m16 tiles) x (big, small)  (cell g | g+8, ci t and t+4) at the shift's input
///   b           uint2 x (1 n8 tile) x (big, small)    (ci t and t+4, channel g) of one tap
///   acc         float (8 classes, 2, 1, 4)      d0..d3 = (cell g, ch 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1)
/// Shift (sd, sh, sw) reads x_s at pixel (d + sd, h + sh, cell + sw): lanes read 64 consecutive
/// words per 8-byte load, as do the B loads of w_s: no bank conflict. Each fragment is split
/// (split_tf32) after its load; each (m16, n8) pair then takes three mma.
__global__ void __launch_bounds__(kThreads, 1)
    three_tf32_forward_kernel(Geometry g, TileGrid tg, const float* __restrict__ x, const float* __restrict__ wt,
                              const float* __restrict__ bias, const float* __restrict__ multiplier,
                              float* __restrict__ out, int32_t* __restrict__ argmax, float* __restrict__ y_saved) {
  __shared__ __align__(16) float x_s[kPatchPixels * kCiChunk];  // (3, 5, 17, 8):(680, 136, 8, 1)
  __shared__ __align__(16) float w_s[kWeightFloats];            // (27, 16, 8):(128, 8, 1)

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wm = warp % kWarpsM, wn = warp / kWarpsM, gq = lane / 4, tq = lane % 4;
  const int co_tile = int(blockIdx.x % unsigned(tg.co_tiles));
  const int64_t rest = blockIdx.x / unsigned(tg.co_tiles);
  const int tiles = tg.tiles_d * tg.tiles_h * tg.tiles_w;
  const int n = int(rest / tiles), tile = int(rest % tiles);
  const int tw = tile % tg.tiles_w, th = (tile / tg.tiles_w) % tg.tiles_h, td = tile / (tg.tiles_w * tg.tiles_h);
  const int qd0 = td * kTD, qh0 = th * kTH, qw0 = tw * kTW, co0 = co_tile * kCoTile;

  // acc (8 classes, 2 m16, 1 n8, 4): every class starts at the bias of its fragment's channels.
  float acc[kClasses][kMTiles][kNTiles][4];
#pragma unroll
  for (int j = 0; j < kNTiles; ++j)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int c = co0 + wn * (kNTiles * 8) + 8 * j + 2 * tq + e;
      const float b0 = c < g.out_channels ? bias[c] : 0.f;
#pragma unroll
      for (int p = 0; p < kClasses; ++p)
#pragma unroll
        for (int i = 0; i < kMTiles; ++i) acc[p][i][j][e] = acc[p][i][j][e + 2] = b0;
    }

  // Copy roles. x: thread -> channel cl = tid % 8 of patch pixels tid / 8, + 32, ... (a warp
  // writes 4 whole pixels, 32 consecutive words). Weights: 16-byte pieces tid, tid + 256, ...
  const int x_cl = tid % kCiChunk, x_slot = channel_slot(x_cl);
  const float* xn = x + int64_t(n) * g.in_channels * g.in_spatial;
  const float* wt_tile = wt + int64_t(co_tile) * kWeightFloats;

  for (int chunk = 0; chunk < tg.chunks; ++chunk) {
    __syncthreads();  // the previous chunk's x_s and w_s are no longer read
    const int ci = chunk * kCiChunk + x_cl;
    const float* xc = xn + int64_t(ci < g.in_channels ? ci : 0) * g.in_spatial;
    for (int px = tid / kCiChunk; px < kPatchPixels; px += kThreads / kCiChunk) {
      const int pw = px % (kTW + 1), ph = (px / (kTW + 1)) % (kTH + 1), pd = px / ((kTW + 1) * (kTH + 1));
      const int id = qd0 + pd, ih = qh0 + ph, iw = qw0 + pw;  // input q + shift of the cells
      const bool inside = ci < g.in_channels && id < g.in[0] && ih < g.in[1] && iw < g.in[2];
      const float v = inside ? __ldg(xc + (int64_t(id) * g.in[1] + ih) * g.in[2] + iw) : 0.f;
      x_s[px * kCiChunk + x_slot] = v;  // FP32 as it is: the split needs the bits TF32 drops
    }
    const float4* w_src = reinterpret_cast<const float4*>(wt_tile + int64_t(chunk) * tg.co_tiles * kWeightFloats);
    for (int q = tid; q < kWeightFloats / 4; q += kThreads) reinterpret_cast<float4*>(w_s)[q] = __ldg(w_src + q);
    __syncthreads();

    // The implicit GEMM of one chunk in 3xTF32: per shift, the A fragments once, split, then every
    // tap reading it, its B fragments split, three mma per (m16, n8) pair.
    // BEGIN SOLUTION p74-10 p74-12
    // STUB: if (chunk == 0) ladder_todo("p74-12.2", "the chunk's 3xTF32 mma: rung 10's loop, operands split, 3 mma");
    // STUB: ladder_unused(x_s, w_s, wm, wn, gq, tq, acc);
    // STUB: ladder_unused(pair_phase(0), pair_tap(0), pair_shift(0));  // the helpers the loop uses
    // STUB: ladder_unused(&split_tf32);
#pragma unroll
    for (int s = 0; s < 8; ++s) {
      const int sd = s >> 2, sh = (s >> 1) & 1, sw = s & 1;
      uint2 lo_big[kMTiles], lo_small[kMTiles], hi_big[kMTiles], hi_small[kMTiles];
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        const int mi = wm * kMTiles + mt, dl = mi / kTH, hl = mi % kTH;
        const float* a_px = x_s + (((dl + sd) * (kTH + 1) + hl + sh) * (kTW + 1) + gq + sw) * kCiChunk + 2 * tq;
        split_tf32(*reinterpret_cast<const uint2*>(a_px), lo_big[mt], lo_small[mt]);
        split_tf32(*reinterpret_cast<const uint2*>(a_px + 8 * kCiChunk), hi_big[mt], hi_small[mt]);
      }
#pragma unroll
      for (int ed = 0; ed < 3; ++ed)
#pragma unroll
        for (int eh = 0; eh < 3; ++eh)
#pragma unroll
          for (int ew = 0; ew < 3; ++ew) {
            if (pair_shift(ed) != sd || pair_shift(eh) != sh || pair_shift(ew) != sw) continue;
            const int k = (pair_tap(ed) * 3 + pair_tap(eh)) * 3 + pair_tap(ew);
            const int p = (pair_phase(ed) * 2 + pair_phase(eh)) * 2 + pair_phase(ew);
            uint2 b_big[kNTiles], b_small[kNTiles];
#pragma unroll
            for (int nt = 0; nt < kNTiles; ++nt)
              split_tf32(*reinterpret_cast<const uint2*>(
                             w_s + (k * kCoTile + wn * (kNTiles * 8) + 8 * nt + gq) * kCiChunk + 2 * tq),
                         b_big[nt], b_small[nt]);
#pragma unroll
            for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
              for (int nt = 0; nt < kNTiles; ++nt) {  // the small products first, then the big one
                mma_tf32(acc[p][mt][nt], lo_small[mt], hi_small[mt], b_big[nt]);
                mma_tf32(acc[p][mt][nt], lo_big[mt], hi_big[mt], b_small[nt]);
                mma_tf32(acc[p][mt][nt], lo_big[mt], hi_big[mt], b_big[nt]);
              }
          }
    }
    // END SOLUTION
  }

  // Epilogue (rung 04's): the chain and the max in window order over the thread's 8 classes.
#pragma unroll
  for (int i = 0; i < kMTiles; ++i) {
    const int mi = wm * kMTiles + i, qd = qd0 + mi / kTH, qh = qh0 + mi % kTH;
#pragma unroll
    for (int j = 0; j < kNTiles; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int qw = qw0 + gq + 8 * (e >> 1), c = co0 + wn * (kNTiles * 8) + 8 * j + 2 * tq + (e & 1);
        if (qd >= g.out[0] || qh >= g.out[1] || qw >= g.out[2] || c >= g.out_channels) continue;
        const float mult = multiplier[c];
        WindowMax m;
        float y_at = 0.f;
#pragma unroll
        for (int p = 0; p < kClasses; ++p)
          if (m.take(chain(acc[p][i][j][e], mult, g.slope), p)) y_at = acc[p][i][j][e];
        const int64_t at =
            (int64_t(n) * g.out_channels + c) * g.out_spatial + (int64_t(qd) * g.out[1] + qh) * g.out[2] + qw;
        out[at] = m.best;
        argmax[at] = m.offset;
        y_saved[at] = y_at;
      }
  }
}

/// "" for the KernelBench geometry family, else the sentence naming the parameter outside it.
std::string unsupported(const Problem74& p) { return kernelbench_family_mismatch(p, LADDER_RUNG_ID); }

/// The FP32 weights' layout (fragment_weight_layout), 256-byte aligned by the caller.
size_t workspace(const Problem74& p) {
  const int64_t chunks = (p.in_channels + kCiChunk - 1) / kCiChunk, co_tiles = (p.out_channels + kCoTile - 1) / kCoTile;
  return size_t(chunks * co_tiles * kWeightFloats) * sizeof(float);
}

void forward(const ForwardArgs& a) {
  const std::string why = unsupported(a.problem);
  if (!why.empty()) throw InvalidProblem(why);
  const Geometry g = make_geometry(a.problem);
  if (!tf32_mma_in(three_tf32_forward_kernel)) {  // no TF32 mma in this GPU's code: rung 03's FP32 kernel
    a.mark("fused");
    launch_fused_forward(g, a.in.x, a.in.weight, a.in.bias, a.in.multiplier, a.out, a.argmax, a.y_saved, a.stream);
    return;
  }
  const TileGrid tg = tile_grid(g);
  float* wt = static_cast<float*>(a.workspace);
  const int64_t wt_elems = int64_t(tg.chunks) * tg.co_tiles * kWeightFloats;
  const int64_t blocks = int64_t(g.batch) * tg.tiles_d * tg.tiles_h * tg.tiles_w * tg.co_tiles;
  const unsigned layout_grid = grid_for(wt_elems, 256, "fragment_weight_layout");
  const unsigned grid = grid_for(blocks, 1, "three_tf32_forward_kernel");
  a.mark("weights");
  fragment_weight_layout<<<layout_grid, 256, 0, a.stream>>>(g, tg, a.in.weight, wt);
  CUDA_CHECK_LAUNCH("fragment_weight_layout");
  a.mark("fused");
  three_tf32_forward_kernel<<<grid, kThreads, 0, a.stream>>>(g, tg, a.in.x, wt, a.in.bias, a.in.multiplier, a.out,
                                                             a.argmax, a.y_saved);
  CUDA_CHECK_LAUNCH("three_tf32_forward_kernel");
}

}  // namespace

const Rung& LADDER_RUNG_SYMBOL() {
  static const Rung r = [] {
    Rung r;
    r.id = LADDER_RUNG_ID;
    r.name = LADDER_RUNG_NAME;
    r.idea = "rung 10's implicit GEMMs in 3xTF32: operands split into big and small TF32 parts, three mma";
    r.forward_workspace = workspace;
    r.forward = forward;
    r.unsupported = unsupported;
    r.deterministic = true;
    r.precision = Precision::Fp32;  // the split recovers FP32 accuracy: held to the FP32 bound
    return r;
  }();
  return r;
}

}  // namespace ladder::p74
