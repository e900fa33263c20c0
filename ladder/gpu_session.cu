#include "gpu_session.hpp"
#include "event_marks.hpp"     // EventMarks
#include "run_loop.hpp"        // poison
#include "streaming_read.cuh"  // the floor kernel and its tuned launch

#include <algorithm>
#include <cub/device/device_segmented_reduce.cuh>
#include <stdexcept>

namespace ladder {

namespace {

/// Fills data[0..n) with values in [0, 1) from a hash of the index: realistic bits for timing.
__global__ void fill_pseudo_random(float* data, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ uint32_t(i >> 32);
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    data[i] = float(h >> 8) * (1.0f / 16777216.0f);
  }
}

/// Segment i of the flattened convT output starts at i * plane_size.
__global__ void fill_segment_offsets(int64_t* offsets, int64_t segments, int64_t plane_size) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i <= segments) offsets[i] = i * plane_size;
}

std::vector<double> to_host(const DeviceBuffer<float>& d) {
  std::vector<float> h(d.size());
  CUDA_CHECK(cudaMemcpy(h.data(), d.get(), d.bytes(), cudaMemcpyDeviceToHost));
  return {h.begin(), h.end()};
}

DeviceBuffer<float> upload(const std::vector<float>& h, const std::string& what) {
  DeviceBuffer<float> d(h.size(), what);
  CUDA_CHECK(cudaMemcpy(d.get(), h.data(), d.bytes(), cudaMemcpyHostToDevice));
  return d;
}

}  // namespace

GpuSession::GpuSession(const Problem& p, const HostInputs& in)
    : problem_(p),
      x_(upload(in.x, "x " + format_bytes(4.0 * double(in.x.size())))),
      weight_(upload(in.weight, "weight")),
      conv_bias_(upload(in.conv_bias, "conv_bias")),
      bias_(upload(in.bias, "bias")),
      pooled_(size_t(p.pooled_elems()), "pooled"),
      y_(size_t(p.batch), "y") {
  init_timing();
}

void GpuSession::refill(const HostInputs& in) {
  const std::pair<const std::vector<float>*, DeviceBuffer<float>*> pairs[] = {
      {&in.x, &x_}, {&in.weight, &weight_}, {&in.conv_bias, &conv_bias_}, {&in.bias, &bias_}};
  for (const auto& [host, dev] : pairs) {
    if (host->size() != dev->size()) throw std::invalid_argument("GpuSession::refill: inputs of another problem");
    if (!host->empty()) CUDA_CHECK(cudaMemcpy(dev->get(), host->data(), dev->bytes(), cudaMemcpyHostToDevice));
  }
}

GpuSession::GpuSession(const Problem& p)
    : problem_(p), pooled_(size_t(p.pooled_elems()), "pooled"), y_(size_t(p.batch), "y") {
  init_timing();
}

void GpuSession::init_timing() {
  l2_flush_ = std::make_unique<L2Flush>();
  CUDA_CHECK(cudaStreamCreate(&stream_));
}

GpuSession::~GpuSession() {
  if (stream_) cudaStreamDestroy(stream_);
}

void GpuSession::flush_l2() { (*l2_flush_)(stream_); }

double GpuSession::time_streaming_read(int warmup, int reps, bool flush) {
  return time_streaming_read(x_.get(), int64_t(x_.size()), warmup, reps, flush);
}

double GpuSession::time_streaming_read(const float* data, int64_t n, int warmup, int reps, bool flush) {
  // Planned once, outside the timed region: the launch tuned by floor_sweep (streaming_read.cuh).
  const StreamingReadLaunch read = plan_streaming_read(n);
  DeviceBuffer<float> sink(1, "streaming-read sink");
  return time_launch(warmup, reps, flush, [&] { read(data, n, sink.get(), stream_); });
}

double GpuSession::time_launch(int warmup, int reps, bool flush, const std::function<void()>& launch) {
  last_launch_spread_ = {};
  EventMarks<PhaseMarks, Phase> marks(stream_);
  marks.reserve(2);
  std::vector<double> times;
  for (int r = 0; r < warmup + reps; ++r) {
    if (flush) flush_l2();
    marks.reset();
    marks.mark();
    launch();
    marks.mark();
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    if (r >= warmup) times.push_back(marks.elapsed(0, 1));
  }
  last_launch_spread_ = spread_of(times);
  return last_launch_spread_.median;
}

double GpuSession::time_cub_segmented_sum(int warmup, int reps, bool flush) {
  DeviceBuffer<float> data(size_t(problem_.out_elems()), "the CUB baseline's convT-sized input");
  fill_pseudo_random<<<1024, 256, 0, stream_>>>(data.get(), int64_t(data.size()));
  CUDA_CHECK_LAUNCH("fill_pseudo_random");
  return time_cub_segmented_sum(data.get(), warmup, reps, flush);
}

