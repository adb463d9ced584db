// Helpers of the multi-rank tests: a tiny deck, runs of the real trainer on any communicator
// (the 1-rank reference runs on MPI_COMM_SELF inside the same job), and comparisons.
#pragma once

#include <mpi.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "comm/world.h"
#include "config/deck.h"
#include "train/trainer.h"

namespace sof::test {

// 2 layers, 2 heads (Ulysses sp=2 splits them), C=32, T=16, V=64: seconds per run on 2 cores.
inline const char* kParallelDeck = R"(model:
  num_layers: 2
  num_heads: 2
  channels: 32
  max_seq_len: 16
  vocab_size: 64
data:
  train: builtin
  val: builtin
  shuffle: true
  builtin:
    train_tokens: 65536
    val_tokens: 4096
train:
  seq_len: 16
  steps: 6
  lr: 3.0e-3
  warmup_steps: 2
  schedule: cosine
  eval_batches: 1
  log_every: 0
optimizer:
  weight_decay: 0.1
parallel:
  bind: false
device:
  type: host
  memory_gb: 1
runtime:
  threads: 1
  log_level: quiet
  out_dir: ""
)";

struct RunOut {
    std::vector<float> losses, norms, params;
    int64_t skips = 0, rollbacks = 0;
    int64_t end_step = 0;
    bool stopped = false; // ended on a stop request (train::StopCheck)
    int stop_signal = 0;
    std::string last_checkpoint;
    size_t device_peak = 0;                  // this rank's device accounting (bytes)
    std::vector<comm::CommBytes> comm_bytes; // this rank's bytes per step
};

// collective: all ranks of comm
inline RunOut run_trainer(MPI_Comm comm, const std::vector<std::string>& overrides,
                          train::StopCheck stop = {}) {
    config::Config cfg = config::load_deck_from_string(kParallelDeck, "parallel-test", overrides);
    comm::World world(comm);
    core::Log log(world.rank(), core::LogLevel::Quiet);
    train::Trainer t(cfg, world, log);
    t.set_stop_check(std::move(stop));
    train::RunSummary s = t.run();
    RunOut o;
    o.losses = s.train_losses;
    for (double n : s.grad_norms)
        o.norms.push_back(static_cast<float>(n));
    o.params = t.params();
    o.skips = s.skips;
    o.rollbacks = s.rollbacks;
    o.end_step = s.end_step;
    o.stopped = s.stopped;
    o.stop_signal = s.stop_signal;
    o.last_checkpoint = s.last_checkpoint;
    o.device_peak = s.device_peak;
    o.comm_bytes = s.comm_bytes;
    return o;
}

inline size_t count_bit_diffs(const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size()) return static_cast<size_t>(-1);
    size_t d = 0;
    for (size_t i = 0; i < a.size(); i++)
        if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) d++;
    return d;
}

inline double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
    double m = a.size() == b.size() ? 0.0 : INFINITY;
    for (size_t i = 0; i < a.size() && i < b.size(); i++) {
        double d = std::fabs(static_cast<double>(a[i]) - b[i]);
        m = std::isnan(d) ? INFINITY : std::max(m, d);
    }
    return m;
}

inline double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
    double m = a.size() == b.size() ? 0.0 : INFINITY;
    for (size_t i = 0; i < a.size() && i < b.size(); i++) {
        if (!std::isfinite(a[i]) && !std::isfinite(b[i])) continue; // both skipped (NaN norm)
        double d = std::fabs(static_cast<double>(a[i]) - b[i]) /
                   std::max(1e-12, std::fabs(static_cast<double>(b[i])));
        m = std::isnan(d) ? INFINITY : std::max(m, d);
    }
    return m;
}

inline int world_rank() {
    int r = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}
inline int world_size() {
    int n = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    return n;
}

} // namespace sof::test
