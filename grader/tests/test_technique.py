#!/usr/bin/env python3
"""Tests of the technique check (grader/technique.py, run by scripts/check_sass.sh) without a GPU.

For every rung it has rules for, the honest version (this repository's code) must pass and a
known wrong-technique variant must fail, by the check meant to catch it. The variants are text
edits of the sources (VARIANTS: a serial sum for a tree, rung 10's kernel handed in as 11, ...).
Compiling them all takes minutes, so their disassemblies are saved, trimmed to the kernels the
rules read, in grader/tests/testdata/technique/ (one .sass.gz per variant and architecture); the
tests read those, and check that every edit still applies to the sources as they are now (an
edit that no longer applies means the saved code is stale: regenerate it).

  python3 grader/tests/test_technique.py                 the tests (seconds; no GPU, nvcc or cuobjdump)
  python3 grader/tests/test_technique.py --regenerate    recompile the variants into testdata (nvcc, cuobjdump)
  python3 grader/tests/test_technique.py --regenerate 15_wgmma ...   only those rungs' variants (a stage
                                                    folder or a track rung id); the others' files stay
  LADDER_TECHNIQUE_COMPILE=1 ...                    also compile and check the variants now (sm_90,
                                                    and sm_75 or sm_80; sm_90a alone for a rung whose
                                                    rules need it), and grader/fixtures' technique
                                                    and valid ("loses: nothing") fixtures (minutes)
  LADDER_TECHNIQUE_BUILD=DIR ...                    also check a build's real objects (default: build,
                                                    when it has stage objects and cuobjdump is found)
"""
import glob
import gzip
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.dont_write_bytecode = True  # leave no __pycache__ in grader/
sys.path.insert(0, ROOT)  # the packages' root: this test is an entry point

from grader import handout, rung_meta, technique  # noqa: E402
from tooling.checks import sass as sass_model  # noqa: E402

DATA = os.path.join(ROOT, "grader", "tests", "testdata", "technique")
# Saved: sm_90 (the tuned GPU) for every rung, and sm_75 (what CI's grader checks build: no TF32
# mma, no cp.async) for the rungs CI grades, but for the TF32 ones (their rules need sm_80).
# Compiled now (LADDER_TECHNIQUE_COMPILE): sm_90, and sm_80 for the rungs that need it, sm_75 for
# the others. A rung whose rules say "needs_sm90a"
# (wgmma, the bulk copy: its rung.json builds it for sm_90a in place of sm_90) is saved and
# compiled for sm_90a alone: no other architecture's code holds its idea.
CI_RUNGS = ("02_", "03_", "04_", "p38-", "p74-")


@dataclass
class Variant:
    rung: str          # a stage folder (03_shared_tree) or a track rung (p38-03)
    name: str          # "honest" for the repository's code
    edits: list = field(default_factory=list)  # (file, original text, replacement), each original once
    fails: tuple = ()  # the checks (technique.CHECKS keys) that must fail; () for a version that passes
    why: str = ""

    @property
    def rules(self):
        key = self.rung if self.rung in technique.TRACK_RULES else self.rung[3:]
        return technique.TRACK_RULES.get(key, technique.STAGE_RULES.get(key))

    @property
    def sm90a(self):
        return any(r.get("needs_sm90a") for r in self.rules)

    def saved_archs(self):
        if self.sm90a:
            return ("sm_90a",)
        tf32 = any(r.get("needs_sm80") for r in self.rules)  # sm_75 code has no TF32 mma: nothing to save
        return ("sm_90", "sm_75") if self.rung.startswith(CI_RUNGS) and not tf32 else ("sm_90",)

    def compile_archs(self):
        if self.sm90a:
            return ("sm_90a",)
        return ("sm_90", "sm_80") if any(r.get("needs_sm80") for r in self.rules) else ("sm_90", "sm_75")

    def data(self, arch):
        return os.path.join(DATA, f"{self.rung}__{self.name}.{arch}.sass.gz")


def stage_file(folder):
    return os.path.relpath(glob.glob(os.path.join(ROOT, "stages", folder, "*.cu"))[0], ROOT)


def region(path, begin, end="// END SOLUTION"):
    """The text of `path` from the line holding `begin` through the line holding `end` after it."""
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        text = f.read()
    i = text.index(begin)
    i = text.rindex("\n", 0, i) + 1
    j = text.index("\n", text.index(end, i)) + 1
    return text[i:j]


S02, S03, S04, S05 = (stage_file(f) for f in ("02_atomics", "03_shared_tree", "04_warp_shuffle", "05_vectorized_loads"))
S06, S07, S08, S09 = (stage_file(f) for f in ("06_fused_gather", "07_shared_memory_tiling", "08_register_tiling",
                                              "09_async_copy"))
S10, S11, S12, S13 = (stage_file(f) for f in ("10_tensor_cores", "11_three_tf32", "12_pool_before_conv",
                                              "13_single_launch"))
S14, S15, S16 = stage_file("14_multistage_mma"), stage_file("15_wgmma"), stage_file("16_three_tf32_wgmma")
S17 = stage_file("17_warp_specialized")
P38, P74 = "tracks/p38_spatial_softmax/rungs", "tracks/p74_backward"
REDUCE = f"{P74}/device/reduce.cuh"
MMA_TILE = "common/toolkit/mma_tf32.cuh"  # mma_tf32, shared by the mma.sync rungs

# Stage 03's tree loop, as the reference writes it, and its levels above the last warp (the
# variants that finish the last warp another way keep these).
TREE03 = """\
  for (unsigned s = kBlock / 2; s > 0; s >>= 1) {
    if (tid < s) sh[tid] += sh[tid + s];
    __syncthreads();
  }
#endif
"""
TREE03_ABOVE_WARP = """\
  for (unsigned s = kBlock / 2; s > 32; s >>= 1) {
    if (tid < s) sh[tid] += sh[tid + s];
    __syncthreads();
  }
"""


def gemm(path):
    """The implicit-GEMM solution region of stage 10 or 11 (what a student writes)."""
    return region(path, "for (int kh = 0; kh < p.kernel_h; ++kh) {", "// END SOLUTION")


