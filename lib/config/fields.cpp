// The deck's key table (every key, its member, type, choices and range) and the conversions
// between YAML scalar text and typed values, with the messages for wrong types and ranges.
#include "config/fields.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>

#include "core/error.h"

namespace sof::config {

namespace {

Range at_least(double v) {
    Range r;
    r.has_min = true;
    r.min = v;
    return r;
}

Range above(double v) {
    Range r = at_least(v);
    r.min_open = true;
    return r;
}

Range half_open(double lo, double hi) { // [lo, hi)
    Range r = at_least(lo);
    r.has_max = true;
    r.max = hi;
    r.max_open = true;
    return r;
}

Range closed(double lo, double hi) { // [lo, hi]
    Range r = at_least(lo);
    r.has_max = true;
    r.max = hi;
    return r;
}

template <class E> EnumRef enum_ref(E* p) {
    return EnumRef{[p] { return static_cast<int>(*p); }, [p](int i) { *p = static_cast<E>(i); }};
}

Field make(const char* key, FieldTarget target, Range range = Range()) {
    Field f;
    f.key = key;
    f.target = target;
    f.range = range;
    return f;
}

Field choice(const char* key, FieldTarget target, std::vector<std::string> choices) {
    Field f = make(key, target);
    f.choices = std::move(choices);
    return f;
}

Field with(Field f, Resume r) {
    f.resume = r;
    return f;
}

Field int_or_auto(const char* key, int* target, Range range) {
    Field f = make(key, target, range);
    f.auto_ok = true;
    return f;
}

Field float_or_auto(const char* key, float* target, Range range) {
    Field f = make(key, target, range);
    f.auto_ok = true;
    return f;
}

std::string lower(std::string s) {
    for (char& c : s)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

std::string trim(const std::string& s) {
    size_t b = 0, e = s.size();
    while (b < e && std::isspace(static_cast<unsigned char>(s[b])))
        b++;
    while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1])))
        e--;
    return s.substr(b, e - b);
}

// "<where>: <key>" for file origins; just "<where>" for --set (it already names the key).
std::string prefix(const Field& f, const Origin& at) {
    return at.from_file ? at.where + ": " + f.key : at.where;
}

[[noreturn]] void type_error(const Field& f, const std::string& text, bool is_null,
                             const Origin& at) {
    std::string got = is_null ? std::string("nothing") : "'" + text + "'";
    std::string msg = prefix(f, at) + ": expected " + describe_type(f) + ", got " + got;
    if (!f.choices.empty() && !is_null) {
        std::string near = nearest(lower(text), f.choices);
        if (!near.empty()) msg += " (did you mean '" + near + "'?)";
    }
    core::throw_error(core::ErrorKind::Config, msg);
}

bool in_range(const Range& r, double v) {
    if (r.has_min && (r.min_open ? !(v > r.min) : !(v >= r.min))) return false;
    if (r.has_max && (r.max_open ? !(v < r.max) : !(v <= r.max))) return false;
    return true;
}

void check_range(const Field& f, const Range& r, double v, const std::string& text,
                 const Origin& at) {
    if (in_range(r, v)) return;
    std::string rs = describe_range(r);
    std::string how =
        (r.has_min && r.has_max) ? "out of range " + rs : "out of range (must be " + rs + ")";
    core::throw_error(core::ErrorKind::Config,
                      at.where + ": " + f.key + " = " + text + " is " + how);
}

bool parse_ll(const std::string& t, long long& out) {
    if (t.empty()) return false;
    size_t i = (t[0] == '+' || t[0] == '-') ? 1 : 0;
    if (i == t.size()) return false;
    for (size_t j = i; j < t.size(); j++)
        if (!std::isdigit(static_cast<unsigned char>(t[j]))) return false;
    errno = 0;
    out = std::strtoll(t.c_str(), nullptr, 10);
    return errno == 0;
}

bool parse_ull(const std::string& t, unsigned long long& out) {
    if (t.empty()) return false;
    size_t i = t[0] == '+' ? 1 : 0;
    if (i == t.size()) return false;
    for (size_t j = i; j < t.size(); j++)
        if (!std::isdigit(static_cast<unsigned char>(t[j]))) return false;
    errno = 0;
    out = std::strtoull(t.c_str(), nullptr, 10);
    return errno == 0;
}

