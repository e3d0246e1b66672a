// An attention kernel of its own, checked by flashcore-check through the plugin ABI
// (include/flashcore/plugin.h) alone: a fused forward kernel, one thread per query row,
// online softmax over tiles of 64 keys in fp32 (scores of a tile, its max, the rescale of the
// running sum and accumulator, p~ V), then O / l. It taps two stages: the running max and sum
// after its last tile, and its output. Plant its bug with
//   flashcore-check --plugin libexample_attention.so --trace --impl example-fused \
//       --inject example-no-empty-row-guard --mask padding=0
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <new>

#include "flashcore/plugin.h"

namespace {

constexpr int kTile = 64;       // keys per tile: the blocked graph's tile width
constexpr int kMaxDim = 256;    // head dims up to this
constexpr int kThreads = 128;   // query rows per block

struct Params {
  long long batch, heads, q_len, kv_len, head_dim;
  float scale;
  int causal;               // FC_CAUSAL_*
  const int* key_lengths;   // [B] or null
  bool guard_empty_rows;    // false: the planted fault
};

__device__ float load(const __half* p, long long i) { return __half2float(p[i]); }
__device__ float load(const __nv_bfloat16* p, long long i) { return __bfloat162float(p[i]); }
__device__ void store(__half* p, long long i, float v) { p[i] = __float2half_rn(v); }
__device__ void store(__nv_bfloat16* p, long long i, float v) { p[i] = __float2bfloat16_rn(v); }

__device__ bool masked(const Params& p, long long b, long long i, long long j) {
  if (p.causal == FC_CAUSAL_TOP_LEFT && j > i) return true;
  if (p.causal == FC_CAUSAL_BOTTOM_RIGHT && j > i + p.kv_len - p.q_len) return true;
  return p.key_lengths && j >= p.key_lengths[b];
}

template <class T>
__global__ void __launch_bounds__(kThreads) attention_forward(const T* q, const T* k, const T* v, T* out,
                                                               float* row_max, float* row_sum, Params p) {
  const long long row = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= p.batch * p.heads * p.q_len) return;
  const long long head = row / p.q_len, i = row % p.q_len, b = head / p.heads;
  const int d = static_cast<int>(p.head_dim);
  const T* kh = k + head * p.kv_len * d;
  const T* vh = v + head * p.kv_len * d;

  float acc[kMaxDim];
  for (int c = 0; c < d; ++c) acc[c] = 0.0f;
  float m = -INFINITY, l = 0.0f, s[kTile];
  for (long long begin = 0; begin < p.kv_len; begin += kTile) {
    const int n = static_cast<int>(min(static_cast<long long>(kTile), p.kv_len - begin));
    float tile_max = -INFINITY;
    for (int j = 0; j < n; ++j) {  // scores of the tile: scale q.k, -inf where masked
      float dot = 0.0f;
      for (int c = 0; c < d; ++c) dot = fmaf(load(q, row * d + c), load(kh, (begin + j) * d + c), dot);
      s[j] = masked(p, b, i, begin + j) ? -INFINITY : p.scale * dot;
      tile_max = fmaxf(tile_max, s[j]);
    }
    const float m_new = fmaxf(m, tile_max);
    if (m_new == -INFINITY) continue;  // no key attended yet
    const float r = m == -INFINITY ? 0.0f : expf(m - m_new);
    l *= r;
    for (int c = 0; c < d; ++c) acc[c] *= r;
    for (int j = 0; j < n; ++j) {
      const float pt = expf(s[j] - m_new);  // 0 for a masked key
      l += pt;
      for (int c = 0; c < d; ++c) acc[c] = fmaf(pt, load(vh, (begin + j) * d + c), acc[c]);
    }
    m = m_new;
  }
  for (int c = 0; c < d; ++c) store(out, row * d + c, l > 0.0f || !p.guard_empty_rows ? acc[c] / l : 0.0f);
  row_max[row] = m;
  row_sum[row] = l;
}

struct Instance {
  void *out = nullptr, *row_max = nullptr, *row_sum = nullptr;
  long long tiles = 0;
};

void say(char* error, size_t size, const char* text) {
  if (size > 0) std::snprintf(error, size, "%s", text);
}

void* create(char* error, size_t size) {
  Instance* instance = new (std::nothrow) Instance;
  if (!instance) say(error, size, "out of memory");
  return instance;
}

void destroy(void* instance) { delete static_cast<Instance*>(instance); }

int stage_graph(void*, const fc_problem* p, const char*, const fc_graph_builder* g, char*, size_t) {
  const long long tiles = (p->kv_len + kTile - 1) / kTile;
  // Scalar fp32 arithmetic, no tensor cores: q.k accumulated in fp32, p~ and the accumulator
  // kept in fp32, the output rounded to the input format.
  const fc_arithmetic fp32_acc = {FC_DTYPE_F32, FC_DTYPE_F32, FC_DTYPE_F32, 0};
  const fc_arithmetic qk = {FC_DTYPE_F32, p->dtype, FC_DTYPE_F32, 0};
  fc_stage last_softmax = {FC_STAGE_SOFTMAX, -1, static_cast<int32_t>(tiles - 1), 0, 2,
                           {{"max", FC_QUANTITY_ROW_MAX, FC_DTYPE_F32, 1.0}, {"sum", FC_QUANTITY_ROW_SUM, FC_DTYPE_F32, 1.0}}};
  fc_stage normalize = {FC_STAGE_NORMALIZE, -1, -1, 0, 1, {{"", FC_QUANTITY_OUTPUT, p->dtype, 1.0}}};
  const bool ok = g->set_algorithm(g->handle, FC_ALGORITHM_BLOCKED, kTile, 0) == FC_OK &&
                  g->set_arithmetic(g->handle, FC_STAGE_QK, &qk) == FC_OK &&
                  g->set_arithmetic(g->handle, FC_STAGE_SOFTMAX, &fp32_acc) == FC_OK &&
                  g->set_arithmetic(g->handle, FC_STAGE_RESCALE, &fp32_acc) == FC_OK &&
                  g->set_arithmetic(g->handle, FC_STAGE_PV, &fp32_acc) == FC_OK &&
                  g->add_stage(g->handle, &last_softmax) == FC_OK && g->add_stage(g->handle, &normalize) == FC_OK;
  return ok ? FC_OK : FC_FAILED;
}