VARIANTS = [
    Variant("02_atomics", "honest"),
    Variant("02_atomics", "serial_then_one_atomic", [(S02, """\
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= total) return;
  atomicAdd(&sums[idx / plane_size], conv_out[idx]);  // result unused: compiles to RED
""", """\
  const int64_t plane = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (plane >= total / plane_size) return;
  float sum = 0.0f;
  for (int64_t j = 0; j < plane_size; ++j) sum += conv_out[plane * plane_size + j];
  atomicAdd(&sums[plane], sum);
""")], ("atomic_per_element",), "one thread per plane sums serially, then makes one atomic"),

    Variant("03_shared_tree", "honest"),
    Variant("03_shared_tree", "serial_by_thread0", [(S03, TREE03, """\
  if (tid == 0) {
    float total = 0.0f;
    for (int i = 0; i < kBlock; ++i) total += sh[i];
    sh[0] = total;
  }
  __syncthreads();
#endif
""")], ("block_tree",), "thread 0 adds the block's partials in a loop: one barrier, no tree"),
    Variant("03_shared_tree", "last_warp_unrolled", [(S03, TREE03, TREE03_ABOVE_WARP + """\
  if (tid < 32) {  // Harris's kernel 5: the last warp's levels without barriers
    volatile float* v = sh;
    v[tid] += v[tid + 32]; __syncwarp(); v[tid] += v[tid + 16]; __syncwarp(); v[tid] += v[tid + 8]; __syncwarp();
    v[tid] += v[tid + 4]; __syncwarp(); v[tid] += v[tid + 2]; __syncwarp(); v[tid] += v[tid + 1];
  }
  __syncthreads();
#endif
""")], (), "a tree whose last six levels run in one warp, without block barriers: still a tree"),
    Variant("03_shared_tree", "cg_reduce_last_warp", [(S03, """\
#include <stdexcept>
""", """\
#include <stdexcept>

#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;
"""), (S03, TREE03, TREE03_ABOVE_WARP + """\
  if (tid < 32) {  // the last warp: cooperative_groups::reduce (butterfly shuffles)
    const cg::thread_block_tile<32> warp = cg::tiled_partition<32>(cg::this_thread_block());
    const float total = cg::reduce(warp, sh[tid] + sh[tid + 32], cg::plus<float>());
    if (tid == 0) sh[0] = total;
  }
#endif
""")], (), "a tree whose last warp finishes with cooperative_groups::reduce (grader/fixtures/03/"
           "cg_reduce_last_warp): still a tree"),

    Variant("04_warp_shuffle", "honest"),
    Variant("04_warp_shuffle", "shared_tree_in_pool", [(S04, """\
  __shared__ float warp_sums[kBlock / kWarp];
  const int lane = int(threadIdx.x % kWarp), warp = int(threadIdx.x / kWarp);
  acc = warp_sum(acc);
  if (lane == 0) warp_sums[warp] = acc;
  __syncthreads();
  if (warp == 0) {
    acc = lane < kBlock / kWarp ? warp_sums[lane] : 0.0f;  // every lane joins the full-mask shuffle
    acc = warp_sum(acc);
    if (lane == 0) atomicAdd(&sums[plane], acc);  // one atomic per block
  }
""", """\
  __shared__ float sh[kBlock];
  sh[tid] = acc;
  __syncthreads();
  for (int s = kBlock / 2; s > 0; s >>= 1) {
    if (tid < s) sh[tid] += sh[tid + s];
    __syncthreads();
  }
  if (tid == 0) atomicAdd(&sums[plane], sh[0]);
""")], ("shuffles",), "stage 03's shared-memory tree in place of the shuffles"),
    Variant("04_warp_shuffle", "lane_gathers_lse", [("stages/lib/warp_reduce.cuh", """\
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float other_max = __shfl_xor_sync(0xffffffffu, max_value, offset);
    const float other_sum = __shfl_xor_sync(0xffffffffu, sum, offset);
    lse_merge(max_value, sum, other_max, other_sum);
  }
""", """\
  const float my_max = max_value, my_sum = sum;
  for (int src = 0; src < 32; ++src) {  // every lane reads the 31 others' pairs one by one
    const float other_max = __shfl_sync(0xffffffffu, my_max, src);
    const float other_sum = __shfl_sync(0xffffffffu, my_sum, src);
    if (src != int(threadIdx.x % 32)) lse_merge(max_value, sum, other_max, other_sum);
  }
""")], ("shuffles",), "the epilogue's lanes gather the warp's pairs one by one (SHFL.IDX), no butterfly"),

    Variant("05_vectorized_loads", "honest"),
    Variant("05_vectorized_loads", "scalar_loads", [(S05, """\
  for (int i = begin + tid; i < end; i += kBlock * kUnroll) {
    float4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int j = i + u * kBlock;
      v[u] = j < end ? body[j] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc += (v[u].x + v[u].y) + (v[u].z + v[u].w);
  }
""", """\
  const float* flat = reinterpret_cast<const float*>(body);
  for (int i = 4 * begin + tid; i < 4 * end; i += kBlock) acc += flat[i];  // 4-byte loads
""")], ("wide_loads_loop",), "the body read with 4-byte loads"),

    Variant("06_fused_gather", "honest"),
    Variant("06_fused_gather", "atomic_per_thread", [(S06, """\
  sum = warp_allreduce_sum(sum);
  if (lane == 0) warp_sums[warp] = sum;
  __syncthreads();
  if (tid == 0) {
    float s = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) s += warp_sums[w];
    *slot = s;
  }
""", """\
  atomicAdd(slot, sum);  // every thread adds into the partial
  (void)lane, (void)warp, (void)warp_sums;
""")], ("shuffles", "absent"), "every thread adds its sum into the partial with an atomic: no block sum"),

    Variant("07_shared_memory_tiling", "honest"),
    Variant("07_shared_memory_tiling", "global_operands", [(S07, """\
            acc = fmaf(x_row[kk], w_row[(KW - 1 - kk) * kCoTile], acc);  // 2 loads, 1 FMA
""", """\
            acc = fmaf(__ldg(x_n + (cl * p.in_h + jh) * p.in_w + c + kk),
                       __ldg(a.weight + (cl * p.kernel_h + jh) * KW + kk), acc + 0.0f * x_row[kk] * w_row[0]);
""")], ("smem_operands",), "the FMAs read x and the weights from global memory"),

    Variant("08_register_tiling", "honest"),
    Variant("08_register_tiling", "one_output_per_thread", [(S08, """\
          float window[kWindow];
#pragma unroll
          for (int q = 0; q < kWindow / 4; ++q) {
            const float4 v = *reinterpret_cast<const float4*>(x_row + 4 * q);
            window[4 * q] = v.x;
            window[4 * q + 1] = v.y;
            window[4 * q + 2] = v.z;
            window[4 * q + 3] = v.w;
          }
#pragma unroll
          for (int kk = 0; kk < KW; ++kk) {  // window offset kk is tap kw = KW-1-kk
            const float* w_tap = w_row + (KW - 1 - kk) * kCoTile;
            const float4 w0 = *reinterpret_cast<const float4*>(w_tap);
            const float4 w1 = *reinterpret_cast<const float4*>(w_tap + 4);
            const float wv[kCo] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
#pragma unroll
            for (int m = 0; m < kPix; ++m)
#pragma unroll
              for (int c = 0; c < kCo; ++c) acc[m][c] = fmaf(window[m + kk], wv[c], acc[m][c]);
          }
""", """\
#pragma unroll
          for (int kk = 0; kk < KW; ++kk)  // stage 07's compute: one output, two loads per FMA
            acc[0][0] = fmaf(x_row[kk], w_row[(KW - 1 - kk) * kCoTile], acc[0][0]);
""")], ("register_tile",), "stage 07's one output per thread: two shared loads per FMA"),

    Variant("09_async_copy", "honest"),
    Variant("09_async_copy", "wait_for_all", [(S09, """\
    cp_async_wait<1>();  // this thread's copies for `step` have landed ...
""", """\
    cp_async_wait<0>();  // every copy has landed, the next step's too: nothing overlaps
""")], ("async_pipeline",), "cp.async waited for at once (wait_group 0): no copy overlaps the compute"),

    Variant("10_tensor_cores", "honest"),
    Variant("10_tensor_cores", "ffma_instead_of_mma", [(MMA_TILE, """\
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a_lo.x), "r"(a_hi.x), "r"(a_lo.y), "r"(a_hi.y), "r"(b.x), "r"(b.y));
""", """\
  d[0] = fmaf(__uint_as_float(a_lo.x), __uint_as_float(b.x), d[0]);  // FP32 FMAs, no tensor core
  d[1] = fmaf(__uint_as_float(a_lo.y), __uint_as_float(b.y), d[1]);
  d[2] = fmaf(__uint_as_float(a_hi.x), __uint_as_float(b.x), d[2]);
  d[3] = fmaf(__uint_as_float(a_hi.y), __uint_as_float(b.y), d[3]);
""")], ("mma_loop",), "the products on FP32 FMAs instead of mma"),

    Variant("11_three_tf32", "honest"),
    Variant("11_three_tf32", "rung10_handed_in", [(S11, gemm(S11), gemm(S10))], ("three_products",),
            "rung 10's one-TF32 GEMM handed in as rung 11"),
    Variant("11_three_tf32", "two_products", [(S11, """\
            mma_tf32(acc[i][j], lo_small, hi_small, b_big[j]);
            mma_tf32(acc[i][j], lo_big, hi_big, b_small[j]);
""", """\
            mma_tf32(acc[i][j], lo_small, hi_small, b_big[j]);
""")], ("three_products",), "2xTF32: the correction of B's rounding left out"),
    Variant("11_three_tf32", "four_products", [(S11, """\
            mma_tf32(acc[i][j], lo_big, hi_big, b_big[j]);
""", """\
            mma_tf32(acc[i][j], lo_big, hi_big, b_big[j]);
            mma_tf32(acc[i][j], lo_small, hi_small, b_small[j]);
""")], (), "small*small as well: four products a pair, still 3xTF32's idea"),

    Variant("12_pool_before_conv", "honest"),
    Variant("12_pool_before_conv", "scalar_chunk_sum", [(S12, """\
  const float mine = chunk_partial_sum<kBlock, kUnroll>(x + int64_t(plane) * p.plane_elems + begin, len);
""", """\
  const float* src = x + int64_t(plane) * p.plane_elems + begin;
  float mine = 0.0f;
  for (int i = threadIdx.x; i < len; i += kBlock) mine += src[i];  // 4-byte loads
""")], ("wide_loads_loop",), "the chunk read with 4-byte loads"),

    Variant("13_single_launch", "honest"),
    Variant("13_single_launch", "no_fence", [(S13, region(S13, "cuda::atomic_ref<unsigned, cuda::thread_scope_device>",
                                                          "count.store(0u"), """\
    *last = atomicAdd(counter, 1u) == expected - 1u;  // relaxed: no release, no acquire
    if (*last) {
      *counter = 0u;
""")], ("present",), "the arrival counter without release and acquire: no fence"),

    Variant("14_multistage_mma", "honest"),
    Variant("14_multistage_mma", "rung10_double_buffer", [(S14, """\
  for (int s = 0; s < a.stages - 1; ++s) {
    if (s < steps) load_step(s, s);
    cp_async_commit();
  }
  int read_buf = 0, write_buf = a.stages - 1;
""", """\
  if (steps > 0) load_step(0, 0);
  cp_async_commit();
"""), (S14, """\
    cp_async_wait_dynamic(a.stages - 2);  // this thread's copies of `step` have landed
    __syncthreads();  // ... everyone's; and every warp is done with the buffer refilled next
    if (step + a.stages - 1 < steps) load_step(step + a.stages - 1, write_buf);
    cp_async_commit();
    write_buf = write_buf + 1 == a.stages ? 0 : write_buf + 1;

    const float* xs = smem + read_buf * stage_floats;
    const float* ws = xs + x_floats;
    read_buf = read_buf + 1 == a.stages ? 0 : read_buf + 1;
    step_mma(xs, ws);
""", """\
    if (step + 1 < steps) load_step(step + 1, (step + 1) & 1);  // rung 10's double buffer
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    const float* xs = smem + (step & 1) * stage_floats;
    const float* ws = xs + x_floats;
    step_mma(xs, ws);
    __syncthreads();
""")], ("async_pipeline",), "rung 10's double buffer (wait_group 1) in place of the multistage pipeline"),
    Variant("14_multistage_mma", "wait_for_all", [(S14, """\
    cp_async_wait_dynamic(a.stages - 2);  // this thread's copies of `step` have landed
""", """\
    cp_async_wait<0>();  // every copy has landed, the later steps' too: nothing overlaps
""")], ("async_pipeline",), "cp.async waited for at once (wait_group 0): a one-stage pipeline"),

    Variant("15_wgmma", "honest"),
    Variant("15_wgmma", "rung14_mma_sync", [(S15, """\
#include "wgmma.cuh"           // descriptors, wgmma, mbarriers, the bulk copy, proxy fences
""", """\
#define conv_pool_multistage conv_pool_wgmma  // stage 14's kernel under rung 15's name
#include "14_multistage_mma/multistage_mma.cu"
#if 0  // rung 15's own code, left out
#include "wgmma.cuh"
"""), (S15, """\
  d.precision = Precision::Tf32;  // inputs rounded to 10 mantissa bits: the TF32 bound
}

}  // namespace ladder
""", """\
  d.precision = Precision::Tf32;  // inputs rounded to 10 mantissa bits: the TF32 bound
}

}  // namespace ladder
#endif
""")], ("loop_has",), "stage 14's mma.sync kernel (cp.async for both operands) handed in as rung 15: no HGMMA, "
                      "no bulk copy"),
    Variant("15_wgmma", "weights_by_cp_async", [(S15, """\
  auto load_w = [&](int step) {
    if (tid != 0) return;
    const int chunk = step % chunks, slot = step % kRing;
    const float* w_src = wt_block + int64_t(chunk) * a.g.co_tiles_per_group * weight_floats;
    mbar_arrive_expect_tx(&wbar[slot], uint32_t(weight_floats * 4));
    bulk_copy(wring + slot * weight_floats, w_src, uint32_t(weight_floats * 4), &wbar[slot]);
  };
""", """\
  auto load_w = [&](int step) {  // every thread copies 16 bytes at a time with cp.async
    const int chunk = step % chunks, slot = step % kRing;
    const float* w_src = wt_block + int64_t(chunk) * a.g.co_tiles_per_group * weight_floats;
    for (int i = 4 * tid; i < weight_floats; i += 4 * kThreads)
      cp_async_16_or_zero(wring + slot * weight_floats + i, w_src + i, true);
  };
"""), (S15, """\
    mbar_wait(&wbar[step % kRing], (step / kRing) & 1);  // this step's weights have landed
""", """\
    cp_async_wait<0>();  // every group, this step's weights among them
    fence_proxy_async();
    __syncthreads();
""")], ("loop_has",), "the weights copied with cp.async by every thread in place of the bulk copy and its mbarrier"),

    Variant("16_three_tf32_wgmma", "honest"),
    Variant("16_three_tf32_wgmma", "rung15_single_product", [(S16, """\
            wgmma_m64n128k8(acc[r], ad_small, bd_big, !first || kh > 0 || kw > 0);
            wgmma_m64n128k8(acc[r], ad_big, bd_small, true);
            wgmma_m64n128k8(acc[r], ad_big, bd_big, true);
""", """\
            wgmma_m64n128k8(acc[r], ad_big, bd_big, !first || kh > 0 || kw > 0);  // rung 15's one product
            (void)ad_small, (void)bd_small;
""")], ("wgmma_products",), "rung 15's arithmetic, one big*big wgmma per accumulator and tap, in rung 16's kernel"),
    Variant("16_three_tf32_wgmma", "two_products", [(S16, """\
            wgmma_m64n128k8(acc[r], ad_big, bd_small, true);
""", "")], ("wgmma_products",), "2xTF32: the correction of B's rounding left out, two wgmma per accumulator and tap"),
    Variant("16_three_tf32_wgmma", "four_products", [(S16, """\
            wgmma_m64n128k8(acc[r], ad_big, bd_big, true);
""", """\
            wgmma_m64n128k8(acc[r], ad_big, bd_big, true);
            wgmma_m64n128k8(acc[r], ad_small, bd_small, true);
""")], (), "small*small as well: four wgmma per accumulator and tap, still 3xTF32's idea"),

    Variant("17_warp_specialized", "honest"),
    Variant("17_warp_specialized", "block_barrier_per_step", [(S17, """\
        mbar_wait(&full[slot], (step / kWsRing) & 1);  // the box and the weights of this step
""", """\
        mbar_wait(&full[slot], (step / kWsRing) & 1);  // the box and the weights of this step
        __syncthreads();  // stage 15's habit: every thread meets every step
""")], ("not_in_loop",), "a block-wide barrier in the consumers' step loop: the roles meet at every step, "
                         "as stage 15's threads do"),
    Variant("17_warp_specialized", "no_setmaxnreg", [(S17, """\
    setmaxnreg_dec<kWsProducerRegs>();
""", ""), (S17, """\
    setmaxnreg_inc<kWsConsumerRegs>();
""", "")], ("present",), "the roles keep the entry registers: no setmaxnreg"),
    Variant("17_warp_specialized", "a_not_rounded", [(S17, """\
              afrag[r][0] = tf32_bits(src[0]);              // (pixel g,     channel t)
              afrag[r][1] = tf32_bits(src[8]);              // (pixel g + 8, channel t)
              afrag[r][2] = tf32_bits(src[4 * plane]);      // (pixel g,     channel t + 4)
              afrag[r][3] = tf32_bits(src[4 * plane + 8]);  // (pixel g + 8, channel t + 4)
""", """\
              afrag[r][0] = __float_as_uint(src[0]);
              afrag[r][1] = __float_as_uint(src[8]);
              afrag[r][2] = __float_as_uint(src[4 * plane]);
              afrag[r][3] = __float_as_uint(src[4 * plane + 8]);
""")], ("tf32_rounded",), "the A fragments never rounded: wgmma truncates them (grader/fixtures/17/a_not_rounded)"),
    Variant("17_warp_specialized", "a_truncated", [(S17, """\
              afrag[r][0] = tf32_bits(src[0]);              // (pixel g,     channel t)
              afrag[r][1] = tf32_bits(src[8]);              // (pixel g + 8, channel t)
              afrag[r][2] = tf32_bits(src[4 * plane]);      // (pixel g,     channel t + 4)
              afrag[r][3] = tf32_bits(src[4 * plane + 8]);  // (pixel g + 8, channel t + 4)
""", """\
              afrag[r][0] = __float_as_uint(src[0]) & 0xffffe000u;
              afrag[r][1] = __float_as_uint(src[8]) & 0xffffe000u;
              afrag[r][2] = __float_as_uint(src[4 * plane]) & 0xffffe000u;
              afrag[r][3] = __float_as_uint(src[4 * plane + 8]) & 0xffffe000u;
""")], ("tf32_rounded",), "the A fragments truncated (a mask without the add of 0x1000)"),
    Variant("17_warp_specialized", "waits_for_every_wgmma", [(S17, """\
              wgmma_wait<1>();  // every wgmma but this one is done: the other row's fragment is free
""", """\
              wgmma_wait<0>();  // waits for this one too: nothing overlaps the next fragment's loads
""")], ("wgmma_in_flight",), "a wait<0> after every wgmma: correct, and the tensor pipe idles while the "
                             "next A fragment loads (grader/fixtures/17/waits_for_every_wgmma)"),
    Variant("17_warp_specialized", "next_values_carried_across_the_wait", [(S17, """\
    uint32_t afrag[kWgRows][4];  // one A fragment per m64 row: row r's wgmma reads afrag[r]
""", """\
    uint32_t afrag[kWgRows][4];  // one A fragment per m64 row: row r's wgmma reads afrag[r]
    float anext[4];              // the next wgmma's A values, loaded one iteration ahead
"""), (S17, """\
        const uint32_t ws = smem_addr(wring + slot * weight_floats);
""", """\
        const uint32_t ws = smem_addr(wring + slot * weight_floats);
        {  // the step's first A values: kh 0, kw 0, row 0
          const float* src = xs + (p.kernel_h - 1) * p.dilation_h * a.box_cols + (KW - 1);
          anext[0] = src[0], anext[1] = src[8], anext[2] = src[4 * plane], anext[3] = src[4 * plane + 8];
        }
"""), (S17, """\
              const float* src = xrow + r * a.box_cols + (KW - 1 - kw);
              afrag[r][0] = tf32_bits(src[0]);              // (pixel g,     channel t)
              afrag[r][1] = tf32_bits(src[8]);              // (pixel g + 8, channel t)
              afrag[r][2] = tf32_bits(src[4 * plane]);      // (pixel g,     channel t + 4)
              afrag[r][3] = tf32_bits(src[4 * plane + 8]);  // (pixel g + 8, channel t + 4)
""", """\
#pragma unroll
              for (int i = 0; i < 4; ++i) afrag[r][i] = tf32_bits(anext[i]);
"""), (S17, """\
              wgmma_wait<1>();  // every wgmma but this one is done: the other row's fragment is free
""", """\
              wgmma_wait<1>();  // every wgmma but this one is done: the other row's fragment is free
              const float* tap0 = xrow + (KW - 1 - kw);  // the next wgmma's values: row 1, the next tap, the next kh
              const float* src = r + 1 < kWgRows ? tap0 + (r + 1) * a.box_cols
                               : kw + 1 < KW     ? tap0 - 1
                               : kh + 1 < p.kernel_h ? xrow - p.dilation_h * a.box_cols + (KW - 1)
                                                     : nullptr;
              if (src) anext[0] = src[0], anext[1] = src[8], anext[2] = src[4 * plane], anext[3] = src[4 * plane + 8];
""")], ("wgmma_in_flight",), "the next A values loaded one iteration ahead into a buffer that the fragment "
                             "is converted from: ptxas gives both rows' fragments the buffer's registers "
                             "and serializes the wgmma (its C7513 note)"),

    Variant("p38-03", "honest"),
    Variant("p38-03", "serial_by_thread0", [(f"{P38}/03_block_tree/block_tree.cu", """\
  for (unsigned stride = blockDim.x / 2; stride > 0; stride >>= 1) {
    if (threadIdx.x < stride) {
      const float o = partial[threadIdx.x + stride];
      partial[threadIdx.x] = op == Op::Max ? fmaxf(partial[threadIdx.x], o) : partial[threadIdx.x] + o;
    }
    __syncthreads();
  }
""", """\
  if (threadIdx.x == 0) {  // one thread walks the partials
    float r = partial[0];
    for (unsigned i = 1; i < blockDim.x; ++i) r = op == Op::Max ? fmaxf(r, partial[i]) : r + partial[i];
    partial[0] = r;
  }
  __syncthreads();
""")], ("block_tree",), "thread 0 combines the block's partials in a loop"),

    Variant("p38-04", "honest"),
    Variant("p38-04", "lane0_gathers", [(f"{P38}/04_online_softmax/online_softmax.cu", """\
    t = warp_merge(t);
""", """\
    for (int src = 1; src < 32; ++src) {  // lane 0 gathers its warp's pairs one by one
      const MaxSum o{__shfl_sync(0xffffffffu, t.m, src), __shfl_sync(0xffffffffu, t.s, src)};
      if (lane == 0) t = merge(t, o);
    }
"""), (f"{P38}/04_online_softmax/online_softmax.cu", """\
    b = warp_merge(b);  // every warp merges the slots itself: no second barrier to broadcast
""", """\
    for (int src = 1; src < 32; ++src) b = merge(b, MaxSum{__shfl_sync(0xffffffffu, b.m, src),
                                                           __shfl_sync(0xffffffffu, b.s, src)});
""")], ("shuffles",), "lane 0 gathers its warp's pairs one by one (SHFL.IDX), no butterfly"),

    Variant("p38-05", "honest"),
    Variant("p38-05", "sum_only_recompute", [(f"{P38}/05_fused_rescale/fused_rescale.cu", """\
  conv_exp_partials<true><<<""", """\
  conv_exp_partials<false><<<"""), (f"{P38}/05_fused_rescale/fused_rescale.cu", """\
    out[i] *= factor[i / g.spatial];
""", """\
    out[i] = expf(out[i] - g.clamp_hi) * factor[i / g.spatial];  // recomputed from what the conv left
""")], ("present", "absent"), "the epilogue's sum-only form (rung 06's) and the exponential recomputed"),

    Variant("p74-06", "honest"),
    Variant("p74-06", "serial_by_thread0", [(REDUCE, """\
  for (unsigned stride = blockDim.x / 2; stride > 0; stride >>= 1) {
    if (threadIdx.x < stride) partial[threadIdx.x] = plus(partial[threadIdx.x], partial[threadIdx.x + stride]);
    __syncthreads();
  }
""", """\
  if (threadIdx.x == 0) {  // one thread walks the partials
    float2 s = partial[0];
    for (unsigned i = 1; i < blockDim.x; ++i) s = plus(s, partial[i]);
    partial[0] = s;
  }
  __syncthreads();
""")], ("block_tree",), "thread 0 adds the block's partials in a loop"),

    Variant("p74-07", "honest"),
    Variant("p74-07", "lane0_gathers", [(REDUCE, """\
  for (int offset = 16; offset > 0; offset >>= 1) {
    v.x += __shfl_down_sync(0xffffffffu, v.x, offset);
    v.y += __shfl_down_sync(0xffffffffu, v.y, offset);
  }
""", """\
  const float2 mine = v;
  for (int src = 1; src < 32; ++src) {  // lane 0 gathers the warp's values one by one
    v.x += __shfl_sync(0xffffffffu, mine.x, src);
    v.y += __shfl_sync(0xffffffffu, mine.y, src);
  }
""")], ("shuffles",), "lane 0 gathers the warp's values one by one (SHFL.IDX), no down tree"),

    Variant("p74-08", "honest"),
    Variant("p74-08", "atomic_second_pass", [(f"{P74}/device/backward_two_level.cuh", """\
    grad_multiplier[c] = sum.x;
    grad_bias[c] = sum.y;
""", """\
    atomicAdd(&grad_multiplier[c], sum.x);
    atomicAdd(&grad_bias[c], sum.y);
""")], ("absent",), "the second pass adds with float atomics (grader/fixtures/p74-08)"),

    Variant("p38-08", "honest"),
    Variant("p38-08", "truncate_not_round", [(f"{P38}/08_tensor_cores/tensor_cores.cu", """\
      auto t = [](float x) { return __uint_as_float(tf32_bits(x)); };
""", """\
      auto t = [](float x) { return __uint_as_float(__float_as_uint(x) & 0xffffe000u); };
""")], ("tf32_rounded",), "the staged inputs truncated (a mask without the add of 0x1000; grader/fixtures/p38-08)"),
    Variant("p38-08", "ffma_not_mma", [(f"{P38}/08_tensor_cores/tensor_cores.cu", """\
                      mma_tf32(acc[cls][0], a_lo, a_hi, uint2{__float_as_uint(bv.x), __float_as_uint(bv.y)});
                      mma_tf32(acc[cls][1], a_lo, a_hi, uint2{__float_as_uint(bv.z), __float_as_uint(bv.w)});
""", """\
                      for (int e = 0; e < 4; ++e) {  // FP32 FMAs on the fragments' values: no mma
                        acc[cls][0][e] += __uint_as_float(e < 2 ? a_lo.x : a_hi.y) * (e % 2 ? bv.y : bv.x);
                        acc[cls][1][e] += __uint_as_float(e < 2 ? a_lo.y : a_hi.x) * (e % 2 ? bv.w : bv.z);
                      }
""")], ("loop_has", "not_in_loop"), "FP32 FMAs in the chunk loop in place of the mma (grader/fixtures/p38-08)"),

    Variant("p74-10", "honest"),
    Variant("p74-10", "truncate_not_round", [(f"{P74}/rungs/10_tensor_cores/tensor_cores.cu", """\
      x_s[px * kCiChunk + x_slot] = __uint_as_float(tf32_bits(v));  // rounded to nearest by its copier
""", """\
      x_s[px * kCiChunk + x_slot] = __uint_as_float(__float_as_uint(v) & 0xffffe000u);
""")], ("tf32_rounded",), "the staged x truncated (a mask without the add of 0x1000; grader/fixtures/p74-10)"),
    Variant("p74-10", "weights_unrounded", [(f"{P74}/rungs/10_tensor_cores/tensor_cores.cu", """\
  wt[e] = __uint_as_float(tf32_bits(v));
""", """\
  wt[e] = v;
""")], ("tf32_rounded",), "the laid-out weights never rounded: the mma truncates them (grader/fixtures/p74-10)"),
    Variant("p74-10", "ffma_not_mma", [(f"{P74}/rungs/10_tensor_cores/tensor_cores.cu", """\
              for (int nt = 0; nt < kNTiles; ++nt) mma_tf32(acc[p][mt][nt], a_lo[mt], a_hi[mt], b[nt]);
""", """\
              for (int nt = 0; nt < kNTiles; ++nt)  // FP32 FMAs on the fragments' values: no mma
                for (int e = 0; e < 4; ++e)
                  acc[p][mt][nt][e] += __uint_as_float(e < 2 ? a_lo[mt].x : a_hi[mt].y) *
                                       __uint_as_float(e % 2 ? b[nt].y : b[nt].x);
""")], ("loop_has", "not_in_loop"), "FP32 FMAs in the chunk loop in place of the mma (grader/fixtures/p74-10)"),

    Variant("p74-11", "honest"),
    Variant("p74-11", "truncate_not_round", [(f"{P74}/rungs/11_tensor_core_grads/tensor_core_grads.cu", """\
      gy_s[px * kK + slot] = __uint_as_float(tf32_bits(gy));  // rounded to nearest by its copier
""", """\
      gy_s[px * kK + slot] = __uint_as_float(__float_as_uint(gy) & 0xffffe000u);
""")], ("tf32_rounded",), "grad_x's staged g_y truncated (a mask without the add of 0x1000; grader/fixtures/p74-11)"),
    Variant("p74-11", "x_truncated_not_rounded", [(f"{P74}/rungs/11_tensor_core_grads/tensor_core_grads.cu", """\
      x_s[stage_row * kK + stage_slot] = __uint_as_float(tf32_bits(v));  // rounded to nearest by its copier
""", """\
      x_s[stage_row * kK + stage_slot] = __uint_as_float(__float_as_uint(v) & 0xffffe000u);
""")], ("tf32_rounded",), "grad_weight's staged x truncated (a mask without the add of 0x1000)"),
    Variant("p74-11", "weights_unrounded", [(f"{P74}/rungs/11_tensor_core_grads/tensor_core_grads.cu", """\
  wx[e] = __uint_as_float(tf32_bits(v));
""", """\
  wx[e] = v;
""")], ("tf32_rounded",), "grad_x's laid-out weights never rounded: the mma truncates them (grader/fixtures/p74-11)"),
    Variant("p74-11", "ffma_not_mma", [(f"{P74}/rungs/11_tensor_core_grads/tensor_core_grads.cu", """\
              for (int nt = 0; nt < kXNTiles; ++nt) mma_tf32(acc[mt][nt], a_lo, a_hi, bf[nt]);
""", """\
              for (int nt = 0; nt < kXNTiles; ++nt)  // FP32 FMAs on the fragments' values: no mma
                for (int e = 0; e < 4; ++e)
                  acc[mt][nt][e] += __uint_as_float(e < 2 ? a_lo.x : a_hi.y) *
                                    __uint_as_float(e % 2 ? bf[nt].y : bf[nt].x);
""")], ("loop_has", "not_in_loop"), "grad_x: FP32 FMAs in the chunk loop in place of the mma"),

    Variant("p74-12", "honest"),
    Variant("p74-12", "ffma_not_mma", [(f"{P74}/rungs/12_three_tf32/three_tf32.cu", """\
                mma_tf32(acc[p][mt][nt], lo_small[mt], hi_small[mt], b_big[nt]);
                mma_tf32(acc[p][mt][nt], lo_big[mt], hi_big[mt], b_small[nt]);
                mma_tf32(acc[p][mt][nt], lo_big[mt], hi_big[mt], b_big[nt]);
""", """\
                for (int e = 0; e < 4; ++e)  // FP32 FMAs on the fragments' big parts: no mma
                  acc[p][mt][nt][e] += __uint_as_float(e < 2 ? lo_big[mt].x : hi_big[mt].y) *
                                       __uint_as_float(e % 2 ? b_big[nt].y : b_big[nt].x);
""")], ("loop_has", "not_in_loop"), "FP32 FMAs in the chunk loop in place of the three mma"),
    Variant("p74-12", "split_truncated", [(f"{P74}/rungs/12_three_tf32/three_tf32.cu", """\
  big = make_uint2(tf32_bits(__uint_as_float(v.x)), tf32_bits(__uint_as_float(v.y)));
  small = make_uint2(tf32_bits(__uint_as_float(v.x) - __uint_as_float(big.x)),
                     tf32_bits(__uint_as_float(v.y) - __uint_as_float(big.y)));
""", """\
  big = make_uint2(v.x & 0xffffe000u, v.y & 0xffffe000u);
  small = make_uint2(__float_as_uint(__uint_as_float(v.x) - __uint_as_float(big.x)) & 0xffffe000u,
                     __float_as_uint(__uint_as_float(v.y) - __uint_as_float(big.y)) & 0xffffe000u);
""")], ("tf32_rounded",), "the split's parts truncated to TF32 (a mask without the add of 0x1000)"),
    Variant("p74-12", "one_product", [(f"{P74}/rungs/12_three_tf32/three_tf32.cu", """\
                mma_tf32(acc[p][mt][nt], lo_small[mt], hi_small[mt], b_big[nt]);
                mma_tf32(acc[p][mt][nt], lo_big[mt], hi_big[mt], b_small[nt]);
                mma_tf32(acc[p][mt][nt], lo_big[mt], hi_big[mt], b_big[nt]);
""", """\
                mma_tf32(acc[p][mt][nt], lo_big[mt], hi_big[mt], b_big[nt]);
""")], ("three_products",),
            "only big*big: plain TF32, one mma per pair, handed in as 3xTF32 (nvcc also drops the mask of the "
            "unused split: tf32_rounded fails too)"),
]


