// Working weights of the engine as a model::WeightSource: stationary (all units resident in device
// memory) or flow (units fetched from host memory into a ring of device slots, with prefetch).
#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/strfmt.h"
#include "offload/engine.h"

namespace sof::offload {

class Engine::StationaryWeights : public model::WeightSource {
  public:
    explicit StationaryWeights(Engine& e) : e_(e) {}
    // bf16 working weights are handed out as the unit's first bf16 (the model built with bf16
    // weights reads them so; model.h)
    const float* acquire(int unit, model::Pass) override {
        e_.wait_unit(unit);
        size_t o = e_.layout_.unit_begin[static_cast<size_t>(unit)];
        if (e_.work16_) return reinterpret_cast<const float*>(e_.dwork16_ + o);
        return e_.dwork_ + o;
    }

  private:
    Engine& e_;
};

// Weight flow: no working weights are kept for the whole model; acquire(u) builds unit u in a
// device slot from the fp32 master of its buckets (host state set of the bucket, or the device
// state of a device-resident bucket): fp32 copied (4 bytes/param H2D), bf16 cast on the device,
// whatever offload.cast says (which decides the grads' dtype on the link), then prefetches the
// next `prefetch_layers` units of the pass's acquire order into free slots. A slot is reloaded
// only after the compute stream has passed the release of its unit (the `freed` event: on CUDA
// the model's kernels run after acquire/release return).
class Engine::FlowWeights : public model::WeightSource {
  public:
    explicit FlowWeights(Engine& e) : e_(e) {
        // unit u = segments of the buckets it overlaps (buckets cut at stat pieces, not units)
        const model::ParamLayout& L = e_.layout_;
        segs_.resize(static_cast<size_t>(L.num_units()));
        for (int u = 0; u < L.num_units(); u++) {
            size_t ub = L.unit_begin[static_cast<size_t>(u)];
            size_t ue = L.unit_begin[static_cast<size_t>(u) + 1];
            for (const Bucket& b : e_.buckets_) {
                size_t lo = std::max(ub, b.begin), hi = std::min(ue, b.end);
                if (lo < hi) segs_[static_cast<size_t>(u)].push_back({lo, hi - lo, b.index});
            }
        }
        // the slots are the plan's (make_memory_plan: prefetch_layers + 3 of them)
        for (int i = 0;; i++) {
            Slot s;
            s.buf = static_cast<float*>(e_.buf(Buf::FlowSlot32, i));
            if (!s.buf) break;
            s.buf16 = static_cast<uint16_t*>(e_.buf(Buf::FlowSlot16, i));
            s.ev = e_.dev_->create_event();
            s.freed = e_.dev_->create_event();
            slots_.push_back(std::move(s));
        }
        if (static_cast<int>(slots_.size()) != e_.cfg_.offload.prefetch_layers + 3)
            SOF_FAIL(Internal, "weight flow: %zu slots planned, %d expected", slots_.size(),
                     e_.cfg_.offload.prefetch_layers + 3);
    }

    const float* acquire(int unit, model::Pass pass) override {
        Slot* s = find(unit);
        if (!s) {
            s = victim(true);
            if (!s)
                SOF_FAIL(Internal, "weight flow: every slot is held when acquiring unit %d", unit);
            load(*s, unit);
        }
        s->ev->synchronize();
        s->held = true;
        s->used = true;
        int w = unit;
        for (int k = 0; k < e_.cfg_.offload.prefetch_layers; k++) {
            w = next_unit(w, pass);
            if (w < 0) break;
            if (find(w)) continue;
            if (e_.unit_pending(w)) break; // its new weights are not written yet: load on demand
            Slot* v = victim(false);
            if (!v) break;
            load(*v, w);
        }
        if (e_.work16_) return reinterpret_cast<const float*>(s->buf16);
        return s->buf;
    }
    void release(int unit, model::Pass) override {
        if (Slot* s = find(unit)) {
            s->held = false;
            e_.dev_->record(*s->freed, *e_.compute_);
        }
    }
    // New weights were written to host memory: forget every cached unit.
    void invalidate() {
        e_.dev_->synchronize(*e_.fetch_);
        for (Slot& s : slots_) {
            s.unit = -1;
            s.held = false;
            s.used = false;
        }
    }

  private:
    struct Seg {
        size_t off = 0; // flat offset
        size_t n = 0;
        int bucket = 0;
    };
    struct Slot {
        float* buf = nullptr;      // (max unit) fp32 weights (the model reads them, or staging)
        uint16_t* buf16 = nullptr; // (max unit) bf16 (bf16 runs; the model reads them: work16_)
        int unit = -1;
        bool held = false; // between acquire and release
        bool used = false; // acquired at least once since loaded (prefetch may reuse it)
        std::unique_ptr<device::Event> ev;    // loaded (fetch stream)
        std::unique_ptr<device::Event> freed; // released (compute stream)
    };

