// flashcore-check bench: every figure as a ratio to a baseline measured in the same run.
//   reference  FP64 reference GFLOP/s  vs  Eigen FP64 GEMM GFLOP/s on this CPU
//   gpu reference  the same on the GPU (what --reference gpu judges with)  vs  cuBLAS DGEMM GFLOP/s on the device
//   flags      flag-kernel bytes/s     vs  device-to-device copy (bytes read + written)/s
//   trace      traced run (flags on every stage, no host copies)  vs  the untraced run
//   impls      TFLOP/s (4 B H Sq Sk D / time); scripts/gpu-check sets them beside PyTorch SDPA
// Before any timing, each implementation is judged (trace and production builds) on a small
// case with the benchmark's head dim and mask: exit 1 if one diverges.
#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>

#include "core/resource_usage.h"
#include "core/error.h"
#include "core/parallel.h"
#include "core/stopwatch.h"
#include "harness/bench/bench_kernels.h"
#include "harness/bench/timing.h"
#include "harness/cli/commands.h"
#include "harness/inputs.h"
#include "harness/trace/capture.h"
#include "harness/trace/judge.h"
#include "reports/table.h"
#include "kernels/common/device_inputs.h"
#include "kernels/implementation.h"
#include "reference/attention.h"
#include "reference/gpu/transfer.h"
#include "reference/gpu/gpu_evaluator.h"
#include "reports/progress.h"
#include "stages/device_info.h"
#include "stages/device_kernels.h"

namespace fc {
namespace {

struct Line {
  std::string metric;
  double value;
  std::string unit;
  double baseline;
  std::string baseline_name;
};

std::vector<Line> bench_reference(bool quick) {
  CaseSpec spec;
  spec.shape = quick ? Shape{1, 4, 256, 256, 64} : Shape{1, 16, 1024, 1024, 64};
  spec.dist = "uniform";
  const AttentionInputs in = generate_inputs(spec);
  const ChainArithmetic a = nominal_arithmetic(in.problem.dtype);
  const Shape& s = in.problem.shape;
  Stopwatch watch;
  parallel_for(s.batch * s.heads, [&](std::int64_t bh) {
    const FullReference r = full_reference(head_inputs(in, bh / s.heads, bh % s.heads), a);
    if (!r.out.value.allFinite()) throw Error("reference benchmark produced a non-finite output");
  });
  const double reference_gflops = attention_flops(s) / watch.lap() / 1e9;

  // Baseline: independent FP64 GEMMs of the same size, one per thread, as the heads are.
  const int n = quick ? 256 : 1024, threads = omp_get_max_threads();
  const MatrixR x = MatrixR::Random(n, n), y = MatrixR::Random(n, n);
  watch.lap();
  parallel_for(threads, [&](std::int64_t) {
    MatrixR z = x * y;
    if (!z.allFinite()) throw Error("GEMM benchmark produced a non-finite value");
  });
  const double gemm_gflops = 2.0 * n * n * n * threads / watch.lap() / 1e9;
  std::printf("reference  %s, %d threads: %.1f GFLOP/s (with bounds); FP64 GEMM %dx%dx%d per thread: %.1f GFLOP/s\n",
              s.to_string().c_str(), threads, reference_gflops, n, n, n, gemm_gflops);
  return {{"reference " + s.to_string(), reference_gflops, "GFLOP/s", gemm_gflops, "fp64 GEMM"}};
}

// Every head's full chain with both bounds through the GPU evaluator judging uses (heads in
// parallel, a stream per thread), beside one large cuBLAS DGEMM on the same device.
std::vector<Line> bench_gpu_reference(bool quick, cudaStream_t stream) {
  CaseSpec spec;
  spec.shape = quick ? Shape{1, 4, 512, 512, 64} : Shape{1, 16, 4096, 4096, 64};
  spec.dist = "uniform";
  const AttentionInputs in = generate_inputs(spec);
  const ChainArithmetic a = nominal_arithmetic(in.problem.dtype);
  const Shape& s = in.problem.shape;
  const std::unique_ptr<EvaluatorSource> gpu = gpu_evaluators(s.head_dim);
  const auto chains = [&] {
    parallel_for(s.batch * s.heads, [&](std::int64_t bh) {
      const HeadInputs head = head_inputs(in, bh / s.heads, bh % s.heads, BiasForm::mask);
      const std::unique_ptr<HeadEvaluator> ev = gpu->for_head(head);
      const FullReference r = full_reference(*ev, a);
      if (!ev->to_host(r.out).value.allFinite()) throw Error("GPU reference benchmark produced a non-finite output");
    }, gpu->concurrency());
  };
  chains();  // warm-up: streams, cuBLAS handles, the memory pool
  Stopwatch watch;
  chains();
  const double reference_gflops = attention_flops(s) / watch.lap() / 1e9;

  const std::int64_t n = quick ? 1024 : 8192;
  const gpu::DeviceMatrix x = gpu::upload(MatrixR::Random(n, n), stream), y = gpu::upload(MatrixR::Random(n, n), stream);
  gpu::DeviceMatrix z(n, n, stream);
  const gpu::CublasHandle cublas(stream);
  const double ms = median_ms(1, 5, stream, [&] { gpu::gemm(cublas, 1, gpu::whole(x), gpu::whole(y), 0, z); });
  const double dgemm_gflops = 2.0 * static_cast<double>(n) * n * n / ms / 1e6;
  std::printf("gpu reference  %s: %.1f GFLOP/s (with bounds, heads on %d threads); cuBLAS DGEMM %lldx%lldx%lld: "
              "%.1f GFLOP/s\n",
              s.to_string().c_str(), reference_gflops, std::min(gpu->concurrency(), omp_get_max_threads()),
              static_cast<long long>(n), static_cast<long long>(n), static_cast<long long>(n), dgemm_gflops);
  return {{"gpu reference " + s.to_string(), reference_gflops, "GFLOP/s", dgemm_gflops, "cuBLAS DGEMM"}};
}

std::vector<Line> bench_flags(bool quick, cudaStream_t stream) {
  std::vector<Line> lines;
  const std::size_t bytes = quick ? (std::size_t{256} << 20) : (std::size_t{4} << 30);
  DeviceMemory src(bytes), dst(bytes);
  launch_fill_random(src.get(), DType::f32, static_cast<std::int64_t>(bytes / 4), 7, stream);
  const double copy_ms = median_ms(3, 10, stream, [&] {
    FC_CUDA(cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice, stream));
  });
  const double copy_bw = 2.0 * static_cast<double>(bytes) / copy_ms / 1e6;  // GB/s, read + written
  std::printf("device copy %zu MiB: %.3f ms, %.0f GB/s (read + written)\n", bytes >> 20, copy_ms, copy_bw);