# ---- building the variants (--regenerate, LADDER_TECHNIQUE_COMPILE) ---------------------------

def find_tool(name, env):
    for c in (os.environ.get(env, ""), shutil.which(name) or "", f"/usr/local/cuda/bin/{name}"):
        if c and os.access(c, os.X_OK):
            return c
    return technique.find_cuobjdump() if name == "cuobjdump" else ""


def variant_tree(v, tmp):
    """A copy of stages/ and tracks/ under tmp with v's edits made; common/, harness/ and ladder/
    are linked, except one that an edit touches (10's ffma_instead_of_mma edits common/toolkit/),
    which is copied: an edit made through a link would change the checkout itself."""
    edited = {path.split("/")[0] for path, _, _ in v.edits}
    for d in ("stages", "tracks", "common", "harness", "ladder"):
        if d in ("stages", "tracks") or d in edited:
            shutil.copytree(os.path.join(ROOT, d), os.path.join(tmp, d))
        else:
            os.symlink(os.path.join(ROOT, d), os.path.join(tmp, d))
    for path, orig, repl in v.edits:
        with open(os.path.join(tmp, path), encoding="utf-8") as f:
            text = f.read()
        if text.count(orig) != 1:
            raise AssertionError(f"{v.rung} {v.name}: the edit of {path} matches {text.count(orig)} times, not once")
        with open(os.path.join(tmp, path), "w", encoding="utf-8") as f:
            f.write(text.replace(orig, repl))