double GpuSession::time_cub_segmented_sum(const float* data, int warmup, int reps, bool flush,
                                          std::vector<double>* sums_out) {
  const int64_t segments = problem_.pooled_elems(), plane = problem_.out_h() * problem_.out_w();
  DeviceBuffer<float> sums(size_t(segments), "the CUB baseline's sums");
  DeviceBuffer<int64_t> offsets(size_t(segments + 1), "the CUB baseline's segment offsets");
  fill_segment_offsets<<<blocks_for(segments + 1, 256, "fill_segment_offsets"), 256, 0, stream_>>>(
      offsets.get(), segments, plane);
  CUDA_CHECK_LAUNCH("fill_segment_offsets");
  size_t temp_bytes = 0;
  CUDA_CHECK(cub::DeviceSegmentedReduce::Sum(nullptr, temp_bytes, data, sums.get(), segments,
                                             offsets.get(), offsets.get() + 1, stream_));
  DeviceBuffer<unsigned char> temp(temp_bytes, "the CUB baseline's temporary storage");
  const double ms = time_launch(warmup, reps, flush, [&] {
    CUDA_CHECK(cub::DeviceSegmentedReduce::Sum(temp.get(), temp_bytes, data, sums.get(), segments,
                                               offsets.get(), offsets.get() + 1, stream_));
  });
  if (sums_out) *sums_out = to_host(sums);
  return ms;
}

GpuTiming GpuSession::time_stage(const StageDescriptor& stage, int warmup, int reps, bool flush,
                                 const Progress& progress) {
  if (!stage.is_gpu()) throw std::logic_error("time_stage called with CPU stage " + stage.label());
  DeviceBuffer<unsigned char> workspace = prepare_stage(
      stage, stage.workspace_bytes ? stage.workspace_bytes(problem_) : 0, "stage " + stage.label() + " workspace");
  const DeviceInputs in{x_.get(), weight_.get(), conv_bias_.get(), bias_.get()};
  return time_marked("stage " + stage.label(), warmup, reps, flush, progress, [&](PhaseMarks& marks) {
    stage.run_gpu({problem_, in, pooled_.get(), y_.get(), workspace.get(), stream_, marks});
  });
}

GpuTiming GpuSession::time_pool(const StageDescriptor& stage, const float* conv_out, int warmup, int reps,
                                bool flush, const Progress& progress) {
  if (!stage.run_pool) throw std::logic_error("time_pool called with stage " + stage.label() + ", which has no run_pool");
  DeviceBuffer<unsigned char> workspace =
      prepare_stage(stage, stage.pool_workspace_bytes ? stage.pool_workspace_bytes(problem_) : 0,
                    "stage " + stage.label() + " pool workspace");
  return time_marked("the pool phase of stage " + stage.label(), warmup, reps, flush, progress,
                     [&](PhaseMarks& marks) {
                       stage.run_pool({problem_, conv_out, pooled_.get(), workspace.get(), stream_, marks});
                     });
}

DeviceBuffer<unsigned char> GpuSession::prepare_stage(const StageDescriptor& stage, size_t ws_bytes,
                                                      const std::string& what) {
  DeviceBuffer<unsigned char> workspace(ws_bytes, what);
  // A self-resetting stage needs its workspace zeroed before its first run and leaves it ready
  // for the next: zero it once, here, outside every timed region (the runs reuse it).
  if (stage.self_resetting_workspace && ws_bytes)
    CUDA_CHECK(cudaMemsetAsync(workspace.get(), 0, ws_bytes, stream_));
  // One-time host-side setup (kernel attributes and the like), outside every timed region.
  if (stage.prepare) stage.prepare(problem_);
  return workspace;
}

GpuTiming GpuSession::time_marked(const std::string& what, int warmup, int reps, bool flush,
                                  const Progress& progress, const std::function<void(PhaseMarks&)>& run) {
  EventMarks<PhaseMarks, Phase> marks(stream_);
  marks.reserve(9);  // more phases than any stage marks, and the end; a stage that marks more still works
  std::vector<std::vector<double>> phase_times;
  std::vector<double> totals;
  std::vector<Phase> phases;
  for (int r = 0; r < warmup + reps; ++r) {
    // Poison the outputs (all bits set is a NaN): an element the stage forgets stays NaN.
    poison(pooled_, stream_);
    poison(y_, stream_);
    if (flush) flush_l2();
    marks.reset();
    run(marks);
    marks.mark();
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    if (marks.phases().empty()) throw std::logic_error(what + " marked no phase (call marks.begin)");
    if (r < warmup) continue;
    phases = marks.phases();
    phase_times.resize(phases.size());
    for (size_t i = 0; i < phases.size(); ++i) phase_times[i].push_back(marks.elapsed(i, i + 1));
    totals.push_back(marks.elapsed(0, phases.size()));
    if (progress) progress(r - warmup + 1, reps);
  }
  GpuTiming t;
  for (size_t i = 0; i < phases.size(); ++i) {
    t.phase_spread.push_back(spread_of(phase_times[i]));
    t.phase_ms.emplace_back(phases[i], t.phase_spread.back().median);
  }
  t.total_spread = spread_of(totals);
  t.total_ms = t.total_spread.median;
  t.pooled = to_host(pooled_);
  t.y = to_host(y_);
  return t;
}

}  // namespace ladder
