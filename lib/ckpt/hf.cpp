// Hugging Face model directories (see hf.h): config.json both ways, import by tensor name from
// memory-mapped safetensors into this rank's shard, and the atomic sharded export.
#include "ckpt/hf.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "ckpt/compat.h"
#include "ckpt/fileio.h"
#include "ckpt/hf_experts.h"
#include "ckpt/mxfp4.h"
#include "ckpt/safetensors.h"
#include "core/error.h"
#include "core/strfmt.h"
#include "model/block_spec.h"
#include "optim/qstate.h"

namespace sof::ckpt {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json parse_json_file(const std::string& path, const char* what) {
    const std::string text = read_text(path, what);
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object())
        SOF_FAIL(Format, "%s '%s' is not a JSON object", what, path.c_str());
    return j;
}

int int_key(const json& j, const std::string& path, const char* key, int fallback, bool required) {
    if (!j.contains(key) || j[key].is_null()) {
        if (required) SOF_FAIL(Format, "'%s': key '%s' is missing", path.c_str(), key);
        return fallback;
    }
    if (!j[key].is_number_integer() || j[key].get<int64_t>() < 0 ||
        j[key].get<int64_t>() > 2147483647)
        SOF_FAIL(Format, "'%s': key '%s' must be a non-negative integer", path.c_str(), key);
    return j[key].get<int>();
}

double num_key(const json& j, const std::string& path, const char* key, double fallback) {
    if (!j.contains(key) || j[key].is_null()) return fallback;
    if (!j[key].is_number()) SOF_FAIL(Format, "'%s': key '%s' must be a number", path.c_str(), key);
    return j[key].get<double>();
}

bool bool_key(const json& j, const std::string& path, const char* key, bool fallback) {
    if (!j.contains(key) || j[key].is_null()) return fallback;
    if (!j[key].is_boolean())
        SOF_FAIL(Format, "'%s': key '%s' must be true or false", path.c_str(), key);
    return j[key].get<bool>();
}

std::string shape_str(const std::vector<int64_t>& s) {
    std::string r = "[";
    for (size_t i = 0; i < s.size(); i++)
        r += (i ? ", " : "") + std::to_string(s[i]);
    return r + "]";
}

// Name -> file of the directory's weights, and the opened files.
struct WeightFiles {
    std::map<std::string, std::string> where; // tensor name -> file path
    std::map<std::string, std::unique_ptr<SafetensorsFile>> open;

    explicit WeightFiles(const std::string& dir) {
        const std::string index = dir + "/model.safetensors.index.json";
        const std::string single = dir + "/model.safetensors";
        if (fs::exists(index)) {
            json j = parse_json_file(index, "safetensors index");
            if (!j.contains("weight_map") || !j["weight_map"].is_object())
                SOF_FAIL(Format, "'%s': no 'weight_map' object", index.c_str());
            for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
                if (!it.value().is_string())
                    SOF_FAIL(Format, "'%s': weight_map['%s'] must be a file name", index.c_str(),
                             it.key().c_str());
                const std::string f = it.value().get<std::string>();
                if (f.find('/') != std::string::npos)
                    SOF_FAIL(Format, "'%s': weight_map['%s'] = '%s' must be a file in %s",
                             index.c_str(), it.key().c_str(), f.c_str(), dir.c_str());
                where[it.key()] = dir + "/" + f;
            }
        } else if (fs::exists(single)) {
            SafetensorsFile& f = file(single);
            for (const SafetensorsFile::Tensor& t : f.tensors())
                where[t.name] = single;
        } else {
            SOF_FAIL(Io, "'%s' has neither model.safetensors nor model.safetensors.index.json",
                     dir.c_str());
        }
    }
    SafetensorsFile& file(const std::string& path) {
        auto it = open.find(path);
        if (it == open.end())
            it = open.emplace(path, std::make_unique<SafetensorsFile>(path)).first;
        return *it->second;
    }
};

} // namespace

bool is_hf_dir(const std::string& path) {
    std::error_code ec;
    return fs::is_directory(path, ec) && fs::is_regular_file(path + "/config.json", ec);
}

