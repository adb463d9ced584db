// Internal to train/: the trainer's state (Trainer::Impl), shared by the training loop
// (trainer.cpp) and its checkpoint and trace I/O (trainer_ckpt.cpp).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "core/log.h"
#include "core/trace.h"
#include "data/loader.h"
#include "model/model.h"
#include "offload/updater.h"
#include "rank/context.h"
#include "sp/ulysses.h"
#include "train/metrics.h"
#include "train/run_dirs.h"
#include "train/trainer.h"
#include "zero/shard.h"
#include "zero/sharded.h"

namespace sof::train {

struct Trainer::Impl {
    config::Config cfg;
    const comm::World& world;
    core::Log log;
    model::ArchConfig mcfg;
    std::unique_ptr<core::Trace> trace;   // before ctx: the device's stream lanes point into it
    std::unique_ptr<rank::Context> ctx;   // the rank context (device, streams, groups, lane)
    std::unique_ptr<sp::Ulysses> ulysses; // the model's exchange hook (parallel.sp > 1)
    std::unique_ptr<model::Model> model;
    std::unique_ptr<offload::Updater> updater;
    zero::ShardAccess* shards = nullptr; // updater's shard view (multi-rank), else null
    std::unique_ptr<data::DataLoader> train_data, val_data;
    std::vector<int> inputs, targets;   // (B*T) whole sequences from the loader
    std::vector<int> linputs, ltargets; // (B*T/sp) this rank's slice of them
    std::vector<int> segments;          // (B*T) document ids of the whole sequences (data.pack),
                                        // every SP rank all of them; empty when not packed
    std::vector<std::vector<int>> step_inputs, step_targets; // (accum, B*T/sp): a masked step's
                                                             // micro-batches, read ahead
    std::vector<std::vector<int>> step_segments;             // (accum, B*T) when packed
    int64_t step = 0;                                        // steps completed
    int64_t skips0 = 0, rollbacks0 = 0; // counted by the run(s) before the resumed checkpoint
    std::function<void()> crash;        // debug.fail_hard: kills this process (set by the app)
    RunDirs dirs;                       // locks on out_dir and checkpoint_dir (rank 0)
    std::string data_id;                // ckpt::data_identity of the training data
    StopCheck stop_check;               // the app's signal flag (empty: never stops early)
    int eval_n = 1;                     // validation batches per evaluation (clamped to the data)

    Impl(const config::Config& c, const comm::World& w, const core::Log& l)
        : cfg(c), world(w), log(l) {}

    void setup();
    void check_same_deck();
    void next_batch(data::DataLoader& d);
    const int* seg_ptr() const { return segments.empty() ? nullptr : segments.data(); }
    float global_loss(double local);
    float masked_mean(double local_sum, double local_count, double* global_count);
    float evaluate();
    EvalResult eval_pass(int n);
    zero::ShardMap shard_map() const;
    std::string save_checkpoint();
    void write_trace();
    std::string agreed_latest_checkpoint();
    void resume_from(const std::string& dir);
    RunSummary finish_stopped(RunSummary& sum, MetricsWriter& metrics, int64_t saved_step,
                              std::string last_ckpt, bool after_eval);
    bool hold_for_stop(RunSummary& sum);
};

} // namespace sof::train
