// Checkpoint save (atomic: .tmp-step_N, fsync, rename, prune), load (sizes and checksums checked,
// errors name the file) and find_latest. Rank-local: multi-rank callers synchronize between phases.
#include "ckpt/checkpoint.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <system_error>

#include "ckpt/fileio.h"
#include "ckpt/manifest.h"
#include "core/error.h"

namespace sof::ckpt {

namespace fs = std::filesystem;

namespace {

const char* kTmpPrefix = ".tmp-step_";
const char* kOldPrefix = ".old-step_";

std::string tmp_dir(const std::string& root, int64_t step) {
    return (fs::path(root) / (kTmpPrefix + step_dir_name(step).substr(5))).string();
}

// "step_00000100" -> 100; -1 if the name is not step_<digits> (with the given prefix).
int64_t parse_step(const std::string& name, const std::string& prefix) {
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return -1;
    int64_t v = 0;
    for (size_t i = prefix.size(); i < name.size(); i++) {
        char c = name[i];
        if (c < '0' || c > '9' || v > (INT64_MAX - 9) / 10) return -1;
        v = v * 10 + (c - '0');
    }
    return v;
}

// Complete checkpoints under root: (step, path), oldest first.
std::vector<std::pair<int64_t, std::string>> complete_steps(const std::string& root) {
    std::vector<std::pair<int64_t, std::string>> out;
    std::error_code ec;
    if (!fs::is_directory(root, ec)) return out;
    for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        int64_t step = parse_step(name, "step_");
        if (step < 0) continue;
        std::error_code e2;
        if (!fs::is_directory(it->path(), e2)) continue;
        if (!fs::is_regular_file(it->path() / kManifestName, e2)) continue;
        out.emplace_back(step, it->path().string());
    }
    std::sort(out.begin(), out.end());
    return out;
}

FileEntry write_bytes(const std::string& dir, const std::string& name, const void* data,
                      uint64_t bytes) {
    FileEntry f;
    f.file = name;
    f.bytes = bytes;
    f.sum = block_checksum(data, f.bytes);
    write_file_durable((fs::path(dir) / name).string(), data, f.bytes);
    return f;
}

FileEntry write_buffer(const std::string& dir, const std::string& name,
                       const std::vector<float>& v) {
    return write_bytes(dir, name, v.data(), v.size() * sizeof(float));
}

void remove_quietly(const fs::path& p) {
    std::error_code ec;
    fs::remove_all(p, ec);
}

// Removes complete checkpoints beyond the newest `keep` (up to step `current`), and leftovers of
// interrupted saves.
void prune(const std::string& root, int keep, int64_t current) {
    std::error_code ec;
    for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        int64_t t = parse_step(name, kTmpPrefix);
        if (t >= 0 && t != current) remove_quietly(it->path());
        if (parse_step(name, kOldPrefix) >= 0) remove_quietly(it->path());
    }
    if (keep <= 0) return;
    // Only steps up to the one just written compete for `keep`: after resuming from an older
    // checkpoint, newer ones (from the abandoned run) are neither counted nor deleted, so the
    // new checkpoint itself is never pruned.
    auto steps = complete_steps(root);
    while (!steps.empty() && steps.back().first > current)
        steps.pop_back();
    if (steps.size() <= static_cast<size_t>(keep)) return;
    for (size_t i = 0; i + static_cast<size_t>(keep) < steps.size(); i++)
        remove_quietly(steps[i].second);
}

// Reads one shard file, checking existence, size and checksum against the manifest entry.
template <class T>
void read_checked(const std::string& dir, const FileEntry& f, const std::string& manifest_path,
                  std::vector<T>* out) {
    const std::string path = (fs::path(dir) / f.file).string();
    const uint64_t size = file_size_checked(path, "checkpoint file");
    if (size != f.bytes)
        SOF_FAIL(Format,
                 "checkpoint file %s is %llu bytes but %s records %llu (the file is truncated "
                 "or was replaced; resume from another checkpoint)",
                 path.c_str(), static_cast<unsigned long long>(size), manifest_path.c_str(),
                 static_cast<unsigned long long>(f.bytes));
    out->assign(f.bytes / sizeof(T), T{});
    read_exact(path, out->data(), f.bytes);
    const uint64_t h = block_checksum(out->data(), f.bytes);
    if (h != f.sum)
        SOF_FAIL(Format,
                 "checksum mismatch in checkpoint file %s: checksum is %s but %s records %s "
                 "(the file is corrupt; resume from another checkpoint or restore the file)",
                 path.c_str(), checksum_hex(h).c_str(), manifest_path.c_str(),
                 checksum_hex(f.sum).c_str());
}

