// Multi-rank training against the 1-rank run of the same global batch (ZeRO-3 at any rank count,
// ZeRO-0, Ulysses SP, DP x SP), with STV, clipping, a NaN on one rank, weight flow, tail buckets;
// bitwise repeatability, bitwise resume, and resharding a checkpoint to another rank count.
#include "train/mpi_main.h"

#include <csignal>
#include <filesystem>

#include "mpi/parallel_util.h"
#include "ckpt/checkpoint.h"
#include "ckpt/llmc.h"
#include "plan/comm_model.h"
#include "model/model_config.h"
#include "plan/planner.h"
#include "offload/memory_plan.h"
#include "zero/memory.h"
#include "model/layout.h"
#include "core/dtype.h"
#include "offload/engine.h"
#include "rank/context.h"
#include "zero/sharded.h"

namespace fs = std::filesystem;
using namespace sof;
using namespace sof::test;

namespace {

const int kB = 2; // sequences per data-parallel rank

// Why not bitwise against 1 rank: the 1-rank run adds every sequence's grad contributions inside
// the matmul kernels in one order; W ranks each sum their own sequences and the per-rank sums are
// added in rank order; the grad norm is a sum of per-rank partial sums. fp32 rounding of these
// orders differs at ~1e-7 relative and Adam carries it forward. Measured over these 6 steps
// (lr 3e-3) at 2, 3 and 4 ranks: losses within 1.2e-7 relative, grad norms within 7.1e-6
// relative, params within 5.3e-6 absolute; the limits leave 4x to 50x headroom and still fail on
// any real error (a missed shard, a wrong scale or a lost step moves params by ~lr = 3e-3 and
// losses by > 1e-3).
const double kLossRel = 3e-5;
const double kParamAbs = 3e-4;

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

// Runs `opts` on every rank with sp and the matching 1-rank reference on rank 0 (global batch
// kB * dp sequences), and compares them on rank 0.
void check_against_one_rank(const std::string& what, const std::vector<std::string>& opts,
                            int sp = 1, int expect_skips = 0, double norm_rel = kLossRel) {
    const int W = world_size(), dp = W / sp;
    std::vector<std::string> par =
        with(opts, {"train.batch_size=" + std::to_string(kB), "parallel.sp=" + std::to_string(sp)});
    RunOut multi = run_trainer(MPI_COMM_WORLD, par);
    CHECK_MESSAGE(multi.skips == expect_skips,
                  what << ": rank " << world_rank() << " skipped " << multi.skips << " steps");
    if (world_rank() == 0) {
        std::vector<std::string> one =
            with(opts, {"train.batch_size=" + std::to_string(kB * dp), "debug.inject_rank=-1"});
        RunOut ref = run_trainer(MPI_COMM_SELF, one);
        INFO(what << " at " << W << " ranks (dp " << dp << ", sp " << sp << ")");
        CHECK(ref.skips == expect_skips);
        CHECK(multi.losses.size() == ref.losses.size());
        double dl = max_rel_diff(multi.losses, ref.losses);
        double dn = max_rel_diff(multi.norms, ref.norms);
        double dp_ = max_abs_diff(multi.params, ref.params);
        MESSAGE(what << ": losses rel " << dl << ", norms rel " << dn << ", params abs " << dp_);
        CHECK(dl <= kLossRel);
        CHECK(dn <= norm_rel);
        CHECK(dp_ <= kParamAbs);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

const std::vector<std::string> kEngine = {"offload.enabled=true", "offload.bucket_mb=0.005",
                                          "offload.gpu_tail_buckets=1", "offload.stv=true"};

} // namespace

TEST_CASE("ZeRO-3, plain path: equals the 1-rank run") {
    check_against_one_rank("zero3 plain", {"train.grad_clip=1.0"});
}

TEST_CASE("ZeRO-3, engine: STV, clipping, NaN on one rank, tail buckets") {
    // clip 0.05 clips every step (speculative steps rolled back and re-run); step 3 has a NaN on
    // the last rank only, and every rank must skip it
    check_against_one_rank(
        "zero3 engine stv",
        with(kEngine, {"train.grad_clip=0.05", "debug.inject_nonfinite_steps=[3]",
                       "debug.inject_rank=" + std::to_string(world_size() - 1)}),
        1, 1);
}

TEST_CASE("ZeRO-3, engine: weight flow, bf16 cast on the host, accumulation") {
    check_against_one_rank(
        "zero3 engine flow",
        with(kEngine, {"offload.weights=flow", "offload.prefetch_layers=1", "train.dtype=bf16",
                       "offload.cast=host", "train.grad_accum=2", "train.grad_clip=1.0"}),
        1, 0,
        // cast host rounds the grads to bf16 before the norm (issue 12: they cross the link as
        // bf16): the fp32 sums of different batch splits can round to neighbouring bf16 values,
        // one ulp = 2^-8..2^-7 relative per element. Measured < 1e-4 on the first development VM,
        // 1.9e-4 on an AMD EPYC one (other OpenBLAS kernels). The limit is 1e-3 (a quarter
        // ulp); a real error (a lost shard, a wrong scale) moves the norm by > 10%.
        1e-3);
}

TEST_CASE("ZeRO-3 memory: each rank allocates what `superoffload plan --ranks N` says") {
    // the engine on the rank's 1/N shard plus the wrapper's whole-unit gather and grad slots and
    // the model's activations, all in the host device's arena; stationary and flow, a GPT-2 and an
    // untied LLaMA (unit 0 and the head unit differ in size). Bucket cuts differ by rank, so each
    // rank is compared with its own memory plan, and the planner's figure with the largest rank.
    const std::vector<std::vector<std::string>> decks = {
        with(kEngine, {"train.grad_clip=1.0"}),
        with(kEngine,
             {"offload.weights=flow", "model.type=llama", "model.num_heads=4",
              "model.num_kv_heads=2", "model.intermediate_size=48", "model.tie_embeddings=false"})};
    const int W = world_size();
    for (const std::vector<std::string>& d : decks) {
        const std::vector<std::string> o = with(d, {"train.batch_size=2", "train.steps=2"});
        RunOut r = run_trainer(MPI_COMM_WORLD, o);
        config::Config cfg = config::load_deck_from_string(kParallelDeck, "parallel-test", o);
        const model::ArchConfig arch = model::config_for(cfg.model);
        const plan::Plan p = plan::make_plan(cfg, arch, plan::hardware_for(cfg), W);
        plan::resolve_auto(cfg, p);
        const offload::MemoryPlanInputs in =
            zero::sharded_plan_inputs(cfg, model::make_layout(arch), W, false, world_rank());
        const size_t mine =
            offload::make_memory_plan(in).total(offload::MemSide::Device) +
            offload::zero3_memory_plan(
                offload::zero3_slots(in, cfg.train.dtype == config::Precision::BF16, false),
                offload::MemSide::Device)
                .total(offload::MemSide::Device);
        CHECK(in.zero3_slice > 0);
        CHECK(in.zero3_block_slice > 0);
        CHECK(in.zero3_block_slice <= in.zero3_slice);
        // the model's activations are in the same arena (the driver's list, as the plan sums it)
        CHECK(p.mem.activations > 0);
        CHECK(static_cast<double>(r.device_peak) == static_cast<double>(mine) + p.mem.activations);
        unsigned long long peak = r.device_peak, largest = 0;
        MPI_Allreduce(&peak, &largest, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
        CHECK(static_cast<double>(largest) == p.mem.engine_device + p.mem.activations);
        CHECK(static_cast<double>(largest) == p.mem.total);
    }
}

// The driver's unit protocol (model/transformer.cpp) with fake grads, for a model that reads bf16
// weights (the CUDA bf16 model): forward reads every unit (unit 0 released at once when untied,
// held to the end when tied), backward the head unit, the blocks, then unit 0's grads. `seen`
// gets the weights read in forward (widened); grads of element i are 0.05 * w[i] + a
// deterministic offset where `add` (one rank only: the reduce-scatter's sum stays exact).
void bf16_model_step(const model::ParamLayout& l, offload::Updater& u, int64_t step, bool add,
                     std::vector<float>& seen) {
    const int L = l.cfg.num_layers;
    const bool tied = l.cfg.tie_embeddings;
    auto n_of = [&](int k) { return l.unit_begin[k + 1] - l.unit_begin[k]; };
    auto widen = [&](const float* p, int k, float* dst) {
        const uint16_t* h = reinterpret_cast<const uint16_t*>(p);
        for (size_t i = 0; i < n_of(k); i++)
            dst[i] = core::bf16_to_f32(h[i]);
    };
    model::WeightSource& w = u.weights();
    model::GradSink& g = u.grads();
    seen.assign(l.num_params, 0.0f);
    const float* p0 = w.acquire(0, model::Pass::Forward);
    widen(p0, 0, seen.data());
    if (!tied) w.release(0, model::Pass::Forward);
    for (int k = 1; k <= L + 1; k++) {
        widen(w.acquire(k, model::Pass::Forward), k, seen.data() + l.unit_begin[k]);
        w.release(k, model::Pass::Forward);
    }
    if (tied) w.release(0, model::Pass::Forward);
    auto grads = [&](int k) {
        float* gk = g.grads(k);
        const size_t o = l.unit_begin[k];
        for (size_t i = 0; add && i < n_of(k); i++)
            gk[i] += 0.05f * seen[o + i] +
                     0.01f * (static_cast<float>((o + i + 7 * step) % 97) / 48.0f - 1.0f);
    };
    if (tied) w.acquire(0, model::Pass::Backward);
    w.acquire(L + 1, model::Pass::Backward);
    grads(L + 1);
    if (tied) g.grads(0); // the tied head adds into unit 0 first
    w.release(L + 1, model::Pass::Backward);
    g.unit_done(L + 1);
    for (int k = L; k >= 1; k--) {
        w.acquire(k, model::Pass::Backward);
        grads(k);
        w.release(k, model::Pass::Backward);
        g.unit_done(k);
    }
    grads(0);
    if (tied) w.release(0, model::Pass::Backward);
    g.unit_done(0);
}

TEST_CASE("ZeRO-3 for a model that reads bf16 weights (the CUDA bf16 model): bf16 gather slots "
          "sized per unit class, bitwise the 1-rank engine's bf16 working weights") {
    // run here on the host device with a fake model that reads the bf16 units: a tied GPT-2
    // (unit 0 held the whole pass) stationary, an untied Llama with weight flow; a 512-token
    // vocabulary makes unit 0 (and the Llama's head unit) larger than a block, so slot 0 of each
    // kind is larger than the others. No clipping: the updates do not depend on the norm's
    // summation order, and the grads come from rank 0 alone, so the params are bitwise.
    const int W = world_size();
    for (const std::vector<std::string>& d :
         {with(kEngine, {}),
          with(kEngine, {"offload.weights=flow", "model.type=llama", "model.num_heads=4",
                         "model.num_kv_heads=2", "model.intermediate_size=48",
                         "model.tie_embeddings=false"})}) {
        const std::vector<std::string> o =
            with(d, {"train.dtype=bf16", "train.grad_clip=0", "model.vocab_size=512"});
        const config::Config cfg = config::load_deck_from_string(kParallelDeck, "bf16-slots", o);
        const model::ArchConfig arch = model::config_for(cfg.model);
        const model::ParamLayout l = model::make_layout(arch);
        INFO(d.back() << " at " << W << " ranks");
        comm::World world(MPI_COMM_WORLD);
        core::Log log(world.rank(), core::LogLevel::Quiet);
        rank::Context ctx(cfg, world, log, nullptr);
        std::unique_ptr<offload::Updater> z =
            zero::make_parallel_updater(cfg, l, ctx, log, nullptr, true);
        std::unique_ptr<offload::Updater> one; // the 1-rank engine with bf16 working weights
        if (world_rank() == 0) one = std::make_unique<offload::Engine>(cfg, l, log, nullptr, true);
        CHECK(z->bf16_weights());
        std::vector<float> p(l.num_params), zero(l.num_params, 0.0f);
        for (size_t i = 0; i < p.size(); i++) // bf16 values, as the run's working weights are
            p[i] = core::bf16_to_f32(core::f32_to_bf16(0.02f * static_cast<float>(i % 101) - 1.0f));
        z->set_state(p.data(), zero.data(), zero.data(), 0);
        if (one) one->set_state(p.data(), zero.data(), zero.data(), 0);
        std::vector<float> seen_z, seen_1;
        for (int64_t step = 0; step < 3; step++) {
            offload::StepHparams hp;
            hp.step = step;
            hp.lr = 1e-2f;
            for (offload::Updater* u : {z.get(), one.get()}) {
                if (!u) continue;
                u->begin_step(hp);
                u->begin_micro(0, true);
                bf16_model_step(l, *u, step, u == one.get() || world_rank() == 0,
                                u == one.get() ? seen_1 : seen_z);
                u->finish_step();
            }
            if (one) CHECK(count_bit_diffs(seen_z, seen_1) == 0);
        }
        std::vector<float> pz(l.num_params), m(l.num_params), v(l.num_params);
        int64_t t = 0;
        z->get_state(pz.data(), m.data(), v.data(), &t); // collective
        if (one) {
            std::vector<float> p1(l.num_params);
            one->get_state(p1.data(), m.data(), v.data(), &t);
            CHECK(count_bit_diffs(pz, p1) == 0);
        }
        // this rank's device memory: its engine (bf16 working weights) and the wrapper's slots
        const offload::MemoryPlanInputs in =
            zero::sharded_plan_inputs(cfg, l, W, true, world_rank());
        const offload::MemoryPlan zp = offload::zero3_memory_plan(
            offload::zero3_slots(in, true, true), offload::MemSide::Device);
        CHECK(in.zero3_block_slice < in.zero3_slice);
        for (const offload::BufferSpec& b : zp.buffers) {
            CHECK(b.id != offload::Buf::ZeroSend16); // gathered straight into bf16 slots
            CHECK(b.id != offload::Buf::ZeroRecv16);
            if (b.id == offload::Buf::ZeroGather)
                CHECK(b.bytes == W * (b.index == 0 ? in.zero3_slice : in.zero3_block_slice) * 2);
        }
        CHECK(ctx.device().peak() == offload::make_memory_plan(in).total(offload::MemSide::Device) +
                                         zp.total(offload::MemSide::Device));
        z.reset();
        MPI_Barrier(MPI_COMM_WORLD);
    }
}

TEST_CASE("ZeRO-3 with train.dtype bf16 gathers bf16 weights: bitwise the fp32 gathers, half "
          "the allgather bytes") {
    // stationary with the cast on the device, and flow with the cast on the host: the working
    // weights the model reads are bf16 values either way (a weight that is not would stop the
    // run with an internal error naming the unit and rank)
    for (const std::vector<std::string>& d :
         {with(kEngine, {"offload.cast=device"}),
          with(kEngine, {"offload.weights=flow", "offload.cast=host", "train.grad_accum=2"})}) {
        const std::vector<std::string> o =
            with(d, {"train.dtype=bf16", "train.batch_size=2", "train.grad_clip=0.05"});
        config::Config cfg = config::load_deck_from_string(kParallelDeck, "bf16-gathers", o);
        RunOut a = run_trainer(MPI_COMM_WORLD, o);
        RunOut b = run_trainer(MPI_COMM_WORLD, with(o, {"debug.fp32_gathers=true"}));
        CHECK(a.losses.size() == 6);
        CHECK(count_bit_diffs(a.losses, b.losses) == 0);
        CHECK(count_bit_diffs(a.norms, b.norms) == 0);
        CHECK(count_bit_diffs(a.params, b.params) == 0);
    }
}

TEST_CASE("the staged and CUDA-aware collective paths are bitwise the direct path, same bytes") {
    // the wrappers' device-side code (events, the collectives' stream, device sums of the
    // CUDA-aware reduce-scatter and allreduce, staging copies) as a GPU runs it, on the host
    // device: ZeRO-3 with bf16 gathers and a NaN on one rank, ZeRO-0, and ZeRO-3 + Ulysses
    std::vector<std::vector<std::string>> decks = {
        with(kEngine,
             {"train.dtype=bf16", "train.grad_clip=0.05", "debug.inject_nonfinite_steps=[2]",
              "debug.inject_rank=" + std::to_string(world_size() - 1)}),
        with(kEngine, {"parallel.zero_stage=0", "train.grad_accum=2"})};
    if (world_size() % 2 == 0) decks.push_back(with(kEngine, {"parallel.sp=2"}));
    for (const std::vector<std::string>& d : decks) {
        const std::vector<std::string> o = with(d, {"train.batch_size=2", "train.steps=3"});
        RunOut direct = run_trainer(MPI_COMM_WORLD, o);
        for (const char* path : {"staged", "cuda_aware"}) {
            INFO(path << ": " << d.back());
            RunOut r =
                run_trainer(MPI_COMM_WORLD, with(o, {std::string("debug.collectives=") + path}));
            CHECK(r.losses.size() == 3);
            CHECK(count_bit_diffs(r.losses, direct.losses) == 0);
            CHECK(count_bit_diffs(r.norms, direct.norms) == 0);
            CHECK(count_bit_diffs(r.params, direct.params) == 0);
            CHECK(r.skips == direct.skips);
            REQUIRE(r.comm_bytes.size() == direct.comm_bytes.size());
            for (size_t i = 0; i < r.comm_bytes.size(); i++)
                CHECK(r.comm_bytes[i].sent == direct.comm_bytes[i].sent);
        }
    }
}

TEST_CASE("ZeRO-0 (replicated, grads all-reduced): equals the 1-rank run") {
    check_against_one_rank("zero0 engine",
                           with(kEngine, {"parallel.zero_stage=0", "train.grad_clip=0.05"}));
    // weight flow without accumulation would put the model's grads in the device grad ring, whose
    // slots the all-reduces' late delivery outran ("grad ring: no free slot", 3 of 3 runs at 2
    // ranks): ZeRO-0 keeps them in pinned host memory
    check_against_one_rank("zero0 engine flow",
                           with(kEngine, {"parallel.zero_stage=0", "offload.weights=flow",
                                          "offload.gpu_tail_buckets=0", "model.num_layers=4",
                                          "train.grad_clip=0.05"}));
}

TEST_CASE("Ulysses sequence parallelism (sp=2; DP x SP at 4 ranks)") {
    if (world_size() % 2 != 0) return;
    check_against_one_rank("ulysses plain", {"train.grad_clip=1.0"}, 2);
    check_against_one_rank("ulysses engine", with(kEngine, {"train.grad_clip=0.05"}), 2);
}

// The LLaMA family through ZeRO-3 and Ulysses: GQA (NKV = 2 divides sp = 2), untied head (unit 0
// is not fetched in backward), qwen3's qk-norm and head_dim != C/NH.
TEST_CASE("LLaMA family: ZeRO-3 engine with weight flow, and Ulysses, equal the 1-rank run") {
    const std::vector<std::string> llama = {"model.type=llama", "model.num_heads=4",
                                            "model.num_kv_heads=2", "model.intermediate_size=48",
                                            "model.tie_embeddings=false"};
    check_against_one_rank(
        "llama zero3 flow",
        with(with(kEngine, llama), {"offload.weights=flow", "offload.prefetch_layers=1",
                                    "train.grad_accum=2", "train.grad_clip=0.05"}));
    if (world_size() % 2 != 0) return;
    check_against_one_rank("qwen3 ulysses",
                           with(with(kEngine, llama),
                                {"model.type=qwen3", "model.head_dim=12", "train.grad_clip=1.0"}),
                           2);
}

// Dropout (issue 26): every mask is keyed by the run's seed, the step and each element's GLOBAL
// batch row, head and position, so W ranks (ZeRO-3) and Ulysses draw the 1-rank run's masks and
// stay within the fp32 tolerances of the runs without dropout; the same run with another seed,
// or without dropout, moves the losses far outside them (dropout is on and matters). A seed_oss
// block: q/k/v biases, head_dim != C/NH, attention and residual dropout 0.1.
TEST_CASE("dropout: the 1-rank run's masks at any rank count and sp; resume bitwise") {
    const std::vector<std::string> seed_oss = {
        "model.type=seed_oss",        "model.num_heads=4",           "model.num_kv_heads=2",
        "model.head_dim=12",          "model.intermediate_size=48",  "model.attention_bias=true",
        "model.tie_embeddings=false", "model.attention_dropout=0.1", "model.residual_dropout=0.1"};
    const std::vector<std::string> o = with(with(kEngine, seed_oss), {"train.grad_clip=0.05"});
    check_against_one_rank("seed_oss dropout zero3", o);
    if (world_size() % 2 == 0) check_against_one_rank("seed_oss dropout ulysses", o, 2);
    if (world_rank() == 0) {
        const std::vector<std::string> one = with(o, {"train.batch_size=" + std::to_string(kB)});
        RunOut a = run_trainer(MPI_COMM_SELF, one);
        RunOut b = run_trainer(MPI_COMM_SELF, with(one, {"train.seed=43"}));
        RunOut off = run_trainer(
            MPI_COMM_SELF, with(one, {"model.attention_dropout=0", "model.residual_dropout=0"}));
        MESSAGE("dropout: another seed moves the losses by " << max_rel_diff(a.losses, b.losses)
                                                             << ", no dropout by "
                                                             << max_rel_diff(a.losses, off.losses));
        // measured 1.1e-2 and 8.4e-4 (the tiny init's branches are small): 28x the tolerance
        // and more
        CHECK(max_rel_diff(a.losses, b.losses) > 10 * kLossRel);
        CHECK(max_rel_diff(a.losses, off.losses) > 10 * kLossRel);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    // resume with dropout at this rank count: bitwise (the step's key is the same)
    const std::string base =
        std::string(SOF_BINARY_DIR) + "/test-scratch/mpi_dropout_" + std::to_string(world_size());
    if (world_rank() == 0) fs::remove_all(base);
    MPI_Barrier(MPI_COMM_WORLD);
    const std::vector<std::string> r =
        with(o, {"train.batch_size=2", "train.checkpoint_every=3", "train.checkpoint_dir=" + base});
    RunOut full = run_trainer(MPI_COMM_WORLD, with(r, {"train.checkpoint_dir=" + base + "/full"}));
    run_trainer(MPI_COMM_WORLD,
                with(r, {"train.checkpoint_dir=" + base + "/split", "train.stop_after=3"}));
    RunOut rest = run_trainer(
        MPI_COMM_WORLD, with(r, {"train.checkpoint_dir=" + base + "/split", "train.resume=auto"}));
    CHECK(count_bit_diffs(full.params, rest.params) == 0);
    std::vector<float> tail(full.losses.begin() + 3, full.losses.end());
    CHECK(count_bit_diffs(tail, rest.losses) == 0);
}

TEST_CASE("a multi-rank run repeated is bitwise identical") {
    std::vector<std::string> o =
        with(kEngine, {"train.batch_size=2", "train.grad_clip=0.05",
                       "debug.inject_nonfinite_steps=[2]", "debug.inject_rank=0"});
    RunOut a = run_trainer(MPI_COMM_WORLD, o);
    RunOut b = run_trainer(MPI_COMM_WORLD, o);
    CHECK(count_bit_diffs(a.losses, b.losses) == 0);
    CHECK(count_bit_diffs(a.params, b.params) == 0);
}

TEST_CASE("resume at the same rank count is bitwise") {
    const std::string base =
        std::string(SOF_BINARY_DIR) + "/test-scratch/mpi_resume_" + std::to_string(world_size());
    if (world_rank() == 0) fs::remove_all(base);
    MPI_Barrier(MPI_COMM_WORLD);
    std::vector<std::string> o =
        with(kEngine, {"train.batch_size=2", "train.grad_clip=0.05", "train.checkpoint_every=3"});
    RunOut full = run_trainer(MPI_COMM_WORLD, with(o, {"train.checkpoint_dir=" + base + "/full"}));
    run_trainer(MPI_COMM_WORLD,
                with(o, {"train.checkpoint_dir=" + base + "/split", "train.stop_after=3"}));
    RunOut rest = run_trainer(
        MPI_COMM_WORLD, with(o, {"train.checkpoint_dir=" + base + "/split", "train.resume=auto"}));
    CHECK(count_bit_diffs(full.params, rest.params) == 0);
    std::vector<float> tail(full.losses.begin() + 3, full.losses.end());
    CHECK(count_bit_diffs(tail, rest.losses) == 0);
    // the skip/rollback counters go on across the resume
    CHECK(rest.rollbacks == full.rollbacks);
    CHECK(ckpt::load_manifest(base + "/split/step_00000006").rollbacks ==
          ckpt::load_manifest(base + "/full/step_00000006").rollbacks);
    // export (llm.c) reads the sharded checkpoint whole: the gathered params, bitwise
    ckpt::Manifest m;
    std::vector<float> exported;
    ckpt::load_params(base + "/full/step_00000006", &m, &exported);
    CHECK(m.world_size == (world_size() > 1 ? world_size() : 1));
    CHECK(count_bit_diffs(exported, full.params) == 0);

    // init_from into a sharded run: every rank imports the llm.c file and keeps its slices; the
    // gathered params equal the file
    const std::string llmc = base + "/model.bin";
    if (world_rank() == 0)
        ckpt::export_llmc(llmc, m.model, model::make_layout(m.model), exported.data());
    MPI_Barrier(MPI_COMM_WORLD);
    config::Config cfg = config::load_deck_from_string(
        kParallelDeck, "init-from",
        with(o, {"model.init_from=" + llmc, "train.batch_size=2", "train.checkpoint_every=0"}));
    comm::World world(MPI_COMM_WORLD);
    core::Log log(world.rank(), core::LogLevel::Quiet);
    train::Trainer t(cfg, world, log);
    CHECK(count_bit_diffs(t.params(), exported) == 0);
}

TEST_CASE("a stop signal on one rank stops every rank after the same step; resume is bitwise") {
    const std::string base =
        std::string(SOF_BINARY_DIR) + "/test-scratch/mpi_stop_" + std::to_string(world_size());
    if (world_rank() == 0) fs::remove_all(base);
    MPI_Barrier(MPI_COMM_WORLD);
    std::vector<std::string> o = with(kEngine, {"train.batch_size=2", "train.grad_clip=0.05"});
    RunOut full = run_trainer(MPI_COMM_WORLD, with(o, {"train.checkpoint_dir=" + base + "/full"}));
    // only the last rank is signalled, during step 2 (the check runs once per step on each rank)
    const bool signalled = world_rank() == world_size() - 1;
    int calls = 0;
    RunOut stopped =
        run_trainer(MPI_COMM_WORLD, with(o, {"train.checkpoint_dir=" + base + "/split"}),
                    [&] { return signalled && ++calls >= 2 ? SIGUSR1 : 0; });
    CHECK(stopped.stopped);
    CHECK(stopped.end_step == 2);
    CHECK(stopped.stop_signal == (signalled ? SIGUSR1 : 0));
    if (world_rank() == 0) CHECK(fs::path(stopped.last_checkpoint).filename() == "step_00000002");
    RunOut rest = run_trainer(
        MPI_COMM_WORLD, with(o, {"train.checkpoint_dir=" + base + "/split", "train.resume=auto"}));
    CHECK_FALSE(rest.stopped);
    CHECK(count_bit_diffs(full.params, rest.params) == 0);
    std::vector<float> tail(full.losses.begin() + 2, full.losses.end());
    CHECK(count_bit_diffs(tail, rest.losses) == 0);
}

TEST_CASE("a checkpoint written by 2 ranks resumes at 3 ranks (resharded)") {
    if (world_size() != 3) return;
    const std::string base = std::string(SOF_BINARY_DIR) + "/test-scratch/mpi_reshard";
    if (world_rank() == 0) fs::remove_all(base);
    MPI_Barrier(MPI_COMM_WORLD);
    // global batch 6 sequences both ways: 2 ranks x 3, then 3 ranks x 2
    std::vector<std::string> o = with(kEngine, {"train.grad_clip=0.05", "train.checkpoint_every=3",
                                                "train.checkpoint_dir=" + base});
    MPI_Comm two;
    MPI_Comm_split(MPI_COMM_WORLD, world_rank() < 2 ? 0 : MPI_UNDEFINED, world_rank(), &two);
    RunOut at2;
    if (two != MPI_COMM_NULL) {
        at2 = run_trainer(two, with(o, {"train.batch_size=3"})); // 6 steps, checkpoints at 3, 6
        MPI_Comm_free(&two);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    // the step-3 state as 2 ranks saved it, gathered
    RunOut at3 = run_trainer(
        MPI_COMM_WORLD, with(o, {"train.batch_size=2", "train.resume=" + base + "/step_00000003",
                                 "train.checkpoint_dir=" + base + "/at3", "train.steps=6"}));
    if (world_rank() == 0) {
        // the continued run: the same data and state; only reduction orders differ
        std::vector<float> tail(at2.losses.begin() + 3, at2.losses.end());
        double dl = max_rel_diff(at3.losses, tail);
        double dp_ = max_abs_diff(at3.params, at2.params);
        MESSAGE("2 -> 3 ranks: losses rel " << dl << ", params abs " << dp_);
        CHECK(at3.losses.size() == 3);
        CHECK(dl <= kLossRel);
        CHECK(dp_ <= kParamAbs);
    }
}

TEST_CASE("bytes per rank per step equal the plan's formula") {
    const int W = world_size();
    struct Case {
        std::string name;
        std::vector<std::string> opts;
        int sp, stage, accum;
    };
    std::vector<Case> cases = {
        {"zero3", with(kEngine, {"train.grad_accum=2"}), 1, 3, 2},
        {"zero3 bf16 (bf16 gathers)", with(kEngine, {"train.dtype=bf16"}), 1, 3, 1},
        {"zero0", with(kEngine, {"parallel.zero_stage=0"}), 1, 0, 1},
    };
    if (W % 2 == 0) cases.push_back({"zero3+ulysses", {}, 2, 3, 1});
    for (const Case& c : cases) {
        std::vector<std::string> o =
            with(c.opts, {"train.batch_size=2", "train.eval_every=0", "train.steps=3",
                          "train.grad_accum=" + std::to_string(c.accum),
                          "parallel.sp=" + std::to_string(c.sp),
                          "parallel.zero_stage=" + std::to_string(c.stage)});
        config::Config cfg = config::load_deck_from_string(kParallelDeck, "bytes", o);
        comm::World world(MPI_COMM_WORLD);
        core::Log log(world.rank(), core::LogLevel::Quiet);
        train::Trainer t(cfg, world, log);
        train::RunSummary s = t.run();
        model::ArchConfig mc;
        mc.num_layers = 2, mc.num_heads = 2, mc.channels = 32, mc.max_seq_len = 16;
        mc.vocab_size = 64, mc.padded_vocab_size = 128;
        plan::CommVolume v =
            plan::comm_per_step(model::make_layout(mc), W, c.sp, c.stage, 2, 16, c.accum, false,
                                cfg.train.dtype == config::Precision::BF16 ? 2 : 4);
        REQUIRE(s.comm_bytes.size() == 3);
        for (const comm::CommBytes& b : s.comm_bytes) {
            INFO(c.name << " at " << W << " ranks");
            CHECK(static_cast<double>(b.sent[0]) == v.allgather);
            CHECK(static_cast<double>(b.sent[1]) == v.reduce_scatter);
            CHECK(static_cast<double>(b.sent[2]) == v.allreduce);
            CHECK(static_cast<double>(b.sent[3]) == v.alltoall);
            CHECK(b.recv == b.sent);
        }
        if (world_rank() == 0) MESSAGE(c.name << ": " << plan::describe_comm(v, W, c.sp, c.stage));
    }
}
