// Plain update path (see plain.h). The norm uses the same statistic pieces as the engine
// (common.h), so the engine's result is bitwise comparable with this path.
#include "offload/plain.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/dtype.h"
#include "core/timer.h"
#include "kernels/grad_stats.h"
#include "offload/common.h"
#include "optim/adam_ref.h"

namespace sof::offload {

class PlainUpdater::Sink : public model::GradSink {
  public:
    explicit Sink(PlainUpdater& u) : u_(u) {}
    float* grads(int unit) override { return u_.grads_.data() + u_.layout_.unit_begin[unit]; }
    void unit_done(int unit) override {
        if (u_.hp_.inject_nonfinite && unit == u_.layout_.num_units() - 1)
            u_.grads_[inject_offset(u_.layout_)] = std::numeric_limits<float>::quiet_NaN();
    }

  private:
    PlainUpdater& u_;
};

PlainUpdater::PlainUpdater(const config::Config& cfg, const model::ParamLayout& layout,
                           const core::Log& log, core::Trace* trace)
    : cfg_(cfg), layout_(layout), log_(log), trace_(trace),
      bf16_(cfg.train.dtype == config::Precision::BF16),
      bf16_grads_(bf16_ && cfg.offload.cast == config::CastAt::Host) {
    size_t n = layout.num_params;
    sd_ = cfg.optimizer.state_dtype == config::StateDtype::BF16 ? SOF_DTYPE_BF16 : SOF_DTYPE_F32;
    es_ = sd_ == SOF_DTYPE_F32 ? 4 : 2;
    params_.assign(n, 0.0f);
    grads_.assign(n, 0.0f);
    m_.assign(n * es_, 0); // +0.0 in fp32 and bf16
    v_.assign(n * es_, 0);
    if (bf16_) {
        work_.assign(n, 0.0f);
        lowp_.assign(n, 0);
    }
    if (bf16_grads_) grads16_.assign(n, 0);
    pieces_ = stat_pieces(layout);
    weights_ = std::make_unique<model::FlatWeights>(layout, bf16_ ? work_.data() : params_.data());
    sink_ = std::make_unique<Sink>(*this);
    opt_ = load_host_optimizer(cfg.optimizer, cfg.optimizer.threads);
    if (trace_) lane_ = trace_->lane("main");
    log_.info("update path: plain (optimizer %s/%s, %s weights, %s moments)",
              opt_->info().name.c_str(), opt_->info().variant.c_str(), bf16_ ? "bf16" : "fp32",
              sd_ == SOF_DTYPE_BF16 ? "bf16" : "fp32");
}

PlainUpdater::~PlainUpdater() = default;

model::GradSink& PlainUpdater::grads() {
    return *sink_;
}

void PlainUpdater::refresh_working() {
    if (!bf16_) return;
    for (size_t i = 0; i < params_.size(); i++)
        work_[i] = core::bf16_to_f32(core::f32_to_bf16(params_[i]));
}

void PlainUpdater::begin_step(const StepHparams& hp) {
    hp_ = hp;
    std::fill(grads_.begin(), grads_.end(), 0.0f);
}

void PlainUpdater::begin_micro(int, bool) {}

StepReport PlainUpdater::finish_step() {
    core::Timer timer;
    double t0 = trace_ ? trace_->now_us() : 0.0;
    StepReport rep;
    std::vector<device::GradStats> st(pieces_.size() - 1);
    for (size_t i = 0; i + 1 < pieces_.size(); i++)
        st[i] = kernels::piece_stats(grads_.data() + pieces_[i],
                                     static_cast<size_t>(pieces_[i + 1] - pieces_[i]), 1.0f,
                                     bf16_grads_ ? grads16_.data() + pieces_[i] : nullptr);
    NormResult nr = reduce_norm(st, stat_reducer_);
    rep.grad_norm = nr.norm;
    if (nr.nonfinite) {
        rep.skipped = true;
        stats_.skips++;
    } else {
        float coef = clip_coefficient(nr.norm, hp_.grad_clip);
        rep.clipped = coef < 1.0f;
        int64_t step = opt_step_ + 1;
        for (const model::TensorInfo& t : layout_.tensors) {
            const void* g = bf16_grads_ ? static_cast<const void*>(grads16_.data() + t.offset)
                                        : static_cast<const void*>(grads_.data() + t.offset);
            sof_adam_slice s =
                optim::make_slice(static_cast<int64_t>(t.numel), params_.data() + t.offset, g,
                                  bf16_grads_ ? SOF_DTYPE_BF16 : SOF_DTYPE_F32,
                                  m_.data() + t.offset * es_, v_.data() + t.offset * es_, sd_);
            if (bf16_) {
                s.lowp_out = lowp_.data() + t.offset;
                s.lowp_dtype = SOF_DTYPE_BF16;
            }
            opt_->step(s, adam_hparams(cfg_.optimizer, hp_.lr, step, t.decay, coef));
        }
        if (bf16_)
            for (size_t i = 0; i < lowp_.size(); i++)
                work_[i] = core::bf16_to_f32(lowp_[i]);
        opt_step_ = step;
        stats_.commits++;
    }
    rep.exposed_optimizer_ms = timer.ms();
    if (trace_)
        trace_->span(lane_, rep.skipped ? "optimizer (skipped)" : "optimizer", t0, trace_->now_us(),
                     "optimizer");
    return rep;
}

void PlainUpdater::get_state(float* params, float* exp_avg, float* exp_avg_sq, int64_t* opt_step) {
    std::copy(params_.begin(), params_.end(), params);
    for (size_t i = 0; i < params_.size(); i++) { // bf16 moments widen exactly
        exp_avg[i] = optim::adam_ref_state(m_.data(), sd_, static_cast<int64_t>(i));
        exp_avg_sq[i] = optim::adam_ref_state(v_.data(), sd_, static_cast<int64_t>(i));
    }
    *opt_step = opt_step_;
}

void PlainUpdater::set_state(const float* params, const float* exp_avg, const float* exp_avg_sq,
                             int64_t opt_step) {
    size_t n = layout_.num_params;
    std::copy(params, params + n, params_.begin());
    for (size_t i = 0; i < n; i++) { // bf16 moments: rounded to nearest even
        optim::adam_ref_store_state(m_.data(), sd_, static_cast<int64_t>(i), exp_avg[i]);
        optim::adam_ref_store_state(v_.data(), sd_, static_cast<int64_t>(i), exp_avg_sq[i]);
    }
    opt_step_ = opt_step;
    refresh_working();
}

} // namespace sof::offload
