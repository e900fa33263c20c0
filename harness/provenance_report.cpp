#include "provenance_report.hpp"

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace ladder {

std::string describe_provenance(const Provenance& pv) {
  std::ostringstream out;
  out << "build:   git " << pv.git_commit
      << (pv.git_dirty == "yes" ? " with uncommitted changes" : pv.git_dirty == "no" ? "" : " (clean or not: unknown)")
      << "; nvcc " << pv.nvcc_version << ", CUDA runtime " << pv.cuda_runtime_version << "; driver "
      << (pv.driver_cuda_version == "none" ? std::string("none")
                                           : pv.driver_release + " (CUDA " + pv.driver_cuda_version + ")")
      << "\n";
  out << "host:    " << pv.host_cpu << "; run " << pv.date_utc << "\n";
  return out.str();
}

nlohmann::json provenance_to_json(const Provenance& pv) {
  return {{"git_commit", pv.git_commit},
          {"git_dirty", pv.git_dirty},
          {"nvcc_version", pv.nvcc_version},
          {"cuda_runtime_version", pv.cuda_runtime_version},
          {"driver_cuda_version", pv.driver_cuda_version},
          {"driver_release", pv.driver_release},
          {"host_cpu", pv.host_cpu},
          {"date_utc", pv.date_utc}};
}

void write_json_file(const nlohmann::json& j, const std::string& path) {
  std::ofstream f(path);
  if (!f) throw std::runtime_error("cannot write JSON results to '" + path + "'");
  f << j.dump(2) << "\n";
  if (!f) throw std::runtime_error("error while writing JSON results to '" + path + "'");
}

void require_writable(const std::string& path) {
  std::ofstream f(path, std::ios::app);
  if (!f) throw std::runtime_error("cannot write JSON results to '" + path + "'");
}

}  // namespace ladder
