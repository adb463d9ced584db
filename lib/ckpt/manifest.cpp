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

std::string file_entry_json(const FileEntry& f) {
    return core::strfmt("{\"file\": %s, \"bytes\": %llu, \"checksum\": \"%s\"}",
                        json_quote(f.file).c_str(), static_cast<unsigned long long>(f.bytes),
                        checksum_hex(f.sum).c_str());
}

FileEntry file_entry_from(const JsonValue& obj, const std::string& key, const std::string& path) {
    const JsonValue& v = json_get(obj, key, path);
    FileEntry f;
    f.file = json_str(v, "file", path);
    if (f.file.empty() || f.file.find('/') != std::string::npos || f.file == "." || f.file == "..")
        SOF_FAIL(Format, "%s line %d: \"%s\".file = \"%s\" is not a plain file name", path.c_str(),
                 v.line, key.c_str(), f.file.c_str());
    int64_t bytes = json_int(v, "bytes", path);
    if (bytes < 0)
        SOF_FAIL(Format, "%s line %d: \"%s\".bytes is negative", path.c_str(), v.line, key.c_str());
    f.bytes = static_cast<uint64_t>(bytes);
    std::string hex = json_str(v, "checksum", path);
    bool ok = hex.size() == 16;
    for (char c : hex)
        ok = ok && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
    if (!ok)
        SOF_FAIL(Format, "%s line %d: \"%s\".checksum = \"%s\" is not 16 lowercase hex digits",
                 path.c_str(), v.line, key.c_str(), hex.c_str());
    f.sum = std::strtoull(hex.c_str(), nullptr, 16);
    return f;
}

std::string shard_body(const ShardRecord& r, const char* indent) {
    return core::strfmt("%s\"rank\": %d,\n%s\"numel\": %lld,\n%s\"params\": %s,\n%s\"exp_avg\": "
                        "%s,\n%s\"exp_avg_sq\": %s",
                        indent, r.rank, indent, static_cast<long long>(r.numel), indent,
                        file_entry_json(r.params).c_str(), indent,
                        file_entry_json(r.exp_avg).c_str(), indent,
                        file_entry_json(r.exp_avg_sq).c_str());
}

void shard_body_from(const JsonValue& v, const std::string& path, ShardRecord* r) {
    int64_t rank = json_int(v, "rank", path);
    if (rank < 0 || rank > (1 << 24))
        SOF_FAIL(Format, "%s line %d: rank %lld is out of range", path.c_str(), v.line,
                 static_cast<long long>(rank));
    r->rank = static_cast<int>(rank);
    r->numel = json_int(v, "numel", path);
    if (r->numel < 0) SOF_FAIL(Format, "%s line %d: numel is negative", path.c_str(), v.line);
    r->params = file_entry_from(v, "params", path);
    r->exp_avg = file_entry_from(v, "exp_avg", path);
    r->exp_avg_sq = file_entry_from(v, "exp_avg_sq", path);
    for (const FileEntry* f : {&r->params, &r->exp_avg, &r->exp_avg_sq})
        if (f->bytes != static_cast<uint64_t>(r->numel) * 4u)
            SOF_FAIL(Format, "%s line %d: %s has %llu bytes but numel %lld needs %llu",
                     path.c_str(), v.line, f->file.c_str(),
                     static_cast<unsigned long long>(f->bytes), static_cast<long long>(r->numel),
                     static_cast<unsigned long long>(r->numel) * 4u);
}