def compile_variant(v, arch, nvcc, cuobjdump):
    """The disassembly (cuobjdump -sass of nvcc -cubin) of v's rung object for arch."""
    with tempfile.TemporaryDirectory(prefix="technique_") as tmp:
        variant_tree(v, tmp)
        common = [f"-I{tmp}/common/model", f"-I{tmp}/common/toolkit"]  # the build's include folders
        if v.rung.startswith("p"):
            track = glob.glob(os.path.join(tmp, "tracks", v.rung.split("-")[0] + "_*"))[0]
            source = glob.glob(os.path.join(track, "rungs", v.rung.split("-")[1] + "_*", "*.cu"))[0]
            tid, number = v.rung.split("-")
            name = os.path.basename(os.path.dirname(source))[3:]  # rungs/NN_name/, as cmake/Stages.cmake names it
            flags = [f"-DLADDER_RUNG_ID=\"{number}\"", f"-DLADDER_RUNG_NAME=\"{name}\"",
                     f"-DLADDER_RUNG_SYMBOL=rung_{number}", f"-DLADDER_RUNG_TRACK=\"{tid}\"",
                     f"-I{track}", f"-I{tmp}", f"-I{tmp}/tracks", f"-I{tmp}/ladder", *common]
        else:
            source = glob.glob(os.path.join(tmp, "stages", v.rung, "*.cu"))[0]
            sid, name = v.rung[:2], v.rung[3:]
            flags = [f"-DLADDER_STAGE_ID=\"{sid}\"", f"-DLADDER_STAGE_NAME=\"{name}\"",
                     f"-DLADDER_STAGE_SYMBOL=stage_{sid}_descriptor", f"-I{tmp}/stages", *common]
        out = os.path.join(tmp, "rung.cubin")
        cmd = [nvcc, "-cubin", f"-arch={arch}", "-O3", "-DNDEBUG", "-std=c++17", *flags, "-o", out, source]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            raise AssertionError(f"{v.rung} {v.name} does not compile for {arch}:\n{p.stderr[-3000:]}")
        env = dict(os.environ, PATH=os.path.dirname(cuobjdump) + os.pathsep + os.environ.get("PATH", ""))
        return subprocess.run([cuobjdump, "-sass", out], capture_output=True, text=True, env=env, check=True).stdout


