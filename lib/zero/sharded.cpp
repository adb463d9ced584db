// ZeRO-3 and ZeRO-0 wrappers around the single-rank update path (see sharded.h). The model sees
// whole units in device memory; collectives run in one order on every rank, on the rank context's
// comm lane through its device-buffer collectives, so a unit's allgather (forward and backward)
// and reduce-scatter overlap the model's compute.
#include "zero/sharded.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <limits>

#include "core/error.h"
#include "core/strfmt.h"
#include "kernels/residual.h"
#include "offload/common.h"
#include "offload/engine.h"
#include "offload/memory_plan.h"
#include "offload/plain.h"
#include "zero/memory.h"

namespace sof::zero {

namespace {

using model::Pass;

// What the wrappers share: the rank's device, the model's compute stream, the device-buffer
// collectives of the shard group, and a pinned NaN for debug.inject_nonfinite.
//
// Stream order: the model runs on the compute stream. A collective's input is marked by an event
// recorded there (MPI is not stream-ordered: the lane blocks on it), and its results are in device
// memory when the lane job ends, before the main thread hands them on. Work the wrappers put on
// the compute stream for the model (grad-slot zeroing, the delivery add, the NaN) precedes the
// model's kernels in stream order on a GPU; on a host-accessible device the model's CPU twins run
// on the calling thread, so that work is waited for before the model goes on (ready_for_model).
class DeviceSide {
  public:
    explicit DeviceSide(rank::Context& ctx)
        : dev(ctx.device()), compute(ctx.devices().compute()), dc(ctx.shard_device_comm()) {
        nan = static_cast<float*>(dev.alloc_pinned(sizeof(float), "ZeRO NaN injection"));
        *nan = std::numeric_limits<float>::quiet_NaN();
    }
    ~DeviceSide() {
        try {
            dev.synchronize(compute);
        } catch (...) { // an abandoned step's error: nothing left to report it to
        }
        dev.free_pinned(nan);
    }
    DeviceSide(const DeviceSide&) = delete;
    DeviceSide& operator=(const DeviceSide&) = delete;

    void ready_for_model() {
        if (dev.host_accessible()) dev.synchronize(compute);
    }
    // grads[at] = NaN, in compute-stream order
    void inject_nan(float* grads, size_t at) {
        dev.copy(grads + at, nan, sizeof(float), device::CopyKind::HostToDevice, compute);
    }

