// The interleaved schedule's streaming (Deep Optimizer States Algorithm 1): a streamed bucket's
// fp32 params and moments are prefetched into a device slot, stepped there, and flushed back.
#include <algorithm>

#include "core/error.h"
#include "core/strfmt.h"
#include "offload/engine.h"

namespace sof::offload {

void Engine::make_stream_slots() {
    for (int s = 0;; s++) {
        void* p = buf(Buf::SlotP, s);
        if (!p) break;
        auto slot = std::make_unique<StreamSlot>();
        slot->p = p;
        for (const Bucket& b : buckets_)
            if (b.place == Placement::Stream) slot->cap = std::max(slot->cap, b.numel());
        slot->m = buf(Buf::SlotM, s);
        slot->v = buf(Buf::SlotV, s);
        slot->in = dev_->create_event();
        slot->stepped = dev_->create_event();
        slot->out = dev_->create_event();
        sslots_.push_back(std::move(slot));
    }
    bool any = std::any_of(buckets_.begin(), buckets_.end(),
                           [](const Bucket& b) { return b.place == Placement::Stream; });
    if (any && sslots_.empty())
        SOF_FAIL(Internal, "interleaved schedule: streamed buckets but no streaming slot planned");
    if (!sslots_.empty()) {
        // dedicated streams for the two directions (DOS: full-duplex prefetch and flush)
        sin_ = dev_->create_stream("state prefetch");
        sout_ = dev_->create_stream("state flush");
    }
}

void Engine::stream_step(const Bucket& b, float coef, int64_t step) {
    StreamSlot& s = *sslots_[next_slot_++ % sslots_.size()];
    int set = cur_[static_cast<size_t>(b.index)];
    size_t o = b.begin, n = b.numel();
    // async_prefetch_in (Alg. 1 lines 19-22): once the slot's previous bucket is flushed out
    dev_->wait(*sin_, *s.out);
    if (trace_)
        dev_->host_task(
            *sin_, [] {}, core::strfmt("bucket %d", b.index));
    copy_bucket_slot(b, s.m, s.cap, hm_[set], false, *sin_);
    copy_bucket_slot(b, s.v, s.cap, hv_[set], false, *sin_);
    dev_->copy(s.p, hp(set, o), n * pes_, device::CopyKind::HostToDevice, *sin_);
    dev_->record(*s.in, *sin_);
    // gpu_update (line 5) on the device-step stream, with the new working weights
    dev_->wait(*dstep_, *s.in);
    device_step(b, s.p, s.m, s.v, s.cap, coef, step);
    dev_->record(*s.stepped, *dstep_);
    // async_flush_out (lines 14-18) into the same host state set (streamed buckets are never
    // speculated: one committed state, updated in place)
    dev_->wait(*sout_, *s.stepped);
    if (trace_)
        dev_->host_task(
            *sout_, [] {}, core::strfmt("bucket %d", b.index));
    copy_bucket_slot(b, s.m, s.cap, hm_[set], true, *sout_);
    copy_bucket_slot(b, s.v, s.cap, hv_[set], true, *sout_);
    dev_->copy(hp(set, o), s.p, n * pes_, device::CopyKind::DeviceToHost, *sout_);
    dev_->record(*s.out, *sout_);
    const size_t scales = fmt_.moments == SOF_STATE_Q8 ? 4 * blocks_.count_in(o, o + n) : 0;
    step_bytes_.state_h2d += static_cast<int64_t>(n * (pes_ + 2 * es_) + 2 * scales);
    step_bytes_.state_d2h += static_cast<int64_t>(n * (pes_ + 2 * es_) + 2 * scales);
}

void Engine::stream_publish(const Bucket& b) {
    StreamSlot& s = *sslots_[next_slot_++ % sslots_.size()];
    int set = cur_[static_cast<size_t>(b.index)];
    dev_->wait(*sin_, *s.out);
    dev_->copy(s.p, hp(set, b.begin), b.numel() * pes_, device::CopyKind::HostToDevice, *sin_);
    dev_->record(*s.in, *sin_);
    dev_->wait(*dstep_, *s.in);
    device_publish(b, s.p, false);
    dev_->record(*s.stepped, *dstep_);
    dev_->wait(*sout_, *s.stepped);
    dev_->record(*s.out, *sout_);
}

} // namespace sof::offload