namespace {

// A float key of the rope parameters that must be there (transformers' required keys).
double required_num(const json& r, const std::string& path, const char* obj, const char* type,
                    const char* key) {
    if (!r.contains(key) || r[key].is_null())
        SOF_FAIL(Config,
                 "'%s': %s.%s is missing: rope_type %s needs it (transformers refuses such a "
                 "config too); add it, or set %s to null for unscaled RoPE",
                 path.c_str(), obj, key, type, obj);
    return num_key(r, path, key, 0.0);
}

// The rope parameters: theta, and the scaling (none, llama3, yarn) or a refusal naming the key.
void read_rope(const json& j, const std::string& path, const model::ArchInfo& a,
               model::ArchConfig* c) {
    // transformers >= 5 writes "rope_parameters" {rope_theta, rope_type, scaling fields};
    // earlier versions a top-level rope_theta and an optional "rope_scaling" object
    const bool v5 = j.contains("rope_parameters") && j["rope_parameters"].is_object();
    const json& rp = v5 ? j["rope_parameters"] : j;
    c->rope_theta =
        num_key(rp, path, "rope_theta", num_key(j, path, "rope_theta", a.rope_theta_default));
    for (const json* o : {&j, &rp}) { // partial rotary: phi3 puts it in either place
        const double f = num_key(*o, path, "partial_rotary_factor", 1.0);
        if (f != 1.0)
            SOF_FAIL(Config,
                     "'%s': partial_rotary_factor = %g is not supported (this build rotates the "
                     "whole head); a model with partial_rotary_factor < 1 cannot be trained here",
                     path.c_str(), f);
    }
    const char* key = v5 ? "rope_parameters" : "rope_scaling";
    if (!j.contains(key) || j[key].is_null()) return;
    const json& r = j[key];
    if (!r.is_object()) // e.g. "llama3": the factors are unknown, guessing them is wrong
        SOF_FAIL(Config,
                 "'%s': %s must be an object such as {\"rope_type\": \"llama3\", "
                 "\"factor\": 8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
                 "\"original_max_position_embeddings\": 8192} or null, got %s",
                 path.c_str(), key, r.dump().c_str());
    std::string type;
    for (const char* k : {"rope_type", "type"}) {
        if (!r.contains(k)) continue;
        if (!r[k].is_string())
            SOF_FAIL(Config, "'%s': %s.%s must be a string, got %s", path.c_str(), key, k,
                     r[k].dump().c_str());
        type = r[k].get<std::string>();
        break;
    }
    if (type.empty() && !v5)
        SOF_FAIL(Config,
                 "'%s': rope_scaling %s names no rope_type (llama3 and yarn are supported; use "
                 "null for no scaling)",
                 path.c_str(), r.dump().c_str());
    if (type.empty() || type == "default") return;
    if (!a.rope_scaling) // phi3: transformers reads any scaling type as its longrope
        SOF_FAIL(Config,
                 "'%s': %s.rope_type = \"%s\" is not supported for %s (transformers runs it as "
                 "longrope, Phi-3's short/long factor RoPE, which this build lacks); only "
                 "unscaled RoPE (null) is",
                 path.c_str(), key, type.c_str(), model::arch_name(a.arch));
    const int max_pos = c->max_seq_len; // transformers' default original length
    model::RopeScaling& s = c->rope_scaling;
    if (type == "llama3") {
        s.type = model::RopeScalingType::Llama3;
        s.factor = required_num(r, path, key, "llama3", "factor");
        s.low_freq_factor = required_num(r, path, key, "llama3", "low_freq_factor");
        s.high_freq_factor = required_num(r, path, key, "llama3", "high_freq_factor");
        s.original_max_position =
            int_key(r, path, "original_max_position_embeddings", max_pos, false);
    } else if (type == "yarn") {
        s.type = model::RopeScalingType::Yarn;
        s.factor = required_num(r, path, key, "yarn", "factor");
        s.original_max_position =
            int_key(r, path, "original_max_position_embeddings", max_pos, false);
        // null or absent: transformers' `or` defaults (32, 1)
        s.beta_fast = num_key(r, path, "beta_fast", 32.0);
        s.beta_slow = num_key(r, path, "beta_slow", 1.0);
        if (s.beta_fast == 0.0) s.beta_fast = 32.0;
        if (s.beta_slow == 0.0) s.beta_slow = 1.0;
        s.truncate = bool_key(r, path, "truncate", true);
        // the factor on cos and sin: given, or from mscale / mscale_all_dim, or 0.1 ln(factor)+1
        s.attention_factor = num_key(r, path, "attention_factor", 0.0);
        const double ms = num_key(r, path, "mscale", 0.0),
                     msa = num_key(r, path, "mscale_all_dim", 0.0);
        if (s.attention_factor == 0.0 && ms != 0.0 && msa != 0.0) {
            auto mscale = [&](double m) {
                return s.factor <= 1.0 ? 1.0 : 0.1 * m * std::log(s.factor) + 1.0;
            };
            s.attention_factor = mscale(ms) / mscale(msa);
        }
    } else {
        SOF_FAIL(Config, "'%s': %s.rope_type = \"%s\" is not supported (default, llama3 or yarn)",
                 path.c_str(), key, type.c_str());
    }
}

// config.json's layer_types ("sliding_attention" / "full_attention", one per layer; absent:
// sliding, full alternating, GptOssConfig's default) as ArchConfig::layer_types.
std::string read_layer_types(const json& j, const std::string& path, const model::ArchConfig& c) {
    std::string lt;
    if (!j.contains("layer_types") || j["layer_types"].is_null()) {
        for (int l = 0; l < c.num_layers; l++)
            lt += std::string(l ? "," : "") + (l % 2 == 0 ? "sliding" : "full");
        return lt;
    }
    const json& o = j["layer_types"];
    if (!o.is_array() || o.size() != static_cast<size_t>(c.num_layers))
        SOF_FAIL(Config, "'%s': layer_types must be a list of %d entries (one per layer), got %s",
                 path.c_str(), c.num_layers, o.dump().c_str());
    for (size_t l = 0; l < o.size(); l++) {
        const std::string v = o[l].is_string() ? o[l].get<std::string>() : o[l].dump();
        if (v != "sliding_attention" && v != "full_attention")
            SOF_FAIL(Config,
                     "'%s': layer_types[%zu] = %s must be \"sliding_attention\" or "
                     "\"full_attention\"",
                     path.c_str(), l, v.c_str());
        lt += std::string(l ? "," : "") + (v == "sliding_attention" ? "sliding" : "full");
    }
    return lt;
}

// Which layers attend in a window (arch.h WindowKeys).
void read_window(const json& j, const std::string& path, const model::ArchInfo& a,
                 model::ArchConfig* c) {
    switch (a.window) {
    case model::WindowKeys::None:
        return;
    case model::WindowKeys::UseSliding:
        if (bool_key(j, path, "use_sliding_window", false))
            SOF_FAIL(Config,
                     "'%s': use_sliding_window: true is not supported for %s (its windowed "
                     "layers follow max_window_layers, which this build does not read); set it "
                     "false if the model was trained without it",
                     path.c_str(), model::arch_name(a.arch));
        return;
    case model::WindowKeys::AllLayers:
    case model::WindowKeys::LayerTypes: {
        const bool absent = !j.contains("sliding_window");
        if (!absent && j["sliding_window"].is_null()) return;
        const int w = int_key(j, path, "sliding_window", a.window_default, false);
        if (w <= 0 && !absent)
            SOF_FAIL(Config,
                     "'%s': sliding_window = %d must be a positive number of keys, or null for "
                     "none",
                     path.c_str(), w);
        c->sliding_window = w;
        if (a.window == model::WindowKeys::LayerTypes)
            c->layer_types = read_layer_types(j, path, *c);
        return;
    }
    }
}

// The mixture-of-experts keys (arch.h MoeNames; transformers' defaults for absent keys).
void read_moe(const json& j, const std::string& path, const model::ArchInfo& a,
              model::ArchConfig* c) {
    if (!a.moe) return;
    const model::MoeNames& m = *a.moe;
    // transformers 5 saves Qwen3-MoE's num_experts as num_local_experts (its attribute map)
    c->num_experts =
        int_key(j, path, m.experts_key,
                int_key(j, path, "num_local_experts", m.experts_default, false), false);
    if (c->num_experts == 0) return; // transformers: every MLP dense
    c->experts_per_tok = int_key(j, path, "num_experts_per_tok", m.topk_default, false);
    c->moe_intermediate_size = int_key(j, path, m.width_key, m.width_default, false);
    c->norm_topk_prob = m.renorm_key ? bool_key(j, path, m.renorm_key, false) : true;
    if (m.dense_layers) {
        c->decoder_sparse_step = int_key(j, path, "decoder_sparse_step", 1, false);
        if (c->decoder_sparse_step == 0)
            SOF_FAIL(Config, "'%s': decoder_sparse_step = 0 must be >= 1", path.c_str());
        if (j.contains("mlp_only_layers") && !j["mlp_only_layers"].is_null()) {
            const json& o = j["mlp_only_layers"];
            if (!o.is_array())
                SOF_FAIL(Format, "'%s': mlp_only_layers must be a list of layer indices",
                         path.c_str());
            for (const json& v : o) {
                if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 1 << 30)
                    SOF_FAIL(Format, "'%s': mlp_only_layers holds %s, not a layer index",
                             path.c_str(), v.dump().c_str());
                c->mlp_only_layers.push_back(v.get<int>());
            }
        }
    }
    if (m.jitter_key) { // transformers multiplies the MoE input by U(1 - x, 1 + x) in training
        const double x = num_key(j, path, m.jitter_key, 0.0);
        if (x != 0.0)
            SOF_FAIL(Config,
                     "'%s': %s = %g is not supported (this build does not scale the MoE input by "
                     "random jitter in training); set it to 0.0 (every published %s config has "
                     "0.0)",
                     path.c_str(), m.jitter_key, x, model::arch_name(a.arch));
    }
    if (m.clamped) { // GPT-OSS's clamped SwiGLU: this build has transformers' defaults only
        const double alpha = num_key(j, path, "swiglu_alpha", 1.702),
                     limit = num_key(j, path, "swiglu_limit", 7.0);
        if (alpha != 1.702 || limit != 7.0)
            SOF_FAIL(Config,
                     "'%s': swiglu_alpha = %g, swiglu_limit = %g: this build's clamped SwiGLU has "
                     "GPT-OSS's 1.702 and 7.0 only",
                     path.c_str(), alpha, limit);
    }
    c->router_aux_loss_coef = static_cast<float>(num_key(j, path, "router_aux_loss_coef", 0.001));
    c->output_router_logits = bool_key(j, path, "output_router_logits", false);
}

