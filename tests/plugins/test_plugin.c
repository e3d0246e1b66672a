/*
 * A CPU plugin for the tests (C99, through include/flashcore/plugin.h alone): unfused
 * attention on the host, fp32 throughout, stages qk, softmax (p, max, sum), pv, lse, with a
 * planted fault. Compiled several times with one FC_TEST_* switch each into the broken
 * plugins the loader must refuse or survive (tests/test_plugin.cpp):
 *   FC_TEST_NO_ENTRY      no flashcore_plugin symbol
 *   FC_TEST_ABI=N         claims ABI version N
 *   FC_TEST_NAME="x"      its implementation is named x
 *   FC_TEST_CRASH_RUN     dereferences NULL in run
 *   FC_TEST_CRASH_DESTROY dereferences NULL in destroy
 *   FC_TEST_ABORT_PREPARE calls abort() in prepare
 *   FC_TEST_FAIL_RUN      run returns an error
 *   FC_TEST_HANG_RUN      run never returns (a spin on a flag no one clears)
 *   FC_TEST_UNDECLARED    taps a stage its graph does not declare
 *   FC_TEST_FAULT_MASK="m" its fault's trigger case has mask m (one it may not be able to run)
 *   FC_TEST_BAD_STRIDES   taps views whose strides overlap (1 in every dim): no dense layout
 *   FC_TEST_VIEW_OVERRUN  taps views that start at their buffer's last element
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flashcore/plugin.h"

#ifdef FC_TEST_FAULT_MASK
#define FAULT_MASK FC_TEST_FAULT_MASK
#else
#define FAULT_MASK "padding=0"
#endif

#ifndef FC_TEST_ABI
#define FC_TEST_ABI FC_PLUGIN_ABI_VERSION
#endif
#ifndef FC_TEST_NAME
#define FC_TEST_NAME "test-cpu-plugin"
#endif

/* fp16 / bf16 <-> fp32, round to nearest even. */
static float half_to_float(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu, bits;
  if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (man << 13);
  } else if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {
      float f = ldexpf((float)man, -24);
      return sign ? -f : f;
    }
  } else {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

static uint16_t float_to_half(float f) {
  uint32_t bits;
  memcpy(&bits, &f, 4);
  const uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
  if (isnan(f)) return (uint16_t)(sign | 0x7E00u);
  const float a = fabsf(f);
  if (a >= 65520.0f) return (uint16_t)(sign | 0x7C00u);
  if (a < ldexpf(1.0f, -14)) { /* subnormal: multiples of 2^-24, rint is to nearest even */
    return (uint16_t)(sign | (uint16_t)rintf(a * ldexpf(1.0f, 24)));
  }
  int e;
  const float m = frexpf(a, &e); /* a = m 2^e, m in [0.5, 1) */
  uint32_t man = (uint32_t)rintf(ldexpf(m, 11)); /* 11 significant bits */
  if (man == 2048u) {
    man = 1024u;
    ++e;
  }
  if (e - 1 + 15 >= 31) return (uint16_t)(sign | 0x7C00u);
  return (uint16_t)(sign | (uint16_t)((uint32_t)(e - 1 + 15) << 10) | (man & 0x3FFu));
}

static float bf16_to_float(uint16_t b) {
  const uint32_t bits = (uint32_t)b << 16;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

static uint16_t float_to_bf16(float f) {
  uint32_t bits;
  memcpy(&bits, &f, 4);
  if (isnan(f)) return (uint16_t)((bits >> 16) | 0x40u);
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return (uint16_t)(bits >> 16);
}

static float load(const void* p, int32_t dtype, int64_t i) {
  const uint16_t x = ((const uint16_t*)p)[i];
  return dtype == FC_DTYPE_BF16 ? bf16_to_float(x) : half_to_float(x);
}

static void store(void* p, int32_t dtype, int64_t i, float v) {
  ((uint16_t*)p)[i] = dtype == FC_DTYPE_BF16 ? float_to_bf16(v) : float_to_half(v);
}

typedef struct state {
  float *scores, *probs, *max, *sum, *lse;
  void* out;
} state;

static void message(char* error, size_t size, const char* text) {
  if (size > 0) snprintf(error, size, "%s", text);
}

static void* create(char* error, size_t size) {
  state* s = (state*)calloc(1, sizeof(state));
  if (!s) message(error, size, "out of memory");
  return s;
}

static void destroy(void* instance) {
#ifdef FC_TEST_CRASH_DESTROY
  volatile int* nowhere = NULL;
  *nowhere = 1;
#endif
  free(instance);
}

static int stage_graph(void* instance, const fc_problem* p, const char* fault, const fc_graph_builder* g, char* error,
                       size_t size) {
  (void)instance;
  (void)p;
  (void)fault;
  (void)error;
  (void)size;
  const fc_arithmetic pv = {p->dtype, FC_DTYPE_F32, FC_DTYPE_F32, 0};
  if (g->set_algorithm(g->handle, FC_ALGORITHM_FULL, 0, 0) != FC_OK) return FC_FAILED;
  if (g->set_arithmetic(g->handle, FC_STAGE_PV, &pv) != FC_OK) return FC_FAILED;
  const fc_stage stages[] = {
      {FC_STAGE_QK, -1, -1, 0, 1, {{"", FC_QUANTITY_SCORES, FC_DTYPE_F32, 1.0}}},
      {FC_STAGE_SOFTMAX,
       -1,
       -1,
       0,
       3,
       {{"", FC_QUANTITY_PROBS, FC_DTYPE_F32, 1.0},
        {"max", FC_QUANTITY_ROW_MAX, FC_DTYPE_F32, 1.0},
        {"sum", FC_QUANTITY_ROW_SUM, FC_DTYPE_F32, 1.0}}},
      {FC_STAGE_PV, -1, -1, 0, 1, {{"", FC_QUANTITY_OUTPUT, p->dtype, 1.0}}},
      {FC_STAGE_LSE, -1, -1, 0, 1, {{"", FC_QUANTITY_LSE, FC_DTYPE_F32, 1.0}}},
  };
  for (size_t i = 0; i < sizeof stages / sizeof stages[0]; ++i) {
    if (g->add_stage(g->handle, &stages[i]) != FC_OK) return FC_FAILED;
  }
  return FC_OK;
}

static int prepare(void* instance, const fc_problem* p, int32_t traced, const fc_workspace* ws, char* error,
                   size_t size) {
  (void)traced;
  (void)error;
  (void)size;
#ifdef FC_TEST_ABORT_PREPARE
  abort();
#endif
  state* s = (state*)instance;
  const int64_t rows = p->batch * p->heads * p->q_len;
  if (ws->allocate(ws->handle, "scores", FC_DTYPE_F32, rows * p->kv_len, (void**)&s->scores) != FC_OK) return FC_FAILED;
  if (ws->allocate(ws->handle, "probs", FC_DTYPE_F32, rows * p->kv_len, (void**)&s->probs) != FC_OK) return FC_FAILED;
  if (ws->allocate(ws->handle, "row_max", FC_DTYPE_F32, rows, (void**)&s->max) != FC_OK) return FC_FAILED;
  if (ws->allocate(ws->handle, "row_sum", FC_DTYPE_F32, rows, (void**)&s->sum) != FC_OK) return FC_FAILED;
  if (ws->allocate(ws->handle, "lse", FC_DTYPE_F32, rows, (void**)&s->lse) != FC_OK) return FC_FAILED;
  if (ws->allocate(ws->handle, "output", p->dtype, rows * p->head_dim, &s->out) != FC_OK) return FC_FAILED;
  return FC_OK;
}

/* 0, -inf or the bias of query i, key j in head (b, h). */
static float mask_term(const fc_problem* p, const fc_run_args* a, int64_t b, int64_t h, int64_t i, int64_t j) {
  if (p->causal == FC_CAUSAL_TOP_LEFT && j > i) return -INFINITY;
  if (p->causal == FC_CAUSAL_BOTTOM_RIGHT && j > i + p->kv_len - p->q_len) return -INFINITY;
  if (a->key_lengths && j >= a->key_lengths[b]) return -INFINITY;
  if (p->dense_mask == FC_DENSE_NONE) return 0.0f;
  const int64_t bb = p->dense_batch == 1 ? 0 : b, hh = p->dense_heads == 1 ? 0 : h;
  const int64_t at = ((bb * p->dense_heads + hh) * p->q_len + i) * p->kv_len + j;
  if (p->dense_mask == FC_DENSE_BIAS) return ((const float*)a->dense_mask)[at];
  return ((const unsigned char*)a->dense_mask)[at] ? 0.0f : -INFINITY;
}

static int tap(const fc_run_args* a, uint32_t stage, uint32_t output, const void* data, int32_t dtype, int rank,
               int64_t cols) {
  if (!a->tap) return FC_OK;
  const fc_problem* p = a->problem;
  fc_tensor_view v;
  memset(&v, 0, sizeof v);
  v.data = data;
  v.dtype = dtype;
  v.rank = rank;
  v.dims[0] = p->batch;
  v.dims[1] = p->heads;
  v.dims[2] = p->q_len;
  v.dims[3] = cols;
#ifdef FC_TEST_BAD_STRIDES
  for (int d = 0; d < rank; ++d) v.strides[d] = 1;
#endif
#ifdef FC_TEST_VIEW_OVERRUN
  {
    const int64_t count = p->batch * p->heads * p->q_len * (rank == 4 ? cols : 1);
    v.data = (const char*)data + (count - 1) * (dtype == FC_DTYPE_F32 ? 4 : 2);
  }
#endif
  return a->tap->capture(a->tap->handle, stage, output, &v);
}

static int run(void* instance, const fc_run_args* a, char* error, size_t size) {
  state* s = (state*)instance;
  const fc_problem* p = a->problem;
  const int no_guard = strcmp(a->fault, "test-plugin-masked-row-nan") == 0;
#ifdef FC_TEST_CRASH_RUN
  s = NULL;
  s->scores[0] = 1.0f;
#endif
#ifdef FC_TEST_HANG_RUN
  {
    volatile int waiting = 1;
    while (waiting) {
    }
  }
#endif
#ifdef FC_TEST_FAIL_RUN
  message(error, size, "the test plugin failed on purpose");
  return FC_FAILED;
#endif
  const int64_t sq = p->q_len, sk = p->kv_len, d = p->head_dim;
  for (int64_t b = 0; b < p->batch; ++b) {
    for (int64_t h = 0; h < p->heads; ++h) {
      const int64_t head = b * p->heads + h;
      for (int64_t i = 0; i < sq; ++i) {
        const int64_t row = head * sq + i;
        float m = -INFINITY;
        for (int64_t j = 0; j < sk; ++j) {
          float dot = 0.0f;
          for (int64_t c = 0; c < d; ++c) {
            dot += load(a->q, p->dtype, row * d + c) * load(a->k, p->dtype, (head * sk + j) * d + c);
          }
          const float score = (float)p->scale * dot + mask_term(p, a, b, h, i, j);
          s->scores[row * sk + j] = score;
          if (score > m) m = score;
        }
        const float shift = m == -INFINITY && !no_guard ? 0.0f : m;
        float l = 0.0f;
        for (int64_t j = 0; j < sk; ++j) {
          const float e = expf(s->scores[row * sk + j] - shift);
          s->probs[row * sk + j] = e;
          l += e;
        }
        for (int64_t j = 0; j < sk; ++j) s->probs[row * sk + j] = l > 0 || no_guard ? s->probs[row * sk + j] / l : 0.0f;
        s->max[row] = m;
        s->sum[row] = l;
        s->lse[row] = l > 0 ? m + logf(l) : -INFINITY;
        for (int64_t c = 0; c < d; ++c) {
          float o = 0.0f;
          for (int64_t j = 0; j < sk; ++j) o += s->probs[row * sk + j] * load(a->v, p->dtype, (head * sk + j) * d + c);
          store(s->out, p->dtype, row * d + c, o);
        }
      }
    }
  }
  int status = tap(a, 0, 0, s->scores, FC_DTYPE_F32, 4, sk);
  status |= tap(a, 1, 0, s->probs, FC_DTYPE_F32, 4, sk);
  status |= tap(a, 1, 1, s->max, FC_DTYPE_F32, 3, 0);
  status |= tap(a, 1, 2, s->sum, FC_DTYPE_F32, 3, 0);
  status |= tap(a, 2, 0, s->out, p->dtype, 4, d);
  status |= tap(a, 3, 0, s->lse, FC_DTYPE_F32, 3, 0);
#ifdef FC_TEST_UNDECLARED
  status |= tap(a, 7, 0, s->lse, FC_DTYPE_F32, 3, 0);
#endif
  if (status != FC_OK) message(error, size, "the harness refused a view");
  return status == FC_OK ? FC_OK : FC_FAILED;
}

static const fc_fault faults[] = {
    {"test-plugin-masked-row-nan", "no guard for a row with no key: exp(-inf - (-inf)) = NaN", "1,2,16,24,32",
     FAULT_MASK, "fp16", "normal", 1, "softmax", "fully-masked-row", 1, {0, 0, 0, 0}},
};

static const fc_implementation implementations[] = {{
    sizeof(fc_implementation),
    FC_TEST_NAME,
    "CPU test plugin: unfused fp32 attention on the host",
    0,
    {FC_DTYPE_BIT(FC_DTYPE_F16) | FC_DTYPE_BIT(FC_DTYPE_BF16),
     FC_MASK_CAUSAL_TOP_LEFT | FC_MASK_CAUSAL_BOTTOM_RIGHT | FC_MASK_KEY_PADDING | FC_MASK_DENSE_BOOL |
         FC_MASK_DENSE_BIAS,
     0, 256, NULL, 0},
    faults,
    1,
    create,
    destroy,
    NULL,
    stage_graph,
    prepare,
    run,
}};

static const fc_plugin plugin = {FC_TEST_ABI, sizeof(fc_plugin), "flashcore-check test plugin", 1, implementations};

#ifdef FC_TEST_NO_ENTRY
FC_PLUGIN_EXPORT const fc_plugin* not_the_entry(void) { return &plugin; }
#else
FC_PLUGIN_EXPORT const fc_plugin* flashcore_plugin(void) { return &plugin; }
#endif
