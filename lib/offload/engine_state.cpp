// SuperOffload engine (see engine.h): the master state in and out (get_state / set_state as fp32,
// get_native / set_native as kept), for checkpoints and resume: host state sets, device-resident
// buckets; bf16 moments widen exactly, native formats convert through state_layout.h.
#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "offload/engine.h"

namespace sof::offload {

namespace {

// n moments of dtype sd at src as fp32 (bf16 widened exactly), and back (bf16: nearest even).
void widen_state(const void* src, sof_dtype sd, size_t n, float* dst) {
    if (sd == SOF_DTYPE_F32) {
        std::memcpy(dst, src, n * 4);
        return;
    }
    const uint16_t* h = static_cast<const uint16_t*>(src);
    for (size_t i = 0; i < n; i++)
        dst[i] = core::bf16_to_f32(h[i]);
}

void narrow_state(const float* src, size_t n, sof_dtype sd, void* dst) {
    if (sd == SOF_DTYPE_F32) {
        std::memcpy(dst, src, n * 4);
        return;
    }
    uint16_t* h = static_cast<uint16_t*>(dst);
    for (size_t i = 0; i < n; i++)
        h[i] = core::f32_to_bf16(src[i]);
}

} // namespace

namespace {

// Copies elements [o, o + n) of a whole-layout slot buffer (values or codes, and the q8 scales of
// their blocks) from src to dst (both host memory, num_params elements each).
void copy_slot_range(const StateFormat& f, const StateBlocks& blocks, size_t num, size_t o,
                     size_t n, const void* src, void* dst) {
    const size_t es = moment_elem_bytes(f);
    std::memcpy(static_cast<char*>(dst) + o * es, static_cast<const char*>(src) + o * es, n * es);
    if (f.moments != SOF_STATE_Q8) return;
    const size_t so = slot_scale_offset(num) + 4 * blocks.block_of(o);
    std::memcpy(static_cast<char*>(dst) + so, static_cast<const char*>(src) + so,
                4 * blocks.count_in(o, o + n));
}

} // namespace

void Engine::get_native(NativeState* ns) {
    sync_all();
    ns->format = fmt_;
    resize_native(ns, blocks_, num_params());
    for (const Bucket& b : buckets_) {
        size_t o = b.begin, n = b.numel();
        char* p = reinterpret_cast<char*>(ns->params.data()) + o * pes_;
        if (b.place != Placement::Device) {
            int s = cur_[static_cast<size_t>(b.index)];
            std::memcpy(p, hp(s, o), n * pes_);
            copy_slot_range(fmt_, blocks_, num_params(), o, n, hm_[s], ns->slot[0].data());
            copy_slot_range(fmt_, blocks_, num_params(), o, n, hv_[s], ns->slot[1].data());
            continue;
        }
        dev_->copy(p, buf(Buf::DevStateP, b.index), n * pes_, device::CopyKind::DeviceToHost,
                   *dstep_);
        copy_bucket_slot(b, buf(Buf::DevStateM, b.index), n, ns->slot[0].data(), true, *dstep_);
        copy_bucket_slot(b, buf(Buf::DevStateV, b.index), n, ns->slot[1].data(), true, *dstep_);
    }
    dev_->synchronize(*dstep_);
    ns->opt_step = opt_step_;
}

void Engine::set_native(const NativeState& ns) {
    if (ns.format != fmt_)
        SOF_FAIL(Internal, "engine set_native: state of %s, the engine keeps %s",
                 ns.format.name().c_str(), fmt_.name().c_str());
    check_native_sizes(ns, blocks_, num_params());
    sync_all();
    // the host state the device buckets copy from stays alive until the copies are done
    for (const Bucket& b : buckets_) {
        size_t o = b.begin, n = b.numel();
        const char* p = reinterpret_cast<const char*>(ns.params.data()) + o * pes_;
        if (b.place != Placement::Device) {
            int s = cur_[static_cast<size_t>(b.index)];
            std::memcpy(hp(s, o), p, n * pes_);
            copy_slot_range(fmt_, blocks_, num_params(), o, n, ns.slot[0].data(), hm_[s]);
            copy_slot_range(fmt_, blocks_, num_params(), o, n, ns.slot[1].data(), hv_[s]);
            const Bucket* bp = &b;
            if (b.place == Placement::Host)
                worker_->push([this, bp] { refresh_working(*bp); });
            else
                stream_publish(b);
            continue;
        }
        void* pd = buf(Buf::DevStateP, b.index);
        dev_->copy(pd, p, n * pes_, device::CopyKind::HostToDevice, *dstep_);
        copy_bucket_slot(b, buf(Buf::DevStateM, b.index), n,
                         const_cast<uint8_t*>(ns.slot[0].data()), false, *dstep_);
        copy_bucket_slot(b, buf(Buf::DevStateV, b.index), n,
                         const_cast<uint8_t*>(ns.slot[1].data()), false, *dstep_);
        device_publish(b, pd, false);
    }
    opt_step_ = ns.opt_step;
    sync_all();
    weights_changed();
    step_bytes_ = TransferBytes{}; // state import is not a step's traffic
}

void Engine::get_state(float* params, float* exp_avg, float* exp_avg_sq, int64_t* opt_step) {
    if (fmt_.native()) { // bf16 master or q8 moments: converted from the state as kept
        NativeState ns;
        get_native(&ns);
        native_to_f32(ns, blocks_, num_params(), params, exp_avg, exp_avg_sq);
        *opt_step = ns.opt_step;
        return;
    }
    const sof_dtype sd = fmt_.moments == SOF_STATE_BF16 ? SOF_DTYPE_BF16 : SOF_DTYPE_F32;
    sync_all();
    std::vector<uint16_t> tmp; // bf16 moments of a device bucket
    for (const Bucket& b : buckets_) {
        size_t o = b.begin, n = b.numel();
        if (b.place != Placement::Device) {
            int s = cur_[static_cast<size_t>(b.index)];
            std::memcpy(params + o, hp(s, o), n * 4);
            widen_state(hm(s, o), sd, n, exp_avg + o);
            widen_state(hv(s, o), sd, n, exp_avg_sq + o);
            continue;
        }
        dev_->copy(params + o, buf(Buf::DevStateP, b.index), n * 4, device::CopyKind::DeviceToHost,
                   *dstep_);
        void* md = buf(Buf::DevStateM, b.index);
        void* vd = buf(Buf::DevStateV, b.index);
        if (sd == SOF_DTYPE_F32) {
            dev_->copy(exp_avg + o, md, n * 4, device::CopyKind::DeviceToHost, *dstep_);
            dev_->copy(exp_avg_sq + o, vd, n * 4, device::CopyKind::DeviceToHost, *dstep_);
            continue;
        }
        tmp.resize(2 * n);
        dev_->copy(tmp.data(), md, n * 2, device::CopyKind::DeviceToHost, *dstep_);
        dev_->copy(tmp.data() + n, vd, n * 2, device::CopyKind::DeviceToHost, *dstep_);
        dev_->synchronize(*dstep_);
        widen_state(tmp.data(), sd, n, exp_avg + o);
        widen_state(tmp.data() + n, sd, n, exp_avg_sq + o);
    }
    dev_->synchronize(*dstep_);
    *opt_step = opt_step_;
}

void Engine::set_state(const float* params, const float* exp_avg, const float* exp_avg_sq,
                       int64_t opt_step) {
    if (fmt_.native()) {
        NativeState ns;
        ns.format = fmt_;
        resize_native(&ns, blocks_, num_params());
        f32_to_native(params, exp_avg, exp_avg_sq, blocks_, num_params(), &ns);
        ns.opt_step = opt_step;
        set_native(ns);
        return;
    }
    const sof_dtype sd = fmt_.moments == SOF_STATE_BF16 ? SOF_DTYPE_BF16 : SOF_DTYPE_F32;
    sync_all();
    std::vector<std::vector<uint16_t>> keep; // bf16 moments of device buckets until the copies
    for (const Bucket& b : buckets_) {
        size_t o = b.begin, n = b.numel();
        if (b.place != Placement::Device) {
            int s = cur_[static_cast<size_t>(b.index)];
            std::memcpy(hp(s, o), params + o, n * 4);
            narrow_state(exp_avg + o, n, sd, hm(s, o));
            narrow_state(exp_avg_sq + o, n, sd, hv(s, o));
            const Bucket* bp = &b;
            if (b.place == Placement::Host)
                worker_->push([this, bp] { refresh_working(*bp); });
            else
                stream_publish(b);
        } else {
            float* p = static_cast<float*>(buf(Buf::DevStateP, b.index));
            dev_->copy(p, params + o, n * 4, device::CopyKind::HostToDevice, *dstep_);
            const void* ms = exp_avg + o;
            const void* vs = exp_avg_sq + o;
            if (sd != SOF_DTYPE_F32) {
                keep.emplace_back(2 * n);
                narrow_state(exp_avg + o, n, sd, keep.back().data());
                narrow_state(exp_avg_sq + o, n, sd, keep.back().data() + n);
                ms = keep.back().data();
                vs = keep.back().data() + n;
            }
            dev_->copy(buf(Buf::DevStateM, b.index), ms, n * es_, device::CopyKind::HostToDevice,
                       *dstep_);
            dev_->copy(buf(Buf::DevStateV, b.index), vs, n * es_, device::CopyKind::HostToDevice,
                       *dstep_);
            device_publish(b, p, false);
        }
    }
    opt_step_ = opt_step;
    sync_all();
    weights_changed();
    step_bytes_ = TransferBytes{}; // state import is not a step's traffic
}

} // namespace sof::offload