// config.json (parsed) -> ArchConfig; errors name `path` and the key.
model::ArchConfig arch_from_json(const json& j, const std::string& path) {
    std::string name;
    if (j.contains("architectures") && j["architectures"].is_array() &&
        !j["architectures"].empty() && j["architectures"][0].is_string())
        name = j["architectures"][0].get<std::string>();
    else if (j.contains("model_type") && j["model_type"].is_string())
        name = j["model_type"].get<std::string>();
    const model::ArchInfo* a = model::arch_by_hf(name);
    if (!a)
        SOF_FAIL(Config, "'%s': architecture '%s' is not supported; supported: %s", path.c_str(),
                 name.empty() ? "(none given)" : name.c_str(), model::supported_hf_archs().c_str());
    model::ArchConfig c;
    c.arch = a->arch;
    if (j.contains("hidden_act") && j["hidden_act"] != a->hidden_act)
        SOF_FAIL(Config, "'%s': hidden_act %s is not supported (SwiGLU needs %s)", path.c_str(),
                 j["hidden_act"].dump().c_str(), a->hidden_act);
    // the bias switches of this architecture (arch.h; keys it does not read are ignored, as
    // transformers ignores them)
    const bool bd = a->bias_default;
    if (a->qkv_bias_key) c.qkv_bias = bool_key(j, path, a->qkv_bias_key, bd);
    if (a->o_bias_key) c.o_bias = bool_key(j, path, a->o_bias_key, bd);
    if (a->mlp_bias_key) c.mlp_bias = bool_key(j, path, a->mlp_bias_key, bd);
    c.tie_embeddings = bool_key(j, path, "tie_word_embeddings", false);
    model::apply_arch_defaults(&c);
    c.channels = int_key(j, path, "hidden_size", 0, true);
    c.intermediate_size = int_key(j, path, "intermediate_size", 0, true);
    c.num_heads = int_key(j, path, "num_attention_heads", 0, true);
    c.num_layers = int_key(j, path, "num_hidden_layers", 0, true);
    c.vocab_size = int_key(j, path, "vocab_size", 0, true);
    c.padded_vocab_size = c.vocab_size;
    c.max_seq_len = int_key(j, path, "max_position_embeddings", 0, true);
    // absent keys mean what transformers' configs default them to (arch.h)
    c.num_kv_heads = int_key(j, path, "num_key_value_heads",
                             a->kv_heads_default > 0 ? a->kv_heads_default : c.num_heads, false);
    c.head_dim = int_key(j, path, "head_dim", a->head_dim_default, false);
    c.norm_eps = static_cast<float>(num_key(j, path, "rms_norm_eps", a->rms_eps_default));
    if (a->rope_default && !j.contains("rope_parameters") && !j.contains("rope_scaling")) {
        json d = j; // the architecture's rope parameters when config.json has none (gpt_oss)
        d["rope_parameters"] = json::parse(a->rope_default);
        read_rope(d, path, *a, &c);
    } else {
        read_rope(j, path, *a, &c);
    }
    read_window(j, path, *a, &c);
    read_moe(j, path, *a, &c);
    c.attn_dropout =
        static_cast<float>(num_key(j, path, "attention_dropout", a->attn_dropout_default));
    if (a->resid_dropout_key)
        c.resid_dropout =
            static_cast<float>(num_key(j, path, a->resid_dropout_key, a->resid_dropout_default));
    try {
        model::validate(c);
    } catch (const core::Error& e) {
        // model::validate names the deck's keys; say which config.json key that is
        static const char* const kNames[][2] = {
            {"model.num_layers", "num_hidden_layers"},
            {"model.channels", "hidden_size"},
            {"model.num_heads", "num_attention_heads"},
            {"model.num_kv_heads", "num_key_value_heads"},
            {"model.intermediate_size", "intermediate_size"},
            {"model.padded_vocab_size", "vocab_size"},
            {"model.vocab_size", "vocab_size"},
            {"model.max_seq_len", "max_position_embeddings"},
            {"model.head_dim", "head_dim"},
            {"model.attention_dropout", "attention_dropout"},
            {"model.residual_dropout", "residual dropout"},
            {"model.rope_scaling", "rope_scaling"},
            {"model.num_experts", "num_experts"},
            {"model.num_experts_per_tok", "num_experts_per_tok"},
            {"model.moe_intermediate_size", "moe_intermediate_size"},
            {"model.mlp_only_layers", "mlp_only_layers"},
            {"model.decoder_sparse_step", "decoder_sparse_step"}};
        const std::string msg = e.what();
        std::string note;
        size_t first = std::string::npos;
        for (const auto& n : kNames) {
            const size_t at = msg.find(std::string(n[0]) + " ");
            if (at < first) {
                first = at;
                note = core::strfmt(" (config.json key '%s')", n[1]);
            }
        }
        SOF_FAIL(Config, "'%s': %s%s", path.c_str(), msg.c_str(), note.c_str());
    }
    return c;
}

