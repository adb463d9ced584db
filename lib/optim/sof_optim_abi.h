/* sof_optim_abi.h: the versioned C ABI between superoffload and its optimizer plugins.
 * This is the ONLY header a plugin needs. Pure C, no exceptions, no exit/abort/MPI in plugins.
 */
#ifndef SOF_OPTIM_ABI_H
#define SOF_OPTIM_ABI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bump on any incompatible change; the loader rejects a plugin whose abi_version differs and
 * names both numbers. Compatible growth appends fields and is detected through struct_size.
 * Version 3 (issue 28): optimizer state as generic slots (sof_state_slot: format, block, scales)
 * instead of two named Adam moments; master params of param_dtype (fp32, or bf16 with stochastic
 * rounding); entry points named step/step_multi/rollback; the table declares its algorithm, its
 * slots and the formats it steps. */
#define SOF_OPTIM_ABI_VERSION 3

/* Name of the single symbol every plugin exports. */
#define SOF_OPTIM_ENTRY "sof_optim_plugin_get"

/* Most state slots one slice may carry (Adam uses 2). */
#define SOF_MAX_SLOTS 4

typedef enum sof_status {
    SOF_OK = 0,
    SOF_ERR_INVALID_ARGUMENT = 1, /* null pointer, bad dtype, struct_size too small, ... */
    SOF_ERR_UNSUPPORTED = 2,      /* feature not offered by this plugin (e.g. fp16 copy) */
    SOF_ERR_DEVICE = 3,           /* CUDA (or other device) call failed; see last_error */
    SOF_ERR_OUT_OF_MEMORY = 4,
    SOF_ERR_INTERNAL = 5
} sof_status;

/* Element types of params, grads and the low-precision copy. */
typedef enum sof_dtype { SOF_DTYPE_F32 = 0, SOF_DTYPE_BF16 = 1, SOF_DTYPE_F16 = 2 } sof_dtype;

/* How one state slot is stored (optim/qstate.h defines the quantized codes bit for bit):
 *   F32   one fp32 per element;
 *   BF16  one bf16 per element, widened exactly on load, rounded to nearest even on store;
 *   Q8    8-bit codes, one fp32 scale per `block` elements: value = decode(code) * scale. A slot
 *         the algorithm declares signed (Adam's m) uses sign + 4 exponent + 3 mantissa bits, an
 *         unsigned one (Adam's v) 5 exponent + 3 mantissa bits; each block is re-scaled on every
 *         store so that its largest magnitude maps to the largest code. */
typedef enum sof_state_format {
    SOF_STATE_F32 = 0,
    SOF_STATE_BF16 = 1,
    SOF_STATE_Q8 = 3
} sof_state_format;

/* Where the buffers passed to a plugin live and where it computes. */
typedef enum sof_target { SOF_TARGET_HOST = 0, SOF_TARGET_CUDA = 1 } sof_target;

typedef enum sof_adam_mode {
    SOF_ADAM_ADAMW = 0, /* decoupled weight decay: p *= 1 - lr*wd (torch.optim.AdamW) */
    SOF_ADAM_L2 = 1     /* L2 penalty added to the gradient: g += wd*p (torch.optim.Adam) */
} sof_adam_mode;

/* Hyperparameters of one step over one slice. Bias correction is derived from `step` on every
 * call (1-based), never kept as state in the plugin, so slices of one tensor may be stepped by
 * different threads in any order. */
typedef struct sof_optim_hparams {
    uint32_t struct_size; /* sizeof(sof_optim_hparams) */
    float lr;
    float beta1;
    float beta2;
    float eps;
    float weight_decay;      /* 0 disables decay for this slice */
    int64_t step;            /* 1-based optimizer step count of this slice */
    int32_t mode;            /* sof_adam_mode */
    int32_t bias_correction; /* 1: divide by (1-b1^t), (1-b2^t); 0: do not */
    float grad_scale; /* every grad is multiplied by this before use (clip coef, 1/loss scale) */
    int32_t reserved;
    uint64_t seed; /* key of the stochastic rounding of bf16 master params (Philox4x32-10) */
} sof_optim_hparams;

/* One state slot of a slice (Adam: slot 0 = exp_avg m, slot 1 = exp_avg_sq v). F32/BF16: `data`
 * holds n values. Q8: the slice starts at a block boundary; `data` holds n codes (element i at
 * byte i), `scale` ceil(n/block) fp32 scales (the last block may be short). Outputs are the same
 * pointers as the inputs (in place) or disjoint buffers; destinations are written without being
 * read. */
typedef struct sof_state_slot {
    int32_t format;     /* sof_state_format */
    int32_t block;      /* Q8: elements per scale (a power of two, 64..4096); F32/BF16: 0 */
    const void* data;   /* (n) values or codes, read */
    void* data_out;     /* (n) updated; == data for in place */
    const float* scale; /* Q8: (ceil(n/block)) scales, read; else NULL */
    float* scale_out;   /* Q8: (ceil(n/block)) updated scales; == scale for in place */
} sof_state_slot;

/* One contiguous slice of n parameters. Inputs and outputs may be the same buffers (in place) or
 * disjoint (separate outputs: the inputs are left untouched, so an exact rollback is free).
 * Partial overlap is not allowed. */
