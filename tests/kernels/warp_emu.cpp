// The block emulator of warp_emu.h: one ucontext fiber per GPU thread, a scheduler that resumes
// the ready fibers and executes a collective once every participant has arrived.
#include "warp_emu.h"

#include <ucontext.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <stdexcept>

#include "core/dtype.h"
#include "ptx_isa.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define SOF_EMU_ASAN 1
#endif

namespace sof::ktest::emu {

namespace {

enum class Wait { Ready, Sync, Warp, Done };
enum class Op { None, ShflXor, ShflUp, Ldsm, LdsmT, Mma };
constexpr size_t kStack = 256 * 1024;

struct Copy {
    unsigned char* dst;
    unsigned char bytes[16];
    int n;
    long group;
};

[[noreturn]] void fail(const std::string& what) {
    throw std::runtime_error("warp emulator: " + what);
}

const char* op_name(Op o) {
    switch (o) {
    case Op::ShflXor:
        return "shfl_xor";
    case Op::ShflUp:
        return "shfl_up";
    case Op::Ldsm:
        return "ldmatrix";
    case Op::LdsmT:
        return "ldmatrix.trans";
    case Op::Mma:
        return "mma";
    default:
        return "none";
    }
}

} // namespace

struct Block::Impl {
    struct Th {
        ucontext_t ctx{};
        std::unique_ptr<char[]> stack;
        Thread t;
        Wait wait = Wait::Ready;
        Op op = Op::None;
        int arg = 0, i = 0, ri = 0;
        float f = 0, rf = 0;
        const unsigned char* addr = nullptr;
        uint32_t a[4] = {}, b[2] = {}, rr[4] = {};
        float c[4] = {};
        std::vector<Copy> pending;
        long group = 0; // the open (uncommitted) cp.async group
        std::exception_ptr error;
    };

    Block* self = nullptr;
    Options opt;
    int n = 0;
    size_t smem_bytes = 0;
    std::unique_ptr<unsigned char[]> smem_store;
    unsigned char* smem = nullptr;
    struct Range {
        uintptr_t lo, hi;
        bool writable;
    };
    std::vector<Range> globals;
    std::vector<Th> th;
    ucontext_t sched{};
    const std::function<void(Thread&)>* body = nullptr;
#if defined(SOF_EMU_ASAN)
    const void* sched_bottom = nullptr;
    size_t sched_size = 0;
#endif

    // fiber -> scheduler
    void yield(Th& t) {
#if defined(SOF_EMU_ASAN)
        void* fake = nullptr;
        __sanitizer_start_switch_fiber(&fake, sched_bottom, sched_size);
#endif
        swapcontext(&t.ctx, &sched);
#if defined(SOF_EMU_ASAN)
        __sanitizer_finish_switch_fiber(fake, &sched_bottom, &sched_size);
#endif
    }
    // scheduler -> fiber
    void resume(Th& t) {
#if defined(SOF_EMU_ASAN)
        void* fake = nullptr;
        __sanitizer_start_switch_fiber(&fake, t.stack.get(), kStack);
#endif
        swapcontext(&sched, &t.ctx);
#if defined(SOF_EMU_ASAN)
        __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
    }
    static void entry(unsigned hi, unsigned lo, int tid) {
        Impl* im = reinterpret_cast<Impl*>((static_cast<uintptr_t>(hi) << 32) | lo);
#if defined(SOF_EMU_ASAN)
        __sanitizer_finish_switch_fiber(nullptr, &im->sched_bottom, &im->sched_size);
#endif
        Th& t = im->th[static_cast<size_t>(tid)];
        try {
            (*im->body)(t.t);
        } catch (...) {
            t.error = std::current_exception();
        }
        t.wait = Wait::Done;
#if defined(SOF_EMU_ASAN)
        __sanitizer_start_switch_fiber(nullptr, im->sched_bottom, im->sched_size);
#endif
        setcontext(&im->sched);
    }