  DeviceMemory slot(sizeof(FlagCounts));
  for (DType dtype : {DType::f32, DType::f16}) {
    const std::size_t used = dtype == DType::f32 ? bytes : bytes / 2;
    const std::int64_t count = static_cast<std::int64_t>(used / dtype_size(dtype));
    launch_fill_random(src.get(), dtype, count, 11, stream);
    TensorView view;
    view.data = src.get();
    view.dtype = dtype;
    view.dims = {count};
    view.on_device = true;
    const FlagCounts fresh;
    const double ms = median_ms(3, 10, stream, [&] {
      FC_CUDA(cudaMemcpyAsync(slot.get(), &fresh, sizeof fresh, cudaMemcpyHostToDevice, stream));
      launch_flags(view, slot.as<FlagCounts>(), stream);
    });
    FlagCounts result;
    FC_CUDA(cudaMemcpy(&result, slot.get(), sizeof result, cudaMemcpyDeviceToHost));
    if (!result.clean()) throw Error("flag benchmark: random finite data reported NaN/Inf");
    const double bw = static_cast<double>(used) / ms / 1e6;
    std::printf("flags %s %zu MiB: %.3f ms, %.0f GB/s = %.3f of copy bandwidth\n", dtype_name(dtype), used >> 20, ms,
                bw, bw / copy_bw);
    lines.push_back({std::string("flag kernel ") + dtype_name(dtype) + " " + std::to_string(used >> 20) + " MiB", bw,
                     "GB/s", copy_bw, "device copy"});
  }
  return lines;
}

// PyTorch SDPA TFLOP/s per backend and (shape, causal), from scripts/sdpa_bench.py's TSV.
using SdpaTable = std::map<std::string, std::map<std::string, double>>;  // key -> backend -> TFLOP/s

// GQA shapes have no baseline in the table (its lines are for H K/V heads).
std::string sdpa_key(const Shape& s, bool causal) { return shape_argument(s) + "," + (causal ? "1" : "0"); }

// Lines "backend B H S D causal TFLOP/s" (self-attention: Sq = Sk = S).
SdpaTable read_sdpa(const std::string& path) {
  SdpaTable table;
  if (path.empty()) return table;
  std::ifstream in(path);
  if (!in) throw Error(path + ": cannot read the SDPA baseline");
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::istringstream fields(line);
    std::string backend;
    std::int64_t b = 0, h = 0, s = 0, d = 0;
    int causal = 0;
    double tflops = 0;
    if (!(fields >> backend >> b >> h >> s >> d >> causal >> tflops)) {
      throw Error(path + ":" + std::to_string(number) + ": expected 'backend B H S D causal TFLOP/s'");
    }
    table[sdpa_key({b, h, s, s, d}, causal != 0)][backend] = tflops;
  }
  return table;
}