// GPT-OSS's MXFP4 experts: `<name>_blocks` / `_scales` dequantized as transformers does
// (mxfp4.h: already our (E, R, X) layout), this rank's slice copied out. Reads the whole tensor.
void import_mxfp4(WeightFiles& wf, const std::string& dir, const model::ParamLayout& full,
                  const zero::ShardMap& map, const model::HfTensor& t, float* out,
                  std::set<std::string>* used) {
    const std::string blocks = t.name + "_blocks", scales = t.name + "_scales";
    auto wb = wf.where.find(blocks), ws = wf.where.find(scales);
    if (ws == wf.where.end() || ws->second != wb->second)
        SOF_FAIL(Format, "'%s': MXFP4 tensor '%s' needs '%s' in the same file", dir.c_str(),
                 blocks.c_str(), scales.c_str());
    used->insert(blocks);
    used->insert(scales);
    std::vector<int64_t> shape;
    const std::vector<float> v = read_mxfp4(wf.file(wb->second), t.name, &shape);
    const std::vector<int64_t> ours = {t.shape[0], t.shape[2], t.shape[1]};
    if (shape != ours)
        SOF_FAIL(Format, "'%s': MXFP4 tensor '%s' dequantizes to %s, the config needs %s",
                 wb->second.c_str(), t.name.c_str(), shape_str(shape).c_str(),
                 shape_str(ours).c_str());
    const size_t k = first_non_finite(v.data(), v.size());
    if (k != v.size())
        SOF_FAIL(Format, "'%s': MXFP4 tensor '%s' dequantizes to a non-finite value at %s",
                 wb->second.c_str(), t.name.c_str(), index_in_shape(k, shape).c_str());
    const int u = t.unit;
    const size_t a = map.global_first(full, u), b = map.global_last(full, u);
    const size_t x = std::max(a, t.offset), y = std::min(b, t.offset + t.flat_numel);
    if (x >= y) return;
    std::copy(v.begin() + static_cast<std::ptrdiff_t>(x - t.offset),
              v.begin() + static_cast<std::ptrdiff_t>(y - t.offset),
              out + map.local_begin[static_cast<size_t>(u)] + (x - a));
}

} // namespace

