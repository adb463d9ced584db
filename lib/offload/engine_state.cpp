// SuperOffload engine (see engine.h): the master state in and out (get_state / set_state), for
// checkpoints and resume: host state sets, device-resident buckets, bf16 moments widened exactly.
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

void Engine::get_state(float* params, float* exp_avg, float* exp_avg_sq, int64_t* opt_step) {
    sync_all();
    std::vector<uint16_t> tmp; // bf16 moments of a device bucket
    for (const Bucket& b : buckets_) {
        size_t o = b.begin, n = b.numel();
        if (b.place != Placement::Device) {
            int s = cur_[static_cast<size_t>(b.index)];
            std::memcpy(params + o, hparam_[s] + o, n * 4);
            widen_state(hm(s, o), sd_, n, exp_avg + o);
            widen_state(hv(s, o), sd_, n, exp_avg_sq + o);
            continue;
        }
        dev_->copy(params + o, buf(Buf::DevStateP, b.index), n * 4, device::CopyKind::DeviceToHost,
                   *dstep_);
        void* md = buf(Buf::DevStateM, b.index);
        void* vd = buf(Buf::DevStateV, b.index);
        if (sd_ == SOF_DTYPE_F32) {
            dev_->copy(exp_avg + o, md, n * 4, device::CopyKind::DeviceToHost, *dstep_);
            dev_->copy(exp_avg_sq + o, vd, n * 4, device::CopyKind::DeviceToHost, *dstep_);
            continue;
        }
        tmp.resize(2 * n);
        dev_->copy(tmp.data(), md, n * 2, device::CopyKind::DeviceToHost, *dstep_);
        dev_->copy(tmp.data() + n, vd, n * 2, device::CopyKind::DeviceToHost, *dstep_);
        dev_->synchronize(*dstep_);
        widen_state(tmp.data(), sd_, n, exp_avg + o);
        widen_state(tmp.data() + n, sd_, n, exp_avg_sq + o);
    }
    dev_->synchronize(*dstep_);
    *opt_step = opt_step_;
}

void Engine::set_state(const float* params, const float* exp_avg, const float* exp_avg_sq,
                       int64_t opt_step) {
    sync_all();
    std::vector<std::vector<uint16_t>> keep; // bf16 moments of device buckets until the copies
    for (const Bucket& b : buckets_) {
        size_t o = b.begin, n = b.numel();
        if (b.place != Placement::Device) {
            int s = cur_[static_cast<size_t>(b.index)];
            std::memcpy(hparam_[s] + o, params + o, n * 4);
            narrow_state(exp_avg + o, n, sd_, hm(s, o));
            narrow_state(exp_avg_sq + o, n, sd_, hv(s, o));
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
            if (sd_ != SOF_DTYPE_F32) {
                keep.emplace_back(2 * n);
                narrow_state(exp_avg + o, n, sd_, keep.back().data());
                narrow_state(exp_avg_sq + o, n, sd_, keep.back().data() + n);
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
