// The input deck as plain structs: one struct per YAML section, every key with its default.
// Parsing, validation (file:line:key messages), --set overrides and the effective-deck echo:
// deck.h.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/log.h"

namespace sof::config {

// Bounds checked when a deck is loaded (docs/deck.md): the built-in corpus stores tokens as
// uint16 (token shards may be uint32); vocabularies beyond kMaxVocab (64x the largest real
// tokenizers, 2^24) are typos and would overflow int shape arithmetic; thread counts beyond this
// are typos; device.memory_gb beyond this overflows.
constexpr int kMaxBuiltinVocab = 65536;
constexpr int kMaxVocab = 1 << 24;
constexpr int kMaxThreads = 4096;
constexpr double kMaxDeviceMemoryGb = 1048576.0; // 1 PiB

// Model size bounds, checked before anything is allocated, for every source of a model (deck,
// config.json, llm.c header) by model::validate; the deck's key table uses them as ranges. Far
// beyond real models (the deepest have ~130 layers, the widest 2^15 channels), low enough that
// an absurd value is refused at once instead of filling memory. Besides these, every weight
// matrix must have fewer than 2^31 elements and the model at most kMaxParams parameters.
constexpr int kMaxLayers = 1 << 16;
constexpr int kMaxChannels = 1 << 20;
constexpr int kMaxHeads = 1 << 16;
constexpr int kMaxSeqLen = 1 << 24;
constexpr int kMaxIntermediate = 1 << 24;
constexpr double kMaxParams = 4398046511104.0; // 2^42 (17.6 TB of fp32 weights)
constexpr int kMaxExperts = 512;               // experts per MoE layer (= kernels::kMaxExperts)
constexpr int kMaxTopK = 32;                   // experts per token (= kernels::kMaxTopK)

// The architectures (model.type); model::Arch is this enum.
// The table of what each one is (block features, Hugging Face names and keys): model/arch.cpp.
enum class ModelType {
    Gpt2,     // LayerNorm, learned positions, GELU MLP, fused qkv with biases, tied LM head
    Llama,    // RMSNorm, RoPE, SwiGLU, GQA, no biases (attention_bias optional), tied or untied
    Qwen2,    // Llama + q/k/v biases
    Qwen3,    // Llama + per-head RMSNorm on q and k (qk-norm), explicit head_dim
    Phi3,     // Llama with fused qkv_proj / gate_up_proj tensors in its files (Phi-3, Phi-4)
    Mistral,  // Llama + a sliding attention window
    SeedOss,  // Llama + q/k/v biases, decoupled head_dim, attention and residual dropout
    Qwen3Moe, // Qwen3 with mixture-of-experts MLPs (dense MLP layers in between)
    Mixtral,  // Mistral with mixture-of-experts MLPs in every layer (always renormalized)
    GptOss,   // q/k/v/o biases, sinks, sliding/full layers, YaRN; MoE with biases and a clamped
              // SwiGLU (top-k of the logits, softmax over those k)
};
// model.type's spellings, indexed by ModelType (also the manifest's and Hugging Face's
// model_type names).
inline constexpr const char* kModelTypeNames[] = {"gpt2",    "llama",   "qwen2",    "qwen3",
                                                  "phi3",    "mistral", "seed_oss", "qwen3_moe",
                                                  "mixtral", "gpt_oss"};
inline constexpr int kNumModelTypes = static_cast<int>(sizeof(kModelTypeNames) / sizeof(char*));

struct ModelConfig {
    ModelType type = ModelType::Gpt2; // gpt2 | llama | qwen2 | qwen3 | phi3 | mistral | seed_oss
                                      // | qwen3_moe | mixtral | gpt_oss
    int num_layers = 4;               // L
    int num_heads = 4;                // NH
    int channels = 128;               // C, divisible by num_heads
    int max_seq_len = 256;            // maxT (positions)
    int vocab_size = 512;             // V
    int padded_vocab_size = 0;        // Vp; 0 = round V up to a multiple of 128
    // LLaMA family (llama, qwen2, qwen3); ignored by gpt2
    int num_kv_heads = 0;                   // NKV (grouped-query attention); 0 = num_heads
    int head_dim = 0;                       // 0 = channels / num_heads
    int intermediate_size = 0;              // SwiGLU hidden size (required for the LLaMA family)
    float norm_eps = 1e-5f;                 // RMSNorm eps
    double rope_theta = 10000.0;            // RoPE base
    std::string rope_scaling_type = "none"; // none | llama3 | yarn
    double rope_scaling_factor = 8.0;
    double rope_scaling_low_freq_factor = 1.0;  // llama3
    double rope_scaling_high_freq_factor = 4.0; // llama3
    int rope_scaling_original_max_position = 8192;
    double rope_scaling_beta_fast = 32.0;       // yarn
    double rope_scaling_beta_slow = 1.0;        // yarn
    double rope_scaling_attention_factor = 0.0; // yarn: cos/sin scale; 0 = 0.1 ln(factor) + 1
    bool rope_scaling_truncate = true;          // yarn: round the correction range outward
    bool tie_embeddings = true;                 // LM head shares the embedding (gpt2: always)
    bool attention_bias = false;                // q/k/v projection biases (qwen2: always)
    bool attention_out_bias = false;            // attention output projection (o_proj) bias
    bool mlp_bias = false;                      // SwiGLU gate/up/down biases
    bool attention_sinks = false; // one learned logit per head joins every softmax row
    int sliding_window = 0;       // keys t-W+1..t seen by query t in windowed layers; 0 = none
    std::string layer_types = ""; // windowed layers: "" = all (with sliding_window), else a
                                  // comma list of sliding|full repeated over the layers
    // mixture of experts (qwen3_moe, mixtral, gpt_oss; docs/moe.md): experts per MoE layer (0 =
    // dense), experts per token, each expert's SwiGLU width (mixtral, gpt_oss: 0 =
    // intermediate_size), renormalized top-k weights (mixtral: always), which layers are sparse
    // (layer l: l not in mlp_only_layers and (l + 1) % decoder_sparse_step == 0), the
    // load-balancing loss (added x router_aux_loss_coef when output_router_logits)
    int num_experts = 0;
    int num_experts_per_tok = 0;
    int moe_intermediate_size = 0;
    bool norm_topk_prob = false;
    int decoder_sparse_step = 1;
    std::string mlp_only_layers = ""; // comma list of layer indices
    float router_aux_loss_coef = 0.001f;
    bool output_router_logits = false;
    // ours (not in config.json): the router z-loss's weight, coef x z joins the training loss
    // (z: the mean over the sparse layers' tokens of logsumexp(router logits)^2); 0 = off
    float router_z_loss_coef = 0.0f;
    float attention_dropout = -1.0f; // attention-probability dropout; -1 = auto (the model's:
                                     // config.json's with init_from, else 0)
    float residual_dropout = -1.0f;  // dropout of each block branch before its residual add;
                                     // -1 = auto (as attention_dropout)
    std::string init_from;  // llm.c GPT-2 fp32 checkpoint (version 3), a Hugging Face model
                            // directory (config.json + safetensors), or empty
    float init_std = 0.02f; // N(0, init_std) init; residual projections scaled by 1/sqrt(2L)
    bool recompute = false; // per-layer activation recomputation in backward
    // Long sequences (docs/model.md "Long sequences"): tokens per LM head + loss tile and per MLP
    // tile (-1 = auto, 0 = untiled), and the recompute checkpoints in pinned host memory
    int loss_tile = -1;
    int mlp_tile = -1;
    bool offload_checkpoints = false;
    int device_checkpoints = 0; // with offload_checkpoints: the first N stay in device memory
};

struct BuiltinDataConfig {
    uint64_t seed = 1234; // generator seed (same seed = same corpus)
    int64_t train_tokens = 1 << 21;
    int64_t val_tokens = 1 << 16;
};

struct DataConfig {
    std::string train = "builtin"; // "builtin" or a glob of llm.c token shards
    std::string val = "builtin";   // "builtin" or a glob of llm.c token shards
    BuiltinDataConfig builtin;
    bool shuffle = true;  // false: sequential llm.c order from the first shard
    uint64_t seed = 1337; // shuffle order seed
    // loss masks (<shard>.mask, docs/data.md): auto = used when every shard of a split has one,
    // require = must be there, ignore = not used (every target counts)
    std::string loss_mask = "auto";
    // packing (docs/data.md): each row holds documents separated by EOS; attention stays inside
    // a document, positions restart at each, the target across a boundary is not counted
    bool pack = false;
    int eos_id = -1; // the document separator for pack; -1 = auto (prepare.json next to the
                     // training shards, else model.init_from's config.json eos_token_id)
};

enum class LrSchedule { Constant, Linear, Cosine, Wsd };
enum class Precision { FP32, BF16 }; // working precision of weights/grads on the device

struct TrainConfig {
    int batch_size = 4;   // B, micro-batch sequences per rank
    int seq_len = 64;     // T
    int grad_accum = 1;   // micro-batches per optimizer step
    int global_batch = 0; // sequences per optimizer step over all ranks; 0 = not stated (then
                          // batch_size x grad_accum x data-parallel ranks); when stated,
                          // grad_accum (and if needed batch_size) are derived at run time
    int steps = 100;      // optimizer steps in total (the LR schedule spans these)
    int stop_after = 0;   // end this run once this many steps are done in total; 0 = steps
    float lr = 1e-3f;
    float min_lr = 0.0f; // floor of the linear, cosine and wsd decays
    int warmup_steps = 0;
    LrSchedule schedule = LrSchedule::Constant;
    float decay_fraction = 0.2f; // wsd: the last fraction of train.steps spent decaying
    float grad_clip = 1.0f;      // global-norm clip threshold; 0 = off
    int eval_every = 0;          // 0 = only at start and end
    int eval_batches = 4;
    int log_every = 1;
    uint64_t seed = 42;         // parameter init seed
    int checkpoint_every = 0;   // 0 = only at the end (if checkpoint_dir is set)
    std::string checkpoint_dir; // empty = no checkpoints
    int keep_checkpoints = 2;   // newest N kept; 0 = keep all
    std::string resume;         // checkpoint directory, "auto" (newest in checkpoint_dir) or empty
    bool resume_convert_state = false; // resume may change optimizer.state_dtype, state_block or
                                       // master_dtype (the state converted on load)
    std::string metrics;               // JSONL metrics file or empty ("" = <out_dir>/metrics.jsonl)
    Precision dtype =
        Precision::FP32; // bf16: forward/backward see bf16-rounded weights, fp32 master
};

enum class AdamMode { AdamW, Adam };
// Format of the Adam moments m, v in memory (computed in fp32 either way): fp32, bf16, or q8
// (block-wise 8-bit codes with one fp32 scale per optimizer.state_block elements, optim/qstate.h);
// auto: the planner picks the first of fp32, bf16, q8 that fits.
enum class StateDtype { FP32, BF16, Q8, Auto };
// dtype of the master params: fp32, or bf16 with stochastic rounding (every update rounded up or
// down with the probability of its dropped fraction, Philox keyed by train.seed, step and the
// element); auto: the planner keeps fp32 unless it does not fit.
enum class MasterDtype { FP32, BF16, Auto };

struct OptimizerConfig {
    std::string plugin = "auto"; // plugin name or "auto" (highest score)
    std::string plugin_dir;      // empty = <exe dir>/../plugins, then $SOF_PLUGIN_DIR
    AdamMode type = AdamMode::AdamW;
    float beta1 = 0.9f;
    float beta2 = 0.999f;
    float eps = 1e-8f;
    float weight_decay = 0.0f; // applied to matrices and embeddings only
    bool bias_correction = true;
    int threads = 0; // optimizer threads; 0 = all cores of this rank
    StateDtype state_dtype = StateDtype::FP32;
    int state_block = 256; // q8 moments: elements per scale (a power of two, 64..4096)
    MasterDtype master_dtype = MasterDtype::FP32;
};

enum class Schedule { SuperOffload, Interleaved, Synchronous };
// exact: a second state set (bitwise); inverse: the step's arithmetic inverse (one set, drift);
// auto: exact where it fits the host memory, else inverse (the planner decides; unresolved =
// exact).
enum class Rollback { Exact, Inverse, Auto };
enum class CastAt { Device, Host, Auto }; // auto: the planner picks (unresolved = device)
// speculation-then-validation: off, on, or auto (on, paused while clipping is frequent).
enum class Stv { Off, On, Auto };
enum class WeightsPolicy { Stationary, Flow, Auto };
// weight flow without accumulation: the model's fp32 grads in a device ring of units (device), or
// one whole-model pinned host buffer (host; always with accumulation); auto: the planner picks
// device when it fits (unresolved = device).
enum class FlowGrads { Device, Host, Auto };

struct OffloadConfig {
    bool enabled = false; // false: plain path (params, grads, state on the device)
    Schedule schedule = Schedule::SuperOffload;
    double bucket_mb = 64.0;
    Stv stv = Stv::On; // speculation-then-validation
    Rollback rollback = Rollback::Auto;
    int gpu_tail_buckets = 0; // -1 = auto (planner)
    CastAt cast = CastAt::Device;
    WeightsPolicy weights = WeightsPolicy::Stationary;
    FlowGrads flow_grads = FlowGrads::Auto;
    int prefetch_layers = 1;
    int interleave_k = -1; // -1 = auto (Deep Optimizer States Eq. 1)
    std::string hardware;  // planner hardware profile (YAML) for `auto`; "" = built-in
};

enum class DeviceType { Auto, Host, Cuda };

struct DeviceConfig {
    DeviceType type = DeviceType::Auto; // auto = cuda when a GPU is visible, else host
    double memory_gb = 0.0;             // host device arena capacity; 0 = 8 GiB
    int id = -1;                        // CUDA device; -1 = local rank modulo device count
};

struct ParallelConfig {
    int sp = 1;         // Ulysses sequence-parallel degree; dp = world / sp
    int zero_stage = 3; // 0 (replicated) or 3 (sharded)
    bool bind = true;   // bind threads and memory to this rank's NUMA node
};

struct RuntimeConfig {
    std::string out_dir = "runs/default"; // logs, metrics, checkpoints default here
    std::string trace;                    // Chrome trace JSON file or empty
    int threads = 0;                      // OpenMP threads for compute; 0 = cores of this rank
    core::LogLevel log_level = core::LogLevel::Info; // quiet | info | debug
};

struct DebugConfig {
    std::vector<int> inject_nonfinite_steps; // steps whose grads get a NaN injected
    int inject_rank = -1;                    // only this rank injects (-1: every rank)
    int fail_rank = -1;                      // this rank throws at step fail_step (-1: none)
    int fail_step = -1;                      // see fail_rank
    int64_t hold_for_stop = -1; // after this step every rank waits for a stop request (tests)
    bool fail_hard = false;     // fail_rank exits the process (a crash) instead of throwing
    bool fp32_gathers = false;  // ZeRO-3 all-gathers fp32 weights even when train.dtype is bf16
    // auto | staged | cuda_aware: the device-buffer collective path, forced (tests: the staged
    // and CUDA-aware code paths run on the host device too)
    std::string collectives = "auto";
    // auto | cuda_cores | tensor_cores: the CUDA attention kernel (kernels::AttnKernel): auto runs
    // the tensor-core kernel where it applies (bf16, head dim 64/128); cuda_cores forces the
    // CUDA-core kernel (a GPU whose tensor-core kernel misbehaves can still train and compare)
    std::string attention_kernel = "auto";
};

struct Config {
    ModelConfig model;
    DataConfig data;
    TrainConfig train;
    OptimizerConfig optimizer;
    OffloadConfig offload;
    DeviceConfig device;
    ParallelConfig parallel;
    RuntimeConfig runtime;
    DebugConfig debug;
    std::string deck_path; // the deck file this came from ("" for defaults)
    // where each explicitly set key came from ("deck.yaml:3", "--set train.lr=1"); keys at their
    // default are absent. For messages of checks made after loading (model::validate_deck).
    std::map<std::string, std::string> origins;
};

} // namespace sof::config
