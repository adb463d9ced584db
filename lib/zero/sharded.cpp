// ZeRO-3 and ZeRO-0 wrappers around the single-rank update path (see sharded.h). The model sees
// whole units; collectives run in one order on every rank, on the rank context's comm lane, so a
// unit's allgather (forward and backward) and reduce-scatter overlap the model's compute.
#include "zero/sharded.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <limits>

#include "core/error.h"
#include "core/strfmt.h"
#include "offload/common.h"
#include "offload/engine.h"
#include "offload/memory_plan.h"
#include "offload/plain.h"

namespace sof::zero {

namespace {

using model::Pass;

// Host memory the CPU model reads and writes: from the device arena on the host device (so the
// engine's accounting covers it), pinned host memory on a GPU device.
class HostMem {
  public:
    explicit HostMem(device::Device& d) : d_(d), arena_(d.host_accessible()) {}
    // where the memory plan counts these buffers
    offload::MemSide side() const {
        return arena_ ? offload::MemSide::Device : offload::MemSide::Pinned;
    }
    void* get(size_t bytes, const std::string& what) {
        void* p = arena_ ? d_.alloc(bytes, what) : d_.alloc_pinned(bytes, what);
        std::memset(p, 0, bytes);
        return p;
    }
    void put(void* p) {
        if (arena_)
            d_.free(p);
        else
            d_.free_pinned(p);
    }

  private:
    device::Device& d_;
    bool arena_;
};

// The acquire order of the model (gpt2.h): forward 0, 1, ..., L+1; backward 0, L+1, L, ..., 1.
int next_unit(int u, Pass pass, int num_units) {
    int last = num_units - 1;
    if (pass == Pass::Forward) return u < last ? u + 1 : -1;
    if (u == 0) return last;
    return u > 1 ? u - 1 : -1;
}

std::unique_ptr<offload::Updater> make_inner(const config::Config& cfg,
                                             const model::ParamLayout& layout, rank::Context& ctx,
                                             const core::Log& log, core::Trace* trace) {
    if (!cfg.offload.enabled)
        return std::make_unique<offload::PlainUpdater>(cfg, layout, log, trace);
    return std::make_unique<offload::Engine>(cfg, layout, log, trace, ctx.devices());
}

bool injects_here(const offload::StepHparams& hp, const config::Config& cfg, int rank) {
    return hp.inject_nonfinite && (cfg.debug.inject_rank < 0 || cfg.debug.inject_rank == rank);
}

// ---------------------------------------------------------------------------------------------
// ZeRO-3
class Zero3 : public offload::Updater, public ShardAccess, public offload::StatReducer {
  public:
    Zero3(const config::Config& cfg, const model::ParamLayout& full, rank::Context& ctx,
          const core::Log& log, core::Trace* trace)
        : cfg_(cfg), full_(full), ctx_(ctx), mem_(ctx.device()),
          map_(zero::make_shard_map(full, ctx.shard().size(), ctx.shard().rank())),
          slayout_(zero::make_shard_layout(full, map_)), weights_(*this), sink_(*this) {
        for (size_t s : map_.slice)
            max_slice_ = std::max(max_slice_, s);
        inner_ = make_inner(cfg, slayout_, ctx, log, trace);
        inner_->set_stat_reducer(this);
        // the slots as the memory plan lists them (what `superoffload plan` counts per rank)
        gather16_ = cfg.train.dtype == config::Precision::BF16 && !cfg.debug.fp32_gathers;
        const offload::MemoryPlan zp =
            offload::zero3_memory_plan(map_.shards, max_slice_, mem_.side(), gather16_);
        for (const offload::BufferSpec& b : zp.buffers) {
            void* p = mem_.get(b.bytes, b.name);
            owned_.push_back(p);
            float* f = static_cast<float*>(p);
            const size_t i = static_cast<size_t>(b.index);
            if (b.id == offload::Buf::ZeroGather) gslots_[i].buf = f;
            if (b.id == offload::Buf::ZeroRecv) rs_scratch_ = f;
            if (b.id == offload::Buf::ZeroGrads) rslots_[i].buf = f;
            if (b.id == offload::Buf::ZeroGradSlice) rslots_[i].out = f;
            if (b.id == offload::Buf::ZeroSend16) send16_ = static_cast<uint16_t*>(p);
            if (b.id == offload::Buf::ZeroRecv16) recv16_ = static_cast<uint16_t*>(p);
        }
        for (RSlot& r : rslots_) // the lane runs one collective at a time: one receive buffer
            r.scratch = rs_scratch_;
        log.info("zero: stage 3 over %d ranks, per-unit padded 1/%d shards: %zu of %zu params "
                 "here (%zu padding)",
                 map_.shards, map_.shards, map_.real_size, full.num_params,
                 map_.local_size - map_.real_size);
    }
    ~Zero3() override {
        try {
            ctx_.lane().drain();
        } catch (...) { // an abandoned step's collective error: nothing left to report it to
        }
        for (void* p : owned_)
            mem_.put(p);
    }