// A finite decimal number (no inf/nan, no hex).
bool looks_decimal(const std::string& t) {
    if (t.empty()) return false;
    for (char c : t)
        if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == 'E' ||
              c == '+' || c == '-'))
            return false;
    return true;
}

// strto* report ERANGE for overflow (the result is then inf, refused by isfinite) and for
// underflow, where the result is the correctly rounded tiny value, which we take. Whether a value
// that rounds up to the smallest normal (1.17549435e-38 -> FLT_MIN, as our effective deck writes
// it) counts as underflow depends on the CPU: glibc on aarch64 detects tininess before rounding, on
// x86-64 after.
bool underflow_or_ok(int err) {
    return err == 0 || err == ERANGE;
}

bool parse_double(const std::string& t, double& out) {
    if (!looks_decimal(t)) return false;
    char* end = nullptr;
    errno = 0;
    out = std::strtod(t.c_str(), &end);
    return end == t.c_str() + t.size() && underflow_or_ok(errno) && std::isfinite(out);
}

bool parse_float(const std::string& t, float& out) {
    if (!looks_decimal(t)) return false;
    char* end = nullptr;
    errno = 0;
    out = std::strtof(t.c_str(), &end);
    return end == t.c_str() + t.size() && underflow_or_ok(errno) && std::isfinite(out);
}

bool parse_bool(const std::string& t, bool& out) {
    std::string l = lower(t);
    if (l == "true" || l == "yes" || l == "on") {
        out = true;
        return true;
    }
    if (l == "false" || l == "no" || l == "off") {
        out = false;
        return true;
    }
    return false;
}

// One integer element of a list field (or of an int field), range-checked.
long long parse_int_checked(const Field& f, const std::string& text, bool is_null, const Origin& at,
                            long long lo, long long hi) {
    long long v = 0;
    if (is_null || !parse_ll(text, v)) type_error(f, text, is_null, at);
    if (v < lo || v > hi)
        core::throw_error(core::ErrorKind::Config,
                          core::strfmt("%s: %s = %s does not fit (allowed %lld..%lld)",
                                       at.where.c_str(), f.key.c_str(), text.c_str(), lo, hi));
    if (!f.int_set.empty() && std::find(f.int_set.begin(), f.int_set.end(), v) == f.int_set.end()) {
        std::string allowed;
        for (long long a : f.int_set)
            allowed += (allowed.empty() ? "" : " or ") + std::to_string(a);
        core::throw_error(core::ErrorKind::Config, at.where + ": " + f.key + " = " + text +
                                                       " is not allowed (use " + allowed + ")");
    }
    check_range(f, f.range, static_cast<double>(v), text, at);
    return v;
}

} // namespace

