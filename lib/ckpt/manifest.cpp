// Checkpoint manifest (manifest.json) and shard records: writing them as JSON and reading them
// back with validation; every error names the manifest path and the key.
#include "ckpt/manifest.h"

#include <cinttypes>
#include <cstdlib>

#include "ckpt/fileio.h"
#include "ckpt/json.h"
#include "ckpt/llmc.h"
#include "core/error.h"

namespace sof::ckpt {

namespace {

using OJson = nlohmann::ordered_json; // keys in the order written

OJson file_entry_json(const FileEntry& f) {
    OJson j;
    j["file"] = f.file;
    j["bytes"] = f.bytes;
    j["checksum"] = checksum_hex(f.sum);
    return j;
}

FileEntry file_entry_from(const Json& obj, const std::string& key, const std::string& path) {
    const Json& v = json_get(obj, key.c_str(), path);
    FileEntry f;
    f.file = json_str(v, "file", path);
    if (f.file.empty() || f.file.find('/') != std::string::npos || f.file == "." || f.file == "..")
        SOF_FAIL(Format, "%s: \"%s\".file = \"%s\" is not a plain file name", path.c_str(),
                 key.c_str(), f.file.c_str());
    int64_t bytes = json_int(v, "bytes", path);
    if (bytes < 0) SOF_FAIL(Format, "%s: \"%s\".bytes is negative", path.c_str(), key.c_str());
    f.bytes = static_cast<uint64_t>(bytes);
    std::string hex = json_str(v, "checksum", path);
    bool ok = hex.size() == 16;
    for (char c : hex)
        ok = ok && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
    if (!ok)
        SOF_FAIL(Format, "%s: \"%s\".checksum = \"%s\" is not 16 lowercase hex digits",
                 path.c_str(), key.c_str(), hex.c_str());
    f.sum = std::strtoull(hex.c_str(), nullptr, 16);
    return f;
}

void shard_body(const ShardRecord& r, OJson* j) {
    (*j)["rank"] = r.rank;
    (*j)["numel"] = r.numel;
    if (r.native) (*j)["native"] = true;
    (*j)["params"] = file_entry_json(r.params);
    (*j)["exp_avg"] = file_entry_json(r.exp_avg);
    (*j)["exp_avg_sq"] = file_entry_json(r.exp_avg_sq);
}

void shard_body_from(const Json& v, const std::string& path, ShardRecord* r) {
    int64_t rank = json_int(v, "rank", path);
    if (rank < 0 || rank > (1 << 24))
        SOF_FAIL(Format, "%s: rank %lld is out of range", path.c_str(),
                 static_cast<long long>(rank));
    r->rank = static_cast<int>(rank);
    r->numel = json_int(v, "numel", path);
    if (r->numel < 0) SOF_FAIL(Format, "%s: numel is negative", path.c_str());
    r->params = file_entry_from(v, "params", path);
    r->exp_avg = file_entry_from(v, "exp_avg", path);
    r->exp_avg_sq = file_entry_from(v, "exp_avg_sq", path);
    // native state (bf16 master, q8 moments): the files hold the state as kept; their sizes are
    // checked against the shard's layout when read
    r->native = v.contains("native") && v["native"].is_boolean() && v["native"].get<bool>();
    for (const FileEntry* f : {&r->params, &r->exp_avg, &r->exp_avg_sq})
        if (!r->native && f->bytes != static_cast<uint64_t>(r->numel) * 4u)
            SOF_FAIL(Format, "%s: %s has %llu bytes but numel %lld needs %llu", path.c_str(),
                     f->file.c_str(), static_cast<unsigned long long>(f->bytes),
                     static_cast<long long>(r->numel),
                     static_cast<unsigned long long>(r->numel) * 4u);
}

int int_field(const Json& obj, const char* key, const std::string& path) {
    int64_t v = json_int(obj, key, path);
    if (v < INT32_MIN || v > INT32_MAX)
        SOF_FAIL(Format, "%s: \"%s\" = %lld does not fit in 32 bits", path.c_str(), key,
                 static_cast<long long>(v));
    return static_cast<int>(v);
}

// The LLaMA-family part of "model" (written since the family exists).
void read_arch_fields(const Json& mo, const std::string& path, model::ArchConfig* c) {
    const std::string arch = json_str(mo, "arch", path);
    if (!model::parse_arch(arch, &c->arch))
        SOF_FAIL(Format, "%s: model.arch = \"%s\" is not an architecture of this build (%s)",
                 path.c_str(), arch.c_str(), model::arch_names().c_str());
    c->num_kv_heads = int_field(mo, "num_kv_heads", path);
    c->head_dim = int_field(mo, "head_dim", path);
    c->intermediate_size = int_field(mo, "intermediate_size", path);
    const Json& rs = json_get(mo, "rope_scaling", path);
    auto number = [&](const Json& o, const char* key) {
        const Json& v = json_get(o, key, path);
        if (!v.is_number()) SOF_FAIL(Format, "%s: model.%s must be a number", path.c_str(), key);
        return v.get<double>();
    };
    auto flag = [&](const char* key) {
        const Json& v = json_get(mo, key, path);
        if (!v.is_boolean()) SOF_FAIL(Format, "%s: model.%s must be true/false", path.c_str(), key);
        return v.get<bool>();
    };
    c->norm_eps = static_cast<float>(number(mo, "norm_eps"));
    c->rope_theta = number(mo, "rope_theta");
    const std::string type = json_str(rs, "type", path);
    if (type != "none" && type != "llama3" && type != "yarn")
        SOF_FAIL(Format, "%s: model.rope_scaling.type = \"%s\" is not none, llama3 or yarn",
                 path.c_str(), type.c_str());
    c->rope_scaling.type = type == "llama3" ? model::RopeScalingType::Llama3
                           : type == "yarn" ? model::RopeScalingType::Yarn
                                            : model::RopeScalingType::None;
    c->rope_scaling.factor = number(rs, "factor");
    c->rope_scaling.low_freq_factor = number(rs, "low_freq_factor");
    c->rope_scaling.high_freq_factor = number(rs, "high_freq_factor");
    c->rope_scaling.original_max_position = int_field(rs, "original_max_position_embeddings", path);
    c->tie_embeddings = flag("tie_embeddings");
    c->qkv_bias = flag("qkv_bias");
    c->qk_norm = flag("qk_norm");
    // written since the block features of issue 26; absent in older manifests (their defaults)
    auto has = [](const Json& o, const char* key) { return o.is_object() && o.contains(key); };
    if (has(rs, "beta_fast")) {
        c->rope_scaling.beta_fast = number(rs, "beta_fast");
        c->rope_scaling.beta_slow = number(rs, "beta_slow");
        c->rope_scaling.attention_factor = number(rs, "attention_factor");
        const Json& t = json_get(rs, "truncate", path);
        if (!t.is_boolean())
            SOF_FAIL(Format, "%s: model.rope_scaling.truncate must be true/false", path.c_str());
        c->rope_scaling.truncate = t.get<bool>();
    }
    if (has(mo, "o_bias")) {
        c->o_bias = flag("o_bias");
        c->mlp_bias = flag("mlp_bias");
        c->attn_sinks = flag("attn_sinks");
        c->sliding_window = int_field(mo, "sliding_window", path);
        c->layer_types = json_str(mo, "layer_types", path);
        c->attn_dropout = static_cast<float>(number(mo, "attn_dropout"));
        c->resid_dropout = static_cast<float>(number(mo, "resid_dropout"));
    }
    if (has(mo, "num_experts")) { // mixture of experts (issue 27)
        c->num_experts = int_field(mo, "num_experts", path);
        c->experts_per_tok = int_field(mo, "experts_per_tok", path);
        c->moe_intermediate_size = int_field(mo, "moe_intermediate_size", path);
        c->norm_topk_prob = flag("norm_topk_prob");
        c->decoder_sparse_step = int_field(mo, "decoder_sparse_step", path);
        const std::string only = json_str(mo, "mlp_only_layers", path);
        if (!model::parse_layer_list(only, &c->mlp_only_layers))
            SOF_FAIL(Format, "%s: model.mlp_only_layers = \"%s\" is not a list of layers",
                     path.c_str(), only.c_str());
        c->router_aux_loss_coef = static_cast<float>(number(mo, "router_aux_loss_coef"));
        c->output_router_logits = flag("output_router_logits");
    }
}

} // namespace

std::string seal_manifest(const std::string& body) {
    return body + "  \"manifest_checksum\": \"" +
           checksum_hex(block_checksum(body.data(), body.size())) + "\"\n}\n";
}

std::string shard_file_name(const char* what, int rank, int world) {
    if (world == 1) return core::strfmt("%s.bin", what);
    return core::strfmt("%s.rank%05d.bin", what, rank);
}

std::string shard_record_name(int rank) {
    return core::strfmt("shard.rank%05d.json", rank);
}

// The manifest text up to the checksum line: an ordered JSON object without its closing brace.
std::string manifest_body(const OJson& j) {
    std::string text = j.dump(2, ' ', false, Json::error_handler_t::replace); // "{\n ... \n}"
    return text.substr(0, text.size() - 2) + ",\n";
}

// "state": {"master": "fp32"|"bf16", "moments": "fp32"|"bf16"|"q8", "block": n}
static void state_from(const Json& v, const std::string& path, offload::StateFormat* f) {
    if (!v.is_object()) SOF_FAIL(Format, "%s: \"state\" is not an object", path.c_str());
    const std::string master = json_str(v, "master", path);
    const std::string moments = json_str(v, "moments", path);
    const int64_t block = json_int(v, "block", path);
    if (master != "fp32" && master != "bf16")
        SOF_FAIL(Format, "%s: \"state.master\" is \"%s\", expected fp32 or bf16", path.c_str(),
                 master.c_str());
    if (moments != "fp32" && moments != "bf16" && moments != "q8")
        SOF_FAIL(Format, "%s: \"state.moments\" is \"%s\", expected fp32, bf16 or q8", path.c_str(),
                 moments.c_str());
    f->master = master == "bf16" ? SOF_DTYPE_BF16 : SOF_DTYPE_F32;
    f->moments =
        moments == "q8" ? SOF_STATE_Q8 : (moments == "bf16" ? SOF_STATE_BF16 : SOF_STATE_F32);
    const bool q8 = f->moments == SOF_STATE_Q8;
    if (q8 ? (block < 64 || block > 4096 || (block & (block - 1)) != 0) : block != 0)
        SOF_FAIL(Format, "%s: \"state.block\" = %lld does not fit moments %s", path.c_str(),
                 static_cast<long long>(block), moments.c_str());
    f->block = static_cast<int>(block);
}

std::string manifest_to_json(const Manifest& m, const FileEntry& deck,
                             const std::vector<ShardRecord>& shards) {
    OJson j;
    j["format"] = kFormatName;
    j["format_version"] = kFormatVersion;
    j["checksum_algorithm"] = kChecksumAlgorithm;
    j["step"] = m.step;
    j["opt_step"] = m.opt_step;
    j["num_params"] = m.num_params;
    j["world_size"] = m.world_size;
    j["skips"] = m.skips;
    j["rollbacks"] = m.rollbacks;
    OJson mo;
    mo["max_seq_len"] = m.model.max_seq_len;
    mo["vocab_size"] = m.model.vocab_size;
    mo["padded_vocab_size"] = m.model.padded_vocab_size;
    mo["num_layers"] = m.model.num_layers;
    mo["num_heads"] = m.model.num_heads;
    mo["channels"] = m.model.channels;
    // the LLaMA family's keys (absent in older manifests: those are GPT-2)
    mo["arch"] = model::arch_name(m.model.arch);
    mo["num_kv_heads"] = m.model.num_kv_heads;
    mo["head_dim"] = m.model.head_dim;
    mo["intermediate_size"] = m.model.intermediate_size;
    mo["norm_eps"] = m.model.norm_eps;
    mo["rope_theta"] = m.model.rope_theta;
    const model::RopeScaling& rs = m.model.rope_scaling;
    const char* rtype = rs.type == model::RopeScalingType::Llama3 ? "llama3"
                        : rs.type == model::RopeScalingType::Yarn ? "yarn"
                                                                  : "none";
    mo["rope_scaling"] = {{"type", rtype},
                          {"factor", rs.factor},
                          {"low_freq_factor", rs.low_freq_factor},
                          {"high_freq_factor", rs.high_freq_factor},
                          {"original_max_position_embeddings", rs.original_max_position},
                          {"beta_fast", rs.beta_fast},
                          {"beta_slow", rs.beta_slow},
                          {"attention_factor", rs.attention_factor},
                          {"truncate", rs.truncate}};
    mo["tie_embeddings"] = m.model.tie_embeddings;
    mo["qkv_bias"] = m.model.qkv_bias;
    mo["qk_norm"] = m.model.qk_norm;
    mo["o_bias"] = m.model.o_bias;
    mo["mlp_bias"] = m.model.mlp_bias;
    mo["attn_sinks"] = m.model.attn_sinks;
    mo["sliding_window"] = m.model.sliding_window;
    mo["layer_types"] = m.model.layer_types;
    mo["attn_dropout"] = m.model.attn_dropout;
    mo["resid_dropout"] = m.model.resid_dropout;
    if (m.model.moe()) {
        mo["num_experts"] = m.model.num_experts;
        mo["experts_per_tok"] = m.model.experts_per_tok;
        mo["moe_intermediate_size"] = m.model.moe_intermediate_size;
        mo["norm_topk_prob"] = m.model.norm_topk_prob;
        mo["decoder_sparse_step"] = m.model.decoder_sparse_step;
        mo["mlp_only_layers"] = model::format_layer_list(m.model.mlp_only_layers);
        mo["router_aux_loss_coef"] = m.model.router_aux_loss_coef;
        mo["output_router_logits"] = m.model.output_router_logits;
    }
    j["model"] = mo;
    j["train_data"] = m.train_data.to_string();
    j["data_identity"] = m.data_identity;
    // the optimizer state's formats (absent in older manifests: fp32 master and moments)
    j["state"] = {{"master", offload::master_deck_name(m.state.master)},
                  {"moments", offload::moments_deck_name(m.state.moments)},
                  {"block", m.state.block}};
    j["deck"] = file_entry_json(deck);
    OJson arr = OJson::array();
    for (const ShardRecord& r : shards) {
        OJson e;
        shard_body(r, &e);
        arr.push_back(e);
    }
    j["shards"] = arr;
    return seal_manifest(manifest_body(j));
}

void manifest_from_json(const std::string& text, const std::string& path, Manifest* m,
                        FileEntry* deck, std::vector<ShardRecord>* shards) {
    Json root = json_parse(text, path);
    std::string format = json_str(root, "format", path);
    if (format != kFormatName)
        SOF_FAIL(Format, "%s: \"format\" is \"%s\", expected \"%s\": not a superoffload checkpoint",
                 path.c_str(), format.c_str(), kFormatName);
    int64_t version = json_int(root, "format_version", path);
    if (version != kFormatVersion)
        SOF_FAIL(Format,
                 "%s: checkpoint format version %lld, this program reads version %d (%s); use "
                 "the superoffload version that wrote it",
                 path.c_str(), static_cast<long long>(version), kFormatVersion,
                 version > kFormatVersion ? "written by a newer superoffload" : "too old");
    std::string algo = json_str(root, "checksum_algorithm", path);
    if (algo != kChecksumAlgorithm)
        SOF_FAIL(Format, "%s: checksum_algorithm \"%s\" is unknown (this program uses \"%s\")",
                 path.c_str(), algo.c_str(), kChecksumAlgorithm);
    const std::string sealed = json_str(root, "manifest_checksum", path);
    const size_t key = text.rfind("\n  \"manifest_checksum\"");
    const std::string want = key == std::string::npos
                                 ? std::string()
                                 : checksum_hex(block_checksum(text.data(), key + 1));
    if (sealed != want)
        SOF_FAIL(Format,
                 "%s: manifest_checksum %s does not match the manifest's contents (%s): the "
                 "manifest is corrupt or was edited; resume from another checkpoint",
                 path.c_str(), sealed.c_str(), want.empty() ? "not found" : want.c_str());
    *m = Manifest{};
    m->step = json_int(root, "step", path);
    m->opt_step = json_int(root, "opt_step", path);
    m->num_params = json_int(root, "num_params", path);
    m->world_size = int_field(root, "world_size", path);
    m->skips = json_int(root, "skips", path);
    m->rollbacks = json_int(root, "rollbacks", path);
    if (m->step < 0 || m->opt_step < 0 || m->skips < 0 || m->rollbacks < 0)
        SOF_FAIL(Format,
                 "%s: inconsistent counters (step %lld, opt_step %lld, skips %lld, rollbacks "
                 "%lld)",
                 path.c_str(), static_cast<long long>(m->step), static_cast<long long>(m->opt_step),
                 static_cast<long long>(m->skips), static_cast<long long>(m->rollbacks));
    if (m->world_size < 1)
        SOF_FAIL(Format, "%s: world_size = %d must be >= 1", path.c_str(), m->world_size);

    const Json& mo = json_get(root, "model", path);
    m->model.max_seq_len = int_field(mo, "max_seq_len", path);
    m->model.vocab_size = int_field(mo, "vocab_size", path);
    m->model.padded_vocab_size = int_field(mo, "padded_vocab_size", path);
    m->model.num_layers = int_field(mo, "num_layers", path);
    m->model.num_heads = int_field(mo, "num_heads", path);
    m->model.channels = int_field(mo, "channels", path);
    if (mo.contains("arch")) read_arch_fields(mo, path, &m->model);
    try {
        model::validate(m->model);
    } catch (const core::Error& e) {
        SOF_FAIL(Format, "%s: \"model\" is invalid: %s", path.c_str(), e.what());
    }
    const double count = static_cast<double>(model::make_layout(m->model).num_params);
    if (count != static_cast<double>(m->num_params))
        SOF_FAIL(Format, "%s: num_params = %lld but the model dims give %.0f parameters",
                 path.c_str(), static_cast<long long>(m->num_params), count);

    const std::string loader = json_str(root, "train_data", path);
    try {
        m->train_data = data::LoaderState::from_string(loader);
    } catch (const core::Error& e) {
        SOF_FAIL(Format, "%s: \"train_data\" is invalid: %s", path.c_str(), e.what());
    }
    // optional: manifests written before it existed have no data fingerprint
    if (root.contains("data_identity")) m->data_identity = json_str(root, "data_identity", path);
    if (root.contains("state")) state_from(root["state"], path, &m->state);
    *deck = file_entry_from(root, "deck", path);

    const Json& arr = json_arr(root, "shards", path);
    if (arr.size() != static_cast<size_t>(m->world_size))
        SOF_FAIL(Format, "%s: %zu shards listed for world_size %d", path.c_str(), arr.size(),
                 m->world_size);
    shards->clear();
    int64_t total = 0;
    for (size_t i = 0; i < arr.size(); i++) {
        ShardRecord r;
        shard_body_from(arr[i], path, &r);
        r.world_size = m->world_size;
        r.step = m->step;
        if (r.rank != static_cast<int>(i))
            SOF_FAIL(Format, "%s: shard %zu has rank %d (shards must be in rank order)",
                     path.c_str(), i, r.rank);
        total += r.numel;
        shards->push_back(r);
    }
    if (total != m->num_params)
        SOF_FAIL(Format, "%s: the shards hold %lld elements in total but num_params = %lld",
                 path.c_str(), static_cast<long long>(total),
                 static_cast<long long>(m->num_params));
}

std::string shard_to_json(const ShardRecord& r) {
    OJson j;
    j["world_size"] = r.world_size;
    j["step"] = r.step;
    shard_body(r, &j);
    return j.dump(2) + "\n";
}

ShardRecord shard_from_json(const std::string& text, const std::string& path) {
    Json v = json_parse(text, path);
    ShardRecord r;
    r.world_size = int_field(v, "world_size", path);
    r.step = json_int(v, "step", path);
    shard_body_from(v, path, &r);
    return r;
}

} // namespace sof::ckpt