    device::Device& dev;
    device::Stream& compute;
    rank::DeviceComm& dc; // used only from the comm lane
    float* nan = nullptr; // pinned
};

// The acquire order of the model (gpt2.h): forward 0, 1, ..., L+1; backward 0, L+1, L, ..., 1.
int next_unit(int u, Pass pass, int num_units) {
    int last = num_units - 1;
    if (pass == Pass::Forward) return u < last ? u + 1 : -1;
    if (u == 0) return last;
    return u > 1 ? u - 1 : -1;
}

// The single-rank update path under the wrappers; the engine keeps bf16 working weights where
// the model reads them so (model_bf16: the ZeRO-3 wrapper gathers them as they are).
std::unique_ptr<offload::Updater> make_inner(const config::Config& cfg,
                                             const model::ParamLayout& layout, rank::Context& ctx,
                                             const core::Log& log, core::Trace* trace,
                                             bool model_bf16) {
    const bool host = ctx.device().host_accessible();
    if (!cfg.offload.enabled) {
        if (!host)
            SOF_FAIL(Config,
                     "offload.enabled: false on %s: the plain update path keeps weights and grads "
                     "in host memory, where the model on the GPU does not read them; set "
                     "offload.enabled: true (with offload.gpu_tail_buckets larger than the bucket "
                     "count every bucket's state and step stay on the GPU)",
                     ctx.device().describe().c_str());
        if (model_bf16)
            SOF_FAIL(Internal, "the plain update path hands fp32 weights to a model that reads "
                               "bf16; bf16 working weights need the engine (offload.enabled)");
        return std::make_unique<offload::PlainUpdater>(cfg, layout, log, trace);
    }
    return std::make_unique<offload::Engine>(cfg, layout, log, trace, ctx.devices(), model_bf16);
}

bool injects_here(const offload::StepHparams& hp, const config::Config& cfg, int rank) {
    return hp.inject_nonfinite && (cfg.debug.inject_rank < 0 || cfg.debug.inject_rank == rank);
}

// ---------------------------------------------------------------------------------------------
// ZeRO-3
class Zero3 : public offload::Updater, public ShardAccess, public offload::StatReducer {
  public:
    Zero3(const config::Config& cfg, const model::ParamLayout& full, rank::Context& ctx,
          const core::Log& log, core::Trace* trace, bool model_bf16)
        : cfg_(cfg), full_(full), ctx_(ctx), ds_(ctx),
          map_(zero::make_shard_map(full, ctx.shard().size(), ctx.shard().rank())),
          slayout_(zero::make_shard_layout(full, map_)), weights_(*this), sink_(*this) {
        inner_ = make_inner(cfg, slayout_, ctx, log, trace, model_bf16);
        inner_->set_stat_reducer(this);
        // the slots as the memory plan lists them (what `superoffload plan` counts per rank), in
        // device memory: the model reads and writes them on the compute stream. A model that
        // reads bf16 weights gets bf16 slots, gathered from the engine's bf16 working weights;
        // an fp32 model of a bf16 run gets fp32 slots, gathered as bf16 and widened.
        slots16_ = inner_->bf16_weights();
        gather16_ =
            !slots16_ && cfg.train.dtype == config::Precision::BF16 && !cfg.debug.fp32_gathers;
        offload::Zero3Slots z;
        z.shards = map_.shards;
        z.slice = zero::max_slice(map_, false);
        z.block_slice = zero::max_slice(map_, true);
        z.gather16 = gather16_;
        z.slots16 = slots16_;
        const size_t ew = slots16_ ? 2 : 4;
        for (const offload::BufferSpec& b :
             offload::zero3_memory_plan(z, offload::MemSide::Device).buffers) {
            void* p = ds_.dev.alloc(b.bytes, b.name);
            owned_.push_back(p);
            ds_.dev.memset(p, 0, b.bytes, ds_.compute);
            float* f = static_cast<float*>(p);
            const size_t i = static_cast<size_t>(b.index);
            if (b.id == offload::Buf::ZeroGather) {
                gslots_[i].buf = p;
                gslots_[i].cap = b.bytes / ew;
            }
            if (b.id == offload::Buf::ZeroRecv) rs_scratch_ = f;
            if (b.id == offload::Buf::ZeroGrads) {
                rslots_[i].buf = f;
                rslots_[i].cap = b.bytes / sizeof(float);
            }
            if (b.id == offload::Buf::ZeroGradSlice) rslots_[i].out = f;
            if (b.id == offload::Buf::ZeroSend16) send16_ = static_cast<uint16_t*>(p);
            if (b.id == offload::Buf::ZeroRecv16) recv16_ = static_cast<uint16_t*>(p);
        }
        ds_.dev.synchronize(ds_.compute);
        for (RSlot& r : rslots_) { // the lane runs one collective at a time: one receive buffer
            r.scratch = rs_scratch_;
            r.ev = ds_.dev.create_event();
        }
        for (GSlot& g : gslots_)
            g.ev = ds_.dev.create_event();
        ev16_ = ds_.dev.create_event();
        log.info("zero: stage 3 over %d ranks, per-unit padded 1/%d shards: %zu of %zu params "
                 "here (%zu padding); %s gather slots of %zu, %zu, %zu elements",
                 map_.shards, map_.shards, map_.real_size, full.num_params,
                 map_.local_size - map_.real_size, slots16_ ? "bf16" : "fp32", gslots_[0].cap,
                 gslots_[1].cap, gslots_[2].cap);
    }
    ~Zero3() override {
        try {
            ctx_.lane().drain();
        } catch (...) { // an abandoned step's collective error: nothing left to report it to
        }
        try {
            ds_.dev.synchronize(ds_.compute); // the model's last reads of the slots
        } catch (...) {
        }
        for (void* p : owned_)
            ds_.dev.free(p);
    }