std::vector<Field> bind_fields(Config& c) {
    ModelConfig& m = c.model;
    DataConfig& d = c.data;
    TrainConfig& t = c.train;
    OptimizerConfig& o = c.optimizer;
    OffloadConfig& f = c.offload;
    DeviceConfig& dv = c.device;
    ParallelConfig& p = c.parallel;
    RuntimeConfig& r = c.runtime;
    std::vector<Field> v;

    v.push_back(with(choice("model.type", enum_ref(&m.type),
                            {std::begin(kModelTypeNames), std::end(kModelTypeNames)}),
                     Resume::Arch));
    v.push_back(with(make("model.num_layers", &m.num_layers, closed(1, kMaxLayers)), Resume::Arch));
    v.push_back(with(make("model.num_heads", &m.num_heads, closed(1, kMaxHeads)), Resume::Arch));
    v.push_back(with(make("model.channels", &m.channels, closed(1, kMaxChannels)), Resume::Arch));
    v.push_back(
        with(make("model.max_seq_len", &m.max_seq_len, closed(1, kMaxSeqLen)), Resume::Arch));
    v.push_back(with(make("model.vocab_size", &m.vocab_size, closed(1, kMaxVocab)), Resume::Arch));
    v.push_back(with(make("model.padded_vocab_size", &m.padded_vocab_size, closed(0, kMaxVocab)),
                     Resume::Arch));
    v.push_back(
        with(make("model.num_kv_heads", &m.num_kv_heads, closed(0, kMaxHeads)), Resume::Arch));
    v.push_back(with(make("model.head_dim", &m.head_dim, closed(0, kMaxChannels)), Resume::Arch));
    v.push_back(
        with(make("model.intermediate_size", &m.intermediate_size, closed(0, kMaxIntermediate)),
             Resume::Arch));
    v.push_back(with(make("model.norm_eps", &m.norm_eps, above(0)), Resume::Arch));
    v.push_back(with(make("model.rope_theta", &m.rope_theta, above(0)), Resume::Arch));
    v.push_back(
        with(choice("model.rope_scaling.type", &m.rope_scaling_type, {"none", "llama3", "yarn"}),
             Resume::Arch));
    v.push_back(
        with(make("model.rope_scaling.factor", &m.rope_scaling_factor, above(0)), Resume::Arch));
    v.push_back(
        with(make("model.rope_scaling.low_freq_factor", &m.rope_scaling_low_freq_factor, above(0)),
             Resume::Arch));
    v.push_back(with(
        make("model.rope_scaling.high_freq_factor", &m.rope_scaling_high_freq_factor, above(0)),
        Resume::Arch));
    v.push_back(with(make("model.rope_scaling.original_max_position_embeddings",
                          &m.rope_scaling_original_max_position, at_least(1)),
                     Resume::Arch));
    v.push_back(with(make("model.rope_scaling.beta_fast", &m.rope_scaling_beta_fast, above(0)),
                     Resume::Arch));
    v.push_back(with(make("model.rope_scaling.beta_slow", &m.rope_scaling_beta_slow, above(0)),
                     Resume::Arch));
    v.push_back(with(
        make("model.rope_scaling.attention_factor", &m.rope_scaling_attention_factor, at_least(0)),
        Resume::Arch));
    v.push_back(with(make("model.rope_scaling.truncate", &m.rope_scaling_truncate), Resume::Arch));
    v.push_back(with(make("model.tie_embeddings", &m.tie_embeddings), Resume::Arch));
    v.push_back(with(make("model.attention_bias", &m.attention_bias), Resume::Arch));
    v.push_back(with(make("model.attention_out_bias", &m.attention_out_bias), Resume::Arch));
    v.push_back(with(make("model.mlp_bias", &m.mlp_bias), Resume::Arch));
    v.push_back(with(make("model.attention_sinks", &m.attention_sinks), Resume::Arch));
    v.push_back(
        with(make("model.sliding_window", &m.sliding_window, closed(0, kMaxSeqLen)), Resume::Arch));
    v.push_back(with(make("model.layer_types", &m.layer_types), Resume::Arch));
    v.push_back(
        with(make("model.num_experts", &m.num_experts, closed(0, kMaxExperts)), Resume::Arch));
    v.push_back(with(make("model.num_experts_per_tok", &m.num_experts_per_tok, closed(0, kMaxTopK)),
                     Resume::Arch));
    v.push_back(with(
        make("model.moe_intermediate_size", &m.moe_intermediate_size, closed(0, kMaxIntermediate)),
        Resume::Arch));
    v.push_back(with(make("model.norm_topk_prob", &m.norm_topk_prob), Resume::Arch));
    v.push_back(
        with(make("model.decoder_sparse_step", &m.decoder_sparse_step, at_least(1)), Resume::Arch));
    v.push_back(with(make("model.mlp_only_layers", &m.mlp_only_layers), Resume::Arch));
    v.push_back(with(make("model.router_aux_loss_coef", &m.router_aux_loss_coef, at_least(0)),
                     Resume::Arch));
    v.push_back(with(make("model.output_router_logits", &m.output_router_logits), Resume::Arch));
    // the loss, not the model: it may change on resume (reported), as the dropout rates
    v.push_back(make("model.router_z_loss_coef", &m.router_z_loss_coef, at_least(0)));
    v.push_back(float_or_auto("model.attention_dropout", &m.attention_dropout, half_open(0, 1)));
    v.push_back(float_or_auto("model.residual_dropout", &m.residual_dropout, half_open(0, 1)));
    v.push_back(make("model.init_from", &m.init_from));
    v.push_back(make("model.init_std", &m.init_std, at_least(0)));
    v.push_back(make("model.recompute", &m.recompute));
    v.push_back(int_or_auto("model.loss_tile", &m.loss_tile, at_least(0)));
    v.push_back(int_or_auto("model.mlp_tile", &m.mlp_tile, at_least(0)));
    v.push_back(make("model.offload_checkpoints", &m.offload_checkpoints));
    v.push_back(make("model.device_checkpoints", &m.device_checkpoints, at_least(0)));

    v.push_back(with(make("data.train", &d.train), Resume::Match));
    v.push_back(make("data.val", &d.val));
    v.push_back(with(make("data.shuffle", &d.shuffle), Resume::Match));
    v.push_back(with(make("data.seed", &d.seed), Resume::Match));
    v.push_back(choice("data.loss_mask", &d.loss_mask, {"auto", "require", "ignore"}));
    v.push_back(make("data.pack", &d.pack));
    v.push_back(make("data.eos_id", &d.eos_id, at_least(-1)));
    v.push_back(with(make("data.builtin.seed", &d.builtin.seed), Resume::Match));
    v.push_back(with(make("data.builtin.train_tokens", &d.builtin.train_tokens, at_least(1)),
                     Resume::Match));
    v.push_back(make("data.builtin.val_tokens", &d.builtin.val_tokens, at_least(1)));

    v.push_back(make("train.batch_size", &t.batch_size, at_least(1)));
    v.push_back(with(make("train.seq_len", &t.seq_len, at_least(1)), Resume::Match));
    v.push_back(make("train.grad_accum", &t.grad_accum, at_least(1)));
    v.push_back(make("train.global_batch", &t.global_batch, at_least(0)));
    v.push_back(make("train.steps", &t.steps, at_least(1)));
    v.push_back(make("train.stop_after", &t.stop_after, at_least(0)));
    v.push_back(make("train.lr", &t.lr, at_least(0)));
    v.push_back(make("train.min_lr", &t.min_lr, at_least(0)));
    v.push_back(make("train.warmup_steps", &t.warmup_steps, at_least(0)));
    v.push_back(
        choice("train.schedule", enum_ref(&t.schedule), {"constant", "linear", "cosine", "wsd"}));
    v.push_back(make("train.decay_fraction", &t.decay_fraction, closed(0, 1)));
    v.push_back(make("train.grad_clip", &t.grad_clip, at_least(0)));
    v.push_back(make("train.eval_every", &t.eval_every, at_least(0)));
    v.push_back(make("train.eval_batches", &t.eval_batches, at_least(1)));
    v.push_back(make("train.log_every", &t.log_every, at_least(0)));
    v.push_back(make("train.seed", &t.seed));
    v.push_back(make("train.checkpoint_every", &t.checkpoint_every, at_least(0)));
    v.push_back(make("train.checkpoint_dir", &t.checkpoint_dir));
    v.push_back(make("train.keep_checkpoints", &t.keep_checkpoints, at_least(0)));
    v.push_back(with(make("train.resume", &t.resume), Resume::Never));
    v.push_back(make("train.resume_convert_state", &t.resume_convert_state));
    v.push_back(make("train.metrics", &t.metrics));
    v.push_back(choice("train.dtype", enum_ref(&t.dtype), {"fp32", "bf16"}));

    v.push_back(make("optimizer.plugin", &o.plugin));
    v.push_back(make("optimizer.plugin_dir", &o.plugin_dir));
    v.push_back(
        with(choice("optimizer.type", enum_ref(&o.type), {"adamw", "adam"}), Resume::Match));
    v.push_back(with(make("optimizer.beta1", &o.beta1, half_open(0, 1)), Resume::Match));
    v.push_back(with(make("optimizer.beta2", &o.beta2, half_open(0, 1)), Resume::Match));
    v.push_back(with(make("optimizer.eps", &o.eps, above(0)), Resume::Match));
    v.push_back(with(make("optimizer.weight_decay", &o.weight_decay, at_least(0)), Resume::Match));
    v.push_back(with(make("optimizer.bias_correction", &o.bias_correction), Resume::Match));
    v.push_back(make("optimizer.threads", &o.threads, closed(0, kMaxThreads)));
    v.push_back(with(
        choice("optimizer.state_dtype", enum_ref(&o.state_dtype), {"fp32", "bf16", "q8", "auto"}),
        Resume::Match));
    v.push_back(
        with(make("optimizer.state_block", &o.state_block, closed(64, 4096)), Resume::Match));
    v.push_back(
        with(choice("optimizer.master_dtype", enum_ref(&o.master_dtype), {"fp32", "bf16", "auto"}),
             Resume::Match));

    v.push_back(make("offload.enabled", &f.enabled));
    v.push_back(choice("offload.schedule", enum_ref(&f.schedule),
                       {"superoffload", "interleaved", "synchronous"}));
    v.push_back(make("offload.bucket_mb", &f.bucket_mb, above(0)));
    v.push_back(choice("offload.stv", enum_ref(&f.stv), {"false", "true", "auto"}));
    v.push_back(choice("offload.rollback", enum_ref(&f.rollback), {"exact", "inverse", "auto"}));
    v.push_back(int_or_auto("offload.gpu_tail_buckets", &f.gpu_tail_buckets, at_least(0)));
    v.push_back(choice("offload.cast", enum_ref(&f.cast), {"device", "host", "auto"}));
    v.push_back(choice("offload.weights", enum_ref(&f.weights), {"stationary", "flow", "auto"}));
    v.push_back(choice("offload.flow_grads", enum_ref(&f.flow_grads), {"device", "host", "auto"}));
    v.push_back(make("offload.prefetch_layers", &f.prefetch_layers, at_least(0)));
    v.push_back(int_or_auto("offload.interleave_k", &f.interleave_k, at_least(1)));
    v.push_back(make("offload.hardware", &f.hardware));

    v.push_back(choice("device.type", enum_ref(&dv.type), {"auto", "host", "cuda"}));
    v.push_back(make("device.memory_gb", &dv.memory_gb, closed(0, kMaxDeviceMemoryGb)));
    v.push_back(make("device.id", &dv.id, at_least(-1)));

    v.push_back(make("parallel.sp", &p.sp, at_least(1)));
    Field zs = make("parallel.zero_stage", &p.zero_stage);
    zs.int_set = {0, 3};
    v.push_back(zs);
    v.push_back(make("parallel.bind", &p.bind));

    v.push_back(make("runtime.out_dir", &r.out_dir));
    v.push_back(make("runtime.trace", &r.trace));
    v.push_back(make("runtime.threads", &r.threads, closed(0, kMaxThreads)));
    v.push_back(choice("runtime.log_level", enum_ref(&r.log_level), {"quiet", "info", "debug"}));

    v.push_back(make("debug.inject_nonfinite_steps", &c.debug.inject_nonfinite_steps, at_least(0)));
    v.push_back(make("debug.inject_rank", &c.debug.inject_rank, at_least(-1)));
    v.push_back(make("debug.fail_rank", &c.debug.fail_rank, at_least(-1)));
    v.push_back(make("debug.fail_step", &c.debug.fail_step, at_least(-1)));
    v.push_back(make("debug.hold_for_stop", &c.debug.hold_for_stop, at_least(-1)));
    v.push_back(make("debug.fail_hard", &c.debug.fail_hard));
    v.push_back(make("debug.fp32_gathers", &c.debug.fp32_gathers));
    v.push_back(
        choice("debug.collectives", &c.debug.collectives, {"auto", "staged", "cuda_aware"}));
    v.push_back(choice("debug.attention_kernel", &c.debug.attention_kernel,
                       {"auto", "cuda_cores", "tensor_cores"}));
    return v;
}

