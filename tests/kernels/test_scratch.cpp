// kernels::Scratch and the scratch sizes of the CUDA twins (kernels/scratch.h), on the CPU: the
// sizes each op asks for, the driver's reservation covering them, and when the buffer grows.
#include <climits>
#include <string>
#include <vector>

#include "core/cuda_sync.h"
#include "device/host_device.h"
#include "harness.h"
#include "kernels/scratch.h"

using namespace sof;

TEST_CASE("scratch: column-sum chunks and sizes" * doctest::test_suite("cpu")) {
    for (int rows : {1, 63, 64, 65, 8191, 8192, 8193, 9000, 1 << 18, (1 << 18) * 64, INT_MAX / 2}) {
        CAPTURE(rows);
        const int per = kernels::colsum_chunk_rows(rows), n = kernels::colsum_chunks(rows);
        // what reduce.cuh used before the groups: max(ceil(rows / 128), 64) rows per chunk
        CHECK(per == std::max((rows + 127) / 128, 64));
        CHECK(n >= 1);
        CHECK(n <= kernels::kColMaxChunks);
        CHECK(static_cast<long long>(n) * per >= rows);    // every row in a chunk
        CHECK(static_cast<long long>(n - 1) * per < rows); // no empty chunk
        for (int cols : {1, 31, 4096, 4097, 1 << 20})
            for (int nout : {1, 2}) {
                const size_t b = kernels::colsum_scratch_bytes(nout, rows, cols);
                CHECK(b == sizeof(float) * size_t(nout) * size_t(n) *
                               size_t(std::min(cols, kernels::kColGroup)));
                CHECK(b <= kernels::colsum_scratch_max(nout));
            }
    }
    CHECK(kernels::colsum_chunks(0) == 0);
    CHECK(kernels::colsum_scratch_bytes(2, 0, 10) == 0);
    CHECK(kernels::colsum_scratch_max(2) == size_t(4) * 2 * 128 * 4096); // 4 MiB
}

TEST_CASE("scratch: a driver's reservation covers every op at its shapes" *
          doctest::test_suite("cpu")) {
    for (int max_rows : {1, 16, 4096, 65536, 1 << 18}) {
        CAPTURE(max_rows);
        const size_t r = kernels::driver_scratch_bytes(max_rows);
        for (int rows : {1, max_rows / 2 + 1, max_rows})
            for (int cols : {1, 768, 4096, 50304, 1 << 20})
                for (int nout : {1, 2})
                    CHECK(kernels::colsum_scratch_bytes(nout, rows, cols) <= r);
        for (int n : {1, max_rows})
            for (int nrows : {1, n})
                CHECK(kernels::embedding_scratch_bytes(n, nrows) <= r);
    }
    // T = 2^18 positions: the embedding plan of 2^18 distinct ids, 3 MiB + 4 bytes, is less
    // than the column sums' 4 MiB
    CHECK(kernels::driver_scratch_bytes(1 << 18) == kernels::colsum_scratch_max(2));
    CHECK(kernels::embedding_scratch_bytes(1 << 18, 1 << 18) == 4 * (3 * size_t(1 << 18) + 1));
    CHECK(kernels::bounds_scratch_bytes(3) == 32);
}

TEST_CASE("scratch: a MoE driver's reservation covers the MoE ops' requests" *
          doctest::test_suite("cpu")) {
    for (int E : {4, 32, 128})
        for (int K : {1, 2, 8})
            for (int max_rows : {1, 4096, 1 << 18}) {
                if (K > E) continue;
                CAPTURE(E);
                CAPTURE(K);
                CAPTURE(max_rows);
                const size_t r = kernels::driver_scratch_bytes(max_rows, E, K);
                CHECK(r >= kernels::driver_scratch_bytes(max_rows));
                for (int n : {1, max_rows / 2 + 1, max_rows}) {
                    CHECK(kernels::moe_plan_scratch_bytes(n, K, E) <= r);
                    CHECK(kernels::moe_aux_scratch_bytes(n, E) <= r);
                }
                CHECK(kernels::grouped_scratch_bytes(E) <= r);
            }
    // the plan: [bad | one row of E counts per 256 pairs]; Qwen3-30B-A3B (top 8 of 128) at 2^18
    // positions needs 8192 chunks x 128 experts x 4 bytes + 4, past the column sums' 4 MiB
    CHECK(kernels::moe_plan_scratch_bytes(1 << 18, 8, 128) == 4 * (1 + 8192 * size_t(128)));
    CHECK(kernels::driver_scratch_bytes(1 << 18, 128, 8) == 4 * (1 + 8192 * size_t(128)));
    CHECK(kernels::moe_plan_scratch_bytes(1, 1, 4) == 4 * 5);
    CHECK(kernels::moe_plan_scratch_bytes(0, 8, 128) == 4);
    // the aux stats: partials of one output over 2E + 2 columns (256-byte aligned), 2N floats
    CHECK(kernels::moe_aux_partials_bytes(1 << 18, 128) ==
          kernels::colsum_scratch_bytes(1, 1 << 18, 258));
    CHECK(kernels::moe_aux_scratch_bytes(1 << 18, 128) ==
          kernels::colsum_scratch_bytes(1, 1 << 18, 258) + 8 * size_t(1 << 18));
    CHECK(kernels::moe_aux_partials_bytes(1, 4) % 256 == 0);
    CHECK(kernels::grouped_scratch_bytes(32) == 3 * sizeof(void*) * 32);
}

