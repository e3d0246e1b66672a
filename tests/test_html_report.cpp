// The HTML report: PNG heatmaps that decode to what was drawn, max-pooling that keeps one
// bad element visible, markers on the element a planted fault must be found at, row values
// that agree with the reference on a faithful run, a 64-head S 4096 report under 20 MB, and
// the commands' --html files. tests/browser/ checks the same pages in a real browser.
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "catch.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "harness/faults/matrix.h"
#include "harness/html/case_figures.h"
#include "harness/html/row_stats.h"
#include "harness/inputs.h"
#include "harness/io/snapshot.h"
#include "harness/trace/judge.h"
#include "kernels/implementation.h"
#include "reference/attention.h"
#include "reports/data_uri.h"
#include "reports/heatmap.h"
#include "reports/html_report.h"
#include "reports/png.h"
#include "reports/row_plot.h"

namespace fc {
namespace {

namespace fs = std::filesystem;
constexpr double kInf = std::numeric_limits<double>::infinity();

std::uint32_t be32(const std::string& s, std::size_t at) {
  std::uint32_t v = 0;
  for (std::size_t i = 0; i < 4; ++i) v = (v << 8) | static_cast<std::uint8_t>(s[at + i]);
  return v;
}

struct DecodedPng {
  std::int64_t width = 0, height = 0;
  std::vector<Rgb> palette;
  std::vector<std::uint8_t> pixels;  // palette indices
  Rgb at(std::int64_t x, std::int64_t y) const { return palette.at(pixels.at(static_cast<std::size_t>(y * width + x))); }
};

// An independent reading of what the encoder wrote: signature, chunk CRCs, IHDR, PLTE, the
// inflated IDAT with its filter bytes.
DecodedPng decode_png(const std::string& png) {
  REQUIRE(png.size() > 8);
  REQUIRE(png.compare(0, 8, std::string("\x89PNG\r\n\x1a\n", 8)) == 0);
  DecodedPng d;
  std::string idat;
  bool ended = false;
  for (std::size_t at = 8; at < png.size();) {
    const std::uint32_t length = be32(png, at);
    const std::string type = png.substr(at + 4, 4), data = png.substr(at + 8, length);
    const std::string typed = png.substr(at + 4, 4 + length);
    const auto crc = static_cast<std::uint32_t>(
        crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(typed.data()), static_cast<uInt>(typed.size())));
    CHECK(be32(png, at + 8 + length) == crc);
    if (type == "IHDR") {
      d.width = be32(data, 0);
      d.height = be32(data, 4);
      CHECK(data.substr(8) == std::string{8, 3, 0, 0, 0});
    } else if (type == "PLTE") {
      for (std::size_t i = 0; i + 2 < data.size(); i += 3) {
        d.palette.push_back({static_cast<std::uint8_t>(data[i]), static_cast<std::uint8_t>(data[i + 1]),
                             static_cast<std::uint8_t>(data[i + 2])});
      }
    } else if (type == "IDAT") {
      idat += data;
    } else if (type == "IEND") {
      ended = true;
    }
    at += 12 + length;
  }
  CHECK(ended);
  std::string raw(static_cast<std::size_t>((d.width + 1) * d.height), '\0');
  uLongf size = raw.size();
  REQUIRE(uncompress(reinterpret_cast<Bytef*>(&raw[0]), &size, reinterpret_cast<const Bytef*>(idat.data()),
                     static_cast<uLong>(idat.size())) == Z_OK);
  REQUIRE(size == raw.size());
  for (std::int64_t y = 0; y < d.height; ++y) {
    CHECK(raw[static_cast<std::size_t>(y * (d.width + 1))] == 0);  // filter: none
    for (std::int64_t x = 0; x < d.width; ++x) {
      d.pixels.push_back(static_cast<std::uint8_t>(raw[static_cast<std::size_t>(y * (d.width + 1) + 1 + x)]));
    }
  }
  return d;
}

bool is_alarm(Layer layer, const Rgb& c) {
  for (const Swatch& s : swatches(layer)) {
    if (s.color == c) return s.alarm;
  }
  FAIL("colour not in the legend of " << layer_name(layer));
  return false;
}

// A cheap, well-mixed hash (splitmix64) for synthetic data.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

TEST_CASE("a PNG the encoder writes decodes to its pixels and palette", "[html]") {
  const std::vector<Rgb> palette = {{0, 0, 0}, {255, 0, 0}, {1, 2, 3}};
  std::vector<std::uint8_t> pixels;
  for (int i = 0; i < 7 * 5; ++i) pixels.push_back(static_cast<std::uint8_t>((i * 7) % 3));
  const DecodedPng d = decode_png(encode_indexed_png(7, 5, pixels, palette));
  CHECK(d.width == 7);
  CHECK(d.height == 5);
  CHECK(d.palette == palette);
  CHECK(d.pixels == pixels);
  CHECK_THROWS(encode_indexed_png(7, 5, std::vector<std::uint8_t>(35, 3), palette));  // index outside the palette
  CHECK_THROWS(encode_indexed_png(7, 4, pixels, palette));
}

TEST_CASE("base64 follows RFC 4648", "[html]") {
  CHECK(base64("") == "");
  CHECK(base64("f") == "Zg==");
  CHECK(base64("fo") == "Zm8=");
  CHECK(base64("foo") == "Zm9v");
  CHECK(base64("foobar") == "Zm9vYmFy");
  CHECK(base64(std::string("\xff\x00\xfe", 3)) == "/wD+");
  CHECK(data_uri("image/png", "foo") == "data:image/png;base64,Zm9v");
}

TEST_CASE("err/bound colours: calm up to the bound, an alarm past it, black for NaN", "[html]") {
  const std::vector<Swatch>& s = swatches(Layer::error);
  CHECK(error_color(0) == 0);
  CHECK_FALSE(s.at(error_color(1e-9)).alarm);
  CHECK_FALSE(s.at(error_color(0.5)).alarm);
  CHECK_FALSE(s.at(error_color(1.0)).alarm);
  CHECK(s.at(error_color(std::nextafter(1.0, 2.0))).alarm);
  CHECK(s.at(error_color(1e12)).alarm);
  CHECK(error_color(kInf) == s.size() - 1);
  CHECK(error_color(std::nan("")) == s.size() - 1);
  for (double e = 1e-7; e < 1e7; e *= 1.7) CHECK(error_color(e) <= error_color(e * 1.7));  // monotone
}

TEST_CASE("max pooling keeps one bad element of a 4096 x 4096 head visible in its cell", "[html]") {
  const std::int64_t n = 4096, bad_row = 3001, bad_col = 17;
  HeatmapLayers layers(n, n, 256, true);
  REQUIRE(layers.geometry().pool_rows == 16);
  REQUIRE(layers.geometry().pool_cols == 16);
  std::vector<double> normalized(static_cast<std::size_t>(n));
  std::vector<ElementState> states(static_cast<std::size_t>(n), ElementState::finite);
  for (std::int64_t row = 0; row < n; ++row) {
    for (std::int64_t col = 0; col < n; ++col) normalized[static_cast<std::size_t>(col)] = 0.25 + 0.5 * ((row + col) % 2);
    if (row == bad_row) {
      normalized[bad_col] = 5.0;
      states[bad_col] = ElementState::nan;
    }
    layers.add_row(row, normalized.data(), states.data());
    states[bad_col] = ElementState::finite;
  }
  CHECK(layers.count(Layer::error) == 1);
  CHECK(layers.count(Layer::nan) == 1);
  REQUIRE(layers.first_bad());
  CHECK(*layers.first_bad() == std::make_pair(bad_row, bad_col));
  for (Layer layer : {Layer::error, Layer::nan}) {
    const DecodedPng d = decode_png(layers.png(layer));
    REQUIRE(d.width == 256);
    REQUIRE(d.height == 256);
    int alarms = 0;
    for (std::int64_t y = 0; y < d.height; ++y) {
      for (std::int64_t x = 0; x < d.width; ++x) alarms += is_alarm(layer, d.at(x, y));
    }
    CHECK(alarms == 1);
    CHECK(is_alarm(layer, d.at(bad_col / 16, bad_row / 16)));
  }
}

TEST_CASE("the heatmap of every planted fault marks the element the catalog expects", "[html]") {
  MatrixOptions options;
  int checked = 0;
  options.on_run = [&](const MatrixCell& cell, const AttentionInputs& inputs, const Judged& run, bool faulty) {
    REQUIRE(faulty);  // the clean runs pass: no other call
    if (!cell.expected.index) return;
    INFO(cell.fault << " in " << cell.impl);
    const HtmlCase c = case_figures(inputs, run.run, run.result, run.references, {});
    REQUIRE(!c.heatmaps.empty());
    const HtmlHeatmaps& first = c.heatmaps.front();
    CHECK(first.output == cell.expected.output);
    CHECK(first.why == "first divergence");
    int markers = 0;
    for (const HtmlImage& image : first.images) {
      if (!image.marker || !image.marker->first_divergence) continue;
      ++markers;
      const HtmlMarker& m = *image.marker;
      const Index4& e = *cell.expected.index;
      CHECK(m.index == e);
      CHECK(image.b == e.b);
      CHECK(image.h == e.h);
      CHECK(m.y == e.row);
      CHECK(m.x == e.col - image.x_offset);  // a tile's heatmap starts at its first key
      CHECK(m.x < image.geometry.cols);
    }
    CHECK(markers == 1);
    CHECK(c.rows.size() == static_cast<std::size_t>(inputs.problem.shape.batch * inputs.problem.shape.heads));
    ++checked;
  };
  const std::vector<MatrixCell> cells = run_fault_matrix(options);
  CHECK(checked >= 6);  // the CPU cells with a named element
  CHECK(checked <= static_cast<int>(cells.size()));
}

namespace {

// The kernel's row values of a run that passes, against the reference: equal within
// fp32 with the GPU's fast exp (about 1e-4 here); a wrong tile or split would miss whole
// keys. Returns the fully masked rows seen.
int check_kernel_rows(const AttentionInputs& inputs, const TraceRun& run, const CaseResult& result) {
  const KernelRowSource source = kernel_row_source(run, result.outputs);
  REQUIRE(source.has_max_sum());
  int masked = 0;
  const Shape& shape = inputs.problem.shape;
  for (std::int64_t bh = 0; bh < shape.batch * shape.heads; ++bh) {
    const std::int64_t b = bh / shape.heads, h = bh % shape.heads;
    const RowStats ref = reference_row_stats(head_inputs(inputs, b, h));
    const RowStats kernel = kernel_row_stats(source, run, result.outputs, b, h);
    REQUIRE(kernel.max.size() == static_cast<std::size_t>(shape.q_len));
    for (std::size_t row = 0; row < kernel.max.size(); ++row) {
      if (ref.max[row] == -kInf) {  // a fully masked row, by the conventions
        ++masked;
        CHECK(kernel.max[row] == -kInf);
        CHECK(kernel.sum[row] == 0);
        CHECK(kernel.lse[row] == -kInf);
        continue;
      }
      CHECK(kernel.max[row] == Approx(ref.max[row]).epsilon(1e-5));
      CHECK(kernel.sum[row] == Approx(ref.sum[row]).epsilon(1e-3));
      CHECK(kernel.lse[row] == Approx(ref.lse[row]).epsilon(1e-3));
    }
  }
  return masked;
}

}  // namespace

TEST_CASE("the kernel's row max, sum and lse of a faithful run agree with the reference", "[html]") {
  CaseSpec spec;
  spec.shape = Shape{1, 2, 70, 150, 64};
  spec.mask = "causal+masked-rows";
  spec.seed = 5;
  const AttentionInputs inputs = generate_inputs(spec);
  for (const char* name : {"cpu-emulated", "cpu-emulated-paged"}) {
    INFO(name);
    std::unique_ptr<Implementation> impl = make_implementation(name);
    const Judged j = judge_case_keeping(*impl, inputs, describe_case(inputs, "", spec.mask, "normal", 5), nullptr, true);
    REQUIRE(j.result.verdict == Verdict::pass);
    CHECK(check_kernel_rows(inputs, j.run, j.result) > 0);
  }
  // Captured on the GPU: splits combined (flash-splitkv), maxima in log2 units (wmma-fused).
  for (const char* file : {"clean.flash-splitkv.h5", "clean.wmma-fused.h5"}) {
    INFO(file);
    Snapshot s = read_snapshot(H5Reader(std::string(FC_SOURCE_DIR) + "/fixtures/" + file));
    const CaseResult replay = judge_run(s.impl, s.file.inputs, s.file.description, s.run);
    REQUIRE(replay.verdict == Verdict::pass);
    check_kernel_rows(s.file.inputs, s.run, replay);
  }
  Snapshot split = read_snapshot(H5Reader(std::string(FC_SOURCE_DIR) + "/fixtures/clean.flash-splitkv.h5"));
  CHECK(kernel_row_source(split.run, judge_run(split.impl, split.file.inputs, split.file.description, split.run).outputs)
            .lse.size() > 1);
}

TEST_CASE("the reference row values follow the conventions for masked keys and rows", "[html]") {
  HeadInputs in;
  in.q = MatrixR::Zero(3, 2);
  MatrixR k = MatrixR::Zero(2, 2);
  in.q(0, 0) = 1;
  k(0, 0) = 2;
  in.set_kv(k, MatrixR());
  in.scale = 0.5;
  in.bias = MatrixR::Zero(3, 2);
  in.bias(1, 0) = in.bias(1, 1) = -kInf;   // row 1: no key
  in.bias(2, 1) = std::nan("");            // row 2: a NaN score
  const RowStats s = reference_row_stats(in);
  CHECK(s.max[0] == 1.0);                  // scores 0.5 * 2 and 0
  CHECK(s.sum[0] == Approx(1 + std::exp(-1.0)));
  CHECK(s.lse[0] == Approx(std::log(std::exp(1.0) + 1)));
  CHECK(s.max[1] == -kInf);
  CHECK(s.sum[1] == 0);
  CHECK(s.lse[1] == -kInf);
  CHECK(std::isnan(s.max[2]));
  CHECK(std::isnan(s.lse[2]));
  in.softcap = 0.5;  // scores capped before the mask, as the reference does: 0.5 tanh(1 / 0.5)
  const RowStats capped = reference_row_stats(in);
  CHECK(capped.max[0] == Approx(0.5 * std::tanh(2.0)));
  CHECK(capped.max[1] == -kInf);
}

TEST_CASE("a row plot draws both series and ticks the rows where the kernel is not finite", "[html]") {
  std::vector<double> ref(5000), kernel(5000);
  for (std::size_t i = 0; i < ref.size(); ++i) ref[i] = kernel[i] = std::sin(0.01 * static_cast<double>(i));
  kernel[4321] = std::nan("");
  const std::string svg = row_plot_svg("row sum", {ref, kernel});
  CHECK(svg.find("class=\"ref\"") != std::string::npos);
  CHECK(svg.find("class=\"kernel\"") != std::string::npos);
  CHECK(svg.find("row 4321: kernel nan") != std::string::npos);
  CHECK(svg.size() < 40000);  // 5000 rows drawn as at most one band a pixel
  const std::string reference_only = row_plot_svg("row max", {ref, {}});
  CHECK(reference_only.find("class=\"kernel\"") == std::string::npos);
}

TEST_CASE("a summary chart draws each series' points with gaps for NaN and lists its numbers", "[html]") {
  HtmlChart chart;
  chart.id = "sensitivity";
  chart.title = "detection rate against Sk";
  chart.x_label = "Sk";
  chart.y_label = "detection rate";
  chart.log_x = true;
  chart.x = {1024, 4096, 16384, 65536};
  chart.series = {{"rigorous bound", {0.5, 0.25, std::nan(""), 0}}, {"tight bound", {1, 1, 1, 0.875}}};
  HtmlReport report;
  report.summary.push_back(chart);
  std::ostringstream out;
  write_html_report(out, report);
  const std::string html = out.str();
  auto count = [&](const std::string& what) {
    std::size_t n = 0;
    for (std::size_t at = html.find(what); at != std::string::npos; at = html.find(what, at + 1)) ++n;
    return n;
  };
  CHECK(count("<circle") == 7);  // the NaN is not drawn
  CHECK(count("<path d=\"M") == 2);
  const std::size_t rigorous = html.find("<path d=\"M");
  CHECK(std::count(html.begin() + static_cast<std::ptrdiff_t>(rigorous),
                   html.begin() + static_cast<std::ptrdiff_t>(html.find('"', rigorous + 9)), 'M') == 2);  // a gap
  CHECK(html.find("<td>65536</td><td>0</td><td>0.875</td>") != std::string::npos);
  CHECK(html.find("id=\"sensitivity\"") != std::string::npos);
  CHECK(html.find("Sk (log scale)") != std::string::npos);
}

TEST_CASE("sensitivity writes its detection rates against Sk as charts in the HTML report", "[html]") {
  const fs::path page = fs::temp_directory_path() / ("fc_sensitivity_" + std::to_string(::getpid()) + ".html");
  const std::string command = std::string(FC_CLI_PATH) +
                              " sensitivity --impl cpu-emulated --sk 64 --sk 256 --dtype fp16 --seeds 1 --html " +
                              page.string() + " >/dev/null 2>&1";
  const int status = std::system(command.c_str());
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  std::ifstream in(page);
  std::stringstream text;
  text << in.rdbuf();
  const std::string html = text.str();
  CHECK(html.find("id=\"sensitivity-cpu-emulated-fp16\"") != std::string::npos);
  CHECK(html.find("drop-key") != std::string::npos);
  CHECK(html.find("<td>256</td>") != std::string::npos);
  CHECK(html.find("<circle") != std::string::npos);
  fs::remove(page);
}

TEST_CASE("an HTML report of 64 heads x S 4096 stays under 20 MB", "[html][slow]") {
  // Synthetic worst case for the compressor: one element in 256 non-zero at a random
  // err/bound (so every 16 x 16 cell's max is random), NaN, Inf and unwritten masks in every
  // head, and row plots of noise.
  const std::int64_t heads = 64, s = 4096;
  const auto start = std::chrono::steady_clock::now();
  HtmlCase c;
  c.id = "case-1";
  c.result.impl = "synthetic";
  c.result.description.label = "B1 H64 S4096 D64 synthetic";
  c.result.verdict = Verdict::diverged;
  OutputResult qk;
  qk.name = qk.stage_name = "qk";
  qk.dims = {1, heads, s, s};
  qk.present = qk.compared = true;
  c.result.outputs.push_back(qk);
  HtmlHeatmaps set;
  set.output = "qk";
  set.why = "first divergence";
  set.comparison = "stage-local";
  std::vector<std::vector<HtmlImage>> per_head(static_cast<std::size_t>(heads));
  parallel_for(heads, [&](std::int64_t h) {
    HeatmapLayers layers(s, s, 256, true);
    std::vector<double> normalized(static_cast<std::size_t>(s));
    std::vector<ElementState> states(static_cast<std::size_t>(s));
    for (std::int64_t row = 0; row < s; ++row) {
      for (std::int64_t col = 0; col < s; ++col) {
        const std::uint64_t r = mix(static_cast<std::uint64_t>((h * s + row) * s + col));
        const auto i = static_cast<std::size_t>(col);
        normalized[i] = (r & 0xFF) == 0 ? std::ldexp(1.0, -static_cast<int>((r >> 8) % 24)) * 8 : 0.0;
        const std::uint64_t kind = (r >> 40) & 0xFFFF;
        states[i] = kind == 1 ? ElementState::nan : kind == 2 ? ElementState::inf
                  : kind == 3 ? ElementState::unwritten : ElementState::finite;
      }
      layers.add_row(row, normalized.data(), states.data());
    }
    for (Layer layer : {Layer::error, Layer::nan, Layer::inf, Layer::unwritten}) {
      HtmlImage image;
      image.layer = layer;
      image.b = 0;
      image.h = h;
      image.x_axis = "key";
      image.heads = heads;
      image.geometry = layers.geometry();
      image.png = layers.png(layer);
      image.count = layers.count(layer);
      per_head[static_cast<std::size_t>(h)].push_back(std::move(image));
    }
  });
  for (auto& images : per_head) {
    for (HtmlImage& image : images) set.images.push_back(std::move(image));
  }
  REQUIRE(set.images.size() == 4 * heads);
  for (const HtmlImage& image : set.images) CHECK(image.count > 0);
  c.heatmaps.push_back(std::move(set));
  c.row_source = "synthetic";
  for (std::int64_t h = 0; h < heads; ++h) {
    HtmlRowPlots p;
    p.h = h;
    for (const char* what : {"row max", "row sum", "lse"}) {
      std::vector<double> ref(static_cast<std::size_t>(s)), kernel(static_cast<std::size_t>(s));
      for (std::size_t i = 0; i < ref.size(); ++i) {
        ref[i] = static_cast<double>(mix(i + 7919 * static_cast<std::uint64_t>(h)) % 1000) / 100;
        kernel[i] = ref[i] + static_cast<double>(mix(i ^ 0xABCDEF) % 100) / 1e4;
      }
      p.svgs.push_back(row_plot_svg(what, {ref, kernel}));
    }
    c.rows.push_back(std::move(p));
  }
  HtmlReport report;
  report.title = "size test";
  report.cases.push_back(std::move(c));
  std::ostringstream out;
  write_html_report(out, report);
  const double megabytes = static_cast<double>(out.str().size()) / (1 << 20);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  WARN("64 heads x S 4096, 256 images and 192 row plots: " << megabytes << " MiB, built in " << seconds << " s");
  CHECK(megabytes < 20.0);
  CHECK(out.str().find("<script") == std::string::npos);
}

TEST_CASE("the --html pages of trace and replay and faults hold a section per judged run with its descriptors and lint", "[html]") {
  const fs::path dir = fs::temp_directory_path() / ("fc_html_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto run = [&](const std::string& arguments) {
    const std::string command = std::string(FC_CLI_PATH) + " " + arguments + " >/dev/null 2>&1";
    const int status = std::system(command.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  auto read = [](const fs::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  };
  auto count = [](const std::string& text, const std::string& what) {
    std::size_t n = 0;
    for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };

  const fs::path snapshot = dir / "s.h5";
  REQUIRE(run("--trace --impl cpu-emulated --impl cpu-emulated-paged --shape 1,2,40,100,64 --shape 1,1,16,64 "
              "--inject masked-row-nan --mask masked-rows --html-stages pv --html " + (dir / "trace.html").string()) == 1);
  const std::string trace = read(dir / "trace.html");
  CHECK(count(trace, "<section class=\"case\"") == 4);  // 2 cases x 2 implementations
  CHECK(count(trace, "class=\"marker first\"") >= 2);
  CHECK(trace.find("data-output=\"pv\"") != std::string::npos);       // asked for
  CHECK(trace.find("data-output=\"pv[0]\"") != std::string::npos);    // a kind selects every tile
  CHECK(trace.find("://") == std::string::npos);                      // nothing to fetch
  CHECK(trace.find("<script") == std::string::npos);

  REQUIRE(run("--trace --impl cpu-emulated-paged --shape 1,1,30,130,64 --inject stale-scores --snapshot " +
              snapshot.string()) == 1);
  REQUIRE(run("replay " + snapshot.string() + " --html " + (dir / "replay.html").string()) == 1);
  const std::string replay = read(dir / "replay.html");
  CHECK(count(replay, "<section class=\"case\"") == 1);
  CHECK(replay.find("replay of " + snapshot.string()) != std::string::npos);
  CHECK(replay.find("data-output=\"qk[1]\"") != std::string::npos);

  // A cuBLASLt run captured on the GPU: its descriptors, read back, with the lint finding.
  REQUIRE(run("replay " + std::string(FC_SOURCE_DIR) + "/fixtures/attr-int32.cublaslt-paged.h5 --html " +
              (dir / "lint.html").string()) == 1);
  const std::string lint = read(dir / "lint.html");
  CHECK(lint.find("cuBLASLt descriptors and lint") != std::string::npos);
  CHECK(lint.find("<span class=\"lint\">    LINT set-status") != std::string::npos);

  REQUIRE(run("faults --impl cpu-emulated --fault no-max-subtract --fault masked-row-nan --html " +
              (dir / "faults.html").string()) == 0);
  const std::string faults = read(dir / "faults.html");
  CHECK(faults.find("id=\"detection-matrix\"") != std::string::npos);
  CHECK(count(faults, "<section class=\"case\"") == 2);  // the two faults asked for
  CHECK(count(faults, "data-case=\"case-") == 2);
  fs::remove_all(dir);
}

}  // namespace fc