std::vector<Line> bench_implementation(Implementation& impl, const Shape& shape, const std::string& mask,
                                       const SdpaTable& sdpa, cudaStream_t stream) {
  CaseSpec spec;
  spec.shape = shape;
  spec.mask = mask;
  spec.dist = "uniform";
  const AttentionInputs in = generate_inputs(spec);
  const std::string label = impl.name() + " " + shape.to_string() + (mask == "none" ? "" : " " + mask);
  if (const auto why = impl.unsupported(in.problem)) {
    std::printf("%s: skipped (%s)\n", label.c_str(), why->c_str());
    return {};
  }
  const DeviceInputs device(in, stream);
  const StageGraph graph = impl.stage_graph(in.problem);
  // A fused kernel's trace build writes every tile: at large shapes that does not fit.
  constexpr std::size_t kTraceLimit = std::size_t{4} << 30;
  const bool traceable = impl.trace_bytes(in.problem) <= kTraceLimit;
  Workspace workspace(true);
  impl.prepare(in.problem, workspace, traceable);
  RunContext untraced{in, &device, nullptr, stream};
  impl.tune(untraced);
  workspace.poison(stream);
  const double plain_ms = median_ms(2, 10, stream, [&] { impl.run(untraced); });

  double traced_ms = 0;
  if (traceable) {
    CaptureTap tap(graph, in.problem, false, stream);
    RunContext traced{in, &device, &tap, stream};
    traced_ms = median_ms(2, 10, stream, [&] {
      tap.reset();
      impl.run(traced);
      tap.finish();
    });
  }
  const double tflops = attention_flops(shape) / plain_ms / 1e9;
  std::vector<Line> lines;
  if (traceable) {
    std::printf("%s fp16: untraced %.3f ms (%.2f TFLOP/s), traced %.3f ms = %.3f x untraced\n", label.c_str(),
                plain_ms, tflops, traced_ms, traced_ms / plain_ms);
    lines.push_back({"traced/untraced " + label, traced_ms, "ms", plain_ms, "untraced"});
  } else {
    std::printf("%s fp16: untraced %.3f ms (%.2f TFLOP/s); traced not timed (trace buffers %.1f GiB)\n",
                label.c_str(), plain_ms, tflops, static_cast<double>(impl.trace_bytes(in.problem)) / (1 << 30));
  }
  const auto baselines = sdpa.find(sdpa_key(shape, mask == "causal"));
  if (baselines == sdpa.end()) {
    lines.push_back({"TFLOP/s " + label, tflops, "TFLOP/s", 0, ""});
  } else {
    for (const auto& [backend, baseline] : baselines->second) {
      lines.push_back({"TFLOP/s " + label, tflops, "TFLOP/s", baseline, backend});
    }
  }
  return lines;
}

// What is timed is judged: the implementation's trace and production builds on a small case
// with the benchmark's head dim and mask (the trace build does not fit at benchmark sizes).
bool judge_before_timing(Implementation& impl, std::int64_t head_dim, const std::string& mask) {
  CaseSpec spec;
  spec.shape = {1, 2, 384, 512, head_dim};
  spec.mask = mask;
  spec.seed = 3;
  const AttentionInputs in = generate_inputs(spec);
  if (impl.unsupported(in.problem)) return true;
  const DeviceInputs device(in, nullptr);
  const CaseResult r = judge_case(impl, in, describe_case(in, spec.label(), spec.mask, spec.dist, spec.seed), &device);
  int production = 0;
  for (const OutputResult& o : r.outputs) production += o.production ? 1 : 0;
  std::printf("%s %s: judged, trace build and %d production results: %s\n", impl.name().c_str(), spec.label().c_str(),
              production, outcome_text(r).c_str());
  return r.verdict == Verdict::pass;
}

