// Resume compatibility checks (see compat.h): key-by-key comparison of the saved effective deck
// with this run's, plus the manifest's architecture and data fingerprint.
#include "ckpt/compat.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "ckpt/fileio.h"
#include "config/deck.h"
#include "config/fields.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/strfmt.h"
#include "data/shards.h"
#include "model/block_spec.h"
#include "model/model_config.h"

namespace sof::ckpt {

namespace {

namespace fs = std::filesystem;

// An architecture as the deck's model section would state it: its implied sizes spelled out
// (kv heads, head size, MLP size of the LLaMA family), the rope scaling factors only when scaling
// is on, so that two spellings of one model compare equal.
config::Config arch_as_deck(const model::ArchConfig& a) {
    model::ArchConfig c = a;
    if (c.llama_family()) {
        c.num_kv_heads = c.kv_heads();
        c.head_dim = c.hdim();
        c.intermediate_size = c.ffn_dim();
    }
    // only the fields of the scaling in use (YaRN's attention factor resolved)
    model::RopeScaling& r = c.rope_scaling;
    const model::RopeScaling plain;
    if (r.type == model::RopeScalingType::None) r = plain;
    if (r.type != model::RopeScalingType::Llama3) {
        r.low_freq_factor = plain.low_freq_factor;
        r.high_freq_factor = plain.high_freq_factor;
    }
    if (r.type != model::RopeScalingType::Yarn) {
        r.beta_fast = plain.beta_fast;
        r.beta_slow = plain.beta_slow;
        r.truncate = plain.truncate;
    }
    r.attention_factor =
        r.type == model::RopeScalingType::Yarn ? model::rope_attention_scale(c) : 0.0;
    if (c.sliding_window == 0) c.layer_types.clear();
    if (c.sliding_window > 0) { // one entry per layer: "sliding,full" = "sliding,full,sliding"
        std::string lt;
        for (int l = 0; l < c.num_layers; l++)
            lt += std::string(l ? "," : "") + (c.window(l) > 0 ? "sliding" : "full");
        c.layer_types = lt;
    }
    config::Config d;
    model::set_deck_model(c, &d.model);
    return d;
}

// Bytes [off, off+n) of an open file, hashed into h.
uint64_t hash_range(int fd, uint64_t off, uint64_t n, uint64_t h, const std::string& path) {
    std::vector<char> buf(static_cast<size_t>(n));
    size_t done = 0;
    while (done < buf.size()) {
        ssize_t r =
            ::pread(fd, buf.data() + done, buf.size() - done, static_cast<off_t>(off + done));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0)
            SOF_FAIL(Io, "cannot read token shard %s for its fingerprint: %s", path.c_str(),
                     r < 0 ? std::strerror(errno) : "file shrank while reading");
        done += static_cast<size_t>(r);
    }
    return fnv1a64(buf.data(), buf.size(), h);
}

} // namespace

std::string data_identity(const config::DataConfig& data) {
    if (data.train == "builtin") return "";
    constexpr uint64_t kPart = 1 << 20;
    uint64_t h = fnv1a64(nullptr, 0), total = 0;
    std::vector<std::string> files = data::expand_glob(data.train, "data.train");
    for (const std::string& path : files) {
        const core::InputFile f(path, "token shard");
        const uint64_t size = f.size();
        const std::string name = fs::path(path).filename().string();
        h = fnv1a64(name.data(), name.size(), h);
        h = fnv1a64(&size, sizeof size, h);
        h = hash_range(f.fd(), 0, std::min(size, kPart), h, path);
        if (size > kPart)
            h = hash_range(f.fd(), size - std::min(size - kPart, kPart),
                           std::min(size - kPart, kPart), h, path);
        total += size;
    }
    return core::strfmt("shards=%zu bytes=%llu fnv1a64=%s", files.size(),
                        static_cast<unsigned long long>(total), checksum_hex(h).c_str());
}

