// Pieces shared by the plain path and the engine so both produce bitwise the same step: the
// statistic pieces of the flat buffer, the global-norm reduction, clipping and Adam hparams.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "config/config.h"
#include "device/device.h"
#include "model/layout.h"
#include "offload/state_layout.h"
#include "offload/updater.h"
#include "optim/optimizer.h"

namespace sof::offload {

// Piece boundaries over the flat buffer (ascending, first 0, last num_params): every tensor
// start, plus every kernels::kStatPiece elements inside a tensor. The global norm is the sum of
// per-piece fp64 sums (kernels::piece_stats) in ascending piece order, whatever the bucketing.
std::vector<int64_t> stat_pieces(const model::ParamLayout& layout);

struct NormResult {
    double norm = 0.0;      // sqrt(sum of piece sums)
    bool nonfinite = false; // any piece non-finite, or the norm overflowed
};
// With a reducer, this rank's sum (pieces in ascending order) is combined with the other ranks'.
NormResult reduce_norm(const std::vector<device::GradStats>& piece_stats,
                       StatReducer* reducer = nullptr);

// torch.nn.utils.clip_grad_norm_: coef = clip / (norm + 1e-6) in fp32; applied when coef < 1.
// Returns 1.0f when no clipping applies (clip <= 0 or coef >= 1).
float clip_coefficient(double norm, float clip);

// Adam hyperparameters of one slice from the deck: weight decay only where `decay`; the
// stochastic rounding of a bf16 master keyed by train.seed.
sof_optim_hparams adam_hparams(const config::Config& cfg, float lr, int64_t step, bool decay,
                               float grad_scale);

// Throws core::Error (Config) when plugin `opt` cannot step state of format f, naming the deck
// keys and the plugin.
void check_formats(const optim::Optimizer& opt, const StateFormat& f);

// Flat offset of lnfw's first element (the debug NaN injection point).
size_t inject_offset(const model::ParamLayout& layout);

// Loads the host optimizer plugin of the deck with `threads` OpenMP threads per call.
std::unique_ptr<optim::Optimizer> load_host_optimizer(const config::OptimizerConfig& oc,
                                                      int threads);

} // namespace sof::offload