// Reads and validates dir/manifest.json (and deck.yaml); returns the shard list.
std::vector<ShardRecord> read_manifest(const std::string& dir, Manifest* m) {
    std::error_code ec;
    if (!fs::exists(dir, ec))
        SOF_FAIL(Io,
                 "checkpoint directory %s not found (pass a step directory such as "
                 "<checkpoint_dir>/step_00000100, or train.resume=auto)",
                 dir.c_str());
    if (!fs::is_directory(dir, ec))
        SOF_FAIL(Io, "checkpoint %s is not a directory (pass a step_N directory)", dir.c_str());
    const std::string mpath = (fs::path(dir) / kManifestName).string();
    if (!fs::exists(mpath, ec)) {
        const std::string name = fs::path(dir).filename().string();
        if (parse_step(name, kTmpPrefix) >= 0)
            SOF_FAIL(Io,
                     "%s is the temporary directory of an interrupted save (no %s); resume "
                     "from a complete step_N directory",
                     dir.c_str(), kManifestName);
        if (!complete_steps(dir).empty())
            SOF_FAIL(Io,
                     "%s holds checkpoints but is not one: pass one of its step_N directories "
                     "(newest: %s) or set train.resume=auto",
                     dir.c_str(), complete_steps(dir).back().second.c_str());
        SOF_FAIL(Io, "checkpoint file %s not found: %s is not a complete checkpoint directory",
                 mpath.c_str(), dir.c_str());
    }
    const std::string text = read_text(mpath, "checkpoint manifest");
    FileEntry deck;
    std::vector<ShardRecord> shards;
    manifest_from_json(text, mpath, m, &deck, &shards);

    const std::string dpath = (fs::path(dir) / deck.file).string();
    m->deck_yaml = read_text(dpath, "checkpoint file");
    if (m->deck_yaml.size() != deck.bytes ||
        block_checksum(m->deck_yaml.data(), m->deck_yaml.size()) != deck.sum)
        SOF_FAIL(Format,
                 "checkpoint file %s does not match %s (size or checksum differ): it was "
                 "edited or is corrupt; restore it or resume from another checkpoint",
                 dpath.c_str(), mpath.c_str());
    return shards;
}

} // namespace

std::string step_dir_name(int64_t step) {
    return core::strfmt("step_%08lld", static_cast<long long>(step));
}

std::string prepare_save(const std::string& root, int64_t step) {
    std::error_code ec;
    fs::create_directories(root, ec);
    if (ec || !fs::is_directory(root))
        SOF_FAIL(Io, "cannot create checkpoint directory %s: %s (check train.checkpoint_dir)",
                 root.c_str(), ec ? ec.message().c_str() : "exists and is not a directory");
    const std::string tmp = tmp_dir(root, step);
    fs::remove_all(tmp, ec);
    if (ec) SOF_FAIL(Io, "cannot remove the leftover %s: %s", tmp.c_str(), ec.message().c_str());
    fs::create_directory(tmp, ec);
    if (ec) SOF_FAIL(Io, "cannot create %s: %s", tmp.c_str(), ec.message().c_str());
    return tmp;
}