    model::WeightSource& weights() override { return weights_; }
    model::GradSink& grads() override { return sink_; }
    bool bf16_weights() const override { return slots16_; }

    void begin_step(const offload::StepHparams& hp) override {
        hp_ = hp;
        offload::StepHparams inner = hp;
        inner.inject_nonfinite = false; // injected here, before the reduce-scatter
        inner_->begin_step(inner);
        last_ = true;
    }
    void begin_micro(int micro, bool last) override {
        last_ = last;
        inner_->begin_micro(micro, last);
    }
    offload::StepReport finish_step() override {
        deliver_all();
        offload::StepReport r = inner_->finish_step();
        invalidate(); // new weights: every gathered unit is stale
        return r;
    }
    const offload::UpdaterStats& stats() const override { return inner_->stats(); }

    // Whole-model state. collective: all ranks of the shard group (through the comm lane)
    void get_state(float* params, float* exp_avg, float* exp_avg_sq, int64_t* opt_step) override {
        std::vector<float> p(map_.local_size), m(map_.local_size), v(map_.local_size);
        inner_->get_state(p.data(), m.data(), v.data(), opt_step);
        std::vector<float> all(static_cast<size_t>(map_.shards) * zero::max_slice(map_, false));
        for (auto [src, dst] : {std::pair{&p, params}, {&m, exp_avg}, {&v, exp_avg_sq}}) {
            for (int u = 0; u < full_.num_units(); u++) {
                size_t s = map_.slice[static_cast<size_t>(u)];
                const float* mine = src->data() + map_.local_begin[static_cast<size_t>(u)];
                uint64_t t = ctx_.lane().submit(
                    [this, mine, &all, s] { ctx_.shard().allgather(mine, all.data(), s); });
                ctx_.lane().wait(t);
                size_t ub = full_.unit_begin[static_cast<size_t>(u)];
                size_t n = full_.unit_begin[static_cast<size_t>(u) + 1] - ub;
                std::memcpy(dst + ub, all.data(), n * sizeof(float));
            }
        }
    }
    void set_state(const float* params, const float* exp_avg, const float* exp_avg_sq,
                   int64_t opt_step) override {
        std::vector<float> p(map_.local_size), m(map_.local_size), v(map_.local_size);
        zero::shard_scatter(full_, map_, params, p.data());
        zero::shard_scatter(full_, map_, exp_avg, m.data());
        zero::shard_scatter(full_, map_, exp_avg_sq, v.data());
        invalidate();
        inner_->set_state(p.data(), m.data(), v.data(), opt_step);
    }

    offload::StateFormat state_format() const override { return inner_->state_format(); }
    const zero::ShardMap& shard_map() const override { return map_; }
    void get_shard(ShardState* s) override {
        s->map = map_;
        s->native_valid = inner_->state_format().native();
        if (s->native_valid) { // the shard's state as kept (its layout, padding included)
            inner_->get_native(&s->native);
            s->opt_step = s->native.opt_step;
            return;
        }
        std::vector<float> p(map_.local_size), m(map_.local_size), v(map_.local_size);
        inner_->get_state(p.data(), m.data(), v.data(), &s->opt_step);
        s->params.resize(map_.real_size);
        s->exp_avg.resize(map_.real_size);
        s->exp_avg_sq.resize(map_.real_size);
        zero::shard_pack_real(full_, map_, p.data(), s->params.data());
        zero::shard_pack_real(full_, map_, m.data(), s->exp_avg.data());
        zero::shard_pack_real(full_, map_, v.data(), s->exp_avg_sq.data());
    }
    void set_shard(const ShardState& s) override {
        if (s.native_valid) {
            invalidate();
            inner_->set_native(s.native);
            return;
        }
        std::vector<float> p(map_.local_size), m(map_.local_size), v(map_.local_size);
        zero::shard_unpack_real(full_, map_, s.params.data(), p.data());
        zero::shard_unpack_real(full_, map_, s.exp_avg.data(), m.data());
        zero::shard_unpack_real(full_, map_, s.exp_avg_sq.data(), v.data());
        invalidate();
        inner_->set_state(p.data(), m.data(), v.data(), s.opt_step);
    }