    model::WeightSource& weights() override { return weights_; }
    model::GradSink& grads() override { return sink_; }

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
        std::vector<float> all(static_cast<size_t>(map_.shards) * max_slice_);
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

    const zero::ShardMap& shard_map() const override { return map_; }
    void get_shard(ShardState* s) override {
        std::vector<float> p(map_.local_size), m(map_.local_size), v(map_.local_size);
        inner_->get_state(p.data(), m.data(), v.data(), &s->opt_step);
        s->map = map_;
        s->params.resize(map_.real_size);
        s->exp_avg.resize(map_.real_size);
        s->exp_avg_sq.resize(map_.real_size);
        zero::shard_pack_real(full_, map_, p.data(), s->params.data());
        zero::shard_pack_real(full_, map_, m.data(), s->exp_avg.data());
        zero::shard_pack_real(full_, map_, v.data(), s->exp_avg_sq.data());
    }
    void set_shard(const ShardState& s) override {
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
        float* buf = nullptr; // (N*slice) the gathered unit, padding at the end
        int unit = -1;
        bool held = false;
        uint64_t ticket = 0;       // allgather on the comm lane
        bool inner_held = false;   // the inner path's acquire(unit) not released yet
        Pass pass = Pass::Forward; // of that inner acquire
        uint64_t used = 0;         // LRU clock
    };
    struct RSlot {
        float* buf = nullptr;     // (N*slice) the model's grads of one unit (padded)
        float* scratch = nullptr; // (N*slice) the other ranks' chunks (shared: rs_scratch_)
        float* out = nullptr;     // (slice) this rank's reduced chunk
        int unit = -1;            // assigned in this micro-batch
        uint64_t ticket = 0;      // reduce-scatter in flight (0: not submitted)
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
    // Issues unit u's allgather into a free slot (the least recently used unheld one).
    // Slot choice depends only on the call sequence, never on timing, so every rank submits the
    // same collectives in the same order.
    GSlot* issue(int unit, Pass pass) {
        GSlot* v = nullptr;
        for (GSlot& s : gslots_)
            if (!s.held && (!v || s.used < v->used)) v = &s;
        if (!v) return nullptr;
        settle(*v);
        const float* mine = inner_->weights().acquire(unit, pass);
        v->unit = unit;
        v->inner_held = true;
        v->pass = pass;
        v->used = ++clock_;
        const size_t s = map_.slice[static_cast<size_t>(unit)];
        float* dst = v->buf;
        v->ticket = ctx_.lane().submit(
            [this, mine, dst, s, unit] {
                if (gather16_)
                    allgather_bf16(mine, dst, s, unit);
                else
                    ctx_.shard().allgather(mine, dst, s);
            },
            core::strfmt("allgather u%d", unit));
        return v;
    }
    // On the lane: dst (N*s) = every rank's s working weights, moved as bf16. A bf16 run's
    // working weights are bf16 values held in fp32, so the top halves carry them exactly and the
    // result is bitwise the fp32 gather's. A weight with a non-zero low half breaks that: an
    // internal error, raised after the collective so that no rank is left waiting in it.
    void allgather_bf16(const float* mine, float* dst, size_t s, int unit) {
        uint32_t low = 0;
        for (size_t i = 0; i < s; i++) {
            uint32_t u;
            std::memcpy(&u, mine + i, sizeof(u));
            low |= u & 0xffffu;
            send16_[i] = static_cast<uint16_t>(u >> 16);
        }
        ctx_.shard().allgather(send16_, recv16_, s);
        const size_t n = static_cast<size_t>(map_.shards) * s;
        for (size_t i = 0; i < n; i++) {
            const uint32_t u = static_cast<uint32_t>(recv16_[i]) << 16;
            std::memcpy(dst + i, &u, sizeof(u));
        }
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
        if (!s) SOF_FAIL(Internal, "zero: every gather slot is held when acquiring unit %d", unit);
        settle(*s);
        s->held = true;
        s->used = ++clock_;
        int w = next_unit(unit, pass, full_.num_units());
        if (w >= 0 && !find(w)) issue(w, pass); // prefetch: overlaps this unit's compute
        return s->buf;
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
        RSlot* f = free_rslot();
        if (!f) { // every slot has a reduce-scatter in flight: finish the oldest
            deliver_one();
            f = free_rslot();
        }
        if (!f) SOF_FAIL(Internal, "zero: no grad slot free for unit %d", unit);
        f->unit = unit;
        std::memset(f->buf, 0, map_.shards * map_.slice[static_cast<size_t>(unit)] * sizeof(float));
        return *f;
    }
    RSlot* free_rslot() {
        for (RSlot& s : rslots_)
            if (s.unit < 0) return &s;
        return nullptr;
    }
    void unit_done(int unit) {
        RSlot* s = nullptr;
        for (RSlot& x : rslots_)
            if (x.unit == unit && x.ticket == 0) s = &x;
        if (!s) s = &grad_slot(unit); // a unit without grads (not in GPT-2): reduce zeros
        if (last_ && unit == full_.num_units() - 1 && injects_here(hp_, cfg_, ctx_.world().rank()))
            s->buf[offload::inject_offset(full_) - full_.unit_begin[static_cast<size_t>(unit)]] =
                std::numeric_limits<float>::quiet_NaN();
        const size_t n = map_.slice[static_cast<size_t>(unit)];
        float *in = s->buf, *out = s->out, *scratch = s->scratch;
        s->ticket = ctx_.lane().submit(
            [this, in, out, scratch, n] { ctx_.shard().reduce_scatter(in, out, n, scratch); },
            core::strfmt("reduce-scatter u%d", unit));
        inflight_.push_back(static_cast<int>(s - rslots_));
        while (!inflight_.empty() && ctx_.lane().done(rslots_[inflight_.front()].ticket))
            deliver_one(); // hand finished slices to the inner path while backward goes on
        if (unit == 0) deliver_all();
    }
    // The oldest reduce-scatter: its slice is added into the inner path's grads of the unit.
    void deliver_one() {
        if (inflight_.empty()) return;
        RSlot& s = rslots_[inflight_.front()];
        inflight_.pop_front();
        ctx_.lane().wait(s.ticket);
        const size_t n = map_.slice[static_cast<size_t>(s.unit)];
        float* g = inner_->grads().grads(s.unit);
        for (size_t i = 0; i < n; i++)
            g[i] += s.out[i];
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
    HostMem mem_;
    zero::ShardMap map_;
    model::ParamLayout slayout_; // must outlive inner_ (declared before it)
    size_t max_slice_ = 0;
    std::unique_ptr<offload::Updater> inner_;
    Weights weights_;
    Sink sink_;
    GSlot gslots_[kGatherSlots];
    RSlot rslots_[kGradSlots];
    float* rs_scratch_ = nullptr; // (N*max slice)
    bool gather16_ = false;       // weights gathered as bf16 (train.dtype bf16)
    uint16_t* send16_ = nullptr;  // (max slice) bf16 gathers: this rank's slice
    uint16_t* recv16_ = nullptr;  // (N*max slice) bf16 gathers: the gathered unit
    std::vector<void*> owned_;    // every buffer of the memory plan, freed at the end
    std::deque<int> inflight_;    // rslots_ indexes with a reduce-scatter in flight, oldest first
    uint64_t clock_ = 0;
    Pass last_pass_ = Pass::Forward;
    offload::StepHparams hp_;
    bool last_ = true;
};

// ---------------------------------------------------------------------------------------------
// ZeRO-0: every rank holds everything; grads all-reduced per unit (rank-order sums) as backward
// finishes each unit, then handed to the inner path.
class Zero0 : public offload::Updater, public ShardAccess {
  public:
    Zero0(const config::Config& cfg, const model::ParamLayout& full, rank::Context& ctx,
          const core::Log& log, core::Trace* trace)
        : cfg_(cfg), full_(full), ctx_(ctx), mem_(ctx.device()),
          map_(zero::make_shard_map(full, 1, 0)), sink_(*this) {
        inner_ = make_inner(cfg, full, ctx, log, trace);
        const size_t P = static_cast<size_t>(ctx.shard().size());
        size_t max_unit = 0;
        for (int u = 0; u < full.num_units(); u++)
            max_unit = std::max(max_unit, full.unit_begin[static_cast<size_t>(u) + 1] -
                                              full.unit_begin[static_cast<size_t>(u)]);
        for (float*& s : scratch_)
            s = static_cast<float*>(mem_.get(2 * P * ((max_unit + P - 1) / P) * sizeof(float),
                                             "ZeRO-0 allreduce scratch"));
        log.info("zero: stage 0 over %d ranks (replicated state, grads all-reduced)",
                 ctx.shard().size());
    }
    ~Zero0() override {
        try {
            ctx_.lane().drain();
        } catch (...) { // an abandoned step's collective error: nothing left to report it to
        }
        for (float* s : scratch_)
            mem_.put(s);
    }
    model::WeightSource& weights() override { return inner_->weights(); }
    model::GradSink& grads() override { return sink_; }
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
    const zero::ShardMap& shard_map() const override { return map_; }
    void get_shard(ShardState* s) override {
        s->map = map_;
        s->params.resize(full_.num_params);
        s->exp_avg.resize(full_.num_params);
        s->exp_avg_sq.resize(full_.num_params);
        inner_->get_state(s->params.data(), s->exp_avg.data(), s->exp_avg_sq.data(), &s->opt_step);
    }
    void set_shard(const ShardState& s) override {
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
            g[offload::inject_offset(full_) - full_.unit_begin[static_cast<size_t>(unit)]] =
                std::numeric_limits<float>::quiet_NaN();
        if (inflight_.size() == kScratch) deliver_one();
        const size_t n = full_.unit_begin[static_cast<size_t>(unit) + 1] -
                         full_.unit_begin[static_cast<size_t>(unit)];
        float* scratch = scratch_[next_scratch_++ % kScratch];
        uint64_t t =
            ctx_.lane().submit([this, g, n, scratch] { ctx_.shard().allreduce(g, n, scratch); },
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
    static constexpr size_t kScratch = 3;
    config::Config cfg_;
    const model::ParamLayout& full_;
    rank::Context& ctx_;
    HostMem mem_;
    zero::ShardMap map_;
    std::unique_ptr<offload::Updater> inner_;
    Sink sink_;
    float* scratch_[kScratch] = {nullptr, nullptr, nullptr};
    size_t next_scratch_ = 0;
    std::deque<std::pair<int, uint64_t>> inflight_; // (unit, ticket), oldest first
    offload::StepHparams hp_;
    bool last_ = true;
};

} // namespace

std::unique_ptr<offload::Updater> make_parallel_updater(const config::Config& cfg,
                                                        const model::ParamLayout& full,
                                                        rank::Context& ctx, const core::Log& log,
                                                        core::Trace* trace) {
    if (ctx.world().size() == 1) return make_inner(cfg, full, ctx, log, trace);
    if (cfg.parallel.zero_stage == 3) return std::make_unique<Zero3>(cfg, full, ctx, log, trace);
    return std::make_unique<Zero0>(cfg, full, ctx, log, trace);
}

} // namespace sof::zero
