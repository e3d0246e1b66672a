// What crosses into and out of the GPU evaluator of a head: captured tensors widened to FP64
// on the device (a quantity's captures as one stack), and comparisons, every one of a call
// read back at once.
#include "reference/gpu/head_evaluator.h"

#include <cstring>

#include "reference/gpu/compare_kernel.h"

namespace fc::gpu {
namespace {

// The Metrics of a comparison made on the device.
Metrics metrics_of(const HeadSpot& spot, const gpu::DeviceComparison& d, std::int64_t rows, std::int64_t cols,
                   BoundChoice judged_by) {
  Metrics m;
  m.judged_by = judged_by;
  m.elements = rows * cols;
  m.nan_kernel = d.nan_kernel;
  m.posinf_kernel = d.posinf_kernel;
  m.neginf_kernel = d.neginf_kernel;
  m.masked_neg_inf = d.masked_neg_inf;
  m.nan_reference = d.nan_reference;
  m.inf_reference = d.inf_reference;
  m.max_abs_error = d.max_abs_error;
  m.max_rel_error = d.max_rel_error;
  m.max_normalized_error = d.max_normalized_error;
  m.over_bound = d.over_bound;
  m.over_tight = d.over_tight;
  m.max_ulp = d.max_ulp;
  const auto report = [&](const gpu::ReportedElement& e) {
    const std::int64_t r = e.index / cols, c = e.index % cols;
    return ElementReport{{spot.b, spot.h, spot.row_of(r), spot.per_row ? -1 : spot.col_offset + c},
                         e.kernel, e.reference, e.bound, e.tight};
  };
  if (d.first_over_tight.index >= 0) m.first_failure = report(d.first_over_tight);
  if (d.first_over_bound.index >= 0) m.first_worst_case_failure = report(d.first_over_bound);
  if (d.worst.index >= 0) {
    m.worst = report(d.worst);
    m.max_tight_error = d.worst_tight;
  }
  return m;
}

// Rows [first, first + count) of a head of `cols` elements stored at `head` on the host, or its
// rows `listed` when given, widened to FP64 into `out` on the device: one widening, listed rows
// gathered on the host first.
void widen_from_host(const unsigned char* head, DType t, std::int64_t first, std::int64_t count,
                     const std::vector<std::int64_t>* listed, std::int64_t cols, double scale, double* out,
                     cudaStream_t s) {
  const std::size_t row_bytes = static_cast<std::size_t>(cols) * dtype_size(t);
  if (!listed) {
    gpu::widen(head + static_cast<std::size_t>(first) * row_bytes, gpu::Memory::host, t, count * cols, scale, out, s);
    return;
  }
  std::vector<unsigned char> gathered(listed->size() * row_bytes);
  for (std::size_t r = 0; r < listed->size(); ++r) {
    std::memcpy(gathered.data() + r * row_bytes, head + static_cast<std::size_t>((*listed)[r]) * row_bytes, row_bytes);
  }
  // widen() has copied a host source before it returns.
  gpu::widen(gathered.data(), gpu::Memory::host, t, count * cols, scale, out, s);
}

}  // namespace

std::vector<Bounded> GpuHeadEvaluator::captured_each(const std::vector<CapturedTensor>& tensors, std::int64_t b,
                                                     std::int64_t h, const std::vector<std::int64_t>* rows,
                                                     double scale, DType format) const {
  if (tensors.empty()) return {};
  bool stackable = true;
  for (const CapturedTensor& t : tensors) stackable = stackable && gpu::widens(t.dtype) && t.dims == tensors[0].dims;
  // A format not widened here: converted on the host.
  if (!stackable) return HeadEvaluator::captured_each(tensors, b, h, rows, scale, format);
  const HeadLayout l = head_layout(tensors[0].dims, b, h);
  const std::int64_t count = rows ? static_cast<std::int64_t>(rows->size()) : l.rows;
  for (std::int64_t r = 0; rows && r < count; ++r) {
    if ((*rows)[static_cast<std::size_t>(r)] < 0 || (*rows)[static_cast<std::size_t>(r)] >= l.rows) {
      throw Error("gpu reference: captured row " + std::to_string((*rows)[static_cast<std::size_t>(r)]) +
                  " outside the head's " + std::to_string(l.rows));
    }
  }
  const std::int64_t n = static_cast<std::int64_t>(tensors.size());
  DeviceBounded stack;
  stack.format = format;
  stack.value = DeviceMatrix(n * count, l.cols, s_);
  // Rows listed unless consecutive; the device's tensors in one widening (its tables cost a
  // synchronization, a launch a row would cost far more), the host's each in one.
  const std::optional<std::int64_t> first = rows ? first_of_consecutive(*rows) : std::optional<std::int64_t>(0);
  const std::vector<std::int64_t>* listed = first ? nullptr : rows;
  const DType dtype = tensors[0].dtype;
  const auto head_of = [&](const CapturedTensor& t) {
    return static_cast<const unsigned char*>(t.host ? t.host->data() : t.device) +
           static_cast<std::size_t>(l.offset) * dtype_size(t.dtype);
  };
  const auto widen_on_device = [&](const std::vector<const void*>& heads, double* out) {
    if (listed) {
      gpu::widen_rows_each(heads, dtype, *listed, l.cols, scale, out, s_);
    } else {
      gpu::widen_rows_each(heads, dtype, *first, count, l.cols, scale, out, s_);
    }
  };
  bool on_device = true;
  for (const CapturedTensor& t : tensors) on_device = on_device && !t.host;
  if (on_device) {
    std::vector<const void*> heads;
    for (const CapturedTensor& t : tensors) heads.push_back(head_of(t));
    widen_on_device(heads, stack.value.data());
  } else {
    for (std::int64_t i = 0; i < n; ++i) {
      const CapturedTensor& t = tensors[static_cast<std::size_t>(i)];
      double* out = stack.value.row(i * count);
      if (t.host) {
        widen_from_host(head_of(t), dtype, first.value_or(0), count, listed, l.cols, scale, out, s_);
      } else {
        widen_on_device({head_of(t)}, out);
      }
    }
  }
  return gpu::tiles_of(std::move(stack), n);
}

std::vector<Metrics> GpuHeadEvaluator::compare_each(const std::vector<CompareItem>& items,
                                                    BoundChoice judged_by) const {
  std::vector<DevicePtr> kernels, references;
  for (const CompareItem& i : items) {
    kernels.push_back(device_of(*i.kernel));
    references.push_back(device_of(*i.reference));
    const DeviceBounded &k = *kernels.back(), &ref = *references.back();
    if (i.rows > std::min(k.value.rows(), ref.value.rows()) || i.cols > std::min(k.value.cols(), ref.value.cols())) {
      throw Error("compare: the compared extent is larger than the kernel tensor or the reference");
    }
  }
  // Chains of items whose kernel tensors and references each follow the previous one's in
  // memory, whatever order the items come in (a block's outputs interleave the quantities tile
  // by tile): each chain one segmented comparison.
  std::vector<std::vector<std::size_t>> chains;
  std::map<std::pair<const double*, const double*>, std::size_t> next_of;  // where a chain's next item starts
  for (std::size_t i = 0; i < items.size(); ++i) {
    const DeviceBounded &k = *kernels[i], &ref = *references[i];
    const auto it = next_of.find({k.value.data(), ref.value.data()});
    bool joined = false;
    if (it != next_of.end()) {
      const std::size_t last = chains[it->second].back();
      const CompareItem &a = items[last], &b = items[i];
      joined = a.rows == b.rows && a.cols == b.cols && a.kernel_format == b.kernel_format &&
               follows(*kernels[last], k) && follows(*references[last], ref);
    }
    const std::size_t chain = joined ? it->second : chains.size();
    if (joined) {
      next_of.erase(it);
      chains[chain].push_back(i);
    } else {
      chains.push_back({i});
    }
    if (k.value.size() > 0 && ref.value.size() > 0) {
      next_of[{k.value.data() + k.value.size(), ref.value.data() + ref.value.size()}] = chain;
    }
  }
  // Every chain compared on the device into its own stretch of the results, then one
  // read-back of all of them.
  std::vector<gpu::DeviceComparison> found(items.size());
  auto* results = static_cast<gpu::DeviceComparison*>(gpu::allocate_async(items.size() * sizeof found[0], s_));
  try {
    std::vector<std::size_t> order;  // item of each result
    for (const std::vector<std::size_t>& chain : chains) {
      const CompareItem& head = items[chain[0]];
      const std::size_t at = order.size();
      order.insert(order.end(), chain.begin(), chain.end());
      if (head.rows * head.cols == 0) continue;  // nothing compared: as found (none)
      std::vector<DevicePtr> k, ref;
      for (std::size_t i : chain) {
        k.push_back(kernels[i]);
        ref.push_back(references[i]);
      }
      gpu::compare_segments(gpu::stack_view(k, 0, chain.size())->value, *gpu::stack_view(ref, 0, chain.size()),
                            static_cast<std::int64_t>(chain.size()), head.rows, head.cols, head.kernel_format,
                            results + at, s_);
    }
    std::vector<gpu::DeviceComparison> read(items.size());
    FC_CUDA(cudaMemcpyAsync(read.data(), results, items.size() * sizeof read[0], cudaMemcpyDeviceToHost, s_));
    FC_CUDA(cudaStreamSynchronize(s_));
    for (std::size_t j = 0; j < order.size(); ++j) {
      const CompareItem& item = items[order[j]];
      if (item.rows * item.cols > 0) found[order[j]] = read[j];
    }
  } catch (...) {
    cudaFreeAsync(results, s_);
    throw;
  }
  FC_CUDA(cudaFreeAsync(results, s_));
  std::vector<Metrics> out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    out.push_back(metrics_of(items[i].spot, found[i], items[i].rows, items[i].cols, judged_by));
  }
  return out;
}

}  // namespace fc::gpu