model::ArchConfig read_hf_config(const std::string& dir) {
    const std::string path = dir + "/config.json";
    return arch_from_json(parse_json_file(path, "Hugging Face config"), path);
}

ImportStats import_hf(const std::string& dir, const model::ParamLayout& full,
                      const zero::ShardMap& map, float* out, const ReadOptions& opt) {
    const model::ArchConfig& c = full.cfg;
    WeightFiles wf(dir);
    // zero only what no tensor read writes: each unit's shard padding (the padding rows of the
    // embedding / LM head are zeroed below); a full pre-fill would cost one more pass over memory
    for (int u = 0; u < map.num_units(); u++) {
        const size_t lb = map.local_begin[static_cast<size_t>(u)];
        std::fill(out + lb + map.real_count(full, u),
                  out + map.local_begin[static_cast<size_t>(u) + 1], 0.0f);
    }
    // check every tensor before reading any, then read each file in one pass in file order; a
    // fused tensor of the files (phi3's qkv_proj) fills its parts' flat range in one read
    std::set<std::string> used;
    std::map<std::string, std::vector<SafetensorsFile::F32Read>> reads; // by file path
    std::vector<TransposedRead> transposed;
    // experts: the hub's per-expert tensors, or transformers 5's fused ones when the files have
    // them (save_pretrained(save_original_format=False))
    bool fused = false;
    const std::string fused_tail = ".mlp.experts.gate_up_proj";
    for (const auto& kv : wf.where)
        if (kv.first.size() > fused_tail.size() &&
            kv.first.compare(kv.first.size() - fused_tail.size(), fused_tail.size(), fused_tail) ==
                0)
            fused = true;
    for (const model::HfTensor& t : model::hf_tensors(full, fused)) {
        auto w = wf.where.find(t.name);
        if (w == wf.where.end() && t.transposed && wf.where.count(t.name + "_blocks")) {
            import_mxfp4(wf, dir, full, map, t, out, &used); // gpt_oss's quantized experts
            continue;
        }
        if (w == wf.where.end())
            SOF_FAIL(Format, "'%s': tensor '%s' is missing (the config asks for %s%s)", dir.c_str(),
                     t.name.c_str(), model::arch_name(c.arch),
                     full.tensors[t.first].kind == model::TensorKind::LmHead
                         ? " with an untied LM head"
                         : "");
        used.insert(t.name);
        SafetensorsFile& f = wf.file(w->second);
        const SafetensorsFile::Tensor* st = f.find(t.name);
        if (!st)
            SOF_FAIL(Format, "'%s': tensor '%s' is listed in the index but not in the file",
                     w->second.c_str(), t.name.c_str());
        if (st->shape != t.shape)
            SOF_FAIL(Format, "'%s': tensor '%s' has shape %s, the config needs %s",
                     w->second.c_str(), t.name.c_str(), shape_str(st->shape).c_str(),
                     shape_str(t.shape).c_str());
        const int u = t.unit;
        const size_t a = map.global_first(full, u), b = map.global_last(full, u);
        const size_t x = std::max(a, t.offset), y = std::min(b, t.offset + t.flat_numel);
        if (x >= y) continue; // not in this rank's slice
        float* dst = out + map.local_begin[static_cast<size_t>(u)] + (x - a);
        if (t.transposed) { // gpt_oss's experts: whole experts read, transposed after
            plan_transposed_reads(st, x - t.offset, y - t.offset, dst, &reads[w->second],
                                  &transposed);
            continue;
        }
        const size_t first = x - t.offset, last = std::min(y - t.offset, st->numel);
        if (last > first) reads[w->second].push_back({st, first, last - first, dst});
        const size_t pad0 = std::max(first, std::min(last, st->numel)); // rows V..Vp-1: zero
        std::fill(dst + (pad0 - first), dst + (y - x), 0.0f);
    }
    for (const auto& [name, file] : wf.where) {
        if (used.count(name)) continue;
        const bool rotary =
            name.size() > 21 && name.rfind("rotary_emb.inv_freq") != std::string::npos;
        if (rotary || (c.tie_embeddings && name == "lm_head.weight")) continue; // derived copies
        SOF_FAIL(Format,
                 "'%s': unexpected tensor '%s' for a %s with this config (wrong config.json, or "
                 "tie_word_embeddings / a bias switch set wrong?)",
                 file.c_str(), name.c_str(), model::arch_name(c.arch));
    }
    ImportStats st;
    st.direct_used = true;
    for (const auto& [path, r] : reads) {
        const ReadStats rs = wf.file(path).read_f32(r, opt);
        st.bytes_read += rs.bytes_read;
        st.direct_used = st.direct_used && rs.direct_used;
        st.files++;
        // a NaN or Inf weight would make every step's loss non-finite (every step skipped)
        for (const SafetensorsFile::F32Read& x : r) {
            const size_t k = first_non_finite(x.out, x.n);
            if (k == x.n) continue;
            const size_t at = x.first + k;
            SOF_FAIL(Format,
                     "'%s': tensor '%s' holds a non-finite value (%g) at element %s (flat index "
                     "%zu); refusing to import it: the file is corrupt, or the model had diverged "
                     "when it was saved",
                     path.c_str(), x.tensor->name.c_str(), static_cast<double>(x.out[k]),
                     index_in_shape(at, x.tensor->shape).c_str(), at);
        }
    }
    finish_transposed_reads(&transposed);
    return st;
}