void set_scalar(const Field& f, const std::string& raw, bool is_null, const Origin& at) {
    std::string text = trim(raw);
    if (auto* p = std::get_if<int*>(&f.target)) {
        if (f.auto_ok && lower(text) == "auto") {
            **p = -1;
            return;
        }
        **p = static_cast<int>(parse_int_checked(f, text, is_null, at, INT_MIN, INT_MAX));
    } else if (auto* p = std::get_if<int64_t*>(&f.target)) {
        **p = parse_int_checked(f, text, is_null, at, LLONG_MIN, LLONG_MAX);
    } else if (auto* p = std::get_if<uint64_t*>(&f.target)) {
        unsigned long long v = 0;
        if (is_null || !parse_ull(text, v)) type_error(f, text, is_null, at);
        **p = v;
    } else if (auto* p = std::get_if<float*>(&f.target)) {
        if (f.auto_ok && lower(text) == "auto") {
            **p = -1.0f;
            return;
        }
        float v = 0;
        if (is_null || !parse_float(text, v)) type_error(f, text, is_null, at);
        check_range(f, f.range, v, text, at);
        **p = v;
    } else if (auto* p = std::get_if<double*>(&f.target)) {
        double v = 0;
        if (is_null || !parse_double(text, v)) type_error(f, text, is_null, at);
        check_range(f, f.range, v, text, at);
        **p = v;
    } else if (auto* p = std::get_if<bool*>(&f.target)) {
        bool v = false;
        if (is_null || !parse_bool(text, v)) type_error(f, text, is_null, at);
        **p = v;
    } else if (auto* p = std::get_if<std::string*>(&f.target)) {
        std::string v = is_null ? std::string() : raw;
        if (!f.choices.empty()) {
            auto it = std::find(f.choices.begin(), f.choices.end(), lower(trim(v)));
            if (it == f.choices.end()) type_error(f, text, is_null, at);
            v = *it;
        }
        **p = v;
    } else if (auto* p = std::get_if<EnumRef>(&f.target)) {
        auto it = std::find(f.choices.begin(), f.choices.end(), lower(text));
        if (is_null || it == f.choices.end()) type_error(f, text, is_null, at);
        p->set(static_cast<int>(it - f.choices.begin()));
    } else if (auto* p = std::get_if<std::vector<int>*>(&f.target)) {
        // A scalar given for a list: one element (or none when empty).
        std::vector<std::string> items;
        if (!is_null && !text.empty()) items.push_back(text);
        set_list(f, items, at);
        (void)p;
    }
}

