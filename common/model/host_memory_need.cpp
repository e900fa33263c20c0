#include "host_memory_need.hpp"

#include <omp.h>

#include <algorithm>
#include <initializer_list>

namespace ladder {

namespace {

double sum_of(std::initializer_list<double> v) {
  double s = 0;
  for (double x : v) s += x;
  return s;
}

}  // namespace

HostMemoryNeed ladder_host_memory_need(const Problem& p, int stages, bool literal_cpu_stage) {
  // Doubles throughout: the products of a problem too large for memory can overflow int64.
  const double f32 = 4, f64 = 8;
  const double batch = double(p.batch), cin = double(p.in_channels), cout = double(p.out_channels);
  const double planes = batch * cin, pooled = batch * cout, taps = double(p.taps());
  const double outputs = pooled + batch;  // pooled and y
  HostMemoryNeed n;
  n.items.push_back({"x", f32 * planes * double(p.in_h) * double(p.in_w)});
  n.items.push_back({"weight and biases", f32 * (cin * double(p.out_per_group()) * taps + 2 * cout)});
  // R (planes x taps), per-plane |x| means, pooled, magnitudes, y; per OpenMP thread one row
  // prefix (W + 1) and kW column prefixes (H + 1).
  const double scratch = double(omp_get_max_threads()) *
                         (double(p.in_w) + 1 + double(p.kernel_size.w) * (double(p.in_h) + 1));
  n.items.push_back({"the fp64 oracle", f64 * sum_of({planes * taps, planes, 2 * pooled, batch, scratch})});
  n.items.push_back({"tolerances", 3 * f64 * outputs});  // fp32, fp64 and exact-input bounds
  n.items.push_back({"stage outputs", double(stages) * f64 * outputs + f32 * outputs});
  if (literal_cpu_stage)
    n.items.push_back({"stage 00's fp64 convT output", f64 * batch * cout * double(p.out_h()) * double(p.out_w())});
  std::stable_sort(n.items.begin(), n.items.end(),
                   [](const HostMemoryItem& a, const HostMemoryItem& b) { return a.bytes > b.bytes; });
  return n;
}

}  // namespace ladder
