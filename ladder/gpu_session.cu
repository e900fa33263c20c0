#include "gpu_session.hpp"

#include <algorithm>
#include <cub/device/device_segmented_reduce.cuh>
#include <stdexcept>

namespace ladder {

namespace {

/// The floor: read every byte of x once with 16-byte loads in a grid-stride loop and keep a
/// per-block partial sum, so the compiler cannot drop the loads. x is 16-byte aligned
/// (cudaMalloc); the n % 4 tail is read with scalar loads by block 0.
__global__ void streaming_read_kernel(const float* __restrict__ x, int64_t n, float* __restrict__ sink) {
  const float4* x4 = reinterpret_cast<const float4*>(x);
  const int64_t n4 = n / 4;
  float acc = 0.0f;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n4;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float4 v = x4[i];
    acc += (v.x + v.y) + (v.z + v.w);
  }
  if (blockIdx.x == 0)
    for (int64_t i = n4 * 4 + threadIdx.x; i < n; i += blockDim.x) acc += x[i];
  if (acc == 1.2345e-30f) sink[blockIdx.x] = acc;  // almost never true, but not provably false
}

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

/// Records one event per marked phase into a reusable pool.
class EventMarks : public PhaseMarks {
 public:
  explicit EventMarks(cudaStream_t s) : stream_(s) {}
  ~EventMarks() override {
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
  }
  void begin(Phase phase) override { record(); phases_.push_back(phase); }
  void record() {
    const size_t i = used();
    if (i == events_.size()) {
      cudaEvent_t e;
      CUDA_CHECK(cudaEventCreate(&e));
      events_.push_back(e);
    }
    CUDA_CHECK(cudaEventRecord(events_[i], stream_));
    ++recorded_;
  }
  size_t used() const { return recorded_; }
  void start_rep() { phases_.clear(); recorded_ = 0; }
  const std::vector<Phase>& phases() const { return phases_; }
  float elapsed(size_t from, size_t to) const {
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, events_[from], events_[to]));
    return ms;
  }

 private:
  cudaStream_t stream_;
  std::vector<cudaEvent_t> events_;
  std::vector<Phase> phases_;
  size_t recorded_ = 0;
};

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

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

GpuSession::GpuSession(const Problem& p, const HostInputs& in)
    : problem_(p),
      x_(upload(in.x, "x " + format_bytes(4.0 * double(in.x.size())))),
      weight_(upload(in.weight, "weight")),
      conv_bias_(upload(in.conv_bias, "conv_bias")),
      bias_(upload(in.bias, "bias")),
      pooled_(size_t(p.pooled_elems()), "pooled"),
      y_(size_t(p.batch), "y") {
  int dev = 0, l2 = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  // Writing twice the L2 size evicts whatever a previous repetition left there.
  l2_flush_ = DeviceBuffer<unsigned char>(size_t(2) * size_t(l2), "L2 flush buffer");
  CUDA_CHECK(cudaStreamCreate(&stream_));
}

GpuSession::~GpuSession() {
  if (stream_) cudaStreamDestroy(stream_);
}

void GpuSession::flush_l2() {
  CUDA_CHECK(cudaMemsetAsync(l2_flush_.get(), 0, l2_flush_.bytes(), stream_));
}

double GpuSession::time_streaming_read(int warmup, int reps, bool flush) {
  int dev = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  constexpr int kBlock = 512;
  const unsigned blocks = unsigned(sms) * 4;  // a full wave of resident blocks, then grid-stride
  DeviceBuffer<float> sink(blocks, "streaming-read sink");
  return time_launch(warmup, reps, flush, [&] {
    streaming_read_kernel<<<blocks, kBlock, 0, stream_>>>(x_.get(), int64_t(x_.size()), sink.get());
    CUDA_CHECK_LAUNCH("streaming_read_kernel");
  });
}