int int_field(const JsonValue& obj, const char* key, const std::string& path) {
    int64_t v = json_int(obj, key, path);
    if (v < INT32_MIN || v > INT32_MAX)
        SOF_FAIL(Format, "%s: \"%s\" = %lld does not fit in 32 bits", path.c_str(), key,
                 static_cast<long long>(v));
    return static_cast<int>(v);
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

std::string manifest_to_json(const Manifest& m, const FileEntry& deck,
                             const std::vector<ShardRecord>& shards) {
    std::string s = "{\n";
    s += core::strfmt("  \"format\": \"%s\",\n  \"format_version\": %d,\n", kFormatName,
                      kFormatVersion);
    s += core::strfmt("  \"checksum_algorithm\": \"%s\",\n", kChecksumAlgorithm);
    s += core::strfmt("  \"step\": %lld,\n  \"opt_step\": %lld,\n", static_cast<long long>(m.step),
                      static_cast<long long>(m.opt_step));
    s += core::strfmt("  \"num_params\": %lld,\n  \"world_size\": %d,\n",
                      static_cast<long long>(m.num_params), m.world_size);
    s += core::strfmt("  \"skips\": %lld,\n  \"rollbacks\": %lld,\n",
                      static_cast<long long>(m.skips), static_cast<long long>(m.rollbacks));
    s += core::strfmt("  \"model\": {\"max_seq_len\": %d, \"vocab_size\": %d, "
                      "\"padded_vocab_size\": %d, \"num_layers\": %d, \"num_heads\": %d, "
                      "\"channels\": %d},\n",
                      m.model.max_seq_len, m.model.vocab_size, m.model.padded_vocab_size,
                      m.model.num_layers, m.model.num_heads, m.model.channels);
    s += "  \"train_data\": " + json_quote(m.train_data.to_string()) + ",\n";
    s += "  \"deck\": " + file_entry_json(deck) + ",\n";
    s += "  \"shards\": [\n";
    for (size_t i = 0; i < shards.size(); i++) {
        s += "    {\n" + shard_body(shards[i], "      ") + "\n    }";
        s += i + 1 < shards.size() ? ",\n" : "\n";
    }
    s += "  ],\n";
    return seal_manifest(s);
}

void manifest_from_json(const std::string& text, const std::string& path, Manifest* m,
                        FileEntry* deck, std::vector<ShardRecord>* shards) {
    JsonValue root = json_parse(text, path);
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

    const JsonValue& mo = json_get(root, "model", path);
    m->model.max_seq_len = int_field(mo, "max_seq_len", path);
    m->model.vocab_size = int_field(mo, "vocab_size", path);
    m->model.padded_vocab_size = int_field(mo, "padded_vocab_size", path);
    m->model.num_layers = int_field(mo, "num_layers", path);
    m->model.num_heads = int_field(mo, "num_heads", path);
    m->model.channels = int_field(mo, "channels", path);
    try {
        model::validate(m->model);
    } catch (const core::Error& e) {
        SOF_FAIL(Format, "%s: \"model\" is invalid: %s", path.c_str(), e.what());
    }
    if (llmc_param_count(m->model) != static_cast<double>(m->num_params))
        SOF_FAIL(Format, "%s: num_params = %lld but the model dims give %.0f parameters",
                 path.c_str(), static_cast<long long>(m->num_params), llmc_param_count(m->model));

    const std::string loader = json_str(root, "train_data", path);
    try {
        m->train_data = data::LoaderState::from_string(loader);
    } catch (const core::Error& e) {
        SOF_FAIL(Format, "%s: \"train_data\" is invalid: %s", path.c_str(), e.what());
    }
    *deck = file_entry_from(root, "deck", path);

    const JsonValue& arr = json_arr(root, "shards", path);
    if (arr.arr.size() != static_cast<size_t>(m->world_size))
        SOF_FAIL(Format, "%s: %zu shards listed for world_size %d", path.c_str(), arr.arr.size(),
                 m->world_size);
    shards->clear();
    int64_t total = 0;
    for (size_t i = 0; i < arr.arr.size(); i++) {
        ShardRecord r;
        shard_body_from(arr.arr[i], path, &r);
        r.world_size = m->world_size;
        r.step = m->step;
        if (r.rank != static_cast<int>(i))
            SOF_FAIL(Format, "%s line %d: shard %zu has rank %d (shards must be in rank order)",
                     path.c_str(), arr.arr[i].line, i, r.rank);
        total += r.numel;
        shards->push_back(r);
    }
    if (total != m->num_params)
        SOF_FAIL(Format, "%s: the shards hold %lld elements in total but num_params = %lld",
                 path.c_str(), static_cast<long long>(total),
                 static_cast<long long>(m->num_params));
}

std::string shard_to_json(const ShardRecord& r) {
    return core::strfmt("{\n  \"world_size\": %d,\n  \"step\": %lld,\n", r.world_size,
                        static_cast<long long>(r.step)) +
           shard_body(r, "  ") + "\n}\n";
}

ShardRecord shard_from_json(const std::string& text, const std::string& path) {
    JsonValue v = json_parse(text, path);
    ShardRecord r;
    r.world_size = int_field(v, "world_size", path);
    r.step = json_int(v, "step", path);
    shard_body_from(v, path, &r);
    return r;
}

} // namespace sof::ckpt