void write_shard(const std::string& root, const Manifest& m, const State& s, int rank, int world) {
    if (world < 1 || rank < 0 || rank >= world)
        SOF_FAIL(Internal, "checkpoint save: rank %d of world %d is out of range", rank, world);
    if (world != m.world_size)
        SOF_FAIL(Internal, "checkpoint save: world %d but manifest.world_size = %d", world,
                 m.world_size);
    const bool native = m.state.native();
    if (native && (s.raw[0].empty() || s.raw[1].empty() || s.raw[2].empty()))
        SOF_FAIL(Internal, "checkpoint save: state of %s without its native buffers",
                 m.state.name().c_str());
    if (!native && (s.exp_avg.size() != s.params.size() || s.exp_avg_sq.size() != s.params.size()))
        SOF_FAIL(Internal, "checkpoint save: params/exp_avg/exp_avg_sq sizes differ (%zu/%zu/%zu)",
                 s.params.size(), s.exp_avg.size(), s.exp_avg_sq.size());
    if (!native && world == 1 && static_cast<int64_t>(s.params.size()) != m.num_params)
        SOF_FAIL(Internal, "checkpoint save: %zu params in the state but num_params = %lld",
                 s.params.size(), static_cast<long long>(m.num_params));
    const std::string tmp = tmp_dir(root, m.step);
    if (!fs::is_directory(tmp))
        SOF_FAIL(Io, "checkpoint save: %s does not exist (rank 0 must call prepare_save first)",
                 tmp.c_str());
    ShardRecord r;
    r.rank = rank;
    r.world_size = world;
    r.step = m.step;
    if (native) { // the state as kept; numel: the shard's real elements
        const model::ParamLayout full = model::make_layout(m.model);
        r.numel = static_cast<int64_t>(zero::make_shard_map(full, world, rank).real_size);
        r.native = true;
        FileEntry* f[3] = {&r.params, &r.exp_avg, &r.exp_avg_sq};
        const char* names[3] = {"params", "exp_avg", "exp_avg_sq"};
        for (int k = 0; k < 3; k++)
            *f[k] = write_bytes(tmp, shard_file_name(names[k], rank, world), s.raw[k].data(),
                                s.raw[k].size());
    } else {
        r.numel = static_cast<int64_t>(s.params.size());
        r.params = write_buffer(tmp, shard_file_name("params", rank, world), s.params);
        r.exp_avg = write_buffer(tmp, shard_file_name("exp_avg", rank, world), s.exp_avg);
        r.exp_avg_sq = write_buffer(tmp, shard_file_name("exp_avg_sq", rank, world), s.exp_avg_sq);
    }
    const std::string rec = shard_to_json(r);
    write_file_durable((fs::path(tmp) / shard_record_name(rank)).string(), rec.data(), rec.size());
}

namespace {

std::string commit_impl(const std::string& root, const Manifest& m, int keep) {
    const std::string tmp = tmp_dir(root, m.step);
    std::vector<ShardRecord> shards;
    int64_t total = 0;
    for (int r = 0; r < m.world_size; r++) {
        const std::string rpath = (fs::path(tmp) / shard_record_name(r)).string();
        ShardRecord rec = shard_from_json(read_text(rpath, "checkpoint shard record"), rpath);
        if (rec.rank != r || rec.world_size != m.world_size || rec.step != m.step)
            SOF_FAIL(Internal,
                     "checkpoint save: %s is for rank %d of %d at step %lld, expected rank %d "
                     "of %d at step %lld",
                     rpath.c_str(), rec.rank, rec.world_size, static_cast<long long>(rec.step), r,
                     m.world_size, static_cast<long long>(m.step));
        total += rec.numel;
        shards.push_back(rec);
    }
    if (total != m.num_params)
        SOF_FAIL(Internal, "checkpoint save: the shards hold %lld elements, num_params = %lld",
                 static_cast<long long>(total), static_cast<long long>(m.num_params));

    FileEntry deck;
    deck.file = kDeckName;
    deck.bytes = m.deck_yaml.size();
    deck.sum = block_checksum(m.deck_yaml.data(), m.deck_yaml.size());
    write_file_durable((fs::path(tmp) / kDeckName).string(), m.deck_yaml.data(),
                       m.deck_yaml.size());
    const std::string text = manifest_to_json(m, deck, shards);
    // the manifest is written last: a directory holding one is complete
    write_file_durable((fs::path(tmp) / kManifestName).string(), text.data(), text.size());
    std::error_code ec;
    for (int r = 0; r < m.world_size; r++)
        fs::remove(fs::path(tmp) / shard_record_name(r), ec);
    fsync_dir(tmp);

    const std::string final_dir = (fs::path(root) / step_dir_name(m.step)).string();
    const std::string old =
        (fs::path(root) / (kOldPrefix + step_dir_name(m.step).substr(5))).string();
    bool replaced = false;
    if (fs::exists(final_dir, ec)) {
        // same step saved again (e.g. a rerun): move the old one aside, then swap
        fs::remove_all(old, ec);
        if (std::rename(final_dir.c_str(), old.c_str()) != 0)
            SOF_FAIL(Io, "cannot move the existing %s aside: %s", final_dir.c_str(),
                     std::strerror(errno));
        replaced = true;
    }
    if (std::rename(tmp.c_str(), final_dir.c_str()) != 0)
        SOF_FAIL(Io, "cannot rename %s to %s: %s", tmp.c_str(), final_dir.c_str(),
                 std::strerror(errno));
    fsync_dir(root);
    if (replaced) remove_quietly(old);
    prune(root, keep, m.step);
    return final_dir;
}

} // namespace

