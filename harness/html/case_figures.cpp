#include "harness/html/case_figures.h"

#include <cmath>
#include <functional>
#include <sstream>

#include "core/parallel.h"
#include "harness/html/row_stats.h"
#include "harness/io/snapshot.h"
#include "reference/attention.h"
#include "reports/descriptors.h"
#include "reports/row_plot.h"
#include "stages/flags.h"

namespace fc {
namespace {

// What an element of a captured tensor holds; its own buffer's poison is an unwritten element.
ElementState state_of(const HostTensor& t, std::int64_t flat, int buffer_id, double value) {
  if (std::isinf(value)) return ElementState::inf;
  if (!std::isnan(value)) return ElementState::finite;
  std::uint32_t bits = 0;
  if (dtype_size(t.dtype()) == 4) bits = t.data_as<std::uint32_t>()[flat];
  if (dtype_size(t.dtype()) == 2) bits = t.data_as<std::uint16_t>()[flat];
  return buffer_id != 0 && poison_id(t.dtype(), bits) == buffer_id ? ElementState::unwritten : ElementState::nan;
}

Layer layer_of(ElementState s) {
  switch (s) {
    case ElementState::nan: return Layer::nan;
    case ElementState::inf: return Layer::inf;
    case ElementState::unwritten: return Layer::unwritten;
    case ElementState::finite: break;
  }
  return Layer::error;
}

// One output's tensors: the kernel's, and the reference and bound of the comparison shown.
struct OutputTensors {
  const OutputResult& result;
  const HostTensor& kernel;
  const HostTensor* reference = nullptr;  // null: not compared (masks only)
  const HostTensor* bound = nullptr;
  int buffer_id = 0;

