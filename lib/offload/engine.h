// The SuperOffload engine (offload.enabled: true) over the device interface: bucketed grad offload
// in backward order, speculative CPU AdamW with exact validation (STV), device-resident tail /
// streamed buckets (Deep Optimizer States), casting on host or device, stationary or flow weights.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "config/config.h"
#include "core/log.h"
#include "core/trace.h"
#include "device/device.h"
#include "model/model.h"
#include "offload/buckets.h"
#include "offload/memory_plan.h"
#include "offload/state_layout.h"
#include "offload/updater.h"
#include "offload/worker.h"
#include "optim/optimizer.h"
#include "rank/device_set.h"

namespace sof::offload {

class Engine : public Updater {
  public:
    // Runs on the rank's device and streams (devs outlives the engine). layout is what this rank
    // updates: the whole model, or its ZeRO-3 shard (zero/shard.h). Throws core::Error (Config)
    // naming the deck key for combinations it cannot run. The model reads the working weights and
    // adds its grads in the device's memory (device pointers on CUDA: the model runs there).
    // bf16_weights (train.dtype bf16 only): the model reads bf16 weights (the CUDA driver's bf16
    // activations), so the working weights and weight-flow slots are stored as bf16; otherwise
    // fp32 (bf16 runs: bf16 values held in fp32, what the CPU twins read).
    Engine(const config::Config& cfg, const model::ParamLayout& layout, const core::Log& log,
           core::Trace* trace, rank::DeviceSet& devs, bool bf16_weights = false);
    // Single-process convenience (tests, tools): builds a DeviceSet of its own from cfg.device.
    Engine(const config::Config& cfg, const model::ParamLayout& layout, const core::Log& log,
           core::Trace* trace, bool bf16_weights = false);
    ~Engine() override;
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    model::WeightSource& weights() override;
    model::GradSink& grads() override;
    void begin_step(const StepHparams& hp) override;
    void begin_micro(int micro, bool last) override;
    StepReport finish_step() override;
    const UpdaterStats& stats() const override { return stats_; }
    bool bf16_weights() const override { return work16_; }
    void get_state(float* params, float* exp_avg, float* exp_avg_sq, int64_t* opt_step) override;
    void set_state(const float* params, const float* exp_avg, const float* exp_avg_sq,
                   int64_t opt_step) override;
    StateFormat state_format() const override { return fmt_; }
    void get_native(NativeState* ns) override;
    void set_native(const NativeState& ns) override;

    const std::vector<Bucket>& buckets() const { return buckets_; }
    // The buffers this engine allocated (make_memory_plan); `superoffload plan` sums the same list.
    const MemoryPlan& memory_plan() const { return plan_; }
    // The CPU optimizer lane (tests delay it to check that deferred commits are waited for).
    Worker& worker() { return *worker_; }
    device::Device& device() { return *dev_; }
    // The stream the model's kernels run on (tests drive a fake model on it).
    device::Stream& compute_stream() { return *compute_; }

  private:
    Engine(const config::Config& cfg, const model::ParamLayout& layout, const core::Log& log,
           core::Trace* trace, rank::DeviceSet* devs, std::unique_ptr<rank::DeviceSet> owned,
           bool bf16_weights);
    class Sink;
    class StationaryWeights;
    class FlowWeights;
    // Device buffers of one streamed bucket in flight (DOS p_tmp, m_tmp, v_tmp), reused
    // round-robin: a prefetch into the slot waits for the flush of the bucket it held before.
    struct StreamSlot {
        void* p = nullptr;                      // (max streamed bucket) master params
        void* m = nullptr;                      // (max streamed bucket) exp_avg slot buffer
        void* v = nullptr;                      // (max streamed bucket) exp_avg_sq slot buffer
        size_t cap = 0;                         // elements (max streamed bucket)
        std::unique_ptr<device::Event> in;      // prefetch done (sin_)
        std::unique_ptr<device::Event> stepped; // device step and working weights done (dstep_)
        std::unique_ptr<device::Event> out;     // flush done: the slot is free (sout_)
    };