    // The model's acquire order: forward 0, 1, ..., L+1; backward 0, L+1, L, ..., 1.
    int next_unit(int u, model::Pass pass) const {
        int last = e_.layout_.num_units() - 1;
        if (pass == model::Pass::Forward) return u < last ? u + 1 : -1;
        if (u == 0) return last;
        return u > 1 ? u - 1 : -1;
    }
    Slot* find(int unit) {
        for (Slot& s : slots_)
            if (s.unit == unit) return &s;
        return nullptr;
    }
    // A slot to load into: empty or already used first; `steal` also takes unused prefetches.
    Slot* victim(bool steal) {
        for (Slot& s : slots_)
            if (!s.held && (s.unit < 0 || s.used)) return &s;
        if (steal)
            for (Slot& s : slots_)
                if (!s.held) return &s;
        return nullptr;
    }
    void load(Slot& s, int unit) {
        e_.wait_unit(unit);
        size_t o = e_.layout_.unit_begin[static_cast<size_t>(unit)];
        device::Device& dev = *e_.dev_;
        device::Stream& st = *e_.fetch_;
        dev.wait(st, *s.freed); // the model's kernels over the slot's previous unit are done
        for (const Seg& g : segs_[static_cast<size_t>(unit)]) {
            const Bucket& b = e_.buckets_[static_cast<size_t>(g.bucket)];
            size_t x = g.off - o;                               // offset in the slot
            if (b.place == Placement::Device && e_.pes_ == 2) { // the device's bf16 master
                const uint16_t* p16 =
                    static_cast<const uint16_t*>(e_.buf(Buf::DevStateP, b.index)) +
                    (g.off - b.begin);
                dev.copy(s.buf16 + x, p16, g.n * 2, device::CopyKind::DeviceToDevice, st);
                if (!e_.work16_) dev.cast_bf16_to_f32(s.buf16 + x, s.buf + x, g.n, st);
                continue;
            }
            if (b.place == Placement::Device) { // the master is the device's
                const float* p =
                    static_cast<const float*>(e_.buf(Buf::DevStateP, b.index)) + (g.off - b.begin);
                if (e_.bf16_) {
                    dev.cast_f32_to_bf16(p, s.buf16 + x, g.n, st);
                    if (!e_.work16_) dev.cast_bf16_to_f32(s.buf16 + x, s.buf + x, g.n, st);
                } else {
                    dev.copy(s.buf + x, p, g.n * 4, device::CopyKind::DeviceToDevice, st);
                }
                continue;
            }
            const int set = e_.cur_[static_cast<size_t>(b.index)];
            if (e_.pes_ == 2) { // a bf16 master crosses the link as it is: 2 bytes per param
                dev.copy(s.buf16 + x, e_.hp(set, g.off), g.n * 2, device::CopyKind::HostToDevice,
                         st);
                e_.step_bytes_.params_h2d += static_cast<int64_t>(g.n) * 2;
                if (!e_.work16_) dev.cast_bf16_to_f32(s.buf16 + x, s.buf + x, g.n, st);
                continue;
            }
            // fp32 master over the link (the fast H2D direction), bf16 made on the device: a
            // cast on the host would cost CPU time at every fetch (every pass, every micro-batch)
            const float* p = static_cast<const float*>(e_.hp(set, g.off));
            dev.copy(s.buf + x, p, g.n * 4, device::CopyKind::HostToDevice, st);
            e_.step_bytes_.params_h2d += static_cast<int64_t>(g.n) * 4;
            if (e_.bf16_) {
                dev.cast_f32_to_bf16(s.buf + x, s.buf16 + x, g.n, st);
                if (!e_.work16_) dev.cast_bf16_to_f32(s.buf16 + x, s.buf + x, g.n, st);
            }
        }
        dev.record(*s.ev, st);
        s.unit = unit;
        s.held = false;
        s.used = false;
    }

    Engine& e_;
    std::vector<Slot> slots_;
    std::vector<std::vector<Seg>> segs_; // (num_units) where each unit's master lives
};

std::unique_ptr<model::WeightSource> Engine::make_weights() {
    if (flow_) return std::make_unique<FlowWeights>(*this);
    return std::make_unique<StationaryWeights>(*this);
}

void Engine::weights_changed() {
    if (flow_) static_cast<FlowWeights&>(*weights_).invalidate();
}

} // namespace sof::offload
