/* sof_optim_abi.h: the versioned C ABI between superoffload and its optimizer plugins.
 * This is the ONLY header a plugin includes. Pure C, no exceptions, no exit/abort/MPI in plugins.
 */
#ifndef SOF_OPTIM_ABI_H
#define SOF_OPTIM_ABI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bump on any incompatible change; the loader rejects a plugin whose abi_version differs and
 * names both numbers. Compatible growth appends fields and is detected through struct_size. */
#define SOF_OPTIM_ABI_VERSION 2

/* Name of the single symbol every plugin exports. */
#define SOF_OPTIM_ENTRY "sof_optim_plugin_get"

typedef enum sof_status {
    SOF_OK = 0,
    SOF_ERR_INVALID_ARGUMENT = 1, /* null pointer, bad dtype, struct_size too small, ... */
    SOF_ERR_UNSUPPORTED = 2,      /* feature not offered by this plugin (e.g. fp16 copy) */
    SOF_ERR_DEVICE = 3,           /* CUDA (or other device) call failed; see last_error */
    SOF_ERR_OUT_OF_MEMORY = 4,
    SOF_ERR_INTERNAL = 5
} sof_status;

typedef enum sof_dtype { SOF_DTYPE_F32 = 0, SOF_DTYPE_BF16 = 1, SOF_DTYPE_F16 = 2 } sof_dtype;

/* Where the buffers passed to a plugin live and where it computes. */
typedef enum sof_target { SOF_TARGET_HOST = 0, SOF_TARGET_CUDA = 1 } sof_target;

typedef enum sof_adam_mode {
    SOF_ADAM_ADAMW = 0, /* decoupled weight decay: p *= 1 - lr*wd (torch.optim.AdamW) */
    SOF_ADAM_L2 = 1     /* L2 penalty added to the gradient: g += wd*p (torch.optim.Adam) */
} sof_adam_mode;

/* Hyperparameters of one step over one slice. Bias correction is derived from `step` on every
 * call (1-based), never kept as state in the plugin, so slices of one tensor may be stepped by
 * different threads in any order. */
typedef struct sof_adam_hparams {
    uint32_t struct_size; /* sizeof(sof_adam_hparams) */
    float lr;
    float beta1;
    float beta2;
    float eps;
    float weight_decay;      /* 0 disables decay for this slice */
    int64_t step;            /* 1-based optimizer step count of this slice */
    int32_t mode;            /* sof_adam_mode */
    int32_t bias_correction; /* 1: divide by (1-b1^t), (1-b2^t); 0: do not */
    float grad_scale; /* every grad is multiplied by this before use (clip coef, 1/loss scale) */
} sof_adam_hparams;

/* One contiguous slice of n parameters. Inputs and outputs may be the same buffers (in place) or
 * disjoint (separate outputs: the inputs are left untouched, so an exact rollback is free).
 * Partial overlap is not allowed. Destination buffers are written without being read.
 * The moments are stored in state_dtype: fp32, or bf16 (read and widened to fp32, the step
 * computed in fp32 exactly as with fp32 state, the new moments rounded to nearest even). */
typedef struct sof_adam_slice {
    uint32_t struct_size; /* sizeof(sof_adam_slice) */
    int64_t n;
    const float* param;     /* (n) fp32 master params, read */
    const void* grad;       /* (n) grads of dtype grad_dtype, read */
    int32_t grad_dtype;     /* SOF_DTYPE_F32 or SOF_DTYPE_BF16 (F16 optional) */
    int32_t lowp_dtype;     /* dtype of lowp_out: SOF_DTYPE_BF16 or SOF_DTYPE_F16 */
    const void* exp_avg;    /* (n) first moment m of state_dtype, read */
    const void* exp_avg_sq; /* (n) second moment v of state_dtype, read */
    float* param_out;       /* (n) updated params; == param for in place */
    void* exp_avg_out;      /* (n) updated m; == exp_avg for in place */
    void* exp_avg_sq_out;   /* (n) updated v; == exp_avg_sq for in place */
    void* lowp_out;         /* (n) optional low-precision copy of the updated params, or NULL;
                               rounded to nearest even, NaN kept */
    int32_t state_dtype;    /* SOF_DTYPE_F32 or SOF_DTYPE_BF16: exp_avg(_sq) and their outputs */
    int32_t reserved;
} sof_adam_slice;