    void launch_bucket(Bucket& b); // grad stats + D2H (+ speculative step) of b
    // Worker-thread steps of host bucket b (lr passed by value: hp_ belongs to the caller).
    void host_step(const Bucket& b, int src, int dst, float coef, int64_t step, float lr,
                   bool publish);
    // Inverse rollback of b's in-place speculative step; publish: new working weights after it.
    void host_rollback(const Bucket& b, int64_t step, float lr, bool publish);
    void refresh_working(const Bucket& b); // working weights of b from its master params
    // New working weights of b (after a host step) from state set `set`; stationary with the
    // cast on the host: from H2D ring slot `ring` (written by the step or refresh_working).
    void publish(const Bucket& b, int set, int ring);
    // Worker thread, stationary with the cast on the host: the next H2D ring slot, once the copy
    // out of it two publishes ago is done (-1 when there is no ring).
    int take_pub_ring();
    // Device step of bucket b on dstep_ over master p, moment slot buffers m, v (device buffers
    // of the bucket's size, its formats), then its working weights from p (device_publish).
    // cap: elements of the slot buffers m, v (the bucket's, or a streaming slot's capacity).
    void device_step(const Bucket& b, void* p, void* m, void* v, size_t cap, float coef,
                     int64_t step);
    // Copies bucket b's moment slot (values or codes, and its q8 scales) between the host slot
    // buffer `host` (whole layout) and a bucket-sized buffer `buf` of cap elements.
    void copy_bucket_slot(const Bucket& b, void* buf, size_t cap, void* host, bool to_host,
                          device::Stream& st);
    // Working weights of device bucket b from its device master p (have_lowp: the step already
    // wrote the bf16 copy into dtail16_). Nothing to do in weight flow (fetches read p).
    void device_publish(const Bucket& b, const void* p, bool have_lowp);
    // Bytes of bucket b's master params / one of its moment slot buffers (memory_plan.h).
    size_t bucket_param_bytes(const Bucket& b) const { return b.numel() * pes_; }
    size_t bucket_slot_bytes(const Bucket& b) const;
    // Interleaved schedule (engine_interleaved.cpp): streams b's fp32 params and moments from host
    // state set cur_[b] into a device slot, steps them there and streams them back (DOS Alg. 1).
    void stream_step(const Bucket& b, float coef, int64_t step);
    // Working weights of streamed bucket b from its host master (set_state): through a slot.
    void stream_publish(const Bucket& b);
    void make_stream_slots(); // slots and streams from the plan (constructor)
    // Bytes of one bucket's grads D2H / working weights H2D (for the transfer counters).
    int64_t grad_bytes(const Bucket& b) const;
    int64_t param_bytes(const Bucket& b) const;
    // Host grads of flat offset `off` and their dtype (bf16 when cast on the host in bf16;
    // weight flow: the model's pinned fp32 grads, rounded to bf16 values in place then).
    const void* host_grad(size_t off) const;
    sof_dtype host_grad_dtype() const;
    // Master params and moments of host state set `set` at flat offset `off` (their formats),
    // and (q8) the scale of the block holding `off`.
    void* hp(int set, size_t off) const { return static_cast<char*>(hparam_[set]) + off * pes_; }
    void* hm(int set, size_t off) const { return static_cast<char*>(hm_[set]) + off * es_; }
    void* hv(int set, size_t off) const { return static_cast<char*>(hv_[set]) + off * es_; }
    float* hms(int set, size_t off) const { return scales_at(hm_[set], num_params(), off, 0); }
    float* hvs(int set, size_t off) const { return scales_at(hv_[set], num_params(), off, 0); }
    // The scale of the block holding flat offset off in a slot buffer of n elements whose first
    // block is `first` (whole layout: 0; a bucket: its first block); null without q8.
    float* scales_at(void* slot, size_t n, size_t off, size_t first) const;
    size_t num_params() const { return layout_.num_params; }
    // Slots 0, 1 of x from slot buffers m, v (inputs) and mo, vo (outputs) of n elements whose
    // first block is `first`, at flat offset off relative to the buffers' element 0 (`rel`).
    void set_slots(sof_optim_slice& x, size_t rel, size_t off, size_t n, size_t first, void* m,
                   void* v, void* mo, void* vo) const;
    // Weight flow: unit u's model grads are zeroed on first use in a step (not in begin_step:
    // the previous step's deferred host steps may still read other units' grads).
    void zero_unit_grads(int unit);
    // The model's fp32 grads (device side) at flat offset off: dgrads_ + off, or in a grad ring
    // slot (weight flow without accumulation: the unit must hold a slot, see ring_slot).
    float* dgrad(size_t off) const;
    // Grad ring: the slot of `unit` in this backward, taken on first use: a slot whose unit every
    // bucket is launched from (its D2H waited for), zeroed. Returns the slot index.
    int ring_slot(int unit);
    // Pieces of bucket b that lie in one unit each: flat [lo, hi) (the whole bucket without a
    // ring: its grads are contiguous then).
    struct Frag {
        size_t lo, hi;
    };
    std::vector<Frag> fragments(const Bucket& b) const;
    void* buf(Buf id, int index = 0) const; // the plan's buffer (null when the plan has none)
    void sync_all();                        // worker drained, every stream synchronized
    // Deferred commit: blocks until every host bucket overlapping `unit` has published its new
    // working weights (no-op unless the last finish_step deferred); unit_pending does not block.
    void wait_unit(int unit);
    bool wait_bucket(int b); // true when it had to wait
    bool unit_pending(int unit);
    bool device_lowp() const; // the device step writes a bf16 copy (dtail16_ or dwork16_)
    std::unique_ptr<model::WeightSource> make_weights(); // engine_weights.cpp
    void weights_changed(); // flow: drop cached units (engine_weights.cpp)