def trim(text, rules):
    """The disassembly reduced to what the rules read: the functions they name, one template
    instantiation (KW = 3) of each that has one (every instantiation of the others), and, for a rule on every function (kernel ""), those that
    break it; instructions without their encodings."""
    kernels = {r["kernel"] for r in rules} - {""}
    every = [re.compile(r["sass"]) for r in rules if r["kernel"] == ""]
    templated = re.compile(r"ILi(\d)E")
    functions = technique.parse(text)
    # kernels with a KW = 3 instantiation keep only it; others (p38-08's mma_subpixel_conv<S, ...>) keep all
    with_kw3 = {k for k in kernels for f in functions if k in f.short and (t := templated.search(f.short))
                and t.group(1) == "3"}
    out = []
    for f in functions:
        named = any(k in f.short for k in kernels)
        breaks = any(p.match(i.op) for p in every for i in f.code)
        t = templated.search(f.short)
        if not (named or breaks) or (t and t.group(1) != "3" and any(k in f.short for k in with_kw3)):
            continue
        out += [f"\tarch = {f.arch}", f"\t\tFunction : {f.name}"]
        out += [f"        /*{i.addr:04x}*/  {i.text()} ;" for i in f.code]
    return "\n".join(out) + "\n"


def regenerate(rungs=()):
    """Recompiles the saved disassemblies: every variant's, or only those of `rungs` (stage folders
    such as 15_wgmma, track rung ids such as p38-03), leaving the other rungs' files as they are."""
    nvcc, cuobjdump = find_tool("nvcc", "NVCC"), find_tool("cuobjdump", "CUOBJDUMP")
    if not nvcc or not cuobjdump:
        sys.exit("--regenerate needs nvcc and cuobjdump")
    unknown = set(rungs) - {v.rung for v in VARIANTS}
    if unknown:
        sys.exit(f"--regenerate: no variants of {', '.join(sorted(unknown))}")
    os.makedirs(DATA, exist_ok=True)
    for old in glob.glob(os.path.join(DATA, "*.sass.gz")):
        if not rungs or os.path.basename(old).split("__")[0] in rungs:
            os.remove(old)
    for v in VARIANTS:
        if rungs and v.rung not in rungs:
            continue
        for arch in v.saved_archs():
            text = trim(compile_variant(v, arch, nvcc, cuobjdump), v.rules)
            with gzip.open(v.data(arch), "wt", encoding="utf-8", compresslevel=9) as f:
                f.write(text)
            ok, lines = technique.apply(technique.parse(text), v.rules, f"{v.rung} {v.name} {arch}")
            print(("PASS " if ok else "FAIL ") + f"{v.rung} {v.name} {arch}: "
                  + "; ".join(l for l in lines if l.startswith("FAIL"))[:300])


# ---- the tests --------------------------------------------------------------------------------

def failed_checks(functions, rules, label="t"):
    """The kinds of the rules that fail (with their lines), one rule at a time."""
    out = {}
    for r in rules:
        ok, lines = technique.apply(functions, [r], label)
        if not ok:
            out.setdefault(r["check"], []).extend(lines)
    return out