void set_list(const Field& f, const std::vector<std::string>& items, const Origin& at) {
    auto* p = std::get_if<std::vector<int>*>(&f.target);
    if (!p)
        core::throw_error(core::ErrorKind::Config,
                          prefix(f, at) + ": expected " + describe_type(f) + ", got a list");
    std::vector<int> out;
    for (const std::string& raw : items) {
        std::string t = trim(raw);
        long long v = 0;
        if (!parse_ll(t, v) || v < INT_MIN || v > INT_MAX)
            core::throw_error(core::ErrorKind::Config, prefix(f, at) +
                                                           ": expected a list of integers, got '" +
                                                           t + "' in it");
        check_range(f, f.range, static_cast<double>(v), t, at);
        out.push_back(static_cast<int>(v));
    }
    **p = out;
}

std::string format_value(const Field& f) {
    if (auto* p = std::get_if<int*>(&f.target))
        return (f.auto_ok && **p == -1) ? std::string("auto") : std::to_string(**p);
    if (auto* p = std::get_if<int64_t*>(&f.target)) return std::to_string(**p);
    if (auto* p = std::get_if<uint64_t*>(&f.target)) return std::to_string(**p);
    if (auto* p = std::get_if<float*>(&f.target))
        return (f.auto_ok && **p == -1.0f) ? std::string("auto") : format_float(**p);
    if (auto* p = std::get_if<double*>(&f.target)) return format_double(**p);
    if (auto* p = std::get_if<bool*>(&f.target)) return **p ? "true" : "false";
    if (auto* p = std::get_if<std::string*>(&f.target)) return yaml_quote(**p);
    if (auto* p = std::get_if<EnumRef>(&f.target)) {
        int i = p->get();
        return (i >= 0 && i < static_cast<int>(f.choices.size())) ? f.choices[i] : "?";
    }
    const std::vector<int>& l = **std::get_if<std::vector<int>*>(&f.target);
    std::string s = "[";
    for (size_t i = 0; i < l.size(); i++)
        s += (i ? ", " : "") + std::to_string(l[i]);
    return s + "]";
}

