// Plain update path (see plain.h). The norm uses the same statistic pieces as the engine
// (common.h), so the engine's result is bitwise comparable with this path.
#include "offload/plain.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/dtype.h"
#include "core/error.h"
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
    fmt_ = offload::state_format(cfg.optimizer);
    es_ = moment_elem_bytes(fmt_);
    if (fmt_.moments == SOF_STATE_Q8) blocks_ = StateBlocks(layout, fmt_.block);
    if (fmt_.master == SOF_DTYPE_BF16 && !bf16_)
        SOF_FAIL(Config, "optimizer.master_dtype: bf16 needs train.dtype: bf16 (the model reads "
                         "the bf16 master); set train.dtype: bf16 or optimizer.master_dtype: fp32");
    params_.assign(fmt_.master == SOF_DTYPE_F32 ? n : 0, 0.0f);
    if (fmt_.master == SOF_DTYPE_BF16) params16_.assign(n, 0);
    grads_.assign(n, 0.0f);
    const size_t sb = slot_bytes(fmt_, n, blocks_.count());
    m_.assign(sb, 0); // +0.0 in fp32 and bf16; q8: codes 0, scales 0
    v_.assign(sb, 0);
    if (bf16_) {
        work_.assign(n, 0.0f);
        lowp_.assign(n, 0);
    }
    if (bf16_grads_) grads16_.assign(n, 0);
    pieces_ = stat_pieces(layout);
    weights_ = std::make_unique<model::FlatWeights>(layout, bf16_ ? work_.data() : params_.data());
    sink_ = std::make_unique<Sink>(*this);
    opt_ = load_host_optimizer(cfg.optimizer, cfg.optimizer.threads);
    check_formats(*opt_, fmt_);
    if (trace_) lane_ = trace_->lane("main");
    log_.info("update path: plain (optimizer %s/%s, %s weights, %s)", opt_->info().name.c_str(),
              opt_->info().variant.c_str(), bf16_ ? "bf16" : "fp32", fmt_.name().c_str());
}

PlainUpdater::~PlainUpdater() = default;

model::GradSink& PlainUpdater::grads() {
    return *sink_;
}

void PlainUpdater::refresh_working() {
    if (!bf16_) return;
    if (fmt_.master == SOF_DTYPE_BF16) {
        for (size_t i = 0; i < params16_.size(); i++)
            work_[i] = core::bf16_to_f32(params16_[i]);
        return;
    }
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
            void* p = fmt_.master == SOF_DTYPE_F32
                          ? static_cast<void*>(params_.data() + t.offset)
                          : static_cast<void*>(params16_.data() + t.offset);
            sof_optim_slice s = optim::make_slice(
                static_cast<int64_t>(t.numel), p, g, bf16_grads_ ? SOF_DTYPE_BF16 : SOF_DTYPE_F32,
                m_.data() + t.offset * es_, v_.data() + t.offset * es_, fmt_.moments);
            s.param_dtype = fmt_.master;
            s.index0 = static_cast<int64_t>(t.offset);
            if (fmt_.moments == SOF_STATE_Q8) { // the tensor's blocks start at its first element
                const size_t so = slot_scale_offset(layout_.num_params);
                const size_t b0 = blocks_.block_of(t.offset);
                optim::set_q8(s, 0, fmt_.block, m_.data() + t.offset,
                              reinterpret_cast<float*>(m_.data() + so) + b0);
                optim::set_q8(s, 1, fmt_.block, v_.data() + t.offset,
                              reinterpret_cast<float*>(v_.data() + so) + b0);
            }
            if (bf16_) {
                s.lowp_out = lowp_.data() + t.offset;
                s.lowp_dtype = SOF_DTYPE_BF16;
            }
            opt_->step(s, adam_hparams(cfg_, hp_.lr, step, t.decay, coef));
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

void PlainUpdater::get_native(NativeState* ns) {
    ns->format = fmt_;
    const size_t n = layout_.num_params;
    resize_native(ns, blocks_, n);
    if (fmt_.master == SOF_DTYPE_F32)
        std::memcpy(ns->params.data(), params_.data(), n * 4);
    else
        std::memcpy(ns->params.data(), params16_.data(), n * 2);
    std::memcpy(ns->slot[0].data(), m_.data(), m_.size());
    std::memcpy(ns->slot[1].data(), v_.data(), v_.size());
    ns->opt_step = opt_step_;
}

void PlainUpdater::set_native(const NativeState& ns) {
    if (ns.format != fmt_)
        SOF_FAIL(Internal, "plain set_native: state of %s, the update path keeps %s",
                 ns.format.name().c_str(), fmt_.name().c_str());
    const size_t n = layout_.num_params;
    check_native_sizes(ns, blocks_, n);
    if (fmt_.master == SOF_DTYPE_F32)
        std::memcpy(params_.data(), ns.params.data(), n * 4);
    else
        std::memcpy(params16_.data(), ns.params.data(), n * 2);
    std::memcpy(m_.data(), ns.slot[0].data(), m_.size());
    std::memcpy(v_.data(), ns.slot[1].data(), v_.size());
    opt_step_ = ns.opt_step;
    refresh_working();
}

void PlainUpdater::get_state(float* params, float* exp_avg, float* exp_avg_sq, int64_t* opt_step) {
    NativeState ns;
    get_native(&ns);
    native_to_f32(ns, blocks_, layout_.num_params, params, exp_avg, exp_avg_sq);
    *opt_step = ns.opt_step;
}

void PlainUpdater::set_state(const float* params, const float* exp_avg, const float* exp_avg_sq,
                             int64_t opt_step) {
    NativeState ns;
    ns.format = fmt_;
    resize_native(&ns, blocks_, layout_.num_params);
    f32_to_native(params, exp_avg, exp_avg_sq, blocks_, layout_.num_params, &ns);
    ns.opt_step = opt_step;
    set_native(ns);
}

} // namespace sof::offload
