#include "stages/tensor_view.h"

#include <algorithm>
#include <numeric>

namespace fc {

Dims TensorView::effective_strides() const {
  if (!strides.empty()) return strides;
  Dims s(dims.size(), 1);
  for (std::size_t i = dims.size(); i-- > 1;) s[i - 1] = s[i] * dims[i];
  return s;
}

std::int64_t TensorView::logical_index(std::int64_t offset) const {
  const Dims s = effective_strides();
  // Peel dimensions off from the largest stride down: a dense permutation of the dims.
  std::vector<std::size_t> order(dims.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return s[a] > s[b]; });
  Dims coord(dims.size(), 0);
  for (std::size_t d : order) {
    coord[d] = offset / s[d];
    offset %= s[d];
  }
  std::int64_t logical = 0;
  for (std::size_t d = 0; d < dims.size(); ++d) logical = logical * dims[d] + coord[d];
  return logical;
}

}  // namespace fc