std::string commit(const std::string& root, const Manifest& m, int keep) {
    try {
        return commit_impl(root, m, keep);
    } catch (...) {
        // every rank's shard was written before commit: nothing else uses the temporary directory
        remove_quietly(tmp_dir(root, m.step));
        throw;
    }
}

std::string save(const std::string& root, const Manifest& m, const State& s, int keep, int rank,
                 int world) {
    return save(root, m, &s, keep, rank, world, SaveSync{});
}

std::string save(const std::string& root, const Manifest& m, const State* s, int keep, int rank,
                 int world, const SaveSync& sync) {
    if (root.empty())
        SOF_FAIL(Config, "checkpoint save: no directory given (set train.checkpoint_dir)");
    if (world > 1 && (!sync.barrier || !sync.any))
        SOF_FAIL(Internal,
                 "checkpoint save with %d ranks needs a SaveSync (barrier and agreement), or the "
                 "prepare_save/write_shard/commit phases",
                 world);
    if (rank < m.world_size && !s)
        SOF_FAIL(Internal, "checkpoint save: rank %d of %d shards passed no state", rank,
                 m.world_size);
    // Each phase: run it, then agree whether it failed anywhere (the agreement is the barrier
    // between phases). The rank that failed rethrows its own error; the others name it.
    std::exception_ptr err;
    auto agree = [&](bool failed) { return sync.any ? sync.any(failed) : failed; };
    const long long step = static_cast<long long>(m.step);
    if (rank == 0) {
        try {
            prepare_save(root, m.step);
        } catch (...) {
            err = std::current_exception();
        }
    }
    if (agree(static_cast<bool>(err))) {
        if (err) std::rethrow_exception(err);
        SOF_FAIL(Io,
                 "checkpoint save of step %lld: rank 0 could not create its temporary "
                 "directory under %s (see rank 0's message)",
                 step, root.c_str());
    }
    if (rank < m.world_size) {
        try {
            write_shard(root, m, *s, rank, m.world_size);
        } catch (...) {
            err = std::current_exception();
        }
    }
    if (agree(static_cast<bool>(err))) {
        // a failed save (a full disk on any rank) leaves no partial temporary directory behind;
        // it is gone before any rank reports the error (and may end the job)
        if (rank == 0) remove_quietly(tmp_dir(root, m.step));
        if (sync.barrier) sync.barrier();
        if (err) std::rethrow_exception(err);
        SOF_FAIL(Io,
                 "checkpoint save of step %lld failed on another rank (see its message); the "
                 "partial checkpoint was removed",
                 step);
    }
    std::string dir = (fs::path(root) / step_dir_name(m.step)).string();
    if (rank == 0) {
        try {
            dir = commit(root, m, keep);
        } catch (...) {
            err = std::current_exception();
        }
    }
    if (agree(static_cast<bool>(err))) {
        if (err) std::rethrow_exception(err);
        SOF_FAIL(Io,
                 "checkpoint save of step %lld: rank 0 could not complete it (see rank 0's "
                 "message); the partial checkpoint was removed",
                 step);
    }
    return dir;
}

Manifest load_manifest(const std::string& dir) {
    Manifest m;
    read_manifest(dir, &m);
    return m;
}

