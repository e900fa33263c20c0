// Prints common/toolkit/conv_shape.hpp's transposed-convolution output size for each line of six
// integers on stdin (in kernel_size stride padding output_padding dilation), one result a line,
// or "overflow". scripts/test_output_size.py compares it with the Python formula and PyTorch's.
#include <iostream>
#include <sstream>
#include <string>

#include "conv_shape.hpp"

int main() {
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    long long v[6];
    for (long long& x : v)
      if (!(in >> x)) {
        std::cerr << "error: expected six integers, got '" << line << "'\n";
        return 2;
      }
    const auto out = ladder::conv_transpose_out_size(v[0], v[1], v[2], v[3], v[4], v[5]);
    if (out)
      std::cout << *out << '\n';
    else
      std::cout << "overflow\n";
  }
  return 0;
}