    // Global grad statistics: partial sums of every rank added in rank order.
    // collective: all ranks (main thread, the context's `all` group)
    void combine(double* sumsq, bool* nonfinite) override {
        *sumsq = ctx_.all().ordered_sum(*sumsq);
        *nonfinite = ctx_.all().any(*nonfinite);
    }

  private:
    static constexpr int kGatherSlots = offload::kZeroGatherSlots;
    static constexpr int kGradSlots = offload::kZeroGradSlots;

    struct GSlot {
        void* buf = nullptr; // (cap) device, fp32 or bf16 (slots16_): the gathered unit, padding
                             // at the end
        size_t cap = 0;      // elements: N x the largest slice it is sized for
        int unit = -1;
        bool held = false;
        uint64_t ticket = 0;               // allgather on the comm lane
        std::unique_ptr<device::Event> ev; // compute stream at issue: the allgather waits for it
        bool inner_held = false;           // the inner path's acquire(unit) not released yet
        Pass pass = Pass::Forward;         // of that inner acquire
        uint64_t used = 0;                 // LRU clock
    };
    struct RSlot {
        float* buf = nullptr;     // (cap) device: the model's grads of one unit (padded)
        size_t cap = 0;           // elements: N x the largest slice it is sized for
        float* scratch = nullptr; // (N*slice) device: the other ranks' chunks (rs_scratch_)
        float* out = nullptr;     // (slice) device: this rank's reduced chunk
        int unit = -1;            // assigned in this micro-batch
        uint64_t ticket = 0;      // reduce-scatter in flight (0: not submitted)
        std::unique_ptr<device::Event> ev; // compute stream at unit_done: the model's grads
    };

    class Weights : public model::WeightSource {
      public:
        explicit Weights(Zero3& z) : z_(z) {}
        const float* acquire(int unit, Pass pass) override { return z_.acquire(unit, pass); }
        void release(int unit, Pass) override {
            for (GSlot& s : z_.gslots_)
                if (s.unit == unit) s.held = false;
        }

      private:
        Zero3& z_;
    };
    class Sink : public model::GradSink {
      public:
        explicit Sink(Zero3& z) : z_(z) {}
        float* grads(int unit) override { return z_.grad_slot(unit).buf; }
        void unit_done(int unit) override { z_.unit_done(unit); }

      private:
        Zero3& z_;
    };