class SavedVariants(unittest.TestCase):
    """The honest versions pass and the wrong ones fail, by the checks meant to catch them."""

    def verdicts(self, v, text, arch):
        failed = failed_checks(technique.parse(text), v.rules)
        where = f"{v.rung} {v.name} ({arch}): {v.why}"
        if not v.fails:
            self.assertEqual(failed, {}, where)
            return
        for kind in v.fails:
            self.assertIn(kind, failed, f"{where}: the {kind} check passes")
        # failing for the idea, not for a missing kernel (unless the variant drops it: p38-05)
        lines = [l for kind in v.fails for l in failed[kind]]
        if v.rung != "p38-05":
            self.assertFalse(any("no kernel named" in l for l in lines), f"{where}: {lines}")
        self.assertTrue(all(l.startswith("FAIL") for l in lines))

    def test_saved(self):
        for v in VARIANTS:
            for arch in v.saved_archs():
                with self.subTest(rung=v.rung, variant=v.name, arch=arch):
                    self.assertTrue(os.path.isfile(v.data(arch)),
                                    f"{v.data(arch)} missing: python3 grader/tests/test_technique.py --regenerate")
                    with gzip.open(v.data(arch), "rt", encoding="utf-8") as f:
                        self.verdicts(v, f.read(), arch)

    def test_edits_still_apply(self):
        """Each edit's original text occurs once in today's sources: else the saved code is stale."""
        for v in VARIANTS:
            for path, orig, _ in v.edits:
                with self.subTest(rung=v.rung, variant=v.name, path=path):
                    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
                        self.assertEqual(f.read().count(orig), 1, "regenerate the test data after fixing the edit")

    def test_variant_trees_leave_the_checkout_alone(self):
        """variant_tree edits copies only: each edited file of the checkout is unchanged afterwards,
        and the variant's tree holds the edit (an edit through a linked folder once rewrote
        common/toolkit/mma_tf32.cuh in place, for every later compile and commit)."""
        for v in VARIANTS:
            if not v.edits:
                continue
            with self.subTest(rung=v.rung, variant=v.name), tempfile.TemporaryDirectory() as tmp:
                before = {}
                for path, _, _ in v.edits:
                    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
                        before[path] = f.read()
                variant_tree(v, tmp)
                for path, orig, repl in v.edits:
                    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
                        self.assertEqual(f.read(), before[path], f"{path} of the checkout changed")
                    with open(os.path.join(tmp, path), encoding="utf-8") as f:
                        self.assertIn(repl, f.read())

    def test_every_rung_has_a_failing_variant(self):
        rungs = {v.rung if v.rung.startswith("p") else v.rung[3:] for v in VARIANTS if v.fails}
        honest = {v.rung if v.rung.startswith("p") else v.rung[3:] for v in VARIANTS if v.name == "honest"}
        for name, rules in list(technique.STAGE_RULES.items()) + list(technique.TRACK_RULES.items()):
            if rules:
                self.assertIn(name, rungs, f"{name}: no wrong-technique variant in VARIANTS")
                self.assertIn(name, honest, f"{name}: no honest version in VARIANTS")

    @unittest.skipUnless(os.environ.get("LADDER_TECHNIQUE_COMPILE"), "set LADDER_TECHNIQUE_COMPILE=1 to compile")
    def test_compiled_now(self):
        nvcc, cuobjdump = find_tool("nvcc", "NVCC"), find_tool("cuobjdump", "CUOBJDUMP")
        if not nvcc or not cuobjdump:
            self.skipTest("no nvcc or cuobjdump")
        for v in VARIANTS:
            for arch in v.compile_archs():
                with self.subTest(rung=v.rung, variant=v.name, arch=arch):
                    self.verdicts(v, compile_variant(v, arch, nvcc, cuobjdump), arch)

    # Fixtures that lose technique because their host code cannot build in the grader's sandbox
    # (an .incbin of a file the sandbox does not hold): this test compiles device code only
    # (nvcc -cubin), where their edit is not compiled, so their verdict is the selftest's alone.
    HOST_BUILD_FAILS = {"03/incbin_reference_build", "03/incbin_reference_library"}

    @unittest.skipUnless(os.environ.get("LADDER_TECHNIQUE_COMPILE"), "set LADDER_TECHNIQUE_COMPILE=1 to compile")
    def test_grader_fixtures_compiled_now(self):
        """The selftest's fixtures (grader/fixtures): those that lose technique fail a check here,
        those that lose nothing (valid alternatives) pass every one."""
        from grader import selftest
        nvcc, cuobjdump = find_tool("nvcc", "NVCC"), find_tool("cuobjdump", "CUOBJDUMP")
        if not nvcc or not cuobjdump:
            self.skipTest("no nvcc or cuobjdump")
        folders = {os.path.basename(d)[:2]: os.path.basename(d)
                   for d in glob.glob(os.path.join(ROOT, "stages", "[01]*_*"))}
        for path in sorted(glob.glob(os.path.join(ROOT, "grader", "fixtures", "*", "*.fixture"))):
            fx = selftest.parse_fixture(path)
            if fx["loses"] not in ("technique", "nothing") or fx["name"] in self.HOST_BUILD_FAILS:
                continue
            v = Variant(fx["rung"] if fx["rung"].startswith("p") else folders[fx["rung"]], fx["name"],
                        [(fx["file"], o, r) for o, r in fx["edits"]])
            for arch in v.compile_archs():
                with self.subTest(fixture=fx["name"], arch=arch):
                    failed = failed_checks(technique.parse(compile_variant(v, arch, nvcc, cuobjdump)), v.rules)
                    self.assertEqual(bool(failed), fx["loses"] == "technique", f"{fx['name']}: {failed}")


SASS = """\
\tarch = sm_90
\t\tFunction : _ZN6ladder47_GLOBAL__N__be8183fe_14_shared_tree_cu_537207d916pool_shared_treeEPKfijPf
{body}
\t\tFunction : _ZN6ladder3p3817conv_exp_partialsILb1EEEvNS0_8GeometryEPKf
        /*0000*/                   EXIT ;
"""


def sass(*instructions):
    body = "\n".join(f"        /*{16 * k:04x}*/                   {ins} ;" for k, ins in enumerate(instructions))
    return technique.parse(SASS.format(body=body))


