/*
 * flashcore-check plugin ABI, version 1: attention implementations from outside the harness.
 *
 * A plugin is a shared library that defines one exported function,
 *
 *     FC_PLUGIN_EXPORT const fc_plugin* flashcore_plugin(void);
 *
 * returning a description that lives as long as the library: the ABI version it was built
 * with and its implementations. `flashcore-check --plugin PATH` (or FLASHCORE_PLUGINS=PATH:PATH)
 * loads it with dlopen, and every command (--trace, triage, faults, bench, fixtures, list,
 * describe) then runs its implementations as it runs the built-in ones:
 *
 *   1. stage_graph  the plugin declares, for the case, the stages it will tap: their kind,
 *                   split and tile, what each output holds, its shape-defining dtype, the
 *                   algorithm (full rows, tiles of W keys, T splits) and the arithmetic of
 *                   each stage kind, from which the harness derives the error bounds;
 *   2. prepare      the plugin asks the harness for every buffer it writes (workspace.allocate);
 *                   the harness owns them and fills them with NaN poison before each run, so
 *                   unwritten elements and reads of memory nobody wrote are told apart;
 *   3. run          the plugin computes on those buffers and, after each stage, hands the
 *                   harness a view of each declared output (tap.capture), in graph order.
 *
 * Rules of the boundary: C99 types only; nothing throws across it (a C++ plugin catches
 * its exceptions and returns an error); every call returns FC_OK (0) or an error, with one
 * line of text written into `error` (at most error_size bytes, NUL included). A call that
 * fails, throws or crashes (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) ends the command with
 * that line and exit status 2; the harness does not crash. Strings the plugin returns stay
 * valid as long as the library is loaded.
 *
 * Versioning: FC_PLUGIN_ABI_VERSION changes when a struct or a call changes incompatibly; a
 * plugin of another version is refused. Structs that carry `struct_size` may grow at their
 * end within a version: read a field only if struct_size covers it.
 *
 * Layouts: tensors are row-major [B, H, rows, cols]; q [B,H,Sq,D], k and v [B,Hkv,Sk,D] (Hkv = kv_heads);
 * scores and probabilities [B,H,Sq,cols], row quantities [B,H,Sq], outputs [B,H,Sq,D].
 * Conventions the harness judges against: a masked score is -inf; a row with no key has row
 * max -inf, row sum 0, probabilities 0, output 0, lse -inf.
 */
#ifndef FLASHCORE_PLUGIN_H
#define FLASHCORE_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#define FC_PLUGIN_ABI_VERSION 1
#define FC_PLUGIN_ENTRY_SYMBOL "flashcore_plugin"

#if defined(__GNUC__)
#define FC_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define FC_PLUGIN_EXPORT
#endif