void load(const std::string& dir, Manifest* m, State* s, int rank, int world) {
    std::vector<ShardRecord> shards = read_manifest(dir, m);
    if (m->world_size != world)
        SOF_FAIL(Config,
                 "checkpoint %s was written by %d rank(s) but this job has %d: resharding is "
                 "not supported; relaunch with %d rank(s)",
                 dir.c_str(), m->world_size, world, m->world_size);
    if (rank < 0 || rank >= world)
        SOF_FAIL(Internal, "checkpoint load: rank %d of world %d is out of range", rank, world);
    const std::string mpath = (fs::path(dir) / kManifestName).string();
    const ShardRecord& r = shards[static_cast<size_t>(rank)];
    if (m->state.native()) {
        read_checked(dir, r.params, mpath, &s->raw[0]);
        read_checked(dir, r.exp_avg, mpath, &s->raw[1]);
        read_checked(dir, r.exp_avg_sq, mpath, &s->raw[2]);
        return;
    }
    read_checked(dir, r.params, mpath, &s->params);
    read_checked(dir, r.exp_avg, mpath, &s->exp_avg);
    read_checked(dir, r.exp_avg_sq, mpath, &s->exp_avg_sq);
}

void load_shard_raw(const std::string& dir, int q, Manifest* m, State* s) {
    std::vector<ShardRecord> shards = read_manifest(dir, m);
    if (q < 0 || q >= m->world_size)
        SOF_FAIL(Internal, "checkpoint load: shard %d of %d", q, m->world_size);
    const std::string mpath = (fs::path(dir) / kManifestName).string();
    const ShardRecord& r = shards[static_cast<size_t>(q)];
    read_checked(dir, r.params, mpath, &s->raw[0]);
    read_checked(dir, r.exp_avg, mpath, &s->raw[1]);
    read_checked(dir, r.exp_avg_sq, mpath, &s->raw[2]);
}

namespace {

// Old shard q of a native checkpoint as fp32 real elements (unit by unit, as fp32 shard files
// hold them): its files read, converted over the shard's engine layout (padding included:
// offload::native_to_f32 with the shard layout's q8 blocks), packed.
void native_shard_as_f32(const std::string& dir, const std::string& mpath, const Manifest& m,
                         const ShardRecord& r, const model::ParamLayout& full, int q, int S,
                         bool with_moments, std::vector<float>* out[3]) {
    const zero::ShardMap map = zero::make_shard_map(full, S, q);
    const model::ParamLayout local = S == 1 ? full : zero::make_shard_layout(full, map);
    const size_t n = local.num_params;
    offload::NativeState ns;
    ns.format = m.state;
    const offload::StateBlocks blocks = m.state.moments == SOF_STATE_Q8
                                            ? offload::StateBlocks(local, m.state.block)
                                            : offload::StateBlocks();
    offload::resize_native(&ns, blocks, n);
    std::vector<uint8_t>* raw[3] = {&ns.params, &ns.slot[0], &ns.slot[1]};
    const FileEntry* files[3] = {&r.params, &r.exp_avg, &r.exp_avg_sq};
    for (int k = 0; k < 3; k++) {
        const size_t want = raw[k]->size();
        if (k > 0 && !with_moments) continue;
        read_checked(dir, *files[k], mpath, raw[k]);
        if (raw[k]->size() != want)
            SOF_FAIL(Format, "%s: shard %d's %s holds %zu bytes, %s over its layout needs %zu",
                     mpath.c_str(), q, files[k]->file.c_str(), raw[k]->size(),
                     m.state.name().c_str(), want);
    }
    std::vector<float> p(n), mm(n), vv(n);
    if (!with_moments) { // params only: zero moments convert to anything
        for (int k = 1; k < 3; k++)
            raw[k]->assign(offload::slot_bytes(m.state, n, blocks.count()), 0);
    }
    offload::native_to_f32(ns, blocks, n, p.data(), mm.data(), vv.data());
    std::vector<float>* src[3] = {&p, &mm, &vv};
    for (int k = 0; k < 3; k++) {
        out[k]->assign(map.real_size, 0.0f);
        if (k > 0 && !with_moments) continue;
        if (S == 1)
            std::copy(src[k]->begin(), src[k]->end(), out[k]->begin());
        else
            zero::shard_pack_real(full, map, src[k]->data(), out[k]->data());
    }
}

} // namespace