int prepare(void* instance, const fc_problem* p, int32_t, const fc_workspace* ws, char*, size_t) {
  Instance& s = *static_cast<Instance*>(instance);
  const int64_t rows = p->batch * p->heads * p->q_len;
  const bool ok = ws->allocate(ws->handle, "output", p->dtype, rows * p->head_dim, &s.out) == FC_OK &&
                  ws->allocate(ws->handle, "row_max", FC_DTYPE_F32, rows, &s.row_max) == FC_OK &&
                  ws->allocate(ws->handle, "row_sum", FC_DTYPE_F32, rows, &s.row_sum) == FC_OK;
  s.tiles = (p->kv_len + kTile - 1) / kTile;
  return ok ? FC_OK : FC_FAILED;
}

fc_tensor_view view(const fc_problem* p, const void* data, int32_t dtype, int rank) {
  fc_tensor_view v;
  std::memset(&v, 0, sizeof v);
  v.data = data;
  v.dtype = dtype;
  v.rank = rank;
  v.dims[0] = p->batch;
  v.dims[1] = p->heads;
  v.dims[2] = p->q_len;
  v.dims[3] = p->head_dim;
  return v;
}

int run(void* instance, const fc_run_args* a, char* error, size_t size) {
  const Instance& s = *static_cast<const Instance*>(instance);
  const fc_problem* p = a->problem;
  const Params params{p->batch, p->heads, p->q_len, p->kv_len, p->head_dim, static_cast<float>(p->scale),
                      p->causal, a->key_lengths, std::strcmp(a->fault, "example-no-empty-row-guard") != 0};
  const long long rows = p->batch * p->heads * p->q_len;
  const dim3 grid(static_cast<unsigned>((rows + kThreads - 1) / kThreads));
  const cudaStream_t stream = static_cast<cudaStream_t>(a->stream);
  auto* row_max = static_cast<float*>(s.row_max);
  auto* row_sum = static_cast<float*>(s.row_sum);
  if (p->dtype == FC_DTYPE_BF16) {
    attention_forward<<<grid, kThreads, 0, stream>>>(
        static_cast<const __nv_bfloat16*>(a->q), static_cast<const __nv_bfloat16*>(a->k),
        static_cast<const __nv_bfloat16*>(a->v), static_cast<__nv_bfloat16*>(s.out), row_max, row_sum, params);
  } else {
    attention_forward<<<grid, kThreads, 0, stream>>>(static_cast<const __half*>(a->q), static_cast<const __half*>(a->k),
                                                     static_cast<const __half*>(a->v), static_cast<__half*>(s.out),
                                                     row_max, row_sum, params);
  }
  const cudaError_t launched = cudaGetLastError();
  if (launched != cudaSuccess) {
    say(error, size, cudaGetErrorString(launched));
    return FC_FAILED;
  }
  if (!a->tap) return FC_OK;  // untraced: a benchmark
  const fc_tensor_view max = view(p, s.row_max, FC_DTYPE_F32, 3), sum = view(p, s.row_sum, FC_DTYPE_F32, 3);
  const fc_tensor_view out = view(p, s.out, p->dtype, 4);
  const bool ok = a->tap->capture(a->tap->handle, 0, 0, &max) == FC_OK &&
                  a->tap->capture(a->tap->handle, 0, 1, &sum) == FC_OK &&
                  a->tap->capture(a->tap->handle, 1, 0, &out) == FC_OK;
  if (!ok) say(error, size, "the harness refused a view");
  return ok ? FC_OK : FC_FAILED;
}

const fc_fault kFaults[] = {{
    "example-no-empty-row-guard", "O / l without a guard for a row with no key: 0 / 0 = NaN", "1,2,16,80,64",
    "padding=0", "fp16", "normal", 1, "normalize", "fully-masked-row", 1, {0, 0, 0, 0},
}};

const fc_implementation kImplementations[] = {{
    sizeof(fc_implementation),
    "example-fused",
    "GPU, plugin example: fused scalar attention, a thread per query row, online softmax over tiles of 64 keys "
    "in fp32; taps the last tile's max and sum and the output",
    1,
    {FC_DTYPE_BIT(FC_DTYPE_F16) | FC_DTYPE_BIT(FC_DTYPE_BF16),
     FC_MASK_CAUSAL_TOP_LEFT | FC_MASK_CAUSAL_BOTTOM_RIGHT | FC_MASK_KEY_PADDING, 0, kMaxDim, nullptr, 0},
    kFaults,
    1,
    create,
    destroy,
    nullptr,
    stage_graph,
    prepare,
    run,
}};

const fc_plugin kPlugin = {FC_PLUGIN_ABI_VERSION, sizeof(fc_plugin), "flashcore-check example plugin", 1,
                           kImplementations};

}  // namespace

extern "C" FC_PLUGIN_EXPORT const fc_plugin* flashcore_plugin(void) { return &kPlugin; }