    GSlot* find(int unit) {
        for (GSlot& s : gslots_)
            if (s.unit == unit) return &s;
        return nullptr;
    }
    // Waits for the slot's allgather and gives the inner path its unit back.
    void settle(GSlot& s) {
        if (s.ticket) ctx_.lane().wait(s.ticket);
        s.ticket = 0;
        if (s.inner_held) inner_->weights().release(s.unit, s.pass);
        s.inner_held = false;
    }
    // Elements of unit u's gathered form (N equal slices, padding included).
    size_t whole(int unit) const {
        return static_cast<size_t>(map_.shards) * map_.slice[static_cast<size_t>(unit)];
    }
    // Issues unit u's allgather into a free slot: the smallest unheld slot it fits, the least
    // recently used among equals (offload/memory_plan.h). Slot choice depends only on the call
    // sequence, never on timing, so every rank submits the same collectives in the same order.
    GSlot* issue(int unit, Pass pass) {
        GSlot* v = nullptr;
        const size_t need = whole(unit);
        for (GSlot& s : gslots_)
            if (!s.held && s.cap >= need &&
                (!v || s.cap < v->cap || (s.cap == v->cap && s.used < v->used)))
                v = &s;
        if (!v) return nullptr;
        settle(*v);
        const float* mine = inner_->weights().acquire(unit, pass);
        v->unit = unit;
        v->inner_held = true;
        v->pass = pass;
        v->used = ++clock_;
        const size_t s = map_.slice[static_cast<size_t>(unit)];
        void* dst = v->buf;
        // the inner path's unit is ready for the compute stream, and the model's reads of the
        // slot's previous unit were enqueued there: the allgather waits for both
        device::Event* after = v->ev.get();
        ds_.dev.record(*after, ds_.compute);
        v->ticket = ctx_.lane().submit(
            [this, mine, dst, s, unit, after] {
                if (slots16_) // the engine's bf16 working weights, gathered as they are
                    ds_.dc.allgather(reinterpret_cast<const uint16_t*>(mine),
                                     static_cast<uint16_t*>(dst), s, after);
                else if (gather16_)
                    allgather_bf16(mine, static_cast<float*>(dst), s, unit, after);
                else
                    ds_.dc.allgather(mine, static_cast<float*>(dst), s, after);
            },
            core::strfmt("allgather u%d", unit));
        return v;
    }
    // On the lane: dst (N*s) = every rank's s working weights, moved as bf16 (cast on the device,
    // gathered as 16-bit elements, widened on the device, on the collectives' stream). A bf16
    // run's working weights are bf16 values held in fp32, so the bf16 casts carry them exactly
    // and the result is bitwise the fp32 gather's. A weight with a non-zero low half breaks that:
    // on a host-accessible device an internal error, raised after the collective so that no rank
    // is left waiting in it (a GPU's weights are not read by the host here: not checked there).
    void allgather_bf16(const float* mine, float* dst, size_t s, int unit, device::Event* after) {
        device::Stream& cs = ds_.dc.stream();
        ds_.dev.wait(cs, *after);
        uint32_t low = 0;
        if (ds_.dev.host_accessible()) {
            after->synchronize();
            for (size_t i = 0; i < s; i++) {
                uint32_t u;
                std::memcpy(&u, mine + i, sizeof(u));
                low |= u & 0xffffu;
            }
        }
        ds_.dev.cast_f32_to_bf16(mine, send16_, s, cs);
        ds_.dev.record(*ev16_, cs);
        ds_.dc.allgather(send16_, recv16_, s, ev16_.get());
        ds_.dev.cast_bf16_to_f32(recv16_, dst, static_cast<size_t>(map_.shards) * s, cs);
        ds_.dev.synchronize(cs);
        if (low != 0)
            SOF_FAIL(Internal,
                     "zero: unit %d's working weights on rank %d are not bf16 values, which the "
                     "bf16 allgather of train.dtype bf16 needs",
                     unit, ctx_.shard().rank());
    }
    const float* acquire(int unit, Pass pass) {
        // What stays gathered is a rule of the pass, not of timing, so the bytes per step are a
        // formula (plan: 2 allgathers per micro-batch, less units 0 and L+1 in backward): a
        // forward starts from nothing; a backward keeps only unit 0 and the final LN, which the
        // end of the forward just used.
        const int last = full_.num_units() - 1;
        if (pass == Pass::Forward && unit == 0) drop_unheld(-1, -1);
        if (pass == Pass::Backward && last_pass_ == Pass::Forward) drop_unheld(0, last);
        last_pass_ = pass;
        GSlot* s = find(unit);
        if (!s) s = issue(unit, pass);
        if (!s)
            SOF_FAIL(Internal, "zero: no unheld gather slot fits unit %d (%zu elements)", unit,
                     whole(unit));
        settle(*s);
        s->held = true;
        s->used = ++clock_;
        int w = next_unit(unit, pass, full_.num_units());
        if (w >= 0 && !find(w)) issue(w, pass); // prefetch: overlaps this unit's compute
        return static_cast<const float*>(s->buf);
    }
    void drop_unheld(int keep_a, int keep_b) {
        for (GSlot& s : gslots_)
            if (!s.held && s.unit != keep_a && s.unit != keep_b) {
                settle(s);
                s.unit = -1;
            }
    }
    void invalidate() {
        for (GSlot& s : gslots_) {
            settle(s);
            s.unit = -1;
            s.held = false;
        }
    }