std::vector<DeckChange> arch_differences(const model::ArchConfig& x, const model::ArchConfig& y) {
    std::vector<DeckChange> out;
    config::Config arch_saved = arch_as_deck(x), arch_now = arch_as_deck(y);
    const std::vector<config::Field> as = config::bind_fields(arch_saved);
    const std::vector<config::Field> an = config::bind_fields(arch_now);
    for (size_t i = 0; i < an.size() && i < as.size(); i++) {
        if (an[i].resume != config::Resume::Arch) continue;
        const std::string a = config::format_value(as[i]), b = config::format_value(an[i]);
        if (a != b) out.push_back({an[i].key, a, b, false});
    }
    return out;
}

std::vector<DeckChange> compare_runs(const Manifest& m, const config::Config& cfg,
                                     const model::ArchConfig& mcfg, const std::string& data_id) {
    std::vector<DeckChange> out;
    // the architecture: every key of the table with the Arch policy, compared between the
    // manifest's model and the model this run builds (after model.init_from), both as deck keys
    out = arch_differences(m.model, mcfg);
    if (!m.data_identity.empty() && !data_id.empty() && m.data_identity != data_id)
        out.push_back({"data identity (training shards' names, sizes and contents)",
                       m.data_identity, data_id, false});

    config::Config saved = config::parse_deck_text(m.deck_yaml, "checkpoint deck.yaml");
    config::Config now = cfg;
    std::vector<config::Field> fs_saved = config::bind_fields(saved);
    std::vector<config::Field> fs_now = config::bind_fields(now);
    // the keys and what a difference means come from the key table (config::Resume): Match keys
    // define the data stream or the optimizer state; the global batch (ranks x batch_size x
    // seq_len) is checked by DataLoader::restore, so train.batch_size may change with the rank
    // count; Arch keys were compared above from the manifest (the model actually built)
    for (size_t i = 0; i < fs_now.size() && i < fs_saved.size(); i++) {
        const std::string& key = fs_now[i].key;
        const config::Resume policy = fs_now[i].resume;
        if (policy == config::Resume::Arch || policy == config::Resume::Never) continue;
        std::string a = config::format_value(fs_saved[i]), b = config::format_value(fs_now[i]);
        const bool state_key = key == "optimizer.state_dtype" || key == "optimizer.master_dtype" ||
                               key == "optimizer.state_block";
        if (key == "optimizer.state_dtype" || key == "optimizer.master_dtype") {
            if (a == "auto") a = "fp32"; // an unresolved auto runs fp32
            if (b == "auto") b = "fp32";
        }
        // the block size matters only to q8 moments
        if (key == "optimizer.state_block" &&
            saved.optimizer.state_dtype != config::StateDtype::Q8 &&
            now.optimizer.state_dtype != config::StateDtype::Q8)
            continue;
        if (a == b) continue;
        bool allowed = policy != config::Resume::Match;
        // the state's formats: converted on load (widened to fp32 values, stored in the new
        // formats) only when the run asks for it
        if (state_key && cfg.train.resume_convert_state) allowed = true;
        // shards moved to another path: the same data when their fingerprints agree
        if (key == "data.train" && !m.data_identity.empty() && m.data_identity == data_id)
            allowed = true;
        out.push_back({key, a, b, allowed});
    }
    return out;
}

std::vector<DeckChange> check_resume(const std::string& dir, const Manifest& m,
                                     const config::Config& cfg, const model::ArchConfig& mcfg,
                                     const std::string& data_id) {
    std::vector<DeckChange> all = compare_runs(m, cfg, mcfg, data_id);
    std::string refused;
    std::vector<DeckChange> allowed;
    for (const DeckChange& c : all) {
        if (c.allowed) {
            allowed.push_back(c);
            continue;
        }
        refused += core::strfmt("\n  %s: checkpoint %s, this run %s", c.key.c_str(),
                                c.saved.c_str(), c.now.c_str());
    }
    if (!refused.empty())
        SOF_FAIL(Config,
                 "cannot resume from %s: it was written by a different run (the model, data or "
                 "optimizer differ):%s\nset these keys back to the checkpoint's values, or start "
                 "a new run (another train.checkpoint_dir, train.resume: \"\"); the learning-rate "
                 "schedule, steps, logging, checkpointing and offload keys may change on resume; "
                 "optimizer.state_dtype, state_block and master_dtype may change with "
                 "train.resume_convert_state: true (the state is converted on load)",
                 dir.c_str(), refused.c_str());
    return allowed;
}

} // namespace sof::ckpt