class Model(unittest.TestCase):
    """The parser, the loops and the dataflow on hand-written code."""

    def test_names_and_operands(self):
        fns = sass("@!P0 LDS R3, [R2+0x200]", "ATOM.E.ADD.STRONG.GPU PT, R3, desc[UR16][R4.64], R3", "EXIT")
        self.assertEqual([f.short for f in fns], ["pool_shared_tree", "conv_exp_partialsILb1EEEvNS0_8GeometryEPKf"])
        lds, atom, _ = fns[0].code
        self.assertEqual((lds.pred, lds.op, lds.args), ("@!P0", "LDS", ["R3", "[R2+0x200]"]))
        self.assertEqual(technique.destination(atom), (3, 1))  # after the predicate output
        self.assertEqual(sass_model.base_name("_Z6kernelPf"), "kernel")
        self.assertEqual(sass_model.base_name("not_mangled"), "not_mangled")

    def test_loops(self):
        fn = sass("S2R R0, SR_TID.X", "LDS R1, [R0]", "BAR.SYNC.DEFER_BLOCKING 0x0", "@P0 BRA 0x10",
                  "LDS R2, [R0]", "@P1 BRA 0x40", "EXIT", "BRA 0x70")[0]
        self.assertEqual([(l.where(), l.innermost) for l in fn.loops],
                         [("loop 0x0010-0x0030", True), ("loop 0x0040-0x0050", True)])
        self.assertFalse(fn.in_loop(fn.code[-1]))  # BRA to itself, after EXIT: no loop
        # a shuffle's divergent fallback, after EXIT, jumps back into straight code: no loop
        fn = sass("S2R R0, SR_TID.X", "BRA.DIV UR4, 0x60", "SHFL.BFLY PT, R1, R0, 0x1, 0x1f", "FADD R0, R0, R1",
                  "STG.E desc[UR4][R2.64], R0", "EXIT", "WARPSYNC.ALL", "BRA 0x30")[0]
        self.assertEqual(fn.loops, [])
        # ... and inside a loop, it is part of that loop
        fn = sass("S2R R0, SR_TID.X", "BRA.DIV UR4, 0x60", "SHFL.BFLY PT, R1, R0, 0x1, 0x1f", "FADD R0, R0, R1",
                  "@P0 BRA 0x10", "EXIT", "SHFL.BFLY PT, R1, R0, 0x1, 0x1f", "BRA 0x30")[0]
        self.assertEqual([(l.where(), len(l.body)) for l in fn.loops], [("loop 0x0010-0x0070", 6)])

    def test_tree_needs_a_barrier_in_its_loop(self):
        tree = sass("STS [R2], R3", "BAR.SYNC.DEFER_BLOCKING 0x0", "LDS R4, [R2]", "LDS R5, [R2+0x4]",
                    "FADD R4, R4, R5", "STS [R2], R4", "BAR.SYNC.DEFER_BLOCKING 0x0", "@P0 BRA 0x20", "EXIT")[0]
        serial = sass("STS [R2], R3", "BAR.SYNC.DEFER_BLOCKING 0x0", "LDS R4, [R2]", "FADD R6, R6, R4",
                      "@P0 BRA 0x20", "STS [R2], R6", "BAR.SYNC.DEFER_BLOCKING 0x0", "EXIT")[0]
        self.assertTrue(technique.check_block_tree(tree)[0])
        self.assertFalse(technique.check_block_tree(serial)[0])

    def test_tree_finished_by_a_warp_reduction(self):
        """Two levels through shared memory between barriers, then the last warp's five butterfly
        shuffles (cooperative_groups::reduce): a tree. The divergent fallback's copy of the
        shuffles (after the exit, reached by BRA.DIV) is not counted twice; shuffles alone (stage
        04's warp sums, no level through shared memory) are not this rung's tree, and the message
        says what was found, not a guess."""
        level = ("LDS R4, [R2]", "LDS R5, [R2+0x200]", "FADD R4, R4, R5", "STS [R2], R4", "BAR.SYNC.DEFER_BLOCKING 0x0")
        warp = ["LDS R3, [R2]", "LDS R4, [R2+0x80]", "FADD R3, R3, R4", "BRA.DIV UR5, 0x{fallback:x}"]
        for k in (0x10, 0x8, 0x4, 0x2, 0x1):
            warp += [f"SHFL.BFLY PT, R4, R3, 0x{k:x}, 0x1f", "FADD R3, R3, R4"]
        head = ("STS [R2], R11", "BAR.SYNC.DEFER_BLOCKING 0x0")
        tail = ["@!P0 STS [R2], R3", "EXIT"]
        fallback = ["SHFL.BFLY P0, R6, R3, R10, R11"] * 5 + ["BRA 0x{back:x}"]  # back to the store after them

        def kernel(*parts):
            code = [i for part in parts for i in part]
            at, back = 16 * (len(code) + len(tail)), 16 * len(code)
            return sass(*[i.format(fallback=at) for i in code], *tail, *[i.format(back=back) for i in fallback])[0]
        fn = kernel(head, level, level, warp)
        self.assertEqual(technique.warp_shuffle_levels(fn), 5)
        ok, detail = technique.check_block_tree(fn)
        self.assertTrue(ok, detail)
        self.assertIn("5 warp-shuffle levels", detail)
        # stage 04's way: each warp's shuffles, one slot a warp, no level through shared memory
        ok, detail = technique.check_block_tree(kernel(head, warp[3:]))
        self.assertFalse(ok)
        self.assertIn("0 level(s) through shared memory", detail)
        self.assertIn("5 warp-shuffle level(s)", detail)
        self.assertNotIn("?", detail)

    def test_messages_say_what_was_found(self):
        """Every failing line of the saved wrong variants reports counts and instructions, never a
        guess ending in a question mark."""
        for v in VARIANTS:
            for arch in v.saved_archs() if v.fails else ():
                with gzip.open(v.data(arch), "rt", encoding="utf-8") as f:
                    functions = technique.parse(f.read())
                for lines in failed_checks(functions, v.rules).values():
                    for line in lines:
                        with self.subTest(rung=v.rung, variant=v.name, arch=arch):
                            self.assertNotIn("?", line)

    def test_async_pipeline_counts_the_groups_left_in_flight(self):
        def step_loop(pending):  # copies, a commit, a wait, a barrier and the math, in one loop
            return sass("LDGSTS.E.BYPASS.LTC128B.128 [R3], desc[UR4][R4.64]", "LDGDEPBAR",
                        f"DEPBAR.LE SB0, {pending}", "BAR.SYNC.DEFER_BLOCKING 0x0",
                        "HMMA.1688.F32.TF32 R8, R12, R16, R8", "@P0 BRA 0x0", "EXIT")[0]
        check = technique.check_async_pipeline
        self.assertEqual([check(step_loop(n))[0] for n in ("0x0", "0x1", "0x2")], [False, True, True])
        self.assertEqual([check(step_loop(n), min_pending=2)[0] for n in ("0x0", "0x1", "0x2", "0x3")],
                         [False, False, True, True])
        self.assertIn("waits for all of them", check(step_loop("0x0"), min_pending=2)[1])
        self.assertIn("at most 1 group(s) in flight", check(step_loop("0x1"), min_pending=2)[1])

    def test_sm90a_code_counts_as_sm90(self):
        """A stage built for sm_90a in place of sm_90 (rung.json "build") has its local memory
        checked there, and rules that need sm_90a fail, saying why, on a build without it."""
        def code(arch, *instructions):
            return technique.parse(f"\tarch = {arch}\n\t\tFunction : _Z15conv_pool_wgmmaILi3EEvv\n" + "\n".join(
                f"        /*{16 * k:04x}*/                   {ins} ;" for k, ins in enumerate(instructions)))
        spill = ("STL [R1], R2", "EXIT")
        self.assertFalse(technique.local_memory(code("sm_90a", *spill), "s", "sm_90")[0])
        self.assertTrue(technique.local_memory(code("sm_80", *spill), "s", "sm_90")[0])  # a NOTE only
        self.assertFalse(technique.is_strict("sm_100a", "sm_90"))
        loop = ("SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR6], R4", "UBLKCP.S.G [UR6], [UR4], R5",
                "BAR.SYNC.DEFER_BLOCKING 0x0", "HGMMA.64x128x8.F32.TF32 R24, gdesc[UR24], R24", "@P0 BRA 0x0", "EXIT")
        rules = technique.STAGE_RULES["wgmma"]
        self.assertEqual(technique.apply(code("sm_90a", *loop), rules, "s")[0], True)
        ok, lines = technique.apply(code("sm_90", *loop), rules, "s")
        self.assertFalse(ok)
        self.assertIn("this build has no sm_90a code", lines[0])

    def test_sm90a_rules_are_judged_on_sm90a_code_only(self):
        """A needs_sm90a rule of what must be absent (stage 17's no BAR.SYNC in a loop) fails on
        the sm_90a code that has it, though the sm_120 fallback kernel (a trap, no loop) has none:
        fixture 17/consumers_meet_every_step passed technique while other architectures counted."""
        def code(arch, *instructions):
            return technique.parse(f"\tarch = {arch}\n\t\tFunction : _Z26conv_pool_warp_specializedILi3EEvv\n" +
                                   "\n".join(f"        /*{16 * k:04x}*/                   {ins} ;"
                                             for k, ins in enumerate(instructions)))
        rules = [r for r in technique.STAGE_RULES["warp_specialized"] if r["check"] == "not_in_loop"]
        self.assertTrue(rules and all(r.get("needs_sm90a") for r in rules))
        looped = code("sm_90a", "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR6], R4", "BAR.SYNC.DEFER_BLOCKING 0x1, 0x100",
                      "@P0 BRA 0x0", "EXIT")
        fallback = code("sm_120", "BPT.TRAP 0x1", "EXIT")
        ok, lines = technique.apply(looped + fallback, rules, "s")
        self.assertFalse(ok, lines)
        self.assertIn("on sm_90a", lines[-1])
        self.assertTrue(technique.apply(code("sm_90a", "BAR.SYNC.DEFER_BLOCKING 0x0", "EXIT") + fallback, rules, "s")[0])

    def test_wgmma_products_count_per_accumulator_and_tap(self):
        """Three HGMMA per accumulator and tap of a kernel row, KW from the template argument; an
        unrolled loop (two kernel rows a trip) only raises the count."""
        def kernel(name, *hgmma):
            body = [f"        /*{16 * k:04x}*/                   HGMMA.64x128x8.F32.TF32 {acc}, gdesc[UR16], {acc} ;"
                    for k, acc in enumerate(hgmma)]
            body.append(f"        /*{16 * len(hgmma):04x}*/                   @P0 BRA 0x0 ;")
            return technique.parse(f"\tarch = sm_90a\n\t\tFunction : {name}\n" + "\n".join(body))[0]
        check = technique.check_wgmma_products
        kw2, plain = "_Z15conv_pool_wgmmaILi2EEvv", "_Z15conv_pool_wgmmav"
        self.assertTrue(check(kernel(kw2, *["R24", "R88"] * 6))[0])            # 3 a tap, 2 taps
        ok, detail = check(kernel(kw2, *["R24", "R88"] * 4))                   # 2 a tap: a correction dropped
        self.assertFalse(ok)
        self.assertIn("gets 4 HGMMA for the kernel's 2 tap(s)", detail)
        self.assertFalse(check(kernel(kw2, *(["R24"] * 6 + ["R88"] * 5)))[0])  # every accumulator counts
        self.assertTrue(check(kernel(plain, "R24", "R24", "R24"))[0])           # no template argument: one tap
        self.assertTrue(check(kernel(kw2, *["R24"] * 8))[0])                   # 4 a tap: small*small, or 2 rows a trip
        self.assertFalse(check(technique.parse("\tarch = sm_90a\n\t\tFunction : " + kw2 +
                                               "\n        /*0000*/                   EXIT ;")[0])[0])

    def test_tf32_rounding_is_an_add_then_the_mask(self):
        check = technique.check_tf32_rounded
        rna = ["LDG.E R5, desc[UR4][R2.64]", "FSETP.GEU.AND P0, PT, |R5|, +INF , PT", "IMAD.MOV.U32 R7, RZ, RZ, 0x1000",
               "@!P0 IMAD.IADD.U32 R5, R5, 0x1, R7", "LOP3.LUT R9, R5, 0xffffe000, RZ, 0xc0, !PT", "STS [R0], R9"]
        self.assertTrue(check(sass(*rna)[0])[0])                                    # cvt.rna as nvcc 13 writes it
        self.assertTrue(check(sass("IADD3 R5, R5, 0x1000, RZ", "LOP3.LUT R9, R5, 0xffffe000, RZ, 0xc0, !PT")[0])[0])
        ok, detail = check(sass("LDG.E R5, desc[UR4][R2.64]", "LOP3.LUT R9, R5, 0xffffe000, RZ, 0xc0, !PT")[0])
        self.assertFalse(ok)                                                        # truncation: the mask alone
        self.assertIn("truncation", detail)
        ok, detail = check(sass(*rna[:4], "MOV R5, R3", rna[4])[0])                # the add overwritten first
        self.assertFalse(ok)
        self.assertFalse(check(sass("LDG.E R5, desc[UR4][R2.64]", "STS [R0], R5")[0])[0])  # never rounded

    def test_mma_products_trace_fragments_to_their_loads(self):
        split = [f"LOP3.LUT R{30 + k}, R{10 + k}, 0xffffe000, RZ, 0xc0, !PT" for k in range(4)]
        split += [f"FADD R{34 + k}, R{10 + k}, -R{30 + k}" for k in range(4)]
        body = sass("LDS.64 R10, [R0]", "LDS.64 R12, [R0+0x8]", "LDS.64 R20, [R1]", *split,
                    "HMMA.1688.F32.TF32 R40, R30, R20, R40", "HMMA.1688.F32.TF32 R40, R34, R20, R40",
                    "HMMA.1688.F32.TF32 R44, R10, R22, R44")[0].code
        (a1, b1, f1), (a2, b2, f2), (a3, b3, _) = technique.mma_products(body)
        self.assertEqual((a1, b1), (a2, b2))  # one fragment pair: the loads at 0x00, 0x10 and 0x20
        self.assertEqual((a1, b1), (frozenset({0x00, 0x10}), frozenset({0x20})))
        self.assertEqual((f1, f2), (False, True))  # big, then small (through FADD)
        self.assertEqual(b3, frozenset({("in", 22), ("in", 23)}))  # not written here: stands for itself


