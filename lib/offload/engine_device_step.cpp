// SuperOffload engine (see engine.h): the step of the GPU-resident tail buckets (GPU-Adam on the
// device's step stream, then the working weights), and the optimizer state slots of a bucket.
#include <vector>

#include "core/strfmt.h"
#include "offload/common.h"
#include "offload/engine.h"

namespace sof::offload {

void Engine::device_step(const Bucket& b, void* p, void* m, void* v, size_t cap, float coef,
                         int64_t step) {
    std::vector<sof_optim_slice> sl;
    std::vector<sof_optim_hparams> hps;
    const size_t first = fmt_.moments == SOF_STATE_Q8 ? blocks_.block_of(b.begin) : 0;
    for (const BucketSlice& s : b.slices) {
        size_t r = s.offset - b.begin;
        sof_optim_slice x =
            optim::make_slice(static_cast<int64_t>(s.n), static_cast<char*>(p) + r * pes_,
                              dgrad(s.offset), SOF_DTYPE_F32, nullptr, nullptr);
        x.param_dtype = fmt_.master;
        x.index0 = static_cast<int64_t>(s.offset);
        set_slots(x, r, s.offset, cap, first, m, v, m, v);
        if (device_lowp()) { // bf16 working weights: straight into them
            x.lowp_out = work16_ ? dwork16_ + b.begin + r : dtail16_ + r;
            x.lowp_dtype = SOF_DTYPE_BF16;
        }
        sl.push_back(x);
        hps.push_back(adam_hparams(cfg_, hp_.lr, step, s.decay, coef));
    }
    dev_->wait(*dstep_, *ev_compute_);
    if (dev_->kind() == device::Kind::Host) {
        optim::Optimizer* opt = dopt_.get();
        dev_->host_task(
            *dstep_,
            [opt, sl = std::move(sl), hps = std::move(hps)] {
                opt->step_multi(sl.data(), hps.data(), static_cast<int>(sl.size()));
            },
            core::strfmt("adam b%d (device)", b.index));
    } else {
        // asynchronous on the stream; no statistics (the engine has them from grad_prep)
        dopt_->step_multi_async(sl.data(), hps.data(), static_cast<int>(sl.size()), nullptr,
                                dstep_->native());
    }
    device_publish(b, p, true);
}

void Engine::device_publish(const Bucket& b, const void* pv, bool have_lowp) {
    if (flow_) return; // weight flow fetches the unit from p itself
    size_t n = b.numel(), o = b.begin;
    const float* p = static_cast<const float*>(pv);
    if (fmt_.master == SOF_DTYPE_BF16 && !have_lowp) { // the bf16 master is the working value
        dev_->copy(work16_ ? dwork16_ + o : dtail16_, pv, n * 2, device::CopyKind::DeviceToDevice,
                   *dstep_);
        if (!work16_) dev_->cast_bf16_to_f32(dtail16_, dwork_ + o, n, *dstep_);
        return;
    }
    if (work16_) { // the bf16 working weights are the step's bf16 copy
        if (!have_lowp) dev_->cast_f32_to_bf16(p, dwork16_ + o, n, *dstep_);
        return;
    }
    if (device_lowp() && !have_lowp) dev_->cast_f32_to_bf16(p, dtail16_, n, *dstep_);
    if (bf16_)
        dev_->cast_bf16_to_f32(dtail16_, dwork_ + o, n, *dstep_);
    else
        dev_->copy(dwork_ + o, p, n * 4, device::CopyKind::DeviceToDevice, *dstep_);
}

float* Engine::scales_at(void* slot, size_t n, size_t off, size_t first) const {
    if (fmt_.moments != SOF_STATE_Q8) return nullptr;
    return reinterpret_cast<float*>(static_cast<char*>(slot) + slot_scale_offset(n)) +
           (blocks_.block_of(off) - first);
}

void Engine::set_slots(sof_optim_slice& x, size_t rel, size_t off, size_t n, size_t first, void* m,
                       void* v, void* mo, void* vo) const {
    void* in[2] = {m, v};
    void* out[2] = {mo, vo};
    for (int k = 0; k < 2; k++) {
        sof_state_slot& q = x.slot[k];
        q.format = fmt_.moments;
        q.block = fmt_.moments == SOF_STATE_Q8 ? fmt_.block : 0;
        q.data = static_cast<char*>(in[k]) + rel * es_;
        q.data_out = static_cast<char*>(out[k]) + rel * es_;
        q.scale = scales_at(in[k], n, off, first);
        q.scale_out = scales_at(out[k], n, off, first);
    }
}

void Engine::copy_bucket_slot(const Bucket& b, void* bucket_buf, size_t cap, void* host,
                              bool to_host, device::Stream& st) {
    const size_t n = b.numel();
    char* h = static_cast<char*>(host) + b.begin * es_;
    char* d = static_cast<char*>(bucket_buf);
    const device::CopyKind k =
        to_host ? device::CopyKind::DeviceToHost : device::CopyKind::HostToDevice;
    dev_->copy(to_host ? static_cast<void*>(h) : d, to_host ? static_cast<void*>(d) : h, n * es_, k,
               st);
    if (fmt_.moments != SOF_STATE_Q8) return;
    float* hs = scales_at(host, num_params(), b.begin, 0);
    float* ds = reinterpret_cast<float*>(d + slot_scale_offset(cap));
    const size_t bytes = 4 * blocks_.count_in(b.begin, b.end);
    dev_->copy(to_host ? static_cast<void*>(hs) : ds, to_host ? static_cast<void*>(ds) : hs, bytes,
               k, st);
}

size_t Engine::bucket_slot_bytes(const Bucket& b) const {
    return slot_bytes(fmt_, b.numel(),
                      fmt_.moments == SOF_STATE_Q8 ? blocks_.count_in(b.begin, b.end) : 0);
}

} // namespace sof::offload