    RSlot& grad_slot(int unit) {
        for (RSlot& s : rslots_)
            if (s.unit == unit && s.ticket == 0) return s;
        const size_t need = whole(unit);
        RSlot* f = free_rslot(need);
        while (!f && !inflight_.empty()) { // the fitting slots have reduce-scatters in flight:
            deliver_one();                 // finish the oldest
            f = free_rslot(need);
        }
        if (!f)
            SOF_FAIL(Internal, "zero: no grad slot free that fits unit %d (%zu elements)", unit,
                     need);
        f->unit = unit;
        ds_.dev.memset(f->buf, 0, need * sizeof(float), ds_.compute);
        ds_.ready_for_model();
        return *f;
    }
    // The smallest free grad slot of at least `need` elements (the first among equals).
    RSlot* free_rslot(size_t need) {
        RSlot* v = nullptr;
        for (RSlot& s : rslots_)
            if (s.unit < 0 && s.cap >= need && (!v || s.cap < v->cap)) v = &s;
        return v;
    }
    void unit_done(int unit) {
        RSlot* s = nullptr;
        for (RSlot& x : rslots_)
            if (x.unit == unit && x.ticket == 0) s = &x;
        if (!s) s = &grad_slot(unit); // a unit without grads (not in GPT-2): reduce zeros
        if (last_ && unit == full_.num_units() - 1 && injects_here(hp_, cfg_, ctx_.world().rank()))
            ds_.inject_nan(s->buf, offload::inject_offset(full_) -
                                       full_.unit_begin[static_cast<size_t>(unit)]);
        const size_t n = map_.slice[static_cast<size_t>(unit)];
        float *in = s->buf, *out = s->out, *scratch = s->scratch;
        device::Event* after = s->ev.get(); // the model's grads (and the delivery of `out`)
        ds_.dev.record(*after, ds_.compute);
        s->ticket =
            ctx_.lane().submit([this, in, out, scratch, n,
                                after] { ds_.dc.reduce_scatter(in, out, n, after, scratch); },
                               core::strfmt("reduce-scatter u%d", unit));
        inflight_.push_back(static_cast<int>(s - rslots_));
        while (!inflight_.empty() && ctx_.lane().done(rslots_[inflight_.front()].ticket))
            deliver_one(); // hand finished slices to the inner path while backward goes on
        if (unit == 0) deliver_all();
    }
    // The oldest reduce-scatter: its slice is added into the inner path's grads of the unit, on
    // the compute stream (where the inner path expects the model's grads to be written).
    void deliver_one() {
        if (inflight_.empty()) return;
        RSlot& s = rslots_[inflight_.front()];
        inflight_.pop_front();
        ctx_.lane().wait(s.ticket);
        const long n = static_cast<long>(map_.slice[static_cast<size_t>(s.unit)]);
        float* g = inner_->grads().grads(s.unit);
        const float* out = s.out;
        ds_.dev.launch(
            ds_.compute, "zero: add reduced grads",
            [g, out, n](const kernels::Exec& ex) { kernels::add_inplace<float>(ex, g, out, n); });
        ds_.ready_for_model(); // the inner path reads them after unit_done
        inner_->grads().unit_done(s.unit);
        s.unit = -1;
        s.ticket = 0;
    }
    void deliver_all() {
        while (!inflight_.empty())
            deliver_one();
    }