class CheckSassInterface(unittest.TestCase):
    """scripts/check_sass.sh on a made-up build whose cuobjdump prints saved disassemblies: the
    grader's interface (LADDER_SASS_STAGES, PASS/FAIL lines, the exit code)."""

    def run_check(self, variant):
        with tempfile.TemporaryDirectory(prefix="check_sass_") as build:
            with open(os.path.join(build, "stages.tsv"), "w") as f:
                f.write("# id\tfolder\tname\tkind\n03\t03_shared_tree\tshared_tree\tgpu\t\t\n")
            obj = os.path.join(build, "CMakeFiles", "stage_03.dir", "stages", "x.cu.o")
            os.makedirs(os.path.dirname(obj))
            with open(obj, "w") as f:
                f.write("")
            with gzip.open(variant.data("sm_90"), "rt") as f, open(obj + ".sass", "w") as g:
                g.write(f.read())
            fake = os.path.join(build, "cuobjdump")
            with open(fake, "w") as f:
                f.write('#!/bin/sh\ncat "$2.sass"\n')
            os.chmod(fake, 0o755)
            env = dict(os.environ, CUOBJDUMP=fake, LADDER_SASS_STAGES="03", PYTHONDONTWRITEBYTECODE="1")
            return subprocess.run(["bash", os.path.join(ROOT, "scripts", "check_sass.sh"), build],
                                  capture_output=True, text=True, env=env)

    def test_pass_and_fail(self):
        honest, serial = (next(v for v in VARIANTS if v.rung == "03_shared_tree" and v.name == n)
                          for n in ("honest", "serial_by_thread0"))
        p = self.run_check(honest)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("PASS: stage 03: a shared-memory tree", p.stdout)
        p = self.run_check(serial)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertRegex(p.stdout, r"(?m)^FAIL: stage 03: a shared-memory tree in pool_shared_tree: no loop")

    def test_check_mode_names_a_stage_without_rules(self):
        with tempfile.TemporaryDirectory(prefix="check_sass_") as build:
            with open(os.path.join(build, "stages.tsv"), "w") as f:
                f.write("03\t03_shared_tree\tshared_tree\tgpu\n99\t99_unknown_rung\tunknown_rung\tgpu\n")
            p = subprocess.run(["bash", os.path.join(ROOT, "scripts", "check_sass.sh"), "--check", build],
                               capture_output=True, text=True, env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
            self.assertEqual(p.returncode, 1)
            self.assertRegex(p.stdout, r"(?m)^FAIL: stage 99 unknown_rung: no SASS expectation")


def real_build():
    build = os.environ.get("LADDER_TECHNIQUE_BUILD", os.path.join(ROOT, "build"))
    if glob.glob(os.path.join(build, "CMakeFiles", "stage_*.dir", "**", "*.o"), recursive=True) and \
            technique.find_cuobjdump():
        return build
    return None


class RealBuild(unittest.TestCase):
    @unittest.skipUnless(real_build(), "no build with stage objects (LADDER_TECHNIQUE_BUILD), or no cuobjdump")
    def test_every_rung_of_the_build_passes(self):
        failures, lines = technique.check_build(real_build())
        self.assertEqual(failures, 0, "\n".join(l for l in lines if l.startswith("FAIL")))



class RungMetaTest(unittest.TestCase):
    """Each stage's rung.json: read strictly, and the only place the stages' rules come from."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="rm_")
        self.addCleanup(shutil.rmtree, self.tmp)

    def stage(self, folder, text):
        os.makedirs(os.path.join(self.tmp, "stages", folder), exist_ok=True)
        with open(os.path.join(self.tmp, "stages", folder, "rung.json"), "w", encoding="utf-8") as f:
            f.write(text)

    def test_every_gpu_stage_of_the_repository_has_rules(self):
        gpu = [f.split("_", 1)[1] for f in os.listdir(os.path.join(ROOT, "stages"))
               if re.match(r"^\d\d_", f) and glob.glob(os.path.join(ROOT, "stages", f, "*.cu"))]
        self.assertEqual(sorted(gpu), sorted(technique.STAGE_RULES))
        self.assertIn(technique.FLOAT_ATOMIC, [r.get("sass") for r in technique.STAGE_RULES["single_launch"]])

    def test_read_and_resolve(self):
        self.stage("03_tree", '{"sass": [{"check": "absent", "kernel": "", "sass": "$FLOAT_ATOMIC"}], '
                              '"grader": {"timing": {"mode": "pool", "args": []}}}')
        self.stage("04_none", '{}')
        self.assertEqual(set(rung_meta.stages(self.tmp)), {"03", "04"})
        self.assertEqual(technique.stage_rules(self.tmp)["tree"][0]["sass"], technique.FLOAT_ATOMIC)
        self.assertEqual(rung_meta.by_name(self.tmp, "grader"), {"tree": {"timing": {"mode": "pool", "args": []}}})

    def test_errors_name_the_file(self):
        for text, message in (('{"sass": [], "timing": {}}', "unknown key"), ('[1]', "a JSON object"),
                              ('{"sass": [{"kernel": "k"}]}', "each with"), ('{"sass": ', "rung.json")):
            with self.subTest(text):
                self.stage("05_bad", text)
                with self.assertRaisesRegex(rung_meta.RungMetaError, re.escape(message)):
                    rung_meta.stages(self.tmp)
        self.stage("05_bad", '{"sass": [{"check": "absent", "kernel": "", "sass": "$NO_SUCH"}]}')
        with self.assertRaisesRegex(rung_meta.RungMetaError, "unknown pattern"):
            technique.stage_rules(self.tmp)

    def test_track_rungs_and_the_merged_settings(self):
        # Every track rung the self-test grades (it has fixtures) has its rules and its timing.
        graded = {os.path.basename(d) for d in glob.glob(os.path.join(ROOT, "grader", "fixtures", "*-*"))}
        self.assertTrue(graded)
        self.assertLessEqual(graded, set(technique.TRACK_RULES))
        metas = rung_meta.track_rungs(ROOT)
        self.assertTrue(all("timing" in metas[r].get("grader", {}) for r in graded), graded)
        os.makedirs(os.path.join(self.tmp, "tracks", "p38_x", "rungs", "03_tree"))
        with open(os.path.join(self.tmp, "tracks", "p38_x", "rungs", "03_tree", "rung.json"), "w", encoding="utf-8") as f:
            f.write('{"sass": [], "grader": {"timing": {"args": ["--batch", "8"]}}}')
        open(os.path.join(self.tmp, "tracks", "p38_x", "rungs", "03_tree", "tree.cu"), "w").close()  # the rung it describes
        open(os.path.join(self.tmp, "tracks", "p38_x", "rungs", "04_lone.json"), "w").close()  # in no rung folder: not read
        self.stage("02_atomics", '{"grader": {"timing": {"mode": "pool", "args": []}, "precision": "tf32"}}')
        config = rung_meta.with_rung_settings({"tracks": {"p38": {"about": "x"}}}, self.tmp)
        self.assertEqual(config["rungs"], {"02": {"timing": {"mode": "pool", "args": []}, "precision": "tf32"}})
        self.assertEqual(config["tracks"]["p38"]["rungs"], {"03": {"timing": {"args": ["--batch", "8"]}}})

    def test_a_submission_never_declares_its_rung_json(self):
        """A grading copies only the declared files over the grader's tree, so the rules, the
        timing and the precision a rung is graded by stay the instructor's."""
        declared = {**handout.plan(ROOT, ["03", "10", "13"])[2], **handout.plan(ROOT, ["p38-03", "p38-05"])[2]}
        self.assertTrue(declared)
        for files in declared.values():
            self.assertFalse([f for f in files if f.endswith(".json")], files)


class SassCounts(unittest.TestCase):
    """tooling/results/sass_counts.py's counts, on hand-written code."""

    def test_loads_before_the_first_add_are_counted_in_the_loop(self):
        from tooling.results import sass_counts
        fn = sass("LDG.E.128.CONSTANT R8, desc[UR6][R2.64]", "FADD R1, R1, R8",  # a peeled head: not the loop
                  "IMAD.WIDE R2, R0, 0x4, R4", "LDG.E.128.CONSTANT R8, desc[UR6][R2.64]",
                  "LDG.E.CONSTANT R7, desc[UR6][R2.64+0x10]", "LDG.E.128.CONSTANT R12, desc[UR6][R2.64+0x1000]",
                  "FADD R1, R1, R8", "LDG.E.128.CONSTANT R16, desc[UR6][R2.64+0x2000]", "BRA 0x20", "EXIT")[0]
        self.assertEqual(sass_counts.wide_loads_before_first_add(fn), 2)  # the scalar load is not counted
        fn = sass("IMAD.WIDE R2, R0, 0x4, R4", "FADD R1, R1, R8", "BRA 0x0", "EXIT")[0]
        with self.assertRaises(SystemExit):
            sass_counts.wide_loads_before_first_add(fn)

    def test_the_inner_loop_is_the_one_with_most_ffma(self):
        from tooling.results import sass_counts
        fn = sass("FFMA R1, R2, R3, R1", "@P0 BRA 0x0", "LDS R2, [R4]", "FFMA R1, R2, R3, R1", "FFMA R1, R2, R3, R1",
                  "@P1 BRA 0x20", "EXIT")[0]
        loop = sass_counts.inner_ffma_loop(fn)
        self.assertEqual((loop.count(technique.FFMA), loop.count(technique.LDS), len(loop.body)), (2, 1, 4))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--regenerate"]:
        regenerate(sys.argv[2:])
    else:
        unittest.main()