typedef struct sof_optim_slice {
    uint32_t struct_size; /* sizeof(sof_optim_slice) */
    int32_t param_dtype;  /* master params: SOF_DTYPE_F32, or SOF_DTYPE_BF16 (the new value is
                             stochastically rounded to bf16, keyed by hparams.seed, step, index) */
    int64_t n;
    const void* param;  /* (n) master params of param_dtype, read */
    void* param_out;    /* (n) updated params; == param for in place */
    const void* grad;   /* (n) grads of dtype grad_dtype, read */
    int32_t grad_dtype; /* SOF_DTYPE_F32 or SOF_DTYPE_BF16 (F16 optional) */
    int32_t lowp_dtype; /* dtype of lowp_out: SOF_DTYPE_BF16 or SOF_DTYPE_F16 */
    void* lowp_out;     /* (n) optional low-precision copy of the updated params, or NULL;
                           rounded to nearest even, NaN kept (bf16 master: its bits) */
    int64_t index0;     /* number of the slice's first element in the run's flat parameter
                           space: the stochastic rounding of element i draws from index0 + i */
    int32_t num_slots;  /* the algorithm's slot count (sof_optim_plugin.num_slots) */
    int32_t reserved;
    sof_state_slot slot[SOF_MAX_SLOTS]; /* [0, num_slots) used */
} sof_optim_slice;

/* Per-call result: statistics of the scaled grads the call read. */
typedef struct sof_optim_result {
    double grad_sumsq; /* sum over the slice of (grad_scale*g)^2, accumulated in fp64 */
    int32_t nonfinite; /* 1 if any scaled grad was NaN or +-Inf, else 0 */
    int32_t reserved;
} sof_optim_result;

typedef struct sof_optim_init {
    uint32_t struct_size; /* sizeof(sof_optim_init) */
    int32_t num_threads;  /* host plugins: OpenMP threads per call; 1 = caller parallelizes; 0 =
                             default */
    int32_t device;       /* CUDA plugins: device ordinal */
} sof_optim_init;

/* One state slot the algorithm keeps per parameter. */
typedef struct sof_slot_info {
    const char* name;  /* "exp_avg", "exp_avg_sq" (checkpoint file names use it) */
    int32_t is_signed; /* 1: values of either sign; 0: never negative (picks the Q8 code map) */
    int32_t reserved;
} sof_slot_info;

typedef struct sof_optim_ctx sof_optim_ctx; /* opaque, owned by the plugin */

typedef struct sof_optim_plugin {
    uint32_t abi_version; /* SOF_OPTIM_ABI_VERSION the plugin was built with; always first */
    uint32_t struct_size; /* sizeof(sof_optim_plugin) as the plugin knows it */
    const char* name;     /* "cpu_adam", "grace_adam", "gpu_adam" */
    const char* description;
    int32_t target;             /* sof_target: where buffers must live */
    const char* algorithm;      /* what `step` computes and what its hparams mean: "adam" */
    int32_t num_slots;          /* state slots per parameter (Adam: 2) */
    const sof_slot_info* slots; /* (num_slots) */
    uint32_t state_formats;     /* bit (1 << sof_state_format) per slot format it steps */
    uint32_t param_dtypes;      /* bit (1 << sof_dtype) per master dtype it steps */

    /* 0 = cannot run on this machine; higher = preferred. Must be safe to call on any CPU. */
    int32_t (*score)(void);
    /* The code path the plugin will use here ("avx512", "avx2", "scalar", "sve", "sm_90"). */
    const char* (*variant)(void);

    sof_status (*create)(const sof_optim_init* init, sof_optim_ctx** out);
    void (*destroy)(sof_optim_ctx* ctx);
    /* Message of the last failure on this ctx. */
    const char* (*last_error)(sof_optim_ctx* ctx);

    /* Host targets: synchronous. CUDA targets: asynchronous on `stream` (a cudaStream_t, NULL =
     * default stream); every pointer, `result` included, must be device-accessible. */
    sof_status (*step)(sof_optim_ctx* ctx, const sof_optim_slice* slice,
                       const sof_optim_hparams* hp, sof_optim_result* result, void* stream);
    /* Many slices in one call (one kernel launch on CUDA). hp[i] belongs to slices[i]; `result`
     * is one aggregate over all slices (sum of sumsq, OR of nonfinite). */
    sof_status (*step_multi)(sof_optim_ctx* ctx, const sof_optim_slice* slices,
                             const sof_optim_hparams* hp, int32_t count, sof_optim_result* result,
                             void* stream);
    /* Arithmetic inverse of an in-place step with the same grads and hparams: recovers the
     * params and slots approximately (not bitwise; see docs/optimizer-plugins.md). fp32/bf16
     * slots and fp32 params only (else SOF_ERR_UNSUPPORTED: quantized state is rolled back
     * exactly, from the inputs of a separate-output step). lowp_out refreshed if given. */
    sof_status (*rollback)(sof_optim_ctx* ctx, const sof_optim_slice* slice,
                           const sof_optim_hparams* hp, void* stream);
    /* Sum of squares and non-finite flag of scale*g without stepping. */
    sof_status (*grad_stats)(sof_optim_ctx* ctx, const void* grad, int32_t grad_dtype, int64_t n,
                             float scale, sof_optim_result* result, void* stream);
} sof_optim_plugin;

/* The one exported symbol. Returns a pointer to a static, immutable table. */
typedef const sof_optim_plugin* (*sof_optim_entry_fn)(void);

#ifdef __cplusplus
}
#endif

#endif /* SOF_OPTIM_ABI_H */