std::string describe_type(const Field& f) {
    if (!f.choices.empty()) {
        std::string s = "one of ";
        for (size_t i = 0; i < f.choices.size(); i++)
            s += (i ? "|" : "") + f.choices[i];
        return s;
    }
    if (std::holds_alternative<int*>(f.target))
        return f.auto_ok ? "an integer or 'auto'" : "an integer";
    if (std::holds_alternative<int64_t*>(f.target)) return "an integer";
    if (std::holds_alternative<uint64_t*>(f.target)) return "a non-negative integer";
    if (std::holds_alternative<float*>(f.target) || std::holds_alternative<double*>(f.target))
        return f.auto_ok ? "a number or 'auto'" : "a number";
    if (std::holds_alternative<bool*>(f.target)) return "true or false";
    if (std::holds_alternative<std::string*>(f.target)) return "a string";
    return "a list of integers";
}

std::string describe_range(const Range& r) {
    auto num = [](double v) { return format_double(v); };
    if (r.has_min && r.has_max)
        return (r.min_open ? "(" : "[") + num(r.min) + ", " + num(r.max) + (r.max_open ? ")" : "]");
    if (r.has_min) return (r.min_open ? "> " : ">= ") + num(r.min);
    if (r.has_max) return (r.max_open ? "< " : "<= ") + num(r.max);
    return "";
}