    bool in_smem(const void* p, size_t bytes) const {
        const auto u = reinterpret_cast<uintptr_t>(p), s = reinterpret_cast<uintptr_t>(smem);
        return u >= s && u + bytes <= s + smem_bytes;
    }
    bool in_global(const void* p, size_t bytes, bool write) const {
        const auto u = reinterpret_cast<uintptr_t>(p);
        for (const Range& r : globals)
            if (u >= r.lo && u + bytes <= r.hi && (!write || r.writable)) return true;
        return false;
    }
    void apply(Copy& c) {
        std::memcpy(c.dst, c.bytes, static_cast<size_t>(c.n));
    }

    void warp_collective(int w);
    void run_warp_ldsm(int w, bool trans);
    void run_warp_mma(int w);
};

// ---- the scheduler

Block::Block(int threads, size_t smem_bytes, Options o) : impl_(std::make_unique<Impl>()) {
    Impl& im = *impl_;
    im.self = this;
    im.opt = o;
    im.n = threads;
    im.smem_bytes = smem_bytes;
    im.smem_store = std::make_unique<unsigned char[]>(smem_bytes + 128);
    const auto base = reinterpret_cast<uintptr_t>(im.smem_store.get());
    im.smem = im.smem_store.get() + ((128 - base % 128) % 128);
    im.th.resize(static_cast<size_t>(threads));
    for (int i = 0; i < threads; i++) {
        Impl::Th& t = im.th[static_cast<size_t>(i)];
        t.stack.reset(new char[kStack]); // not zeroed (make_unique would write 32 MiB a block)
        t.t.blk_ = this;
        t.t.tid_ = i;
    }
}

Block::~Block() = default;

void Block::add_global(const void* p, size_t bytes, bool writable) {
    const auto u = reinterpret_cast<uintptr_t>(p);
    impl_->globals.push_back({u, u + bytes, writable});
}

void Block::run(const std::function<void(Thread&)>& body) {
    Impl& im = *impl_;
    im.body = &body;
    std::memset(im.smem, 0xFF, im.smem_bytes);
    const auto self = reinterpret_cast<uintptr_t>(&im);
    for (Impl::Th& t : im.th) {
        t.wait = Wait::Ready;
        t.op = Op::None;
        t.pending.clear();
        t.group = 0;
        t.error = nullptr;
        getcontext(&t.ctx);
        t.ctx.uc_stack.ss_sp = t.stack.get();
        t.ctx.uc_stack.ss_size = kStack;
        t.ctx.uc_link = nullptr;
        makecontext(&t.ctx, reinterpret_cast<void (*)(void)>(reinterpret_cast<void*>(&Impl::entry)),
                    3, static_cast<unsigned>(self >> 32), static_cast<unsigned>(self & 0xffffffffu),
                    t.t.tid_);
    }
    const int n = im.n, warps = (n + 31) / 32;
    auto run_ready = [&](int lo, int hi) { // resume threads lo..hi-1 that are ready
        for (int k = lo; k < hi; k++) {
            Impl::Th& t = im.th[static_cast<size_t>(im.opt.reverse ? hi - 1 - (k - lo) : k)];
            if (t.wait != Wait::Ready) continue;
            im.resume(t);
            if (t.error) std::rethrow_exception(t.error);
        }
    };
    auto all_at_collective = [&](int w) {
        for (int l = 0; l < 32; l++)
            if (im.th[static_cast<size_t>(w * 32 + l)].wait != Wait::Warp) return false;
        return true;
    };
    while (true) {
        if (im.opt.schedule == Options::Schedule::WarpAhead) {
            for (int k = 0; k < warps; k++) { // a warp to its next barrier before the next warp
                const int w = im.opt.reverse ? warps - 1 - k : k;
                while (true) {
                    run_ready(w * 32, std::min(n, w * 32 + 32));
                    if (!all_at_collective(w)) break;
                    im.warp_collective(w);
                }
            }
        } else {
            run_ready(0, n);
        }
        int done = 0, sync = 0;
        for (const Impl::Th& t : im.th) {
            done += t.wait == Wait::Done;
            sync += t.wait == Wait::Sync;
        }
        if (done == n) break;
        bool released = false;
        for (int w = 0; w * 32 < n; w++) {
            int waiting = 0, exited = 0;
            for (int l = 0; l < 32; l++) {
                waiting += im.th[static_cast<size_t>(w * 32 + l)].wait == Wait::Warp;
                exited += im.th[static_cast<size_t>(w * 32 + l)].wait == Wait::Done;
            }
            if (waiting == 32) {
                im.warp_collective(w);
                released = true;
            } else if (waiting > 0 && exited > 0) {
                fail("warp " + std::to_string(w) + ": a warp collective with lanes that exited");
            }
        }
        if (released) continue;
        if (sync > 0 && sync + done == n) {
            if (done > 0) fail("__syncthreads after " + std::to_string(done) + " threads exited");
            for (Impl::Th& t : im.th)
                t.wait = Wait::Ready;
            stats_.syncs++;
            continue;
        }
        fail("deadlock: " + std::to_string(sync) + " threads at a barrier, " +
             std::to_string(done) +
             " exited, the rest in incomplete warp collectives "
             "(divergent code around a barrier or a warp collective)");
    }
    for (Impl::Th& t : im.th) // copies still in flight land after the block (as on a GPU)
        for (Copy& c : t.pending)
            im.apply(c);
}

void Block::Impl::warp_collective(int w) {
    Th* lanes = &th[static_cast<size_t>(w) * 32];
    for (int l = 1; l < 32; l++)
        if (lanes[l].op != lanes[0].op || lanes[l].arg != lanes[0].arg)
            fail("warp " + std::to_string(w) + ": lanes in different collectives (" +
                 op_name(lanes[0].op) + " and " + op_name(lanes[l].op) + ")");
    switch (lanes[0].op) {
    case Op::ShflXor:
        for (int l = 0; l < 32; l++)
            lanes[l].rf = lanes[l ^ lanes[0].arg].f;
        self->stats_.shuffles++;
        break;
    case Op::ShflUp:
        for (int l = 0; l < 32; l++)
            lanes[l].ri = l >= lanes[0].arg ? lanes[l - lanes[0].arg].i : lanes[l].i;
        self->stats_.shuffles++;
        break;
    case Op::Ldsm:
    case Op::LdsmT:
        run_warp_ldsm(w, lanes[0].op == Op::LdsmT);
        break;
    case Op::Mma:
        run_warp_mma(w);
        break;
    default:
        fail("unknown collective");
    }
    for (int l = 0; l < 32; l++)
        lanes[l].wait = Wait::Ready;
}

// ldmatrix .x4 from the ISA's description (ptx_isa.h)
void Block::Impl::run_warp_ldsm(int w, bool trans) {
    Th* lanes = &th[static_cast<size_t>(w) * 32];
    if (opt.defect == Options::Defect::LdsmIgnoresTrans) trans = false;
    for (int l = 0; l < 32; l++) {
        const unsigned char* p = lanes[l].addr;
        if (!in_smem(p, 16) || (reinterpret_cast<uintptr_t>(p) & 15u) != 0)
            fail("ldmatrix: lane " + std::to_string(l) +
                 " gives an address outside shared memory or not 16-byte aligned");
    }
    for (int j = 0; j < 4; j++) {
        int seen = 0;
        bool conflict = false;
        for (int r = 0; r < 8; r++) {
            const auto off = static_cast<size_t>(lanes[isa::ldsm_addr_lane(j, r)].addr - smem);
            const int bank_group = static_cast<int>((off >> 4) & 7);
            conflict |= (seen >> bank_group) & 1;
            seen |= 1 << bank_group;
        }
        self->stats_.ldsm_conflicts += conflict;
    }
    for (int l = 0; l < 32; l++) {
        for (int j = 0; j < 4; j++) {
            uint32_t v = 0;
            for (int h = 0; h < 2; h++) {
                const isa::Elem e = isa::ldsm_frag(l, h, trans);
                const unsigned char* row = lanes[isa::ldsm_addr_lane(j, e.row)].addr;
                uint16_t x;
                std::memcpy(&x, row + 2 * e.col, 2);
                v |= static_cast<uint32_t>(x) << (16 * h);
            }
            lanes[l].rr[j] = v;
        }
    }
    self->stats_.ldsm++;
}

// mma.m16n8k16 bf16 -> f32: D = A B + C with the ISA's fragment layouts; the products and
// their sum in double, rounded once to fp32 (the tensor cores' order and rounding are not
// documented; this is within their fp32-accumulation error)
void Block::Impl::run_warp_mma(int w) {
    Th* lanes = &th[static_cast<size_t>(w) * 32];
    double A[16][16], B[16][8], Cm[16][8];
    for (int l = 0; l < 32; l++) {
        uint32_t a[4] = {lanes[l].a[0], lanes[l].a[1], lanes[l].a[2], lanes[l].a[3]};
        for (int i = 0; i < 8; i++) {
            const isa::Elem e = isa::mma_a(l, i);
            A[e.row][e.col] = core::bf16_to_f32(static_cast<uint16_t>(a[i / 2] >> (16 * (i & 1))));
        }
        for (int i = 0; i < 4; i++) {
            const isa::Elem e = isa::mma_b(l, i);
            B[e.row][e.col] =
                core::bf16_to_f32(static_cast<uint16_t>(lanes[l].b[i / 2] >> (16 * (i & 1))));
        }
        for (int i = 0; i < 4; i++) {
            const isa::Elem e = isa::mma_c(l, i);
            Cm[e.row][e.col] = lanes[l].c[i];
        }
    }
    if (opt.defect == Options::Defect::MmaBTransposed) { // B's two 8x8 halves read as k-major
        double Bt[16][8];
        for (int k = 0; k < 16; k++)
            for (int c = 0; c < 8; c++)
                Bt[k][c] = B[(k / 8) * 8 + c][k % 8];
        std::memcpy(B, Bt, sizeof B);
    }
    for (int l = 0; l < 32; l++) {
        for (int i = 0; i < 4; i++) {
            const isa::Elem e = isa::mma_c(l, i);
            double s = Cm[e.row][e.col];
            for (int k = 0; k < 16; k++)
                s += A[e.row][k] * B[k][e.col];
            lanes[l].c[i] = static_cast<float>(s);
        }
    }
    self->stats_.mma++;
}

// ---- the machine, per thread

unsigned char* Thread::smem() const {
    return blk_->impl_->smem;
}

void Thread::sync() {
    auto& t = blk_->impl_->th[static_cast<size_t>(tid_)];
    t.wait = Wait::Sync;
    blk_->impl_->yield(t);
}

float Thread::shfl_xor(float v, int mask) {
    auto& t = blk_->impl_->th[static_cast<size_t>(tid_)];
    t.op = Op::ShflXor;
    t.arg = mask;
    t.f = v;
    t.wait = Wait::Warp;
    blk_->impl_->yield(t);
    return t.rf;
}

int Thread::shfl_up(int v, int delta) {
    auto& t = blk_->impl_->th[static_cast<size_t>(tid_)];
    t.op = Op::ShflUp;
    t.arg = delta;
    t.i = v;
    t.wait = Wait::Warp;
    blk_->impl_->yield(t);
    return t.ri;
}

void Thread::atomic_max_shared(int* p, int v) {
    if (!blk_->impl_->in_smem(p, sizeof(int))) fail("atomic_max_shared outside shared memory");
    *p = *p > v ? *p : v;
}

void Thread::atomic_min_shared(int* p, int v) {
    if (!blk_->impl_->in_smem(p, sizeof(int))) fail("atomic_min_shared outside shared memory");
    *p = *p < v ? *p : v;
}

float Thread::exp2(float x) const {
    return std::exp2(x);
}
float Thread::log2(float x) const {
    return std::log2(x);
}

uint32_t Thread::pack_bf16(float lo, float hi) const {
    return static_cast<uint32_t>(core::f32_to_bf16(lo)) |
           (static_cast<uint32_t>(core::f32_to_bf16(hi)) << 16);
}

void Thread::ldsm_x4(uint32_t (&r)[4], const unsigned char* p) {
    auto& t = blk_->impl_->th[static_cast<size_t>(tid_)];
    t.op = Op::Ldsm;
    t.arg = 0;
    t.addr = p;
    t.wait = Wait::Warp;
    blk_->impl_->yield(t);
    std::memcpy(r, t.rr, sizeof r);
}

void Thread::ldsm_x4_trans(uint32_t (&r)[4], const unsigned char* p) {
    auto& t = blk_->impl_->th[static_cast<size_t>(tid_)];
    t.op = Op::LdsmT;
    t.arg = 0;
    t.addr = p;
    t.wait = Wait::Warp;
    blk_->impl_->yield(t);
    std::memcpy(r, t.rr, sizeof r);
}

void Thread::mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    auto& t = blk_->impl_->th[static_cast<size_t>(tid_)];
    t.op = Op::Mma;
    t.arg = 0;
    std::memcpy(t.a, a, sizeof t.a);
    t.b[0] = b0;
    t.b[1] = b1;
    std::memcpy(t.c, d, sizeof t.c);
    t.wait = Wait::Warp;
    blk_->impl_->yield(t);
    std::memcpy(d, t.c, sizeof t.c);
}