TEST_CASE("scratch: capacity grows by at least doubling, in whole granules" *
          doctest::test_suite("cpu")) {
    const size_t G = kernels::kScratchGranule;
    CHECK(kernels::scratch_capacity(0, 0) == 0);
    CHECK(kernels::scratch_capacity(0, 1) == G);
    CHECK(kernels::scratch_capacity(G, G) == G); // fits: unchanged
    CHECK(kernels::scratch_capacity(4 * G, 5) == 4 * G);
    CHECK(kernels::scratch_capacity(G, G + 1) == 2 * G); // at least twice
    CHECK(kernels::scratch_capacity(G, 5 * G + 1) == 6 * G);
    for (size_t have : {size_t(0), G, 3 * G})
        for (size_t need : {size_t(1), G - 1, 7 * G + 3}) {
            const size_t c = kernels::scratch_capacity(have, need);
            CHECK(c >= need);
            CHECK(c % G == 0);
            if (need > have) CHECK(c >= 2 * have);
        }
}

namespace {

// Memory hooks that log what the scratch does, in order.
struct Log {
    std::vector<std::string> ev;
    std::vector<std::vector<char>> blocks;
    bool fail = false;
    kernels::Scratch::Memory memory() {
        kernels::Scratch::Memory m;
        m.alloc = [this](size_t n) -> void* {
            if (fail) SOF_FAIL(Runtime, "out of device memory");
            ev.push_back("alloc " + std::to_string(n));
            blocks.emplace_back(n);
            return blocks.back().data();
        };
        m.free = [this](void*) { ev.push_back("free"); };
        m.drain = [this] { ev.push_back("drain"); };
        return m;
    }
};

} // namespace

TEST_CASE("scratch: reserve once, no allocation on the hot path, grow drains first" *
          doctest::test_suite("cpu")) {
    const size_t G = kernels::kScratchGranule;
    Log log;
    {
        kernels::Scratch s(log.memory(), "test scratch");
        CHECK(log.ev.empty()); // nothing before it is asked for
        s.reserve(G + 5);
        CHECK(log.ev == std::vector<std::string>{"alloc " + std::to_string(2 * G)});
        void* p = s.get(100, "op a");
        CHECK(s.get(2 * G, "op b") == p); // fits: the same buffer, nothing allocated
        CHECK(log.ev.size() == 1);
        CHECK(s.grows() == 0);
        CHECK(s.peak() == 2 * G);
        // a request past the capacity: the queued ops may still read the old buffer
        s.get(3 * G, "op c");
        CHECK(log.ev == std::vector<std::string>{"alloc " + std::to_string(2 * G), "drain", "free",
                                                 "alloc " + std::to_string(4 * G)});
        CHECK(s.grows() == 1);
        CHECK(s.capacity() == 4 * G);
        log.ev.clear();
    }
    CHECK(log.ev == std::vector<std::string>{"drain", "free"}); // the destructor
    // a failed allocation names the op and the buffer
    Log bad;
    bad.fail = true;
    kernels::Scratch s(bad.memory(), "kernel scratch (model)");
    try {
        s.get(10, "layernorm_backward");
        FAIL("no error");
    } catch (const core::Error& e) {
        const std::string m = e.what();
        CHECK(m.find("layernorm_backward") != std::string::npos);
        CHECK(m.find("kernel scratch (model)") != std::string::npos);
        CHECK(m.find("out of device memory") != std::string::npos);
    }
    // an Exec without scratch: an Internal error naming the op
    CHECK_THROWS_WITH_AS(kernels::scratch_get(nullptr, 8, "bias_grad"),
                         doctest::Contains("bias_grad"), core::Error);
}

TEST_CASE("scratch: make_scratch takes the device's accounted memory" *
          doctest::test_suite("cpu")) {
    device::HostDevice dev(size_t(1) << 26, nullptr);
    auto st = dev.create_stream("scratch");
    const size_t before = dev.used();
    {
        auto s = device::make_scratch(dev, *st, "kernel scratch (test)");
        CHECK(dev.used() == before);
        s->reserve(kernels::driver_scratch_bytes(1024));
        CHECK(dev.used() == before + s->capacity());
        CHECK(s->capacity() >= kernels::colsum_scratch_max(2));
    }
    CHECK(dev.used() == before);
    // over the device's capacity: the device's own error, naming the buffer
    device::HostDevice small(size_t(1) << 20, nullptr);
    auto st2 = small.create_stream("scratch");
    auto s = device::make_scratch(small, *st2, "kernel scratch (small)");
    CHECK_THROWS_WITH_AS(s->reserve(size_t(8) << 20), doctest::Contains("kernel scratch (small)"),
                         core::Error);
}

TEST_CASE("SOF_CUDA_SYNC: the values that turn it on" * doctest::test_suite("cpu")) {
    for (const char* on : {"1", "yes", "true", "on", "2"})
        CHECK(core::cuda_sync_value_on(on));
    for (const char* off : {"", "0", "no", "false", "off", "OFF"})
        CHECK_FALSE(core::cuda_sync_value_on(off));
    CHECK_FALSE(core::cuda_sync_value_on(nullptr));
#if defined(SOF_HAVE_CUDA)
    // without the switch (ctest runs without SOF_CUDA_SYNC) it returns at once, GPU or not
    if (!core::cuda_sync_mode()) CHECK_NOTHROW(kernels::detail::cuda_op_done("noop", nullptr));
#endif
}
