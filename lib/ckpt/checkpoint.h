// Training checkpoints: one directory per step (manifest.json, deck.yaml, per-rank params /
// exp_avg / exp_avg_sq files with FNV-1a 64 checksums), written atomically, validated on load.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/loader.h"
#include "model/layout.h"
#include "offload/state_layout.h"
#include "zero/shard.h"

namespace sof::ckpt {

constexpr int kFormatVersion = 1;
constexpr const char* kFormatName = "superoffload-checkpoint";

struct Manifest {
    int64_t step = 0, opt_step = 0; // training step done; optimizer steps taken (skips excluded)
    model::ArchConfig model;
    int64_t num_params = 0; // whole model, all ranks together
    int world_size = 1;
    std::string deck_yaml; // the effective deck, stored as deck.yaml
    data::LoaderState train_data;
    int64_t skips = 0, rollbacks = 0;
    std::string data_identity; // ckpt::data_identity() of the training data ("" = builtin/unknown)
    // The optimizer state's formats. fp32 master with fp32/bf16 moments: the shard files hold
    // fp32 values (bf16 moments widened exactly). Native formats (bf16 master, q8 moments):
    // they hold the state as kept (offload::NativeState over the shard's engine layout: master
    // raw, each moment's values or codes followed by its block scales).
    offload::StateFormat state;
};

// One shard of the flat fp32 buffers. One shard: numel = num_params, ParamLayout order. S shards
// (ZeRO-3): shard q holds the real (non-padding) elements of zero::make_shard_map(layout, S, q),
// unit by unit (zero/shard.h); the manifest's world_size is S and records each shard's numel.
struct State {
    std::vector<float> params;     // (numel)
    std::vector<float> exp_avg;    // (numel)
    std::vector<float> exp_avg_sq; // (numel)
    // Native formats (Manifest::state.native()): the shard's params, exp_avg, exp_avg_sq as kept
    // (NativeState params, slot[0], slot[1]); the float vectors are then empty.
    std::vector<uint8_t> raw[3];
};

// "step_00000100"; the complete checkpoint for a step is root/step_dir_name(step).
std::string step_dir_name(int64_t step);

// How the ranks of a save synchronize. barrier: returns once every rank called it; any: true on
// every rank when any rank passed true. Both are collectives over all ranks of the job.
struct SaveSync {
    std::function<void()> barrier;
    std::function<bool(bool)> any;
};

// Saves this rank's shard and (rank 0) the manifest; returns the step directory (on every rank).
// Shard q of m.world_size is written by rank q; ranks >= m.world_size (replicated state: one shard
// for many ranks) pass s = nullptr and only take part in the agreement. world > 1 needs `sync`
// (the 6-argument form throws then). Every phase ends with an agreement, so a failure on any rank
// (a full disk) fails the save on every rank, after rank 0 removed the temporary directory: a
// failed save leaves nothing behind (commit cleans up after its own failures too).
// Deletes checkpoints older than the newest `keep` (0 = keep all) after the new one is complete.
// collective (world > 1): all ranks of world, through `sync`.
std::string save(const std::string& root, const Manifest& m, const State& s, int keep, int rank,
                 int world);
std::string save(const std::string& root, const Manifest& m, const State* s, int keep, int rank,
                 int world, const SaveSync& sync);

// The phases of save(), for callers that synchronize ranks themselves (rank-local each):
//   rank 0: prepare_save; barrier; every rank: write_shard; barrier; rank 0: commit.
// prepare_save creates root/.tmp-step_N (removing a leftover from an interrupted save).
// write_shard writes this rank's three files and its shard record, each fsynced.
// commit checks every rank's record, writes deck.yaml and manifest.json, fsyncs, renames the
// temporary directory to root/step_N, fsyncs root, prunes to `keep`; returns the step directory.
std::string prepare_save(const std::string& root, int64_t step);
void write_shard(const std::string& root, const Manifest& m, const State& s, int rank, int world);
std::string commit(const std::string& root, const Manifest& m, int keep);

// Loads a step directory: the manifest into *m, this rank's shard into *s, verifying sizes and
// checksums of this rank's files and deck.yaml. Errors name the file and say how to fix it:
// Io (missing file / directory), Format (corrupt, truncated, checksum mismatch), Config (the
// checkpoint was written by a different number of ranks).
void load(const std::string& dir, Manifest* m, State* s, int rank, int world);

// Loads the elements that shard map `want` covers (want.real_size of each buffer, unit by unit)
// from a checkpoint written with any number of shards: resharding on load (N ranks -> M ranks) is
// exact for fp32 state (the state is copied, never recomputed); native state (bf16 master, q8
// moments) is converted to fp32 values first (offload::native_to_f32 over each old shard's
// layout). Every file read is checksum-verified. with_moments false: only params (exp_avg /
// exp_avg_sq left empty).
void load_resharded(const std::string& dir, const model::ParamLayout& layout,
                    const zero::ShardMap& want, Manifest* m, State* s, bool with_moments = true);

// Loads shard q's files as they are (native formats: State::raw), checksum-verified: the resume of
// native state on the same shard count.
void load_shard_raw(const std::string& dir, int q, Manifest* m, State* s);

// Reads only the manifest (validated) of a step directory.
Manifest load_manifest(const std::string& dir);

// Loads the full params of any checkpoint (all shards concatenated, checksums verified) into
// *params (num_params floats); for export.
void load_params(const std::string& dir, Manifest* m, std::vector<float>* params);

// Cleans what killed saves leave under root (call it while no save is running, e.g. at the start of
// a run holding the directory's lock): .tmp-step_N directories are removed; a .old-step_N
// directory is removed when step_N exists, else (killed between the two renames of a re-save) it
// is the only complete copy and is renamed back to step_N. Returns one line per action.
std::vector<std::string> clean_interrupted(const std::string& root);

// Newest complete checkpoint under root (a step_N directory holding manifest.json), or "" when
// there is none or root does not exist. Temporary (.tmp-step_N) directories are ignored.
std::string find_latest(const std::string& root);

} // namespace sof::ckpt