    config::Config cfg_;
    const model::ParamLayout& full_;
    rank::Context& ctx_;
    DeviceSide ds_;
    zero::ShardMap map_;
    model::ParamLayout slayout_; // must outlive inner_ (declared before it)
    std::unique_ptr<offload::Updater> inner_;
    Weights weights_;
    Sink sink_;
    GSlot gslots_[kGatherSlots];
    RSlot rslots_[kGradSlots];
    float* rs_scratch_ = nullptr;         // (N*max slice) device
    bool slots16_ = false;                // the model reads bf16: bf16 gather slots
    bool gather16_ = false;               // fp32 slots, weights gathered as bf16 (train.dtype bf16)
    uint16_t* send16_ = nullptr;          // (max slice) device, bf16 gathers: this rank's slice
    uint16_t* recv16_ = nullptr;          // (N*max slice) device, bf16 gathers: the gathered unit
    std::unique_ptr<device::Event> ev16_; // the lane: send16_ cast (bf16 gathers)
    std::vector<void*> owned_; // every buffer of the memory plan (device), freed at the end
    std::deque<int> inflight_; // rslots_ indexes with a reduce-scatter in flight, oldest first
    uint64_t clock_ = 0;
    Pass last_pass_ = Pass::Forward;
    offload::StepHparams hp_;
    bool last_ = true;
};

// ---------------------------------------------------------------------------------------------
// ZeRO-0: every rank holds everything; grads all-reduced per unit (rank-order sums) in the inner
// path's own grad buffers (device memory) as backward finishes each unit, then handed to it.
class Zero0 : public offload::Updater, public ShardAccess {
  public:
    Zero0(const config::Config& cfg, const model::ParamLayout& full, rank::Context& ctx,
          const core::Log& log, core::Trace* trace, bool model_bf16)
        : cfg_(cfg), full_(full), ctx_(ctx), ds_(ctx), map_(zero::make_shard_map(full, 1, 0)),
          sink_(*this) {
        // Weight flow's device grad ring frees a unit's slot when the unit is delivered
        // (unit_done); here the allreduces deliver a unit up to kInflight units after the model
        // wrote it, past what the ring holds ("no free slot"): the model writes its grads into
        // the pinned host buffer instead (offload.flow_grads: host).
        if (cfg_.offload.enabled && cfg_.offload.weights == config::WeightsPolicy::Flow &&
            cfg_.offload.flow_grads != config::FlowGrads::Host) {
            cfg_.offload.flow_grads = config::FlowGrads::Host;
            log.info("zero: stage 0 with weight flow: the model's grads in pinned host memory "
                     "(offload.flow_grads: host; the device grad ring needs each unit delivered "
                     "when written, the all-reduces deliver up to %zu units later)",
                     kInflight);
        }
        inner_ = make_inner(cfg_, full, ctx, log, trace, model_bf16);
        size_t max_unit = 0;
        for (int u = 0; u < full.num_units(); u++)
            max_unit = std::max(max_unit, full.unit_begin[static_cast<size_t>(u) + 1] -
                                              full.unit_begin[static_cast<size_t>(u)]);
        // the lane runs one allreduce at a time: one scratch serves them all
        scratch_ = static_cast<float*>(ds_.dev.alloc(
            ds_.dc.allreduce_scratch(max_unit) * sizeof(float), "ZeRO-0 allreduce scratch"));
        for (auto& e : ev_)
            e = ds_.dev.create_event();
        log.info("zero: stage 0 over %d ranks (replicated state, grads all-reduced)",
                 ctx.shard().size());
    }
    ~Zero0() override {
        try {
            ctx_.lane().drain();
        } catch (...) { // an abandoned step's collective error: nothing left to report it to
        }
        ds_.dev.free(scratch_);
    }
    model::WeightSource& weights() override { return inner_->weights(); }
    model::GradSink& grads() override { return sink_; }
    bool bf16_weights() const override { return inner_->bf16_weights(); }
    void begin_step(const offload::StepHparams& hp) override {
        hp_ = hp;
        offload::StepHparams inner = hp;
        inner.inject_nonfinite = false;
        inner_->begin_step(inner);
        last_ = true;
    }
    void begin_micro(int micro, bool last) override {
        last_ = last;
        inner_->begin_micro(micro, last);
    }
    offload::StepReport finish_step() override {
        deliver_all();
        return inner_->finish_step();
    }
    const offload::UpdaterStats& stats() const override { return inner_->stats(); }
    void get_state(float* p, float* m, float* v, int64_t* t) override {
        inner_->get_state(p, m, v, t);
    }
    void set_state(const float* p, const float* m, const float* v, int64_t t) override {
        inner_->set_state(p, m, v, t);
    }
    offload::StateFormat state_format() const override { return inner_->state_format(); }
    void get_native(offload::NativeState* ns) override { inner_->get_native(ns); }
    void set_native(const offload::NativeState& ns) override { inner_->set_native(ns); }
    const zero::ShardMap& shard_map() const override { return map_; }
    void get_shard(ShardState* s) override {
        s->map = map_;
        s->native_valid = inner_->state_format().native();
        if (s->native_valid) {
            inner_->get_native(&s->native);
            s->opt_step = s->native.opt_step;
            return;
        }
        s->params.resize(full_.num_params);
        s->exp_avg.resize(full_.num_params);
        s->exp_avg_sq.resize(full_.num_params);
        inner_->get_state(s->params.data(), s->exp_avg.data(), s->exp_avg_sq.data(), &s->opt_step);
    }
    void set_shard(const ShardState& s) override {
        if (s.native_valid) {
            inner_->set_native(s.native);
            return;
        }
        inner_->set_state(s.params.data(), s.exp_avg.data(), s.exp_avg_sq.data(), s.opt_step);
    }