namespace {

// A float field as the decimal it was written as (1e-05, not 9.999999747378752e-06).
double tidy(double v) {
    return std::stod(core::strfmt("%.7g", v));
}

json config_json(const model::ArchConfig& c, const std::string& dtype) {
    const model::ArchInfo& a = model::arch_info(c.arch);
    json j;
    j["architectures"] = {a.hf_class};
    j["model_type"] = model::arch_name(c.arch);
    j["hidden_size"] = c.channels;
    j["intermediate_size"] = c.ffn_dim();
    j["num_attention_heads"] = c.num_heads;
    j["num_key_value_heads"] = c.kv_heads();
    j["head_dim"] = c.hdim();
    j["num_hidden_layers"] = c.num_layers;
    j["rms_norm_eps"] = tidy(c.norm_eps);
    j["rope_theta"] = c.rope_theta;
    const model::RopeScaling& r = c.rope_scaling;
    if (r.type == model::RopeScalingType::Llama3)
        j["rope_scaling"] = {{"rope_type", "llama3"},
                             {"factor", r.factor},
                             {"low_freq_factor", r.low_freq_factor},
                             {"high_freq_factor", r.high_freq_factor},
                             {"original_max_position_embeddings", r.original_max_position}};
    else if (r.type == model::RopeScalingType::Yarn)
        j["rope_scaling"] = {
            {"rope_type", "yarn"},
            {"factor", r.factor},
            {"original_max_position_embeddings", r.original_max_position},
            {"beta_fast", r.beta_fast},
            {"beta_slow", r.beta_slow},
            {"truncate", r.truncate},
            {"attention_factor", static_cast<double>(model::rope_attention_scale(c))}};
    else
        j["rope_scaling"] = nullptr;
    if (a.rope_default) { // transformers >= 5's rope_parameters: null would mean its default
        json rp = j["rope_scaling"].is_null() ? json{{"rope_type", "default"}} : j["rope_scaling"];
        rp["rope_theta"] = c.rope_theta;
        j["rope_parameters"] = rp;
        j.erase("rope_scaling");
        j.erase("rope_theta");
    }
    j["vocab_size"] = c.vocab_size;
    j["max_position_embeddings"] = c.max_seq_len;
    j["tie_word_embeddings"] = c.tie_embeddings;
    if (a.qkv_bias_key) j[a.qkv_bias_key] = c.qkv_bias;
    if (a.o_bias_key) j[a.o_bias_key] = c.o_bias;
    if (a.mlp_bias_key) j[a.mlp_bias_key] = c.mlp_bias;
    j["attention_dropout"] = tidy(c.attn_dropout);
    if (a.resid_dropout_key) j[a.resid_dropout_key] = tidy(c.resid_dropout);
    if (a.window == model::WindowKeys::AllLayers || a.window == model::WindowKeys::LayerTypes)
        j["sliding_window"] = c.sliding_window > 0 ? json(c.sliding_window) : json(nullptr);
    if (a.window == model::WindowKeys::LayerTypes) {
        json lt = json::array();
        for (int l = 0; l < c.num_layers; l++)
            lt.push_back(c.window(l) > 0 || c.sliding_window <= 0 ? "sliding_attention"
                                                                  : "full_attention");
        j["layer_types"] = lt;
    }
    if (a.window == model::WindowKeys::UseSliding) j["use_sliding_window"] = false;
    if (a.moe) {
        const model::MoeNames& m = *a.moe;
        j[m.experts_key] = c.num_experts;
        if (c.moe()) {
            j["num_experts_per_tok"] = c.experts_per_tok;
            j[m.width_key] = c.moe_intermediate_size;
            if (m.renorm_key) j[m.renorm_key] = c.norm_topk_prob;
            if (m.dense_layers) {
                j["decoder_sparse_step"] = c.decoder_sparse_step;
                j["mlp_only_layers"] = c.mlp_only_layers;
            }
            if (m.clamped) {
                j["swiglu_alpha"] = 1.702;
                j["swiglu_limit"] = 7.0;
            }
            j["router_aux_loss_coef"] = tidy(c.router_aux_loss_coef);
            j["output_router_logits"] = c.output_router_logits;
        }
    }
    j["hidden_act"] = a.hidden_act;
    j["initializer_range"] = 0.02;
    j["use_cache"] = true;
    // the tokenizer's ids are not in the checkpoint: null, not LlamaConfig's defaults 1 and 2
    // (wrong for Llama-3); copy them from the original model's config.json
    j["bos_token_id"] = nullptr;
    j["eos_token_id"] = nullptr;
    j["torch_dtype"] = dtype == "bf16" ? "bfloat16" : "float32";
    j["transformers_version"] = "4.51.0";
    return j;
}

// The config.json written for `c` must read back as `c` (the architecture's keys can say it):
// otherwise name the first feature it cannot express.
void check_expressible(const model::ArchConfig& c, const json& j) {
    model::ArchConfig back = arch_from_json(j, "config.json");
    back.padded_vocab_size = c.padded_vocab_size; // padding rows are not in the files
    back.norm_eps = c.norm_eps;                   // written as its decimal (tidy)
    const std::vector<DeckChange> d = arch_differences(c, back);
    if (d.empty()) return;
    SOF_FAIL(Usage,
             "export --hf: this %s model has %s = %s, which a Hugging Face %s config.json cannot "
             "express (it would read as %s); export a model type whose config has that feature",
             model::arch_name(c.arch), d[0].key.c_str(), d[0].saved.c_str(),
             model::arch_name(c.arch), d[0].now.c_str());
}

} // namespace