/* Per-call result: statistics of the scaled grads the call read. */
typedef struct sof_adam_result {
    double grad_sumsq; /* sum over the slice of (grad_scale*g)^2, accumulated in fp64 */
    int32_t nonfinite; /* 1 if any scaled grad was NaN or +-Inf, else 0 */
    int32_t reserved;
} sof_adam_result;

typedef struct sof_optim_init {
    uint32_t struct_size; /* sizeof(sof_optim_init) */
    int32_t num_threads;  /* host plugins: OpenMP threads per call; 1 = caller parallelizes; 0 =
                             default */
    int32_t device;       /* CUDA plugins: device ordinal */
} sof_optim_init;

typedef struct sof_optim_ctx sof_optim_ctx; /* opaque, owned by the plugin */

typedef struct sof_optim_plugin {
    uint32_t abi_version; /* SOF_OPTIM_ABI_VERSION the plugin was built with; always first */
    uint32_t struct_size; /* sizeof(sof_optim_plugin) as the plugin knows it */
    const char* name;     /* "cpu_adam", "grace_adam", "gpu_adam" */
    const char* description;
    int32_t target; /* sof_target: where buffers must live */

    /* 0 = cannot run on this machine; higher = preferred. Must be safe to call on any CPU. */
    int32_t (*score)(void);
    /* The code path the plugin will use here ("avx512", "avx2", "scalar", "sve", "sm_90"). */
    const char* (*variant)(void);

    sof_status (*create)(const sof_optim_init* init, sof_optim_ctx** out);
    void (*destroy)(sof_optim_ctx* ctx);
    /* Message of the last failure on this ctx (thread-local where the plugin is threaded). */
    const char* (*last_error)(sof_optim_ctx* ctx);

    /* Host targets: synchronous. CUDA targets: asynchronous on `stream` (a cudaStream_t, NULL =
     * default stream); every pointer, `result` included, must be device-accessible. */
    sof_status (*adam_step)(sof_optim_ctx* ctx, const sof_adam_slice* slice,
                            const sof_adam_hparams* hp, sof_adam_result* result, void* stream);
    /* Many slices in one call (one kernel launch on CUDA). hp[i] belongs to slices[i]; `result`
     * is one aggregate over all slices (sum of sumsq, OR of nonfinite). */
    sof_status (*adam_step_multi)(sof_optim_ctx* ctx, const sof_adam_slice* slices,
                                  const sof_adam_hparams* hp, int32_t count,
                                  sof_adam_result* result, void* stream);
    /* Arithmetic inverse of an in-place step with the same grads and hparams: recovers p, m, v
     * approximately (not bitwise; see docs/optimizer-plugins.md). Uses param/exp_avg/exp_avg_sq
     * as the state to invert, in place; lowp_out refreshed if given. */
    sof_status (*adam_rollback)(sof_optim_ctx* ctx, const sof_adam_slice* slice,
                                const sof_adam_hparams* hp, void* stream);
    /* Sum of squares and non-finite flag of scale*g without stepping. */
    sof_status (*grad_stats)(sof_optim_ctx* ctx, const void* grad, int32_t grad_dtype, int64_t n,
                             float scale, sof_adam_result* result, void* stream);
} sof_optim_plugin;

/* The one exported symbol. Returns a pointer to a static, immutable table. */
typedef const sof_optim_plugin* (*sof_optim_entry_fn)(void);

#ifdef __cplusplus
}
#endif

#endif /* SOF_OPTIM_ABI_H */