double GpuSession::time_launch(int warmup, int reps, bool flush, const std::function<void()>& launch) {
  EventMarks marks(stream_);
  std::vector<double> times;
  for (int r = 0; r < warmup + reps; ++r) {
    if (flush) flush_l2();
    marks.start_rep();
    marks.record();
    launch();
    marks.record();
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    if (r >= warmup) times.push_back(marks.elapsed(0, 1));
  }
  return median(times);
}

double GpuSession::time_cub_segmented_sum(int warmup, int reps, bool flush) {
  const int64_t segments = problem_.pooled_elems(), plane = problem_.out_h() * problem_.out_w();
  DeviceBuffer<float> data(size_t(problem_.out_elems()), "the CUB baseline's convT-sized input");
  DeviceBuffer<float> sums(size_t(segments), "the CUB baseline's sums");
  DeviceBuffer<int64_t> offsets(size_t(segments + 1), "the CUB baseline's segment offsets");
  fill_pseudo_random<<<1024, 256, 0, stream_>>>(data.get(), int64_t(data.size()));
  CUDA_CHECK_LAUNCH("fill_pseudo_random");
  fill_segment_offsets<<<blocks_for(segments + 1, 256, "fill_segment_offsets"), 256, 0, stream_>>>(
      offsets.get(), segments, plane);
  CUDA_CHECK_LAUNCH("fill_segment_offsets");
  size_t temp_bytes = 0;
  CUDA_CHECK(cub::DeviceSegmentedReduce::Sum(nullptr, temp_bytes, data.get(), sums.get(), segments,
                                             offsets.get(), offsets.get() + 1, stream_));
  DeviceBuffer<unsigned char> temp(temp_bytes, "the CUB baseline's temporary storage");
  return time_launch(warmup, reps, flush, [&] {
    CUDA_CHECK(cub::DeviceSegmentedReduce::Sum(temp.get(), temp_bytes, data.get(), sums.get(), segments,
                                               offsets.get(), offsets.get() + 1, stream_));
  });
}

GpuTiming GpuSession::time_stage(const StageDescriptor& stage, int warmup, int reps, bool flush,
                                 const Progress& progress) {
  if (!stage.is_gpu()) throw std::logic_error("time_stage called with CPU stage " + stage.label());
  const size_t ws_bytes = stage.workspace_bytes ? stage.workspace_bytes(problem_) : 0;
  DeviceBuffer<unsigned char> workspace(ws_bytes, "stage " + stage.label() + " workspace");
  EventMarks marks(stream_);
  GpuStageArgs args{problem_, {x_.get(), weight_.get(), conv_bias_.get(), bias_.get()},
                    pooled_.get(), y_.get(), workspace.get(), stream_, marks};

  std::vector<std::vector<double>> phase_times;
  std::vector<double> totals;
  std::vector<Phase> phases;
  for (int r = 0; r < warmup + reps; ++r) {
    // Poison the outputs (all bits set is a NaN): an element the stage forgets stays NaN.
    CUDA_CHECK(cudaMemsetAsync(pooled_.get(), 0xFF, pooled_.bytes(), stream_));
    CUDA_CHECK(cudaMemsetAsync(y_.get(), 0xFF, y_.bytes(), stream_));
    if (flush) flush_l2();
    marks.start_rep();
    stage.run_gpu(args);
    marks.record();
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    if (marks.phases().empty())
      throw std::logic_error("stage " + stage.label() + " marked no phase (call marks.begin)");
    if (r < warmup) continue;
    phases = marks.phases();
    phase_times.resize(phases.size());
    for (size_t i = 0; i < phases.size(); ++i) phase_times[i].push_back(marks.elapsed(i, i + 1));
    totals.push_back(marks.elapsed(0, phases.size()));
    if (progress) progress(r - warmup + 1, reps);
  }
  GpuTiming t;
  for (size_t i = 0; i < phases.size(); ++i) t.phase_ms.emplace_back(phases[i], median(phase_times[i]));
  t.total_ms = median(totals);
  t.pooled = to_host(pooled_);
  t.y = to_host(y_);
  return t;
}

}  // namespace ladder
