// llm.c GPT-2 fp32 checkpoints: header validation, import/export between llm.c's tensor-major
// order and our unit-major flat layout. Each (tensor, layer) block is contiguous in both orders,
// so import preads every block straight into place and export streams blocks in file order.
#include "ckpt/llmc.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "ckpt/fileio.h"
#include "core/error.h"
#include "core/output_file.h"

namespace sof::ckpt {

namespace {

using model::TensorKind;

bool is_block_kind(TensorKind k) {
    return k != TensorKind::Wte && k != TensorKind::Wpe && k != TensorKind::Lnfw &&
           k != TensorKind::Lnfb;
}

// Elements of one instance of tensor `k` (one layer's worth for block tensors).
size_t kind_numel(const model::ArchConfig& cfg, TensorKind k) {
    const size_t C = static_cast<size_t>(cfg.channels);
    switch (k) {
    case TensorKind::Wte:
        return static_cast<size_t>(cfg.padded_vocab_size) * C;
    case TensorKind::Wpe:
        return static_cast<size_t>(cfg.max_seq_len) * C;
    case TensorKind::Qkvw:
        return 3 * C * C;
    case TensorKind::Qkvb:
        return 3 * C;
    case TensorKind::Attprojw:
        return C * C;
    case TensorKind::Fcw:
    case TensorKind::Fcprojw:
        return 4 * C * C;
    case TensorKind::Fcb:
        return 4 * C;
    default:
        return C; // ln1w, ln1b, attprojb, ln2w, ln2b, fcprojb, lnfw, lnfb
    }
}

void check_matches(const std::string& path, const model::ArchConfig& file,
                   const model::ArchConfig& want) {
    auto same = [&](int a, int b, const char* field) {
        if (a != b)
            SOF_FAIL(Format,
                     "%s: header %s = %d but the model being loaded has %s = %d (the file is "
                     "for a different architecture; take the model dims from the file or use "
                     "a matching file)",
                     path.c_str(), field, a, field, b);
    };
    same(file.max_seq_len, want.max_seq_len, "max_seq_len");
    same(file.vocab_size, want.vocab_size, "vocab_size");
    same(file.padded_vocab_size, want.padded_vocab_size, "padded_vocab_size");
    same(file.num_layers, want.num_layers, "num_layers");
    same(file.num_heads, want.num_heads, "num_heads");
    same(file.channels, want.channels, "channels");
}

} // namespace

double llmc_param_count(const model::ArchConfig& cfg) {
    const double C = cfg.channels, L = cfg.num_layers;
    return static_cast<double>(cfg.padded_vocab_size) * C + cfg.max_seq_len * C +
           L * (12.0 * C * C + 13.0 * C) + 2.0 * C;
}

size_t llmc_offset(const model::ArchConfig& cfg, TensorKind kind, int layer) {
    const size_t L = static_cast<size_t>(cfg.num_layers);
    size_t off = 0;
    for (int k = 0; k < model::kNumGpt2TensorKinds; k++) {
        TensorKind tk = static_cast<TensorKind>(k);
        if (tk == kind)
            return off + (is_block_kind(tk) ? static_cast<size_t>(layer) * kind_numel(cfg, tk) : 0);
        off += kind_numel(cfg, tk) * (is_block_kind(tk) ? L : 1);
    }
    SOF_FAIL(Internal, "llmc_offset: unknown tensor kind %d", static_cast<int>(kind));
}

model::ArchConfig read_llmc_header(const std::string& path) {
    const uint64_t size = file_size_checked(path, "llm.c checkpoint");
    if (size < 4u * kLlmcHeaderInts)
        SOF_FAIL(Format,
                 "%s is %llu bytes, shorter than the 1024-byte llm.c header: not an llm.c "
                 "GPT-2 checkpoint (or truncated)",
                 path.c_str(), static_cast<unsigned long long>(size));
    std::vector<int32_t> h(kLlmcHeaderInts);
    read_exact(path, h.data(), 4u * kLlmcHeaderInts);
    if (h[0] != kLlmcMagic)
        SOF_FAIL(Format,
                 "%s: bad magic %d (expected %d): not an llm.c GPT-2 checkpoint (token shards "
                 "use 20240520; pass a model file written by llm.c or 'superoffload export')",
                 path.c_str(), h[0], kLlmcMagic);
    if (h[1] != kLlmcVersionFp32)
        SOF_FAIL(Format,
                 "%s: llm.c checkpoint version %d is not supported (expected %d = fp32; version "
                 "5 is bf16: re-export the model in fp32)",
                 path.c_str(), h[1], kLlmcVersionFp32);
    model::ArchConfig cfg;
    cfg.max_seq_len = h[2];
    cfg.vocab_size = h[3];
    cfg.num_layers = h[4];
    cfg.num_heads = h[5];
    cfg.channels = h[6];
    cfg.padded_vocab_size = h[7];
    try {
        model::validate(cfg);
    } catch (const core::Error& e) {
        SOF_FAIL(Format, "%s: the header describes an invalid model: %s", path.c_str(), e.what());
    }
    const double expect = 4.0 * kLlmcHeaderInts + 4.0 * llmc_param_count(cfg);
    if (expect != static_cast<double>(size))
        SOF_FAIL(Format,
                 "%s is %llu bytes but its header (maxT=%d V=%d Vp=%d L=%d NH=%d C=%d) needs "
                 "%.0f bytes: the file is truncated or not an fp32 llm.c checkpoint",
                 path.c_str(), static_cast<unsigned long long>(size), cfg.max_seq_len,
                 cfg.vocab_size, cfg.padded_vocab_size, cfg.num_layers, cfg.num_heads, cfg.channels,
                 expect);
    return cfg;
}

void import_llmc(const std::string& path, const model::ParamLayout& layout, float* params) {
    const model::ArchConfig cfg = read_llmc_header(path);
    check_matches(path, cfg, layout.cfg);
    const uint64_t base = 4u * kLlmcHeaderInts;
    for (const model::TensorInfo& t : layout.tensors) {
        const size_t src = llmc_offset(cfg, t.kind, t.layer);
        read_exact(path, params + t.offset, t.numel * sizeof(float),
                   base + static_cast<uint64_t>(src) * sizeof(float));
        const size_t k = first_non_finite(params + t.offset, t.numel);
        if (k < t.numel)
            SOF_FAIL(
                Format,
                "%s: tensor '%s' holds a non-finite value (%g) at element %s (flat index "
                "%zu); refusing to import it: the file is corrupt, or the model had diverged "
                "when it was saved",
                path.c_str(), t.name.c_str(), static_cast<double>(params[t.offset + k]),
                index_in_shape(k, std::vector<int64_t>(t.shape.begin(), t.shape.end())).c_str(), k);
    }
}

void export_llmc(const std::string& path, const model::ArchConfig& cfg,
                 const model::ParamLayout& layout, const float* params) {
    check_matches(path + " (export)", cfg, layout.cfg);
    std::vector<int32_t> h(kLlmcHeaderInts, 0);
    h[0] = kLlmcMagic;
    h[1] = kLlmcVersionFp32;
    h[2] = cfg.max_seq_len;
    h[3] = cfg.vocab_size;
    h[4] = cfg.num_layers;
    h[5] = cfg.num_heads;
    h[6] = cfg.channels;
    h[7] = cfg.padded_vocab_size;
    core::check_output_target(path, "llm.c checkpoint (export --llmc)");
    const std::string tmp = path + ".tmp";
    try {
        DurableWriter w(tmp);
        w.write(h.data(), h.size() * sizeof(int32_t));
        // file order: kind-major, then layer
        for (int k = 0; k < model::kNumGpt2TensorKinds; k++) {
            TensorKind kind = static_cast<TensorKind>(k);
            const int reps = is_block_kind(kind) ? cfg.num_layers : 1;
            for (int l = 0; l < reps; l++) {
                const size_t off = layout.offset_of(kind, l);
                w.write(params + off, kind_numel(cfg, kind) * sizeof(float));
            }
        }
        w.finish();
    } catch (...) {
        ::unlink(tmp.c_str());
        throw;
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        int e = errno;
        ::unlink(tmp.c_str());
        SOF_FAIL(Io, "cannot rename %s to %s: %s", tmp.c_str(), path.c_str(), std::strerror(e));
    }
    std::string parent = path.find('/') == std::string::npos
                             ? std::string(".")
                             : path.substr(0, path.find_last_of('/'));
    fsync_dir(parent.empty() ? std::string("/") : parent);
}

} // namespace sof::ckpt