#ifdef __cplusplus
extern "C" {
#endif

enum { FC_OK = 0, FC_FAILED = 1 };

/* Element formats. */
enum { FC_DTYPE_F16 = 0, FC_DTYPE_BF16 = 1, FC_DTYPE_F32 = 2 };
#define FC_DTYPE_BIT(d) (1u << (d))

/* Stage kinds (DESIGN.md, "Stages"). */
enum {
  FC_STAGE_QK = 0,        /* scaled scores, mask applied */
  FC_STAGE_SOFTMAX = 1,   /* probabilities, or a tile's p~ with the running max and sum */
  FC_STAGE_RESCALE = 2,   /* accumulator times exp(previous max - new max) */
  FC_STAGE_PV = 3,        /* P.V (the output of a full-row algorithm, or a tile's accumulator) */
  FC_STAGE_NORMALIZE = 4, /* accumulator / row sum (a split's partial output and lse) */
  FC_STAGE_LSE = 5,       /* log-sum-exp */
  FC_STAGE_COMBINE = 6    /* split-KV merge by lse */
};

/* What a stage output holds (stages/stage.h). Tile quantities are over the tile's keys. */
enum {
  FC_QUANTITY_SCORES = 0,         /* [B,H,Sq,cols] scale*q.k + mask */
  FC_QUANTITY_PROBS = 1,          /* [B,H,Sq,Sk]   softmax over whole rows */
  FC_QUANTITY_P_TILDE = 2,        /* [B,H,Sq,cols] exp(s - running max) of one tile */
  FC_QUANTITY_ROW_MAX = 3,        /* [B,H,Sq]      (running) row max */
  FC_QUANTITY_ROW_SUM = 4,        /* [B,H,Sq]      (running) row sum */
  FC_QUANTITY_RESCALED_ACC = 5,   /* [B,H,Sq,D]    accumulator after rescale */
  FC_QUANTITY_ACC = 6,            /* [B,H,Sq,D]    unnormalized accumulator after a tile */
  FC_QUANTITY_OUTPUT = 7,         /* [B,H,Sq,D]    the attention output */
  FC_QUANTITY_PARTIAL_OUTPUT = 8, /* [B,H,Sq,D]    one split's normalized output */
  FC_QUANTITY_PARTIAL_LSE = 9,    /* [B,H,Sq]      one split's lse */
  FC_QUANTITY_LSE = 10            /* [B,H,Sq]      the final lse */
};

/* How the keys are walked: whole rows, tiles of tile_width keys (online softmax), or
 * `splits` key ranges of whole tiles (split t covers tiles [t*n, (t+1)*n), n = ceil(tiles/splits)). */
enum { FC_ALGORITHM_FULL = 0, FC_ALGORITHM_BLOCKED = 1, FC_ALGORITHM_SPLIT = 2 };

enum { FC_CAUSAL_NONE = 0, FC_CAUSAL_TOP_LEFT = 1, FC_CAUSAL_BOTTOM_RIGHT = 2 };
enum { FC_DENSE_NONE = 0, FC_DENSE_BOOL = 1, FC_DENSE_BIAS = 2 };

/* Mask parts an implementation handles (fc_features.masks). */
#define FC_MASK_CAUSAL_TOP_LEFT 0x1u
#define FC_MASK_CAUSAL_BOTTOM_RIGHT 0x2u
#define FC_MASK_KEY_PADDING 0x4u /* key_lengths: keys >= key_lengths[b] masked */
#define FC_MASK_DENSE_BOOL 0x8u  /* [Bm,Hm,Sq,Sk] bytes, 1 = attend */
#define FC_MASK_DENSE_BIAS 0x10u /* [Bm,Hm,Sq,Sk] fp32 added to the scores, -inf allowed */

/* One case, as the harness describes it. */
typedef struct fc_problem {
  uint32_t struct_size;
  int32_t dtype; /* of q, k, v (and the output): FC_DTYPE_F16 or FC_DTYPE_BF16 */
  int64_t batch, heads, kv_heads, q_len, kv_len, head_dim; /* kv_heads < heads only where features.gqa */
  double scale;                                             /* multiplies q.k */
  int32_t causal;                                           /* FC_CAUSAL_* */
  int32_t key_padding;                                      /* 1: key_lengths given (fc_run_args) */
  int32_t dense_mask;                                       /* FC_DENSE_* */
  int32_t reserved;
  int64_t dense_batch, dense_heads; /* the dense mask is [dense_batch, dense_heads, Sq, Sk] */
} fc_problem;

/* What an implementation can run; the harness skips other cases with the reason. */
typedef struct fc_features {
  uint32_t dtypes;       /* FC_DTYPE_BIT(FC_DTYPE_F16) | ... */
  uint32_t masks;        /* FC_MASK_* it handles; a case with another part is skipped */
  int32_t gqa;           /* 1: kv_heads < heads is fine (K and V then hold kv_heads heads); 0: such cases skipped */
  int32_t max_head_dim;  /* 0: no limit */
  const int32_t* head_dims; /* exactly these D, or NULL: any D up to max_head_dim */
  uint32_t head_dim_count;
} fc_features;

/* The arithmetic of one stage kind: what the bounds are derived from (docs/error-model.md). */
typedef struct fc_arithmetic {
  int32_t out;          /* format the stage stores its main result in */
  int32_t operand;      /* format matrix operands are rounded to inside the stage */
  int32_t accumulate;   /* format the matmul accumulates in (FC_DTYPE_F32) */
  int32_t tensor_cores; /* 1: the products are summed by tensor cores */
} fc_arithmetic;

#define FC_MAX_STAGE_OUTPUTS 4

typedef struct fc_stage_output {
  const char* name;   /* "" for the stage's main tensor, else e.g. "max", "sum", "lse" */
  int32_t quantity;   /* FC_QUANTITY_* */
  int32_t dtype;      /* format the kernel stores it in */
  double value_scale; /* stored value times this is the quantity (ln 2 for log2 units); 0 means 1 */
} fc_stage_output;

typedef struct fc_stage {
  int32_t kind;             /* FC_STAGE_* */
  int32_t split;            /* split index, -1 when the algorithm has none */
  int32_t tile;             /* tile index within the split or the keys, -1 for whole rows */
  int32_t reads_own_output; /* 1: updates its output buffer in place (rescale, pv with beta 1) */
  uint32_t output_count;
  fc_stage_output outputs[FC_MAX_STAGE_OUTPUTS];
} fc_stage;

/* The harness's side of stage_graph. The arithmetic starts as fp32 everywhere with the
 * input format for q and k and the final output; set what differs. Stages in execution order. */
typedef struct fc_graph_builder {
  void* handle;
  int (*set_algorithm)(void* handle, int32_t algorithm, int64_t tile_width, int64_t splits);
  int (*set_arithmetic)(void* handle, int32_t stage_kind, const fc_arithmetic* arithmetic);
  int (*add_stage)(void* handle, const fc_stage* stage);
} fc_graph_builder;

/* The harness's side of prepare: a buffer of `count` elements of `dtype`, in device memory
 * for a GPU implementation and host memory for a CPU one, owned by the harness and
 * poisoned before every run. At most 60 buffers. */
typedef struct fc_workspace {
  void* handle;
  int (*allocate)(void* handle, const char* name, int32_t dtype, int64_t count, void** data);
} fc_workspace;

/* A stage output where the kernel left it. */
typedef struct fc_tensor_view {
  const void* data;   /* inside a workspace buffer */
  int32_t dtype;
  int32_t rank;       /* 3 (row quantities) or 4 */
  int64_t dims[4];    /* logical [B,H,rows(,cols)] */
  int64_t strides[4]; /* element stride of each logical dim; all 0: row-major contiguous; otherwise a
                         dense permutation of dims (refused if not) */
} fc_tensor_view;

/* The harness's side of run: called after each stage for each declared output. A nonzero
 * return means the harness refused the view (an undeclared stage): return that error. */
typedef struct fc_tap {
  void* handle;
  int (*capture)(void* handle, uint32_t stage, uint32_t output, const fc_tensor_view* view);
} fc_tap;

typedef struct fc_run_args {
  uint32_t struct_size;
  const fc_problem* problem;
  /* q, k, v in problem->dtype; the mask parts; device memory for a GPU implementation,
   * host memory for a CPU one. */
  const void* q;
  const void* k;
  const void* v;
  const int32_t* key_lengths; /* [B], or NULL */
  const void* dense_mask;     /* [dense_batch, dense_heads, Sq, Sk], or NULL */
  void* stream;               /* the cudaStream_t to launch on (NULL for a CPU implementation) */
  const fc_tap* tap;          /* NULL: untraced (a benchmark): capture nothing */
  const char* fault;          /* "" clean, or the id of one of the implementation's faults */
  /* With a tap: 1 when it wants every stage (the trace build); 0 when the harness judges the
   * production build: launch what ships; only the results (output, lse, split partials) are
   * kept, other captures are ignored. A plugin built against an older header never reads it
   * (struct_size tells which fields a caller filled). */
  int32_t trace_build;
} fc_run_args;

/* A bug planted in the implementation (`--inject ID`), and what `faults` must find. */
typedef struct fc_fault {
  const char* id;              /* distinct from every other fault's id */
  const char* bug;             /* one sentence */
  const char* shape;           /* the trigger case, in --shape, --mask, --dtype, --dist syntax */
  const char* mask;
  const char* dtype;
  const char* dist;
  uint64_t seed;
  const char* expected_output; /* the first divergence: a stage output ("normalize", "softmax[2].max") */
  const char* expected_cause;  /* its cause id (docs/json-output.md) */
  int32_t has_index;           /* 1: index is the first bad element */
  int64_t index[4];            /* b, h, row, col (col -1 for a row quantity) */
} fc_fault;

/* One implementation. The functions get the instance create() returned. */
typedef struct fc_implementation {
  uint32_t struct_size;
  const char* name;    /* distinct from every other implementation's */
  const char* summary; /* one line for `list` */
  int32_t on_gpu;      /* 1: buffers, inputs and work on the GPU */
  fc_features features;
  const fc_fault* faults;
  uint32_t fault_count;

  void* (*create)(char* error, size_t error_size); /* NULL return: failed */
  void (*destroy)(void* instance);
  /* Optional (NULL: the features decide): FC_OK if the case can run, else why not. */
  int (*supports)(void* instance, const fc_problem* problem, char* why, size_t why_size);
  int (*stage_graph)(void* instance, const fc_problem* problem, const char* fault, const fc_graph_builder* graph,
                     char* error, size_t error_size);
  /* Once per case, before the harness poisons; `traced`: runs will be given a tap. */
  int (*prepare)(void* instance, const fc_problem* problem, int32_t traced, const fc_workspace* workspace,
                 char* error, size_t error_size);
  int (*run)(void* instance, const fc_run_args* args, char* error, size_t error_size);
} fc_implementation;

typedef struct fc_plugin {
  uint32_t abi_version; /* FC_PLUGIN_ABI_VERSION */
  uint32_t struct_size; /* sizeof(fc_plugin) */
  const char* name;
  uint32_t implementation_count;
  const fc_implementation* implementations;
} fc_plugin;

typedef const fc_plugin* (*fc_plugin_entry)(void);

FC_PLUGIN_EXPORT const fc_plugin* flashcore_plugin(void);

#ifdef __cplusplus
}
#endif

#endif /* FLASHCORE_PLUGIN_H */
