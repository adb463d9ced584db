// The model trained on the CUDA device (issue 17, label gpu): 20 steps of a tiny GPT-2, Llama,
// Qwen2 (biases) and Qwen3 (qk-norm), and of the mixtures of experts (Qwen3-MoE, Mixtral,
// GPT-OSS) on CUDA against the CPU run, STV on == off bitwise on CUDA
// with a NaN injected, and 2 ranks on one GPU (ZeRO-3; fp32, and bf16 with bf16 gather slots)
// against 1 rank. Exits 77 (skipped) without a visible GPU.
#include <doctest/doctest.h>
#include <mpi.h>

#include "case_names.h"  // each case named in the log before it runs
#include "gpu_as_host.h" // SOF_TEST_GPU_AS_HOST=1: the "cuda" runs on the host device

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <string>

#include "device/cuda_device.h"
#include "mpi/parallel_util.h"

using namespace sof;
using namespace sof::test;

namespace {

// Tolerances, CUDA against the CPU twins over 20 steps:
// - fp32 (DriverT<float>, cuBLASLt with fp32 compute, no TF32): the two differ only in summation
//   order (~1e-7 relative per product), which 20 Adam steps at lr 3e-3 carry to ~1e-5 of the
//   loss; 1e-3 relative still fails on any real error (a wrong op moves the loss by > 1e-2).
// - bf16 activations and weights: one bf16 rounding is 2^-9 = 0.2% relative; the logits go
//   through ~10 roundings of a 2-layer model and the loss (mean of log-softmax) averages their
//   errors, so per-step losses stay within ~1% of the fp32 CPU run. 3% of the loss (+0.02 nats)
//   is the bound; a broken kernel (wrong scale, missed bias, wrong head) is off by > 10%.
constexpr double kFp32Rel = 1e-3;
constexpr double kBf16Rel = 3e-2, kBf16Abs = 2e-2;
constexpr int kSteps = 20;

std::vector<std::string> deck(const std::string& arch, const std::string& device,
                              const std::string& dtype) {
    std::vector<std::string> o = {"device.type=" + device,
                                  "train.dtype=" + dtype,
                                  "train.steps=" + std::to_string(kSteps),
                                  "train.batch_size=4",
                                  "offload.enabled=true",
                                  "offload.bucket_mb=0.01",
                                  "offload.gpu_tail_buckets=1"};
    // the LLaMA family at head_dim 16 (C=32, 2 heads): llama (GQA, untied), qwen2 (q/k/v biases,
    // tied head), qwen3 (per-head q/k RMSNorm, untied)
    if (arch != "gpt2") {
        o.push_back("model.type=" + arch);
        o.push_back("model.num_kv_heads=1");
        o.push_back("model.intermediate_size=96");
        o.push_back(std::string("model.tie_embeddings=") + (arch == "qwen2" ? "true" : "false"));
    }
    // the mixtures of experts (issue 27): 4 experts, top 2, the load-balancing loss on; Qwen3-MoE
    // with layer 0 dense (mlp_only_layers) and layer 1 sparse, Mixtral, GPT-OSS (clamped SwiGLU,
    // expert and router biases, attention sinks). The router picks its top 2 in fp32 on both
    // twins; a near tie can pick differently in bf16, which moves a loss by less than the bf16
    // bound. (Written without a GPU: not run on one yet; test_train_cuda_on_host runs them.)
    if (arch == "qwen3_moe" || arch == "mixtral" || arch == "gpt_oss") {
        for (const char* kv : {"model.num_experts=4", "model.num_experts_per_tok=2",
                               "model.output_router_logits=true"})
            o.push_back(kv);
    }
    if (arch == "qwen3_moe") {
        o.push_back("model.mlp_only_layers=0");
        o.push_back("model.moe_intermediate_size=32");
    }
    return o;
}

void check_close(const RunOut& gpu, const RunOut& cpu, double rel, double abs) {
    REQUIRE(gpu.losses.size() == cpu.losses.size());
    double worst = 0;
    for (size_t i = 0; i < cpu.losses.size(); i++) {
        double d = std::fabs(static_cast<double>(gpu.losses[i]) - cpu.losses[i]);
        worst = std::max(worst, d / std::max(1e-30, std::fabs(static_cast<double>(cpu.losses[i]))));
        INFO("step " << i << ": cuda " << gpu.losses[i] << ", cpu " << cpu.losses[i]);
        CHECK(d <= rel * std::fabs(cpu.losses[i]) + abs);
    }
    MESSAGE("max relative loss difference over " << cpu.losses.size() << " steps: " << worst);
    CHECK(cpu.losses.back() < cpu.losses.front()); // it learned something
}

bool same(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

} // namespace

TEST_CASE("CUDA: 20 steps of a tiny GPT-2, Llama, Qwen2, Qwen3, Qwen3-MoE, Mixtral and GPT-OSS "
          "equal the CPU run") {
    if (world_size() != 1) return; // the 2-rank case below
    for (std::string arch :
         {"gpt2", "llama", "qwen2", "qwen3", "qwen3_moe", "mixtral", "gpt_oss"}) {
        CAPTURE(arch);
        std::printf("[run] %s: cpu fp32, cuda fp32, cuda bf16\n", arch.c_str());
        std::fflush(stdout);
        RunOut cpu = run_trainer(MPI_COMM_SELF, deck(arch, "host", "fp32"));
        RunOut g32 = run_trainer(MPI_COMM_SELF, deck(arch, gpu(), "fp32"));
        check_close(g32, cpu, kFp32Rel, 0.0);
        RunOut g16 = run_trainer(MPI_COMM_SELF, deck(arch, gpu(), "bf16"));
        check_close(g16, cpu, kBf16Rel, kBf16Abs);
    }
}

// The tensor-core attention in training: head_dim 64 (GPT-2, MHA) and 128 (Llama, GQA 2:1), bf16,
// T = 128 (two key tiles, the causal diagonal in each). The tensor-core run requires the kernel
// (debug.attention_kernel: tensor_cores refuses to fall back), the A/B run forces the CUDA-core
// kernel; both against the CPU fp32 run and against each other, within the bf16 bounds above.
// o with key=value (replacing an earlier override of key)
void set_key(std::vector<std::string>& o, const std::string& key, const std::string& value) {
    for (std::string& s : o)
        if (s.rfind(key + "=", 0) == 0) {
            s = key + "=" + value;
            return;
        }
    o.push_back(key + "=" + value);
}

std::vector<std::string> tc_deck(const std::string& arch, int head_dim, const std::string& device,
                                 const std::string& dtype, const std::string& kernel) {
    std::vector<std::string> o = deck(arch, device, dtype);
    const int heads = 2, C = heads * head_dim;
    set_key(o, "model.channels", std::to_string(C));
    set_key(o, "model.num_heads", std::to_string(heads));
    set_key(o, "model.max_seq_len", "128");
    set_key(o, "train.seq_len", "128");
    set_key(o, "train.batch_size", "2");
    if (arch != "gpt2") set_key(o, "model.intermediate_size", std::to_string(2 * C));
    set_key(o, "debug.attention_kernel", kernel);
    return o;
}

TEST_CASE("CUDA: bf16 training through the tensor-core attention (head_dim 64 and 128)") {
    if (gpu_as_host()) return; // the kernel exists on the GPU only
    if (world_size() != 1) return;
    for (auto [arch, hd] : {std::pair<std::string, int>{"gpt2", 64}, {"llama", 128}}) {
        CAPTURE(arch);
        CAPTURE(hd);
        std::printf(
            "[run] %s head_dim %d: cpu fp32, cuda bf16 tensor cores, cuda bf16 cuda cores\n",
            arch.c_str(), hd);
        std::fflush(stdout);
        RunOut cpu = run_trainer(MPI_COMM_SELF, tc_deck(arch, hd, "host", "fp32", "auto"));
        RunOut tc = run_trainer(MPI_COMM_SELF, tc_deck(arch, hd, "cuda", "bf16", "tensor_cores"));
        RunOut cc = run_trainer(MPI_COMM_SELF, tc_deck(arch, hd, "cuda", "bf16", "cuda_cores"));
        check_close(tc, cpu, kBf16Rel, kBf16Abs);
        check_close(cc, cpu, kBf16Rel, kBf16Abs);
        check_close(tc, cc, kBf16Rel, kBf16Abs); // A/B: the two kernels of one GPU
        CHECK(std::isfinite(tc.losses.back()));
    }
}

TEST_CASE("CUDA: STV on and off bitwise equal with a NaN injected") {
    if (world_size() != 1) return;
    for (std::string dt : {"fp32", "bf16"}) {
        CAPTURE(dt);
        std::vector<std::string> base = deck("llama", gpu(), dt);
        base.push_back("debug.inject_nonfinite_steps=[2]");
        base.push_back("train.grad_clip=0.5");
        std::vector<std::string> on = base, off = base;
        on.push_back("offload.stv=true");
        off.push_back("offload.stv=false");
        RunOut a = run_trainer(MPI_COMM_SELF, on), b = run_trainer(MPI_COMM_SELF, off);
        CHECK(a.skips == 1);
        CHECK(b.skips == 1);
        CHECK(a.rollbacks >= 1);
        CHECK(same(a.losses, b.losses));
        CHECK(same(a.params, b.params));
    }
}

TEST_CASE("CUDA: 2 ranks on one GPU (ZeRO-3) equal 1 rank") {
    if (world_size() != 2) return;
    // the same global batch: 2 sequences per rank, 4 on the 1-rank run (the tolerances of
    // tests/mpi/test_parallel: only the order of the grad sums differs)
    std::vector<std::string> o = deck("gpt2", gpu(), "fp32");
    o.push_back("parallel.zero_stage=3");
    o.push_back("train.batch_size=2");
    RunOut multi = run_trainer(MPI_COMM_WORLD, o);
    if (world_rank() == 0) {
        std::vector<std::string> one = deck("gpt2", gpu(), "fp32");
        RunOut ref = run_trainer(MPI_COMM_SELF, one);
        REQUIRE(multi.losses.size() == ref.losses.size());
        CHECK(max_rel_diff(multi.losses, ref.losses) <= 3e-5);
        CHECK(max_abs_diff(multi.params, ref.params) <= 3e-4);
    }
    // a mixture of experts: the sparse block's (E, ...) parameters are cut across the ranks like
    // any unit and gathered whole (docs/moe.md item 3). The load-balancing loss off: with it on,
    // each rank balances its own micro-batch (as DDP does), which 1 rank does not equal.
    std::vector<std::string> m1 = deck("qwen3_moe", gpu(), "fp32");
    set_key(m1, "model.output_router_logits", "false");
    std::vector<std::string> m = m1;
    m.push_back("parallel.zero_stage=3");
    m.push_back("train.batch_size=2");
    RunOut multi_moe = run_trainer(MPI_COMM_WORLD, m);
    if (world_rank() == 0) {
        RunOut ref = run_trainer(MPI_COMM_SELF, m1);
        REQUIRE(multi_moe.losses.size() == ref.losses.size());
        CHECK(max_rel_diff(multi_moe.losses, ref.losses) <= 3e-5);
        CHECK(max_abs_diff(multi_moe.params, ref.params) <= 3e-4);
    }
    // bf16: under ZeRO-3 the model reads bf16 gather slots filled from each rank's bf16 working
    // weights (an untied Llama: the embedding and the head share the largest slot), against the
    // 1-rank run's bf16 working weights; both are the bf16 model, so the bound of the bf16-vs-CPU
    // comparison above is loose here (written without a GPU: not run yet)
    std::vector<std::string> b = deck("llama", gpu(), "bf16");
    b.push_back("parallel.zero_stage=3");
    b.push_back("train.batch_size=2");
    RunOut multi16 = run_trainer(MPI_COMM_WORLD, b);
    if (world_rank() == 0) {
        RunOut ref16 = run_trainer(MPI_COMM_SELF, deck("llama", gpu(), "bf16"));
        check_close(multi16, ref16, kBf16Rel, kBf16Abs);
    }
}

int main(int argc, char** argv) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    if (!gpu_as_host() && device::cuda_device_count() == 0) {
        std::printf("SKIPPED: no usable CUDA device\n");
        MPI_Finalize();
        return 77;
    }
    doctest::Context ctx(argc, argv);
    int rc = ctx.run();
    MPI_Finalize();
    return rc;
}