const char* const kHfSideFiles[] = {"tokenizer.json",
                                    "tokenizer_config.json",
                                    "special_tokens_map.json",
                                    "added_tokens.json",
                                    "tokenizer.model",
                                    "vocab.json",
                                    "merges.txt",
                                    "chat_template.jinja",
                                    "chat_template.json",
                                    "generation_config.json"};
const int kHfSideFileCount = static_cast<int>(sizeof(kHfSideFiles) / sizeof(kHfSideFiles[0]));

namespace {

// The source directory's tokenizer files into tmp, and its token ids into the config.
void copy_side_files(const std::string& src, const std::string& tmp, json* cfg) {
    std::error_code ec;
    if (!fs::is_directory(src, ec))
        SOF_FAIL(Io,
                 "export --hf: the source directory '%s' (its tokenizer files and token ids are "
                 "copied) does not exist; give --source DIR or --no-source",
                 src.c_str());
    for (int i = 0; i < kHfSideFileCount; i++) {
        const fs::path from = fs::path(src) / kHfSideFiles[i];
        if (!fs::is_regular_file(from, ec)) continue;
        const std::string text = read_text(from.string(), "tokenizer file");
        write_file_durable(tmp + "/" + kHfSideFiles[i], text.data(), text.size());
    }
    const fs::path scfg = fs::path(src) / "config.json";
    if (!fs::is_regular_file(scfg, ec)) return;
    json j;
    try {
        j = json::parse(read_text(scfg.string(), "config.json"));
    } catch (const json::exception& e) {
        SOF_FAIL(Format, "export --hf: %s is not valid JSON: %s", scfg.string().c_str(), e.what());
    }
    for (const char* k : {"bos_token_id", "eos_token_id", "pad_token_id"})
        if (j.is_object() && j.contains(k)) (*cfg)[k] = j[k];
}

} // namespace