// What this bench run held at its peak (core/resource_usage.h).
void print_memory() {
  std::printf("memory: peak host RSS %.2f GiB, peak device %.2f GiB (the harness's allocations)\n",
              static_cast<double>(peak_host_rss_bytes()) / (1 << 30), static_cast<double>(peak_device_bytes()) / (1 << 30));
}

void print_table(const std::vector<Line>& lines) {
  std::printf("\n%-44s %12s %-8s %12s  %-12s %s\n", "metric", "value", "unit", "baseline", "baseline is", "ratio");
  for (const Line& l : lines) {
    if (l.baseline > 0) {
      std::printf("%-44s %12.4g %-8s %12.4g  %-12s %.3f\n", l.metric.c_str(), l.value, l.unit.c_str(), l.baseline,
                  l.baseline_name.c_str(), l.value / l.baseline);
    } else {
      std::printf("%-44s %12.4g %-8s %12s  %-12s %s\n", l.metric.c_str(), l.value, l.unit.c_str(), "-", "-", "-");
    }
  }
}

}  // namespace

int run_bench(const BenchCommand& command) {
  const SdpaTable sdpa = read_sdpa(command.baseline_file);
  std::vector<std::unique_ptr<Implementation>> impls;
  for (auto& impl : select_implementations(command.impls)) {
    if (!impl->on_gpu() && !command.impls.empty()) throw Error("bench: " + impl->name() + " is a CPU implementation");
    if (impl->on_gpu()) impls.push_back(std::move(impl));
  }
  std::vector<Shape> shapes;
  for (const std::string& s : command.shapes) shapes.push_back(parse_shape(s));
  if (shapes.empty() && command.quick) shapes = {{2, 4, 512, 512, 64}};
  if (shapes.empty()) shapes = {{16, 16, 2048, 2048, 64}, {16, 16, 4096, 4096, 64}, {4, 16, 4096, 4096, 128}};
  const std::vector<std::string> masks = command.masks.empty() ? std::vector<std::string>{"none", "causal"} : command.masks;
  for (const std::string& mask : masks) {
    if (mask != "none" && mask != "causal") throw Error("--mask '" + mask + "': bench times none or causal");
  }
  const DeviceInfo device = device_info();
  if (!device.available && !impls.empty() && !command.impls.empty()) {  // asked for by name, as --trace refuses it
    throw Error("--impl " + impls.front()->name() + " needs a CUDA device: " + device.why_unavailable);
  }
  if (!device.available) std::fprintf(stderr, "no CUDA device (%s): GPU benchmarks not run\n", device.why_unavailable.c_str());
  if (device.available) std::printf("device: %s\n", device.describe().c_str());

  // Each implementation judged once per head dim and mask before it is timed.
  std::vector<std::pair<Implementation*, std::pair<std::int64_t, std::string>>> to_judge;
  for (const Shape& shape : shapes) {
    for (const std::string& mask : masks) {
      for (auto& impl : impls) {
        const auto what = std::make_pair(impl.get(), std::make_pair(shape.head_dim, mask));
        if (std::find(to_judge.begin(), to_judge.end(), what) == to_judge.end()) to_judge.push_back(what);
      }
    }
  }
  // The reference, the flag kernel, the judging, then every implementation on every shape and mask.
  const std::int64_t timed = static_cast<std::int64_t>(shapes.size() * masks.size() * impls.size());
  Progress progress("bench", 1 + (device.available ? 2 + static_cast<std::int64_t>(to_judge.size()) + timed : 0));
  std::vector<Line> lines = bench_reference(command.quick);
  progress.advance();
  if (!device.available) {
    progress.clear();
    print_table(lines);
    print_memory();
    return kExitPass;
  }
  CudaStream stream;
  for (const Line& l : bench_gpu_reference(command.quick, stream.get())) lines.push_back(l);
  progress.advance();
  for (const Line& l : bench_flags(command.quick, stream.get())) lines.push_back(l);
  progress.advance();
  bool judged_ok = true;
  for (const auto& [impl, what] : to_judge) {
    progress.clear();  // judge_before_timing prints a line
    judged_ok = judge_before_timing(*impl, what.first, what.second) && judged_ok;
    progress.advance();
  }
  for (const Shape& shape : shapes) {
    for (const std::string& mask : masks) {
      for (auto& impl : impls) {
        for (const Line& l : bench_implementation(*impl, shape, mask, sdpa, stream.get())) lines.push_back(l);
        progress.advance();
      }
    }
  }
  progress.clear();
  print_table(lines);
  print_memory();
  return judged_ok ? kExitPass : kExitDiverged;
}

}  // namespace fc