void load_resharded(const std::string& dir, const model::ParamLayout& layout,
                    const zero::ShardMap& want, Manifest* m, State* s, bool with_moments) {
    std::vector<ShardRecord> shards = read_manifest(dir, m);
    if (m->num_params != static_cast<int64_t>(layout.num_params))
        SOF_FAIL(Config, "checkpoint %s holds %lld params but the deck's model has %zu",
                 dir.c_str(), static_cast<long long>(m->num_params), layout.num_params);
    const std::string mpath = (fs::path(dir) / kManifestName).string();
    const int S = m->world_size;
    s->params.assign(want.real_size, 0.0f);
    s->exp_avg.assign(with_moments ? want.real_size : 0, 0.0f);
    s->exp_avg_sq.assign(with_moments ? want.real_size : 0, 0.0f);
    std::vector<float> part;
    for (int q = 0; q < S; q++) {
        const zero::ShardMap have = zero::make_shard_map(layout, S, q);
        // which units of old shard q overlap what this rank wants
        bool needed = false;
        for (int u = 0; u < layout.num_units() && !needed; u++)
            needed = std::max(have.global_first(layout, u), want.global_first(layout, u)) <
                     std::min(have.global_last(layout, u), want.global_last(layout, u));
        if (!needed) continue;
        const ShardRecord& r = shards[static_cast<size_t>(q)];
        if (r.numel != static_cast<int64_t>(have.real_size))
            SOF_FAIL(Format, "%s: shard %d holds %lld elements, the model's shard %d of %d has %zu",
                     mpath.c_str(), q, static_cast<long long>(r.numel), q, S, have.real_size);
        const FileEntry* files[3] = {&r.params, &r.exp_avg, &r.exp_avg_sq};
        std::vector<float>* outs[3] = {&s->params, &s->exp_avg, &s->exp_avg_sq};
        std::vector<float> conv[3];
        if (m->state.native()) {
            std::vector<float>* c[3] = {&conv[0], &conv[1], &conv[2]};
            native_shard_as_f32(dir, mpath, *m, r, layout, q, S, with_moments, c);
        }
        for (int k = 0; k < (with_moments ? 3 : 1); k++) {
            if (m->state.native())
                part.swap(conv[k]);
            else
                read_checked(dir, *files[k], mpath, &part);
            for (int u = 0; u < layout.num_units(); u++) {
                size_t a = std::max(have.global_first(layout, u), want.global_first(layout, u));
                size_t b = std::min(have.global_last(layout, u), want.global_last(layout, u));
                if (a >= b) continue;
                const float* src = part.data() + have.real_begin[static_cast<size_t>(u)] +
                                   (a - have.global_first(layout, u));
                float* dst = outs[k]->data() + want.real_begin[static_cast<size_t>(u)] +
                             (a - want.global_first(layout, u));
                std::copy(src, src + (b - a), dst);
            }
        }
    }
}

void load_params(const std::string& dir, Manifest* m, std::vector<float>* params) {
    Manifest head = load_manifest(dir);
    const model::ParamLayout layout = model::make_layout(head.model);
    State s;
    load_resharded(dir, layout, zero::make_shard_map(layout, 1, 0), m, &s, false);
    *params = std::move(s.params);
}

std::vector<std::string> clean_interrupted(const std::string& root) {
    std::vector<std::string> done;
    std::error_code ec;
    if (!fs::is_directory(root, ec)) return done;
    std::vector<fs::path> tmps, olds;
    for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (parse_step(name, kTmpPrefix) >= 0) tmps.push_back(it->path());
        if (parse_step(name, kOldPrefix) >= 0) olds.push_back(it->path());
    }
    for (const fs::path& old : olds) {
        const int64_t step = parse_step(old.filename().string(), kOldPrefix);
        const fs::path final_dir = fs::path(root) / step_dir_name(step);
        std::error_code e2;
        if (!fs::exists(final_dir, e2) && fs::is_regular_file(old / kManifestName, e2)) {
            if (std::rename(old.c_str(), final_dir.c_str()) == 0) {
                fsync_dir(root);
                done.push_back("restored " + final_dir.string() + " from " + old.string() +
                               " (a save of the same step was interrupted)");
                continue;
            }
        }
        remove_quietly(old);
        done.push_back("removed " + old.string() + " (left by an interrupted save)");
    }
    for (const fs::path& tmp : tmps) {
        remove_quietly(tmp);
        done.push_back("removed " + tmp.string() + " (left by an interrupted save)");
    }
    return done;
}

std::string find_latest(const std::string& root) {
    auto steps = complete_steps(root);
    return steps.empty() ? std::string() : steps.back().second;
}

} // namespace sof::ckpt