  private:
    class Sink : public model::GradSink {
      public:
        explicit Sink(Zero0& z) : z_(z) {}
        float* grads(int unit) override { return z_.inner_->grads().grads(unit); }
        void unit_done(int unit) override { z_.unit_done(unit); }

      private:
        Zero0& z_;
    };
    void unit_done(int unit) {
        if (!last_) { // accumulation: grads are reduced once, after the last micro-batch
            inner_->grads().unit_done(unit);
            return;
        }
        float* g = inner_->grads().grads(unit);
        if (unit == full_.num_units() - 1 && injects_here(hp_, cfg_, ctx_.world().rank()))
            ds_.inject_nan(g, offload::inject_offset(full_) -
                                  full_.unit_begin[static_cast<size_t>(unit)]);
        if (inflight_.size() == kInflight) deliver_one();
        const size_t n = full_.unit_begin[static_cast<size_t>(unit) + 1] -
                         full_.unit_begin[static_cast<size_t>(unit)];
        // the model's grads, written on the compute stream (an event is reused only after the
        // allreduce of kInflight submissions ago was delivered)
        device::Event* after = ev_[next_ev_++ % kInflight].get();
        ds_.dev.record(*after, ds_.compute);
        float* scratch = scratch_;
        uint64_t t = ctx_.lane().submit(
            [this, g, n, after, scratch] { ds_.dc.allreduce(g, n, after, scratch); },
            core::strfmt("allreduce u%d", unit));
        inflight_.push_back({unit, t});
        while (!inflight_.empty() && ctx_.lane().done(inflight_.front().second))
            deliver_one();
        if (unit == 0) deliver_all();
    }
    void deliver_one() {
        auto [unit, t] = inflight_.front();
        inflight_.pop_front();
        ctx_.lane().wait(t);
        inner_->grads().unit_done(unit);
    }
    void deliver_all() {
        while (!inflight_.empty())
            deliver_one();
    }
    static constexpr size_t kInflight = 3; // allreduces submitted and not yet delivered
    config::Config cfg_;
    const model::ParamLayout& full_;
    rank::Context& ctx_;
    DeviceSide ds_;
    zero::ShardMap map_;
    std::unique_ptr<offload::Updater> inner_;
    Sink sink_;
    float* scratch_ = nullptr; // (allreduce_scratch(largest unit)) device
    std::unique_ptr<device::Event> ev_[kInflight];
    size_t next_ev_ = 0;
    std::deque<std::pair<int, uint64_t>> inflight_; // (unit, ticket), oldest first
    offload::StepHparams hp_;
    bool last_ = true;
};

} // namespace

std::unique_ptr<offload::Updater> make_parallel_updater(const config::Config& cfg,
                                                        const model::ParamLayout& full,
                                                        rank::Context& ctx, const core::Log& log,
                                                        core::Trace* trace, bool model_bf16) {
    if (ctx.world().size() == 1) return make_inner(cfg, full, ctx, log, trace, model_bf16);
    if (cfg.parallel.zero_stage == 3)
        return std::make_unique<Zero3>(cfg, full, ctx, log, trace, model_bf16);
    return std::make_unique<Zero0>(cfg, full, ctx, log, trace, model_bf16);
}

} // namespace sof::zero
