// SuperOffload engine (see engine.h): construction, the per-bucket pipeline in backward, the
// speculation-then-validation protocol in finish_step, and state import/export.
#include "offload/engine.h"

#include <algorithm>
#include <exception>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "core/dtype.h"
#include "core/error.h"
#include "core/strfmt.h"
#include "core/timer.h"
#include "offload/common.h"

namespace sof::offload {

class Engine::Sink : public model::GradSink {
  public:
    explicit Sink(Engine& e) : e_(e) {}
    float* grads(int unit) override {
        if (e_.ring_) return e_.ring_dev_[static_cast<size_t>(e_.ring_slot(unit))];
        if (e_.grads_pinned_) e_.zero_unit_grads(unit);
        return e_.dgrads_ + e_.layout_.unit_begin[static_cast<size_t>(unit)];
    }
    void unit_done(int unit) override {
        // a unit the model wrote nothing into: zeros
        if (e_.ring_) e_.ring_slot(unit);
        if (e_.grads_pinned_) e_.zero_unit_grads(unit);
        if (e_.hp_.inject_nonfinite && unit == e_.layout_.num_units() - 1) {
            size_t at = inject_offset(e_.layout_);
            if (e_.grads_pinned_) {
                e_.dev_->synchronize(*e_.compute_); // the model's writes into pinned memory
                e_.dgrads_[at] = *e_.hnan_;
            } else { // the CPU twins add on the calling thread: the NaN is in when this returns
                e_.dev_->copy(e_.dgrad(at), e_.hnan_, sizeof(float), device::CopyKind::HostToDevice,
                              *e_.compute_);
                if (e_.dev_->host_accessible()) e_.dev_->synchronize(*e_.compute_);
            }
        }
        if (e_.last_micro_) e_.done_lo_ = std::min(e_.done_lo_, unit);
        if (unit == 0 && e_.trace_) { // the model's backward of this micro-batch is over
            double now = e_.trace_->now_us();
            e_.trace_->span(e_.lane_main_, "backward", e_.t_mark_, now, "model");
            e_.t_mark_ = now;
        }
        if (!e_.last_micro_) return;
        while (e_.next_bucket_ < e_.buckets_.size() &&
               e_.buckets_[e_.next_bucket_].ready_unit >= unit)
            e_.launch_bucket(e_.buckets_[e_.next_bucket_++]);
    }