  double normalized(std::int64_t flat, double k) const {
    return normalized_error(k, reference->get(flat), bound->get(flat));
  }
  // Element `flat`: its normalized error (when compared) and state.
  void element(std::int64_t flat, double& normalized_out, ElementState& state) const {
    const double k = kernel.get(flat) * result.value_scale;
    state = state_of(kernel, flat, buffer_id, k);
    normalized_out = reference ? normalized(flat, k) : 0.0;
  }
};

// The element at (row, col) of an image, as a marker.
using MarkerAt = std::function<HtmlMarker(std::int64_t row, std::int64_t col)>;

// The images of one heatmap set: the error layer (when compared) and every non-empty mask.
// `marker` (the first divergence, else the first bad element) goes on the error layer, else
// on the mask of the marked element; every other mask marks its own first element.
std::vector<HtmlImage> images_of(const HeatmapLayers& layers, HtmlImage base, std::optional<HtmlMarker> marker,
                                 ElementState marked_state, const MarkerAt& marker_at) {
  std::vector<HtmlImage> images;
  const Layer marker_layer = layers.with_error() ? Layer::error : layer_of(marked_state);
  for (Layer layer : {Layer::error, Layer::nan, Layer::inf, Layer::unwritten}) {
    const bool shown = layer == Layer::error ? layers.with_error() : layers.count(layer) > 0;
    if (!shown) continue;
    HtmlImage image = base;
    image.layer = layer;
    image.geometry = layers.geometry();
    image.png = layers.png(layer);
    image.count = layers.count(layer);
    if (layer == marker_layer && marker) {
      image.marker = marker;
    } else if (const auto at = layers.first(layer)) {
      image.marker = marker_at(at->first, at->second);
    }
    images.push_back(std::move(image));
  }
  return images;
}

std::string x_axis_of(Quantity q) {
  if (is_row_quantity(q)) return "head";
  return q == Quantity::scores || q == Quantity::probs || q == Quantity::p_tilde ? "key" : "dim";
}

// Per head, rows x columns of a [B,H,R,C] output.
std::vector<HtmlImage> head_images(const OutputTensors& t, const std::optional<Divergence>& divergence,
                                   std::int64_t max_side) {
  const OutputResult& r = t.result;
  const std::int64_t B = r.dims[0], H = r.dims[1], R = r.dims[2], C = r.dims[3];
  const bool is_first = divergence && divergence->output == r.name;
  std::vector<std::vector<HtmlImage>> per_head(static_cast<std::size_t>(B * H));
  parallel_for(B * H, [&](std::int64_t bh) {
    const std::int64_t b = bh / H, h = bh % H;
    HeatmapLayers layers(R, C, max_side, t.reference != nullptr);
    std::vector<double> normalized(static_cast<std::size_t>(C));
    std::vector<ElementState> states(static_cast<std::size_t>(C));
    const std::int64_t head_base = bh * R * C;
    for (std::int64_t row = 0; row < R; ++row) {
      for (std::int64_t col = 0; col < C; ++col) {
        t.element(head_base + row * C + col, normalized[static_cast<std::size_t>(col)], states[static_cast<std::size_t>(col)]);
      }
      layers.add_row(row, normalized.data(), states.data());
    }
    std::optional<HtmlMarker> marker;
    if (is_first && divergence->index.b == b && divergence->index.h == h) {
      const Index4& at = divergence->index;
      const std::int64_t x = at.col - r.col_offset;
      if (at.row >= 0 && at.row < R && x >= 0 && x < C) marker = HtmlMarker{at, x, at.row, true};
    }
    const MarkerAt marker_at = [&](std::int64_t row, std::int64_t col) {
      return HtmlMarker{{b, h, row, col + r.col_offset}, col, row, false};
    };
    if (!marker && layers.first_bad()) marker = marker_at(layers.first_bad()->first, layers.first_bad()->second);
    ElementState marked = ElementState::finite;
    if (marker) {
      double ignored;
      t.element(head_base + marker->y * C + marker->x, ignored, marked);
    }
    HtmlImage base;
    base.b = b;
    base.h = h;
    base.x_axis = x_axis_of(r.quantity);
    base.x_offset = r.col_offset;
    base.heads = H;
    per_head[static_cast<std::size_t>(bh)] = images_of(layers, base, marker, marked, marker_at);
  });
  std::vector<HtmlImage> images;
  for (std::vector<HtmlImage>& head : per_head) {
    for (HtmlImage& image : head) images.push_back(std::move(image));
  }
  return images;
}

// Rows x heads (column b*H + h) of a [B,H,R] per-row output, in one image.
std::vector<HtmlImage> row_quantity_images(const OutputTensors& t, const std::optional<Divergence>& divergence,
                                           std::int64_t max_side) {
  const OutputResult& r = t.result;
  const std::int64_t B = r.dims[0], H = r.dims[1], R = r.dims[2];
  HeatmapLayers layers(R, B * H, max_side, t.reference != nullptr);
  std::vector<double> normalized(static_cast<std::size_t>(B * H));
  std::vector<ElementState> states(static_cast<std::size_t>(B * H));
  for (std::int64_t row = 0; row < R; ++row) {
    for (std::int64_t bh = 0; bh < B * H; ++bh) {
      t.element(bh * R + row, normalized[static_cast<std::size_t>(bh)], states[static_cast<std::size_t>(bh)]);
    }
    layers.add_row(row, normalized.data(), states.data());
  }
  std::optional<HtmlMarker> marker;
  if (divergence && divergence->output == r.name) {
    const Index4& at = divergence->index;
    if (at.b >= 0 && at.b < B && at.h >= 0 && at.h < H && at.row >= 0 && at.row < R) {
      marker = HtmlMarker{at, at.b * H + at.h, at.row, true};
    }
  }
  const MarkerAt marker_at = [H](std::int64_t row, std::int64_t x) {
    return HtmlMarker{{x / H, x % H, row, -1}, x, row, false};
  };
  if (!marker && layers.first_bad()) marker = marker_at(layers.first_bad()->first, layers.first_bad()->second);
  ElementState marked = ElementState::finite;
  if (marker) {
    double ignored;
    t.element(marker->x * R + marker->y, ignored, marked);
  }
  HtmlImage base;
  base.x_axis = "head";
  base.heads = H;
  return images_of(layers, base, marker, marked, marker_at);
}

// Result i's capture and the index of its references: the trace build's outputs first, one
// per capture; then the production build's, which share the end-to-end reference of the trace
// build's same output (their own "local" comparison is with that output, bit for bit).
const Captured& capture_of(const TraceRun& run, std::size_t i, std::size_t& reference_index) {
  reference_index = i;
  if (i < run.captured.size()) return run.captured[i];
  const Captured& produced = run.production.results.at(i - run.captured.size());
  reference_index = run.captured.size();
  for (std::size_t t = 0; t < run.captured.size(); ++t) {
    if (run.captured[t].stage == produced.stage && run.captured[t].output == produced.output) reference_index = t;
  }
  return produced;
}

HtmlHeatmaps heatmaps_of(const TraceRun& run, const CaseResult& result, const std::vector<OutputReferences>& references,
                         std::size_t i, const std::string& why, std::int64_t max_side) {
  const OutputResult& r = result.outputs[i];
  HtmlHeatmaps set;
  set.output = r.name;
  set.why = why;
  std::size_t reference_index = i;
  const Captured& captured = capture_of(run, i, reference_index);
  const HostTensor& kernel = captured.tensor;
  if (!r.present || !r.capture_problem.empty() || kernel.empty()) {
    set.note = !r.present ? "not captured by the implementation"
               : !r.capture_problem.empty() ? "not drawn: " + r.capture_problem
                                            : "no tensor: this run did not keep " + r.name;
    return set;
  }
  OutputTensors t{r, kernel};
  t.buffer_id = captured.view.buffer_id;
  const OutputReferences* refs = reference_index < references.size() ? &references[reference_index] : nullptr;
  if (refs && !refs->end_to_end.empty()) {
    const bool local = !r.production && heatmap_uses_local(r);
    // The bound that decides the verdict (docs/error-model.md): the tight one unless --bound worst-case.
    const HostTensor& tight = local ? refs->local_tight : refs->end_to_end_tight;
    const bool by_tight = r.end_to_end.judged_by == BoundChoice::tight && !tight.empty();
    set.comparison = std::string(local ? "stage-local" : "end-to-end") + (by_tight ? ", tight bound" : ", worst-case bound");
    t.reference = local ? &refs->local : &refs->end_to_end;
    t.bound = by_tight ? &tight : local ? &refs->local_bound : &refs->end_to_end_bound;
  } else {
    set.note = "not compared with a reference: masks only";
  }
  set.images = r.dims.size() == 4 ? head_images(t, result.divergence, max_side)
                                  : row_quantity_images(t, result.divergence, max_side);
  return set;
}

std::vector<HtmlRowPlots> row_plots(const AttentionInputs& inputs, const TraceRun& run, const CaseResult& result,
                                    std::string& source_text) {
  const KernelRowSource source = kernel_row_source(run, result.outputs);
  source_text = source.description;
  const Shape& shape = inputs.problem.shape;
  std::vector<HtmlRowPlots> plots(static_cast<std::size_t>(shape.batch * shape.heads));
  parallel_for(shape.batch * shape.heads, [&](std::int64_t bh) {
    const std::int64_t b = bh / shape.heads, h = bh % shape.heads;
    const RowStats ref = reference_row_stats(head_inputs(inputs, b, h, BiasForm::mask));
    const RowStats kernel = kernel_row_stats(source, run, result.outputs, b, h);
    HtmlRowPlots& p = plots[static_cast<std::size_t>(bh)];
    p.b = b;
    p.h = h;
    const std::string head = " (b=" + std::to_string(b) + " h=" + std::to_string(h) + ")";
    p.svgs.push_back(row_plot_svg("row max" + head, {ref.max, kernel.max}));
    p.svgs.push_back(row_plot_svg("row sum" + head, {ref.sum, kernel.sum}));
    p.svgs.push_back(row_plot_svg("lse" + head, {ref.lse, kernel.lse}));
  });
  return plots;
}

}  // namespace

bool heatmap_uses_local(const OutputResult& r) { return !r.local.passed(); }

HtmlCase case_figures(const AttentionInputs& inputs, const TraceRun& run, const CaseResult& result,
                      const std::vector<OutputReferences>& references, const FigureOptions& options) {
  HtmlCase c;
  c.result = result;
  if (!result.descriptors.empty()) {
    std::ostringstream text;
    write_descriptors(text, &run.graph, result.descriptors);
    c.descriptors = text.str();
  }
  if (result.outputs.size() != run.captured.size() + run.production.results.size()) return c;

  const Shape& shape = inputs.problem.shape;
  const std::int64_t max_side = options.max_side > 0 ? options.max_side : shape.batch * shape.heads <= 4 ? 512 : 256;
  // The first divergence's output first, then those asked for in execution order.
  for (bool first_pass : {true, false}) {
    for (std::size_t i = 0; i < result.outputs.size(); ++i) {
      const OutputResult& r = result.outputs[i];
      const bool first = result.divergence && result.divergence->output == r.name;
      const bool asked = !options.stages.empty() && stage_selected(options.stages, r.name);
      if (first_pass ? first : asked && !first) {
        c.heatmaps.push_back(heatmaps_of(run, result, references, i, first ? "first divergence" : "asked for", max_side));
      }
    }
  }
  c.rows = row_plots(inputs, run, result, c.row_source);
  return c;
}

}  // namespace fc