void Thread::check_global(const void* p, size_t n, bool write) const {
    if (reinterpret_cast<uintptr_t>(p) % n != 0)
        fail("thread " + std::to_string(tid_) + ": misaligned global access");
    if (!blk_->impl_->in_global(p, n, write))
        fail("thread " + std::to_string(tid_) + (write ? ": store" : ": load") +
             " outside the registered global memory");
}

void Thread::copy(unsigned char* dst, const void* src, int n, bool valid) {
    Block::Impl& im = *blk_->impl_;
    if (!im.in_smem(dst, static_cast<size_t>(n)) ||
        reinterpret_cast<uintptr_t>(dst) % static_cast<uintptr_t>(n) != 0)
        fail("cp.async: destination outside shared memory or misaligned");
    Copy c{dst, {}, n, im.th[static_cast<size_t>(tid_)].group};
    if (valid) {
        check_global(src, static_cast<size_t>(n), false);
        std::memcpy(c.bytes, src, static_cast<size_t>(n));
    }
    blk_->stats_.cp_async++;
    if (im.opt.late_copy)
        im.th[static_cast<size_t>(tid_)].pending.push_back(c);
    else
        im.apply(c);
}

void Thread::cp_async16(unsigned char* dst, const void* src, bool valid) {
    copy(dst, src, 16, valid);
}
void Thread::cp_async4(unsigned char* dst, const void* src, bool valid) {
    copy(dst, src, 4, valid);
}
void Thread::cp_commit() {
    blk_->impl_->th[static_cast<size_t>(tid_)].group++;
}
// cp.async.wait_group 0: every committed group has landed (copies not yet committed have not)
void Thread::cp_wait_all() {
    auto& t = blk_->impl_->th[static_cast<size_t>(tid_)];
    std::vector<Copy> keep;
    for (Copy& c : t.pending) {
        if (c.group < t.group)
            blk_->impl_->apply(c);
        else
            keep.push_back(c);
    }
    t.pending.swap(keep);
}

} // namespace sof::ktest::emu