    config::Config cfg_;
    const model::ParamLayout& layout_;
    core::Log log_;
    core::Trace* trace_;
    int lane_main_ = 0, lane_cpu_ = 0;

    // Modes resolved from the deck.
    bool work16_ = false;       // the model reads bf16 working weights (dwork16_, flow slots)
    bool grads_pinned_ = false; // weight flow: dgrads_ is pinned host memory (no grad mirror)
    bool ring_ = false;         // weight flow, grad_accum 1: the model's grads in a device ring
    bool bf16_ = false;         // working precision bf16
    bool bf16_grads_ = false;   // bf16 with cast on the host: grads cross the link as bf16
    bool flow_ = false;         // weight flow (else stationary)
    bool cast_host_ = false;    // bf16 cast on the host (fused into the optimizer), else on device
    bool speculate_ = false;    // STV: host buckets stepped during backward (may happen at all)
    bool spec_step_ = false;    // this step speculates (stv auto: not while rollbacks are frequent)
    bool stv_auto_ = false;     // offload.stv: auto
    // stv auto: of the last kStvWindow steps, which were clipped or skipped (a rollback under
    // speculation); speculation pauses while kStvPause or more of them were
    static constexpr int kStvWindow = 8, kStvPause = 4;
    std::vector<char> stv_hist_; // ring of the last kStvWindow steps
    int64_t stv_steps_ = 0;      // steps recorded
    bool exact_ = true;          // exact rollback (two state sets) vs arithmetic inverse
    int nsets_ = 2;              // host state sets (2: exact rollback of speculative steps)
    StateFormat fmt_;            // optimizer.master_dtype, state_dtype, state_block
    StateBlocks blocks_;         // q8: the blocks of layout_
    size_t pes_ = 4;             // bytes per master param
    size_t es_ = 4;              // bytes per moment (q8: per code)

    std::unique_ptr<rank::DeviceSet> owned_; // the standalone constructor's: destroyed last
    device::Device* dev_ = nullptr;          // the rank's device
    device::Stream *compute_ = nullptr, *d2h_ = nullptr, *h2d_ = nullptr, *dstep_ = nullptr,
                   *fetch_ = nullptr; // the rank's named streams
    std::unique_ptr<device::Event> ev_compute_;
    std::vector<std::unique_ptr<device::Event>> ev_d2h_; // (nbuckets)
    std::vector<std::unique_ptr<device::Event>> ev_pub_; // (nbuckets) speculative H2D done
    std::unique_ptr<optim::Optimizer> hopt_, dopt_;      // host plugin; device-side plugin
    std::unique_ptr<device::Stream> sin_, sout_; // interleaved: state prefetch H2D, flush D2H
    std::vector<std::unique_ptr<StreamSlot>> sslots_;
    size_t next_slot_ = 0;
    std::unique_ptr<Worker> worker_;

    std::vector<int64_t> pieces_; // stat piece bounds (npieces+1)
    std::vector<Bucket> buckets_; // backward order
    std::vector<int> cur_;        // (nbuckets) host state set holding the committed state
    std::vector<char> spec_done_; // (nbuckets) inverse mode: speculative step taken (worker)
    size_t max_dev_bucket_ = 0;   // largest bucket stepped on the device (resident or streamed)
    MemoryPlan plan_;             // what this engine allocates
    std::vector<void*> ptrs_;     // (plan_.buffers) the allocations