int edit_distance(const std::string& a, const std::string& b) {
    // Optimal string alignment: insert, delete, substitute, swap two neighbours (each costs 1).
    size_t n = a.size(), m = b.size();
    std::vector<std::vector<int>> d(n + 1, std::vector<int>(m + 1, 0));
    for (size_t i = 0; i <= n; i++)
        d[i][0] = static_cast<int>(i);
    for (size_t j = 0; j <= m; j++)
        d[0][j] = static_cast<int>(j);
    for (size_t i = 1; i <= n; i++) {
        for (size_t j = 1; j <= m; j++) {
            int cost = a[i - 1] == b[j - 1] ? 0 : 1;
            d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
                d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
        }
    }
    return d[n][m];
}

std::string nearest(const std::string& word, const std::vector<std::string>& candidates) {
    std::string best;
    int best_d = INT_MAX;
    for (const std::string& c : candidates) {
        int d = edit_distance(word, c);
        if (d < best_d) {
            best_d = d;
            best = c;
        }
    }
    int limit = std::clamp(static_cast<int>(word.size()) / 4, 1, 3);
    return best_d <= limit ? best : std::string();
}

std::string format_float(float v) {
    char buf[64];
    for (int prec = 1; prec <= 9; prec++) {
        std::snprintf(buf, sizeof buf, "%.*g", prec, static_cast<double>(v));
        if (std::strtof(buf, nullptr) == v) break;
    }
    return buf;
}

std::string format_double(double v) {
    char buf[64];
    for (int prec = 1; prec <= 17; prec++) {
        std::snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (std::strtod(buf, nullptr) == v) break;
    }
    return buf;
}

std::string yaml_quote(const std::string& s) {
    static const char* const kReserved[] = {"true", "false", "yes", "no", "on",
                                            "off",  "null",  "y",   "n",  "~"};
    bool plain = !s.empty() &&
                 (std::isalnum(static_cast<unsigned char>(s[0])) || s[0] == '_' || s[0] == '/');
    for (char c : s)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '/' ||
              c == '-' || c == '+'))
            plain = false;
    for (const char* r : kReserved)
        if (lower(s) == r) plain = false;
    double num = 0;
    if (parse_double(s, num)) plain = false;
    if (plain) return s;
    std::string q = "\"";
    for (char c : s) {
        unsigned char u = static_cast<unsigned char>(c);
        if (c == '"' || c == '\\') {
            q += '\\';
            q += c;
        } else if (c == '\n') {
            q += "\\n";
        } else if (c == '\t') {
            q += "\\t";
        } else if (u < 0x20 || u == 0x7f) {
            q += core::strfmt("\\x%02x", u);
        } else {
            q += c;
        }
    }
    return q + "\"";
}

} // namespace sof::config