void round_bf16_stochastic(float* params, size_t n, uint64_t seed, int64_t step) {
    for (size_t i = 0; i < n; i++)
        params[i] =
            core::bf16_to_f32(optim::f32_to_bf16_sr(params[i], optim::sr_bits(seed, step, i)));
}

void export_hf(const std::string& out_dir, const model::ParamLayout& layout, const float* params,
               const HfExportOptions& o) {
    const model::ArchConfig& c = layout.cfg;
    if (!c.llama_family())
        SOF_FAIL(Usage,
                 "export --hf: a GPT-2 checkpoint is exported with --llmc (the Hugging "
                 "Face export writes the LLaMA family: %s)",
                 model::supported_hf_archs().c_str());
    check_expressible(c, config_json(c, o.dtype));
    if (o.dtype != "bf16" && o.dtype != "fp32")
        SOF_FAIL(Usage, "export --hf: --dtype '%s' must be bf16 or fp32", o.dtype.c_str());
    std::error_code ec;
    if (fs::exists(out_dir, ec) && !(fs::is_directory(out_dir, ec) && fs::is_empty(out_dir, ec)))
        SOF_FAIL(Io, "export --hf: '%s' exists and is not an empty directory; give a new path",
                 out_dir.c_str());
    const bool bf16 = o.dtype == "bf16";
    const size_t eb = bf16 ? 2 : 4;
    // group whole tensors into files of at most shard_bytes
    std::vector<std::vector<SafetensorsOut>> files(1);
    std::vector<std::vector<model::HfTensor>> tensors(1); // files' tensors (transposed: a copy)
    size_t in_file = 0;
    uint64_t total = 0;
    for (const model::HfTensor& t : model::hf_tensors(layout)) {
        SafetensorsOut s{t.name, t.shape, params + t.offset};
        size_t n = 1;
        for (int64_t d : s.shape)
            n *= static_cast<size_t>(d);
        if (in_file > 0 && in_file + n * eb > o.shard_bytes) {
            files.emplace_back();
            tensors.emplace_back();
            in_file = 0;
        }
        files.back().push_back(std::move(s));
        tensors.back().push_back(t);
        in_file += n * eb;
        total += n * eb;
    }
    const fs::path out = fs::absolute(fs::path(out_dir)).lexically_normal();
    const std::string tmp = out.string() + ".tmp-" + std::to_string(::getpid());
    fs::remove_all(tmp, ec);
    fs::create_directories(tmp, ec);
    if (ec) SOF_FAIL(Io, "export --hf: cannot create '%s': %s", tmp.c_str(), ec.message().c_str());
    try {
        const size_t m = files.size();
        json wm = json::object();
        for (size_t i = 0; i < m; i++) {
            const std::string name =
                m == 1 ? std::string("model.safetensors")
                       : core::strfmt("model-%05zu-of-%05zu.safetensors", i + 1, m);
            std::vector<std::vector<float>> copies; // this file's transposed experts (gpt_oss)
            for (size_t k = 0; k < files[i].size(); k++) {
                const model::HfTensor& t = tensors[i][k];
                if (!t.transposed) continue;
                copies.emplace_back(t.numel);
                transpose_experts(params + t.offset, static_cast<size_t>(t.shape[0]),
                                  static_cast<size_t>(t.shape[2]), static_cast<size_t>(t.shape[1]),
                                  copies.back().data());
                files[i][k].data = copies.back().data();
            }
            write_safetensors(tmp + "/" + name, files[i], bf16);
            for (const SafetensorsOut& s : files[i])
                wm[s.name] = name;
        }
        if (m > 1) {
            const std::string idx =
                json{{"metadata", {{"total_size", total}}}, {"weight_map", wm}}.dump(2) + "\n";
            write_file_durable(tmp + "/model.safetensors.index.json", idx.data(), idx.size());
        }
        json cj = config_json(c, o.dtype);
        if (!o.source_dir.empty()) copy_side_files(o.source_dir, tmp, &cj);
        const std::string cfg = cj.dump(2) + "\n";
        write_file_durable(tmp + "/config.json", cfg.data(), cfg.size());
        fsync_dir(tmp);
        if (fs::exists(out, ec)) fs::remove(out, ec); // the empty directory
        fs::rename(tmp, out, ec);
        if (ec)
            SOF_FAIL(Io, "export --hf: cannot rename '%s' to '%s': %s", tmp.c_str(),
                     out.string().c_str(), ec.message().c_str());
        fsync_dir(out.parent_path().string());
    } catch (...) {
        fs::remove_all(tmp, ec);
        throw;
    }
}

} // namespace sof::ckpt