    // Device memory (every pointer below is one of the plan's buffers, see memory_plan.h).
    float* dgrads_ = nullptr;             // (num_params) fp32 grads, the model adds into them;
                                          // pinned host memory in weight flow
    float* dwork_ = nullptr;              // (num_params) fp32 working weights (stationary only)
    uint16_t* dwork16_ = nullptr;         // (num_params) bf16 working weights (instead, work16_)
    device::GradStats* dstats_ = nullptr; // (npieces)
    int64_t* dbounds_ = nullptr;          // (npieces+1) pieces_ on the device (uploaded once)
    float* dstage32_ = nullptr;           // (max host bucket) H2D staging fp32 (device cast)
    uint16_t* dstage16_ = nullptr;        // (max host bucket) H2D staging bf16
    uint16_t* dtail16_ = nullptr;   // (max device/streamed bucket) bf16 copy from the device step
    uint16_t* dgstage16_ = nullptr; // (max bucket) bf16 grads from grad_prep (cast host)
    // Pinned host memory.
    void* hparam_[2] = {nullptr, nullptr}; // (num_params) master params (fp32 or bf16), set 0/1
    void* hm_[2] = {nullptr, nullptr};     // (num_params) exp_avg slot buffer (values or codes +
                                           // scales, state_layout.h)
    void* hv_[2] = {nullptr, nullptr};     // (num_params) exp_avg_sq slot buffer
    float* hgrads_ = nullptr;              // (num_params) grads offloaded D2H (stationary)
    uint16_t* hgrads16_ = nullptr;         // (num_params) bf16 grads offloaded D2H (cast host)
    device::GradStats* hstats_ = nullptr;  // (npieces)
    // stationary, cast host: ring of 2 (max host bucket) bf16 buffers the host step writes its
    // bf16 params into on their way H2D (worker thread only); pub_ev_[r]: the copy out is done
    uint16_t* hpub16_[2] = {nullptr, nullptr};
    std::unique_ptr<device::Event> pub_ev_[2];
    int pub_next_ = 0;
    std::vector<char> gzeroed_; // (num_units) flow: unit grads zeroed this step
    // grad ring (memory_plan.h grad_ring_slots): slot buffers, their units, per unit its slot
    // this backward, the lowest ready unit of a bucket over it, whether a device bucket is over it
    std::vector<float*> ring_dev_;                   // (slots) device, (max unit) fp32 each
    std::vector<int> ring_unit_;                     // (slots) unit held, -1 free
    std::vector<int> unit_ring_;                     // (num_units) slot, -1 none
    std::vector<int> unit_min_ready_;                // (num_units)
    std::vector<char> unit_dev_;                     // (num_units)
    std::vector<std::vector<int>> unit_all_buckets_; // (num_units) every bucket over the unit
    int done_lo_ = 0;       // lowest unit whose unit_done came in this backward (num_units: none)
    float* hnan_ = nullptr; // (1) NaN for the debug injection

    std::unique_ptr<model::WeightSource> weights_;
    std::unique_ptr<Sink> sink_;
    StepHparams hp_;
    bool last_micro_ = true;
    size_t next_bucket_ = 0;    // buckets launched this step
    bool spec_running_ = false; // speculative host steps were issued this step
    int64_t opt_step_ = 0;
    // Deferred commit (see wait_unit): pending_[b] is set by the caller when b's speculative step
    // is queued and cleared by the worker when its working weights are published.
    bool deferred_ = false;
    std::mutex pub_mu_;
    std::condition_variable pub_cv_;
    std::vector<char> pending_; // (nbuckets) guarded by pub_mu_
    bool pub_failed_ = false;   // a deferred step threw (guarded by pub_mu_; wait_bucket drains)
    std::vector<std::vector<int>> unit_buckets_; // (num_units) host buckets overlapping the unit
    double carry_ms_ = 0.0; // time waited for deferred work, reported by the next finish_step
    UpdaterStats stats_;
    TransferBytes step_bytes_; // this step's link traffic (enqueued so far)
    double t_mark_ = 0.0;      // trace: start of the current forward/backward span (us)
};

} // namespace sof::offload