  private:
    Engine& e_;
};

Engine::Engine(const config::Config& cfg, const model::ParamLayout& layout, const core::Log& log,
               core::Trace* trace, bool bf16_weights)
    : Engine(cfg, layout, log, trace, nullptr,
             std::make_unique<rank::DeviceSet>(cfg.device, 0, trace), bf16_weights) {}

Engine::Engine(const config::Config& cfg, const model::ParamLayout& layout, const core::Log& log,
               core::Trace* trace, rank::DeviceSet& devs, bool bf16_weights)
    : Engine(cfg, layout, log, trace, &devs, nullptr, bf16_weights) {}

Engine::Engine(const config::Config& cfg, const model::ParamLayout& layout, const core::Log& log,
               core::Trace* trace, rank::DeviceSet* devs, std::unique_ptr<rank::DeviceSet> owned,
               bool bf16_weights)
    : cfg_(cfg), layout_(layout), log_(log), trace_(trace), owned_(std::move(owned)) {
    rank::DeviceSet& ds = devs ? *devs : *owned_;
    const config::OffloadConfig& oc = cfg.offload;
    bf16_ = cfg.train.dtype == config::Precision::BF16;
    flow_ = oc.weights == config::WeightsPolicy::Flow;
    cast_host_ = oc.cast == config::CastAt::Host; // auto unresolved: on the device
    bf16_grads_ = bf16_ && cast_host_;
    speculate_ = oc.schedule != config::Schedule::Synchronous && oc.stv != config::Stv::Off;
    stv_auto_ = speculate_ && oc.stv == config::Stv::Auto;
    spec_step_ = speculate_;
    stv_hist_.assign(kStvWindow, 0);
    exact_ = oc.rollback != config::Rollback::Inverse; // auto unresolved: exact
    nsets_ = exact_ && speculate_ ? 2 : 1; // without speculation nothing is ever rolled back
    fmt_ = offload::state_format(cfg.optimizer);
    pes_ = master_elem_bytes(fmt_);
    es_ = moment_elem_bytes(fmt_);
    if (fmt_.moments == SOF_STATE_Q8) blocks_ = StateBlocks(layout, fmt_.block);
    if (fmt_.master == SOF_DTYPE_BF16 && !bf16_)
        SOF_FAIL(Config, "optimizer.master_dtype: bf16 needs train.dtype: bf16 (the device reads "
                         "the bf16 master as its working weights); set train.dtype: bf16 or "
                         "optimizer.master_dtype: fp32");
    if (fmt_.native() && !exact_ && speculate_)
        SOF_FAIL(Config,
                 "offload.rollback: inverse cannot undo a step of %s (stochastic rounding and "
                 "q8 codes are not invertible): set offload.rollback: exact (a second state "
                 "set) or auto, or offload.stv: false",
                 fmt_.name().c_str());
    work16_ = bf16_weights;
    if (work16_ && !bf16_)
        SOF_FAIL(Internal, "engine: bf16 working weights asked for with train.dtype fp32");
    if (!(oc.bucket_mb > 0.0))
        SOF_FAIL(Config, "offload.bucket_mb = %g must be > 0 (MiB of fp32 grads per bucket)",
                 oc.bucket_mb);
    if (oc.weights == config::WeightsPolicy::Auto)
        SOF_FAIL(Internal, "offload.weights is still 'auto' when the engine is built: the "
                           "planner (plan::resolve_auto) must resolve it first");
    if (oc.gpu_tail_buckets < 0)
        SOF_FAIL(Internal,
                 "offload.gpu_tail_buckets is still 'auto' (%d) when the engine is "
                 "built: the planner must resolve it first",
                 oc.gpu_tail_buckets);
    if (oc.schedule == config::Schedule::Interleaved && oc.interleave_k == -1)
        SOF_FAIL(Internal, "offload.interleave_k is still 'auto' with schedule interleaved when "
                           "the engine is built: the planner must resolve it first");
    if (oc.schedule == config::Schedule::Interleaved && oc.interleave_k < 1)
        SOF_FAIL(Config,
                 "offload.interleave_k = %d with offload.schedule: interleaved: it must "
                 "be >= 1 (every k-th bucket is stepped on the device) or auto",
                 oc.interleave_k);
    if (flow_ && oc.prefetch_layers < 0)
        SOF_FAIL(Config, "offload.prefetch_layers = %d must be >= 0", oc.prefetch_layers);

    dev_ = &ds.device();
    compute_ = &ds.compute();
    d2h_ = &ds.d2h();
    h2d_ = &ds.h2d();
    dstep_ = &ds.dstep();
    fetch_ = &ds.fetch();
    ev_compute_ = dev_->create_event();

    hopt_ = load_host_optimizer(cfg.optimizer, cfg.optimizer.threads);
    check_formats(*hopt_, fmt_);
    pieces_ = stat_pieces(layout);
    buckets_ = engine_buckets(cfg, layout, pieces_);
    cur_.assign(buckets_.size(), 0);
    spec_done_.assign(buckets_.size(), 0);
    pending_.assign(buckets_.size(), 0);
    unit_buckets_.resize(static_cast<size_t>(layout.num_units()));
    for (const Bucket& b : buckets_) {
        if (b.place != Placement::Host) continue;
        for (int u = 0; u < layout.num_units(); u++) {
            size_t ub = layout.unit_begin[static_cast<size_t>(u)];
            size_t ue = layout.unit_begin[static_cast<size_t>(u) + 1];
            if (ub < b.end && b.begin < ue)
                unit_buckets_[static_cast<size_t>(u)].push_back(b.index);
        }
    }
    for (const Bucket& b : buckets_) {
        ev_d2h_.push_back(dev_->create_event());
        ev_pub_.push_back(dev_->create_event());
        if (b.place != Placement::Host) max_dev_bucket_ = std::max(max_dev_bucket_, b.numel());
    }
    if (max_dev_bucket_ > 0) {
        if (dev_->kind() == device::Kind::Cuda)
            dopt_ = optim::Optimizer::load(cfg.optimizer.plugin_dir, "auto", SOF_TARGET_CUDA, 0,
                                           dev_->ordinal());
        else
            dopt_ = load_host_optimizer(cfg.optimizer, cfg.optimizer.threads);
        check_formats(*dopt_, fmt_);
    }

    // Every buffer from the memory plan (the list `superoffload plan` sums). Weight flow keeps the
    // device for the layers in flight: the model's fp32 grads are written to pinned host memory
    // (over C2C on a Superchip) and the device streams read them there.
    plan_ = make_memory_plan(memory_plan_inputs(cfg, layout, buckets_, work16_));
    for (const BufferSpec& b : plan_.buffers) {
        void* p = nullptr;
        if (b.side == MemSide::Device) {
            p = dev_->alloc(b.bytes, b.name);
        } else if (b.side == MemSide::Pinned) {
            p = dev_->alloc_pinned(b.bytes, b.name);
        } else {
            p = std::aligned_alloc(kMemAlign, mem_round(b.bytes));
            if (!p)
                SOF_FAIL(Runtime, "host memory exhausted allocating %s for %s",
                         device::format_bytes(static_cast<double>(b.bytes)).c_str(),
                         b.name.c_str());
        }
        ptrs_.push_back(p);
        if (b.side != MemSide::Device) std::memset(p, 0, b.bytes);
    }
    dgrads_ = static_cast<float*>(buf(Buf::DevGrads));
    for (int r = 0;; r++) {
        float* d = static_cast<float*>(buf(Buf::DevGradRing, r));
        if (!d) break;
        ring_dev_.push_back(d);
    }
    ring_ = !ring_dev_.empty();
    grads_pinned_ = flow_ && !ring_;
    if (ring_) {
        const size_t U = static_cast<size_t>(layout.num_units());
        ring_unit_.assign(ring_dev_.size(), -1);
        unit_ring_.assign(U, -1);
        unit_dev_.assign(U, 0);
        unit_all_buckets_.resize(U);
        unit_min_ready_.resize(U);
        for (size_t u = 0; u < U; u++) {
            unit_min_ready_[u] = static_cast<int>(u);
            for (const Bucket& b : buckets_) {
                if (b.begin >= layout.unit_begin[u + 1] || b.end <= layout.unit_begin[u]) continue;
                unit_all_buckets_[u].push_back(b.index);
                unit_min_ready_[u] = std::min(unit_min_ready_[u], b.ready_unit);
                if (b.place == Placement::Device) unit_dev_[u] = 1;
            }
        }
        done_lo_ = layout.num_units();
    }
    if (work16_)
        dwork16_ = static_cast<uint16_t*>(buf(Buf::DevWork));
    else
        dwork_ = static_cast<float*>(buf(Buf::DevWork));
    dstats_ = static_cast<device::GradStats*>(buf(Buf::DevStats));
    dbounds_ = static_cast<int64_t*>(buf(Buf::DevBounds));
    dstage32_ = static_cast<float*>(buf(Buf::DevStage32));
    dstage16_ = static_cast<uint16_t*>(buf(Buf::DevStage16));
    dgstage16_ = static_cast<uint16_t*>(buf(Buf::DevGradStage16));
    dtail16_ = static_cast<uint16_t*>(buf(Buf::DevLowp));
    for (int s = 0; s < nsets_; s++) {
        hparam_[s] = buf(Buf::HostParams, s);
        hm_[s] = buf(Buf::HostExpAvg, s);
        hv_[s] = buf(Buf::HostExpAvgSq, s);
    }
    hgrads_ = static_cast<float*>(buf(Buf::HostGrads));
    hgrads16_ = static_cast<uint16_t*>(buf(Buf::HostGrads16));
    hstats_ = static_cast<device::GradStats*>(buf(Buf::HostStats));
    for (int r = 0; r < 2; r++) {
        hpub16_[r] = static_cast<uint16_t*>(buf(Buf::HostPub16, r));
        pub_ev_[r] = dev_->create_event();
    }
    if (grads_pinned_) gzeroed_.assign(static_cast<size_t>(layout.num_units()), 0);
    hnan_ = static_cast<float*>(buf(Buf::HostNaN));
    *hnan_ = std::numeric_limits<float>::quiet_NaN();
    make_stream_slots();

    for (size_t i = 0; i < plan_.buffers.size(); i++)
        if (plan_.buffers[i].side == MemSide::Device)
            dev_->memset(ptrs_[i], 0, plan_.buffers[i].bytes, *compute_);
    // the piece bounds once (grad_prep reads them on the device for every bucket, per fragment)
    if (pieces_.size() >= 2) kernels::check_piece_bounds(pieces_, layout.num_params);
    dev_->copy(dbounds_, pieces_.data(), pieces_.size() * sizeof(int64_t),
               device::CopyKind::HostToDevice, *compute_);
    dev_->synchronize(*compute_);

    worker_ = std::make_unique<Worker>("cpu optimizer");
    if (trace_) {
        lane_main_ = trace_->lane("engine");
        lane_cpu_ = trace_->lane("cpu optimizer");
    }
    weights_ = make_weights();
    sink_ = std::make_unique<Sink>(*this);

    const char* sched =
        oc.schedule == config::Schedule::SuperOffload
            ? "superoffload"
            : (oc.schedule == config::Schedule::Interleaved ? "interleaved" : "synchronous");
    log_.info("update path: SuperOffload engine on %s (%s working weights for the model)",
              dev_->describe().c_str(), work16_ ? "bf16" : "fp32");
    log_.info("engine: schedule %s, STV %s (%s rollback), %s weights, cast on %s, %s, %s", sched,
              speculate_ ? (oc.stv == config::Stv::Auto ? "auto" : "on") : "off",
              nsets_ == 2 ? "exact" : (exact_ ? "no" : "inverse"), flow_ ? "flow" : "stationary",
              cast_host_ ? "host" : "device", fmt_.name().c_str(),
              describe_buckets(buckets_).c_str());
    log_.info("engine: optimizer %s/%s on the host%s%s; device memory %s",
              hopt_->info().name.c_str(), hopt_->info().variant.c_str(),
              dopt_ ? ", device buckets with " : "", dopt_ ? dopt_->info().name.c_str() : "",
              device::format_bytes(static_cast<double>(dev_->used())).c_str());
}

Engine::~Engine() {
    worker_.reset(); // joins after the queued jobs
    try {
        dev_->synchronize();
    } catch (...) { // an error of an abandoned step: nothing left to report it to
    }
    weights_.reset();
    sslots_.clear();
    for (size_t i = 0; i < ptrs_.size(); i++) {
        if (plan_.buffers[i].side == MemSide::Device)
            dev_->free(ptrs_[i]);
        else if (plan_.buffers[i].side == MemSide::Pinned)
            dev_->free_pinned(ptrs_[i]);
        else
            std::free(ptrs_[i]);
    }
}

void* Engine::buf(Buf id, int index) const {
    for (size_t i = 0; i < ptrs_.size(); i++)
        if (plan_.buffers[i].id == id && plan_.buffers[i].index == index) return ptrs_[i];
    return nullptr;
}

int64_t Engine::grad_bytes(const Bucket& b) const {
    // Weight flow: the backward writes the fp32 grads into pinned host memory itself (they cross
    // the link as fp32 whatever the cast); the engine's copy after grad_prep stays on the host.
    if (flow_) return static_cast<int64_t>(b.numel()) * 4;
    return static_cast<int64_t>(b.numel()) * (bf16_grads_ ? 2 : 4);
}

int64_t Engine::param_bytes(const Bucket& b) const {
    if (flow_) return 0; // host steps update the master; the forward fetches from it
    return static_cast<int64_t>(b.numel()) * (bf16_ && cast_host_ ? 2 : 4);
}

const void* Engine::host_grad(size_t off) const {
    if (grads_pinned_) return dgrads_ + off; // the model's pinned grads (bf16 values, cast host)
    if (bf16_grads_) return hgrads16_ + off;
    return hgrads_ + off;
}

sof_dtype Engine::host_grad_dtype() const {
    return bf16_grads_ && !grads_pinned_ ? SOF_DTYPE_BF16 : SOF_DTYPE_F32;
}

float* Engine::dgrad(size_t off) const {
    if (!ring_) return dgrads_ + off;
    const std::vector<size_t>& ub = layout_.unit_begin;
    size_t u = static_cast<size_t>(std::upper_bound(ub.begin(), ub.end(), off) - ub.begin()) - 1;
    int r = unit_ring_[u];
    if (r < 0) SOF_FAIL(Internal, "grad ring: unit %zu holds no slot (offset %zu)", u, off);
    return ring_dev_[static_cast<size_t>(r)] + (off - ub[u]);
}

int Engine::ring_slot(int unit) {
    const size_t u = static_cast<size_t>(unit);
    if (unit_ring_[u] >= 0) return unit_ring_[u];
    int pick = -1;
    if (unit == 0) {
        pick = 0; // unit 0's own slot (a tied LM head adds into it first)
    } else {
        for (size_t r = 1; r < ring_unit_.size() && pick < 0; r++) {
            int w = ring_unit_[r];
            if (w < 0 || (!unit_dev_[static_cast<size_t>(w)] &&
                          done_lo_ <= unit_min_ready_[static_cast<size_t>(w)]))
                pick = static_cast<int>(r);
        }
    }
    if (pick < 0)
        SOF_FAIL(Internal, "grad ring: no free slot for unit %d (%zu planned)", unit,
                 ring_unit_.size());
    int w = ring_unit_[static_cast<size_t>(pick)];
    if (w >= 0) { // the buckets over w are launched: their grads must be out of the slot
        for (int b : unit_all_buckets_[static_cast<size_t>(w)])
            ev_d2h_[static_cast<size_t>(b)]->synchronize();
        unit_ring_[static_cast<size_t>(w)] = -1;
    }
    size_t n = layout_.unit_begin[u + 1] - layout_.unit_begin[u];
    // on the compute stream, ahead of the model's kernels that add into the slot (the CPU twins
    // run on the calling thread: wait for it there)
    dev_->memset(ring_dev_[static_cast<size_t>(pick)], 0, n * 4, *compute_);
    if (dev_->host_accessible()) dev_->synchronize(*compute_);
    ring_unit_[static_cast<size_t>(pick)] = unit;
    unit_ring_[u] = pick;
    return pick;
}

std::vector<Engine::Frag> Engine::fragments(const Bucket& b) const {
    if (!ring_) return {{b.begin, b.end}};
    std::vector<Frag> f;
    for (int u = 0; u < layout_.num_units(); u++) {
        size_t lo = std::max(b.begin, layout_.unit_begin[static_cast<size_t>(u)]);
        size_t hi = std::min(b.end, layout_.unit_begin[static_cast<size_t>(u) + 1]);
        if (lo < hi) f.push_back({lo, hi});
    }
    return f;
}

void Engine::zero_unit_grads(int unit) {
    char& z = gzeroed_[static_cast<size_t>(unit)];
    if (z) return;
    wait_unit(unit); // deferred host steps of the previous step read these grads
    size_t o = layout_.unit_begin[static_cast<size_t>(unit)];
    size_t n = layout_.unit_begin[static_cast<size_t>(unit) + 1] - o;
    std::memset(dgrads_ + o, 0, n * 4);
    z = 1;
}

model::WeightSource& Engine::weights() {
    return *weights_;
}
model::GradSink& Engine::grads() {
    return *sink_;
}

bool Engine::device_lowp() const {
    return bf16_ && !flow_;
}

int Engine::take_pub_ring() {
    if (!hpub16_[0]) return -1;
    int r = pub_next_;
    pub_next_ = 1 - pub_next_;
    pub_ev_[r]->synchronize(); // the H2D out of this slot (two publishes ago) is done
    return r;
}

void Engine::begin_step(const StepHparams& hp) {
    // Deferred speculative work of the previous step may still run (it reads host buffers only,
    // and the forward waits per unit in wait_unit); surface its errors, if any, here.
    worker_->rethrow_if_failed();
    hp_ = hp;
    if (stv_auto_) { // paused while rollbacks (clips, skips) are frequent: exact either way
        int recent = 0;
        for (char c : stv_hist_)
            recent += c;
        bool on = recent < kStvPause;
        if (on != spec_step_)
            log_.info("engine: stv auto: %d of the last %d steps were clipped or skipped: "
                      "speculation %s at step %lld",
                      recent, kStvWindow, on ? "resumes" : "pauses",
                      static_cast<long long>(hp.step));
        spec_step_ = on;
    }
    step_bytes_ = TransferBytes{};
    last_micro_ = true;
    next_bucket_ = 0;
    spec_running_ = false;
    if (grads_pinned_) { // host memory: each unit zeroed on first use (zero_unit_grads)
        dev_->synchronize(*d2h_);
        dev_->synchronize(*dstep_);
        std::fill(gzeroed_.begin(), gzeroed_.end(), 0);
    } else if (ring_) { // every slot free; a unit's slot is zeroed when it is taken
        dev_->synchronize(*d2h_);
        dev_->synchronize(*dstep_);
        std::fill(ring_unit_.begin(), ring_unit_.end(), -1);
        std::fill(unit_ring_.begin(), unit_ring_.end(), -1);
        done_lo_ = layout_.num_units();
    } else {
        dev_->memset(dgrads_, 0, layout_.num_params * 4, *compute_);
    }
    dev_->synchronize(*compute_);
    if (trace_) t_mark_ = trace_->now_us();
}

void Engine::begin_micro(int, bool last) {
    if (ring_ && !last)
        SOF_FAIL(Internal, "engine: a micro-batch that is not the step's last, but the grad ring "
                           "was planned for train.grad_accum = 1 (no accumulation)");
    last_micro_ = last;
    if (trace_) { // forward of this micro-batch: since begin_step or the previous backward
        double now = trace_->now_us();
        trace_->span(lane_main_, "forward", t_mark_, now, "model");
        t_mark_ = now;
    }
}

void Engine::launch_bucket(Bucket& b) {
    size_t n = b.numel();
    wait_bucket(b.index); // the previous step's deferred step of b still reads its grads
    dev_->record(*ev_compute_, *compute_);
    dev_->wait(*d2h_, *ev_compute_);
    if (trace_) // a marker span naming the bucket whose transfers follow on this stream lane
        dev_->host_task(
            *d2h_, [] {}, core::strfmt("bucket %d", b.index));
    // bf16 with the cast on the host: the grads are rounded to bf16 once (grad_prep's bf16_out;
    // the statistics are of the rounded values) and cross the link as bf16; device-stepped
    // buckets get the same rounded values back in their fp32 grads. Per unit fragment: a grad
    // ring holds the units in separate slots (pieces never cross a unit).
    const std::vector<Frag> frags = fragments(b);
    int piece = b.piece_begin;
    for (const Frag& f : frags) {
        const int first = piece;
        while (piece < b.piece_end &&
               pieces_[static_cast<size_t>(piece)] < static_cast<int64_t>(f.hi))
            piece++;
        // the fragment is whole pieces (buckets cut at piece bounds, pieces never cross a unit):
        // its bounds are pieces_[first..piece], read on the device from the copy made once
        SOF_CHECK(pieces_[static_cast<size_t>(first)] == static_cast<int64_t>(f.lo) &&
                      pieces_[static_cast<size_t>(piece)] == static_cast<int64_t>(f.hi),
                  "engine: bucket %d fragment [%zu, %zu) is not whole statistic pieces", b.index,
                  f.lo, f.hi);
        dev_->grad_prep_pieces(dgrad(f.lo), dbounds_ + first, piece - first,
                               static_cast<int64_t>(f.lo), 1.0f, dstats_ + first,
                               bf16_grads_ ? dgstage16_ + (f.lo - b.begin) : nullptr, *d2h_);
    }
    dev_->copy(hstats_ + b.piece_begin, dstats_ + b.piece_begin,
               static_cast<size_t>(b.piece_end - b.piece_begin) * sizeof(device::GradStats),
               device::CopyKind::DeviceToHost, *d2h_);
    if (b.place == Placement::Host && !grads_pinned_) {
        if (bf16_grads_)
            dev_->copy(hgrads16_ + b.begin, dgstage16_, n * 2, device::CopyKind::DeviceToHost,
                       *d2h_);
        else
            for (const Frag& f : frags)
                dev_->copy(hgrads_ + f.lo, dgrad(f.lo), (f.hi - f.lo) * 4,
                           device::CopyKind::DeviceToHost, *d2h_);
    } else if (bf16_grads_) { // device-stepped, or pinned grads (the host step reads dgrads_)
        for (const Frag& f : frags)
            dev_->cast_bf16_to_f32(dgstage16_ + (f.lo - b.begin), dgrad(f.lo), f.hi - f.lo, *d2h_);
    }
    if (b.place == Placement::Host) step_bytes_.grads_d2h += grad_bytes(b);
    device::Event* ev = ev_d2h_[static_cast<size_t>(b.index)].get();
    dev_->record(*ev, *d2h_);
    if (b.place == Placement::Host && spec_step_) {
        int src = cur_[static_cast<size_t>(b.index)];
        int dst = exact_ ? 1 - src : src;
        int64_t step = opt_step_ + 1;
        const Bucket* bp = &b;
        {
            std::lock_guard<std::mutex> lk(pub_mu_);
            pending_[static_cast<size_t>(b.index)] = 1;
        }
        step_bytes_.params_h2d += param_bytes(b); // published when the step is not rolled back
        worker_->push([this, bp, ev, src, dst, step, lr = hp_.lr] {
            struct Done { // clears pending_ even when the step throws (then marks the failure:
                          // wait_bucket drains the worker, which rethrows the step's error)
                Engine& e;
                size_t i;
                int unwinding = std::uncaught_exceptions();
                ~Done() {
                    {
                        std::lock_guard<std::mutex> lk(e.pub_mu_);
                        e.pending_[i] = 0;
                        if (std::uncaught_exceptions() > unwinding) e.pub_failed_ = true;
                    }
                    e.pub_cv_.notify_all();
                }
            } done{*this, static_cast<size_t>(bp->index)};
            ev->synchronize();
            if (!exact_) { // an in-place step on non-finite grads could not be inverted
                bool bad = false;
                for (int i = bp->piece_begin; i < bp->piece_end; i++)
                    bad |= hstats_[i].nonfinite;
                spec_done_[static_cast<size_t>(bp->index)] = bad ? 0 : 1;
                if (bad) return;
            }
            host_step(*bp, src, dst, 1.0f, step, lr, true);
            if (!flow_) dev_->record(*ev_pub_[static_cast<size_t>(bp->index)], *h2d_);
        });
        spec_running_ = true;
    }
}

void Engine::host_step(const Bucket& b, int src, int dst, float coef, int64_t step, float lr,
                       bool do_publish) {
    core::Trace::Scope span(trace_, lane_cpu_,
                            core::strfmt("adam b%d%s", b.index, coef < 1.0f ? " (clipped)" : ""),
                            "optimizer");
    // the bf16 copy on its way H2D (stationary, cast on the host): a slot of the H2D ring
    int ring = do_publish ? take_pub_ring() : -1;
    std::vector<sof_optim_slice> sl;
    std::vector<sof_optim_hparams> hps;
    for (const BucketSlice& s : b.slices) {
        sof_optim_slice x =
            optim::make_slice(static_cast<int64_t>(s.n), hp(src, s.offset), host_grad(s.offset),
                              host_grad_dtype(), nullptr, nullptr);
        x.param_dtype = fmt_.master;
        x.param_out = hp(dst, s.offset);
        x.index0 = static_cast<int64_t>(s.offset);
        set_slots(x, s.offset, s.offset, num_params(), 0, hm_[src], hv_[src], hm_[dst], hv_[dst]);
        if (ring >= 0) {
            x.lowp_out = hpub16_[ring] + (s.offset - b.begin);
            x.lowp_dtype = SOF_DTYPE_BF16;
        }
        sl.push_back(x);
        hps.push_back(adam_hparams(cfg_, lr, step, s.decay, coef));
    }
    hopt_->step_multi(sl.data(), hps.data(), static_cast<int>(sl.size()));
    if (do_publish) publish(b, dst, ring);
}

void Engine::host_rollback(const Bucket& b, int64_t step, float lr, bool do_publish) {
    core::Trace::Scope span(trace_, lane_cpu_, core::strfmt("inverse b%d", b.index), "rollback");
    int ring = do_publish ? take_pub_ring() : -1;
    for (const BucketSlice& s : b.slices) {
        sof_optim_slice x =
            optim::make_slice(static_cast<int64_t>(s.n), hp(0, s.offset), host_grad(s.offset),
                              host_grad_dtype(), hm(0, s.offset), hv(0, s.offset),
                              fmt_.moments); // fp32 master, fp32/bf16 moments (constructor)
        if (ring >= 0) {
            x.lowp_out = hpub16_[ring] + (s.offset - b.begin);
            x.lowp_dtype = SOF_DTYPE_BF16;
        }
        hopt_->rollback(x, adam_hparams(cfg_, lr, step, s.decay, 1.0f));
    }
    if (do_publish) publish(b, 0, ring);
}

void Engine::publish(const Bucket& b, int set, int ring) {
    size_t n = b.numel(), o = b.begin;
    if (flow_) return; // the next forward fetches from the master
    if (trace_)
        dev_->host_task(
            *h2d_, [] {}, core::strfmt("bucket %d", b.index));
    if (!bf16_) {
        dev_->copy(dwork_ + o, hp(set, o), n * 4, device::CopyKind::HostToDevice, *h2d_);
    } else if (fmt_.master == SOF_DTYPE_BF16) { // the bf16 master is the working weights' value
        uint16_t* dst16 = work16_ ? dwork16_ + o : dstage16_;
        dev_->copy(dst16, hp(set, o), n * 2, device::CopyKind::HostToDevice, *h2d_);
        if (!work16_) dev_->cast_bf16_to_f32(dstage16_, dwork_ + o, n, *h2d_);
    } else if (cast_host_) {
        if (ring < 0)
            SOF_FAIL(Internal, "publish of bucket %d without its bf16 ring slot", b.index);
        // bf16 working weights take the host step's bf16 copy as it is
        uint16_t* dst16 = work16_ ? dwork16_ + o : dstage16_;
        dev_->copy(dst16, hpub16_[ring], n * 2, device::CopyKind::HostToDevice, *h2d_);
        dev_->record(*pub_ev_[ring], *h2d_); // the slot may be written again
        if (!work16_) dev_->cast_bf16_to_f32(dstage16_, dwork_ + o, n, *h2d_);
    } else {
        dev_->copy(dstage32_, hp(set, o), n * 4, device::CopyKind::HostToDevice, *h2d_);
        if (work16_) {
            dev_->cast_f32_to_bf16(dstage32_, dwork16_ + o, n, *h2d_);
        } else {
            dev_->cast_f32_to_bf16(dstage32_, dstage16_, n, *h2d_);
            dev_->cast_bf16_to_f32(dstage16_, dwork_ + o, n, *h2d_);
        }
    }
}

void Engine::refresh_working(const Bucket& b) {
    int set = cur_[static_cast<size_t>(b.index)];
    int ring = flow_ ? -1 : take_pub_ring();
    if (ring >= 0 && fmt_.master == SOF_DTYPE_F32) {
        core::Trace::Scope span(trace_, lane_cpu_, core::strfmt("cast b%d", b.index), "cast");
        const float* p = static_cast<const float*>(hp(set, b.begin));
        uint16_t* lp = hpub16_[ring];
        for (size_t i = 0; i < b.numel(); i++)
            lp[i] = core::f32_to_bf16(p[i]);
    }
    publish(b, set, ring);
}

void Engine::sync_all() {
    worker_->drain();
    dev_->synchronize();
    deferred_ = false;
    std::lock_guard<std::mutex> lk(pub_mu_);
    pub_failed_ = false;
}

bool Engine::unit_pending(int unit) {
    if (!deferred_) return false;
    std::lock_guard<std::mutex> lk(pub_mu_);
    for (int b : unit_buckets_[static_cast<size_t>(unit)])
        if (pending_[static_cast<size_t>(b)]) return true;
    return false;
}

bool Engine::wait_bucket(int b) {
    if (!deferred_) return false;
    bool waited, failed;
    {
        std::unique_lock<std::mutex> lk(pub_mu_);
        waited = pending_[static_cast<size_t>(b)] != 0;
        pub_cv_.wait(lk, [&] { return pending_[static_cast<size_t>(b)] == 0; });
        failed = pub_failed_;
    }
    // a deferred step that threw cleared its pending flag without publishing: its error now
    // (drain rethrows it), before a forward reads the bucket's stale or half-copied weights
    if (failed) worker_->drain();
    if (!flow_) ev_pub_[static_cast<size_t>(b)]->synchronize();
    return waited;
}

void Engine::wait_unit(int unit) {
    if (!deferred_) return;
    core::Timer t;
    double t0 = trace_ ? trace_->now_us() : 0.0;
    bool waited = false;
    for (int b : unit_buckets_[static_cast<size_t>(unit)])
        waited |= wait_bucket(b);
    carry_ms_ += t.ms();
    if (trace_ && waited)
        trace_->span(lane_main_, core::strfmt("wait unit %d", unit), t0, trace_->now_us(),
                     "engine");
}

StepReport Engine::finish_step() {
    core::Trace::Scope span(trace_, lane_main_, "finish step", "engine");
    StepReport rep;
    if (!last_micro_)
        SOF_FAIL(Internal, "finish_step after a micro-batch that begin_micro did not mark last");
    while (next_bucket_ < buckets_.size())
        launch_bucket(buckets_[next_bucket_++]);

    rep.exposed_optimizer_ms = carry_ms_; // waits for the previous step's deferred work
    carry_ms_ = 0.0;
    core::Timer t;
    dev_->synchronize(*d2h_); // every bucket's grads and statistics are on the host
    rep.exposed_transfer_ms += t.ms();
    NormResult nr = reduce_norm(
        std::vector<device::GradStats>(hstats_, hstats_ + (pieces_.size() - 1)), stat_reducer_);
    rep.grad_norm = nr.norm;
    int64_t step = opt_step_ + 1;
    auto wait_speculation = [&] {
        core::Timer w;
        worker_->drain();
        rep.exposed_optimizer_ms += w.ms();
        w.reset();
        dev_->synchronize(*h2d_);
        rep.exposed_transfer_ms += w.ms();
    };

    if (nr.nonfinite) {
        rep.skipped = true;
        stats_.skips++;
        if (trace_) trace_->instant(lane_main_, "skip (non-finite grads)");
        if (spec_running_) {
            wait_speculation();
            if (trace_) trace_->instant(lane_main_, "rollback");
            for (const Bucket& b : buckets_) {
                if (b.place != Placement::Host) continue;
                const Bucket* bp = &b;
                if (exact_) {
                    worker_->push([this, bp] { refresh_working(*bp); });
                    step_bytes_.params_h2d += param_bytes(b);
                } else if (spec_done_[static_cast<size_t>(b.index)]) {
                    worker_->push(
                        [this, bp, step, lr = hp_.lr] { host_rollback(*bp, step, lr, true); });
                    step_bytes_.params_h2d += param_bytes(b);
                } else { // the speculative step saw non-finite grads and published nothing
                    step_bytes_.params_h2d -= param_bytes(b);
                }
            }
            rep.rolled_back = true;
            stats_.rollbacks++;
        }
    } else {
        float coef = clip_coefficient(nr.norm, hp_.grad_clip);
        rep.clipped = coef < 1.0f;
        for (const Bucket& b : buckets_)
            if (b.place == Placement::Device)
                device_step(b, buf(Buf::DevStateP, b.index), buf(Buf::DevStateM, b.index),
                            buf(Buf::DevStateV, b.index), b.numel(), coef, step);
        bool rerun = spec_running_ && rep.clipped;
        if (rerun) {
            wait_speculation();
            if (trace_) trace_->instant(lane_main_, "rollback + rerun (clip)");
            rep.rolled_back = true;
            stats_.rollbacks++;
        }
        // Deep Optimizer States Algorithm 1: the subgroups in order, every k-th streamed to the
        // device and stepped there while the CPU lane steps the others.
        for (const Bucket& b : buckets_) {
            if (b.place == Placement::Stream) {
                stream_step(b, coef, step);
                continue;
            }
            if (b.place != Placement::Host) continue;
            size_t i = static_cast<size_t>(b.index);
            if (!spec_running_ || rerun) {
                const Bucket* bp = &b;
                int src = cur_[i], dst = nsets_ == 2 ? 1 - src : src;
                bool inverse_first = rerun && !exact_;
                worker_->push([this, bp, src, dst, coef, step, inverse_first, lr = hp_.lr] {
                    if (inverse_first) host_rollback(*bp, step, lr, false);
                    host_step(*bp, src, dst, coef, step, lr, true);
                });
                step_bytes_.params_h2d += param_bytes(b);
                if (rerun) stats_.reruns++;
            }
            if (nsets_ == 2) cur_[i] = 1 - cur_[i];
        }
        opt_step_ = step;
        stats_.commits++;
    }
    t.reset();
    if (spec_running_ && !rep.rolled_back) {
        // Commit: the speculative steps of the last buckets may still run; the next forward waits
        // per unit (wait_unit) for exactly the buckets it reads. Device buckets finish here.
        dev_->synchronize(*dstep_);
        if (sout_) dev_->synchronize(*sout_);
        rep.exposed_transfer_ms += t.ms();
        deferred_ = true;
    } else {
        worker_->drain();
        rep.exposed_optimizer_ms += t.ms();
        t.reset();
        dev_->synchronize();
        rep.exposed_transfer_ms += t.ms();
        deferred_ = false; // nothing pending: the next forward need not wait per unit
    }
    weights_changed();
    if (stv_auto_)
        stv_hist_[static_cast<size_t>(stv_steps_++ % kStvWindow)] = rep.clipped || rep.skipped;
    rep.bytes = step_bytes_;
    stats_.bytes += step_bytes_;
    step_bytes_ = TransferBytes{};
    return rep;
}

} // namespace sof::offload
