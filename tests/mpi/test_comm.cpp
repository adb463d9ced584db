// Collectives: host Group ops against sums computed locally (rank order, bitwise), byte counters,
// the device-buffer layer (direct, CUDA-aware and forced staged transport, multi-chunk, fp32 and
// 16-bit) against them, and the Ulysses exchange on device buffers against its definition.
#include "train/mpi_main.h"

#include <random>

#include "comm/group.h"
#include "comm/lane.h"
#include "comm/world.h"
#include "config/config.h"
#include "rank/device_comm.h"
#include "rank/device_set.h"
#include "sp/ulysses.h"

using namespace sof;

namespace {

// Rank q's input: deterministic, so every rank knows every rank's data.
std::vector<float> input_of(int q, size_t n) {
    std::mt19937 g(1234u + static_cast<unsigned>(q));
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    std::vector<float> v(n);
    for (float& x : v)
        x = d(g) * (q + 1.5f);
    return v;
}

bool bits_equal(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

} // namespace

TEST_CASE("the MPI library is named; its CUDA query is the one its mpi.h declares") {
    const std::string lib = comm::mpi_library();
    MESSAGE("MPI library: " << lib);
    CHECK(lib.find('\n') == std::string::npos);
    CHECK(lib.find("  ") == std::string::npos);
#if defined(OPEN_MPI)
    CHECK(lib.rfind("Open MPI v", 0) == 0);
#elif defined(MPICH_VERSION)
    CHECK(lib.find("MPICH") != std::string::npos);
#endif
    const comm::CudaAwareness own = comm::query_cuda_awareness(nullptr);
    MESSAGE("CUDA-aware: " << own.supported << " (" << own.source << ")");
#if defined(MPIX_GPU_SUPPORT_CUDA) // MPICH 4 (Debian's mpich, Cray MPICH on MPICH 4)
    CHECK(own.source.rfind("MPIX_GPU_query_support(CUDA) = ", 0) == 0);
#elif defined(OPEN_MPI)
    CHECK((own.source.find("MPIX_Query_cuda_support") != std::string::npos ||
           own.source.find("MPIX_CUDA_AWARE_SUPPORT") != std::string::npos));
#endif
    comm::CudaAwareness off = comm::query_cuda_awareness("0");
    comm::CudaAwareness on = comm::query_cuda_awareness("1");
#if defined(OPEN_MPI) // Cray MPICH's switch means nothing here
    CHECK(off.supported == own.supported);
    CHECK(on.supported == own.supported);
    CHECK(on.source == own.source);
#else
    // the switch off: no device buffers to MPI, whatever the library could do
    CHECK_FALSE(off.supported);
    CHECK(off.source.rfind("MPICH_GPU_SUPPORT_ENABLED=0", 0) == 0);
    CHECK(on.source.rfind("MPICH_GPU_SUPPORT_ENABLED=1", 0) == 0);
#if defined(MPIX_GPU_SUPPORT_CUDA) // on: the library's own answer decides
    CHECK(on.supported == own.supported);
#else // a library without a query (older Cray MPICH) is taken at the switch's word
    CHECK(on.supported);
    CHECK_FALSE(own.supported);
#endif
#endif
}

TEST_CASE("host collectives: rank-order sums, bitwise, with byte counts") {
    comm::Group g(MPI_COMM_WORLD, 0, 0, "test");
    const int P = g.size(), r = g.rank();
    for (size_t n : {size_t(1), size_t(7), size_t(1000)}) {
        // reduce-scatter: out = sum over q in order of input_q[r*n ..]
        std::vector<float> in = input_of(r, P * n), out(n), scratch(P * n);
        comm::CommBytes b0 = g.bytes();
        g.reduce_scatter(in.data(), out.data(), n, scratch.data());
        comm::CommBytes db = g.bytes() - b0;
        std::vector<float> want(n);
        for (int q = 0; q < P; q++) {
            std::vector<float> x = input_of(q, P * n);
            for (size_t i = 0; i < n; i++)
                want[i] = q == 0 ? x[r * n + i] : want[i] + x[r * n + i];
        }
        CHECK(bits_equal(out, want));
        CHECK(db.sent[1] == static_cast<uint64_t>(P - 1) * n * 4);
        // allgather
        std::vector<float> all(P * n);
        std::vector<float> mine = input_of(r, n);
        g.allgather(mine.data(), all.data(), n);
        for (int q = 0; q < P; q++) {
            std::vector<float> x = input_of(q, n);
            CHECK(std::memcmp(all.data() + q * n, x.data(), n * 4) == 0);
        }
        // allreduce: every rank the same bits, equal to the rank-order sum
        std::vector<float> buf = input_of(r, n), ar_scratch(2 * P * ((n + P - 1) / P));
        g.allreduce(buf.data(), n, ar_scratch.data());
        std::vector<float> sum(n);
        for (int q = 0; q < P; q++) {
            std::vector<float> x = input_of(q, n);
            for (size_t i = 0; i < n; i++)
                sum[i] = q == 0 ? x[i] : sum[i] + x[i];
        }
        CHECK(bits_equal(buf, sum));
    }
    double s = g.ordered_sum(0.1 * (r + 1));
    double want = 0;
    for (int q = 0; q < P; q++)
        want += 0.1 * (q + 1);
    CHECK(s == want);
    CHECK(g.any(r == P - 1));
    CHECK_FALSE(g.any(false));
}

TEST_CASE("device collectives: direct, CUDA-aware and staged (several chunks) give the host bits") {
    comm::Group g(MPI_COMM_WORLD, 0, 0, "dev");
    const int P = g.size(), r = g.rank();
    config::DeviceConfig dc;
    dc.type = config::DeviceType::Host;
    rank::DeviceSet devs(dc, 0, nullptr);
    std::string why;
    CHECK(rank::choose_transport(devs, g, false, &why) == rank::Transport::Direct);
    CHECK(rank::choose_transport(devs, g, true, &why) == rank::Transport::Staged);
    device::Device& d = devs.device();
    const size_t n = 2500; // 2500 floats, staging chunks of 1000 bytes: 10 chunks, last partial
    for (rank::Transport t :
         {rank::Transport::Direct, rank::Transport::CudaAware, rank::Transport::Staged}) {
        // CUDA-aware on the host device: MPI reads host memory, the sums run on the stream
        INFO(rank::transport_name(t));
        rank::DeviceComm dcomm(devs, g, t, 1000);
        float* din = static_cast<float*>(d.alloc(P * n * 4, "in"));
        float* dout = static_cast<float*>(d.alloc(P * n * 4, "out"));
        std::vector<float> in = input_of(r, P * n);
        d.copy(din, in.data(), P * n * 4, device::CopyKind::HostToDevice, devs.compute());
        auto ev = d.create_event();
        d.record(*ev, devs.compute()); // the producer's event: the collective waits for it
        comm::CommBytes b0 = g.bytes();
        dcomm.reduce_scatter(din, dout, n, ev.get());
        comm::CommBytes db = g.bytes() - b0;
        std::vector<float> got(n), want(n), scratch(P * n);
        d.copy(got.data(), dout, n * 4, device::CopyKind::DeviceToHost, devs.compute());
        d.synchronize(devs.compute());
        g.reduce_scatter(in.data(), want.data(), n, scratch.data());
        CHECK(bits_equal(got, want));
        // every path counts its bytes as the host reduce-scatter does
        CHECK(db.sent[1] == static_cast<uint64_t>(P - 1) * n * 4);
        CHECK(db.total_sent() == db.sent[1]);
        // with the caller's scratch (device, P*n)
        float* dscratch = static_cast<float*>(d.alloc(P * n * 4, "scratch"));
        d.memset(dout, 0, n * 4, devs.compute());
        d.synchronize(devs.compute());
        dcomm.reduce_scatter(din, dout, n, nullptr, dscratch);
        d.copy(got.data(), dout, n * 4, device::CopyKind::DeviceToHost, devs.compute());
        d.synchronize(devs.compute());
        CHECK(bits_equal(got, want));
        d.free(dscratch);

        dcomm.allgather(din, dout, n, nullptr);
        std::vector<float> all(P * n), hall(P * n);
        d.copy(all.data(), dout, P * n * 4, device::CopyKind::DeviceToHost, devs.compute());
        d.synchronize(devs.compute());
        g.allgather(in.data(), hall.data(), n);
        CHECK(bits_equal(all, hall));

        dcomm.alltoall(din, dout, n, nullptr);
        std::vector<float> a2a(P * n), ha2a(P * n);
        d.copy(a2a.data(), dout, P * n * 4, device::CopyKind::DeviceToHost, devs.compute());
        d.synchronize(devs.compute());
        g.alltoall(in.data(), ha2a.data(), n);
        CHECK(bits_equal(a2a, ha2a));

        b0 = g.bytes();
        dcomm.allreduce(din, n, nullptr);
        db = g.bytes() - b0;
        std::vector<float> ar(n), har(in.begin(), in.begin() + n), s2(2 * P * ((n + P - 1) / P));
        d.copy(ar.data(), din, n * 4, device::CopyKind::DeviceToHost, devs.compute());
        d.synchronize(devs.compute());
        comm::CommBytes h0 = g.bytes();
        g.allreduce(har.data(), n, s2.data());
        comm::CommBytes hb = g.bytes() - h0;
        CHECK(bits_equal(ar, har));
        if (t != rank::Transport::Staged) CHECK(db.sent == hb.sent); // staged: per chunk
        CHECK(db.total_sent() == db.sent[2]);
        // with the caller's scratch (device, allreduce_scratch(n))
        float* ascratch =
            static_cast<float*>(d.alloc(dcomm.allreduce_scratch(n) * 4, "allreduce scratch"));
        d.copy(din, in.data(), n * 4, device::CopyKind::HostToDevice, devs.compute());
        d.synchronize(devs.compute());
        dcomm.allreduce(din, n, nullptr, ascratch);
        d.copy(ar.data(), din, n * 4, device::CopyKind::DeviceToHost, devs.compute());
        d.synchronize(devs.compute());
        CHECK(bits_equal(ar, har));
        d.free(ascratch);

        // 16-bit elements (bf16 gathers and exchanges): bit patterns through unchanged
        std::vector<uint16_t> in16(P * n), all16(P * n), want16(P * n);
        for (size_t i = 0; i < in16.size(); i++)
            in16[i] = static_cast<uint16_t>((r * 7919 + i * 31) & 0xffff);
        uint16_t* d16 = static_cast<uint16_t*>(d.alloc(P * n * 2, "in16"));
        uint16_t* o16 = static_cast<uint16_t*>(d.alloc(P * n * 2, "out16"));
        d.copy(d16, in16.data(), P * n * 2, device::CopyKind::HostToDevice, devs.compute());
        d.record(*ev, devs.compute());
        dcomm.allgather(d16, o16, n, ev.get());
        d.copy(all16.data(), o16, P * n * 2, device::CopyKind::DeviceToHost, devs.compute());
        d.synchronize(devs.compute());
        g.allgather(in16.data(), want16.data(), n);
        CHECK(all16 == want16);
        dcomm.alltoall(d16, o16, n, nullptr);
        d.copy(all16.data(), o16, P * n * 2, device::CopyKind::DeviceToHost, devs.compute());
        d.synchronize(devs.compute());
        g.alltoall(in16.data(), want16.data(), n);
        CHECK(all16 == want16);
        d.free(d16);
        d.free(o16);
        d.free(din);
        d.free(dout);
    }
}

// Ulysses' definition, computed from every rank's input: to_heads gives rank i
// out[b, j*Tl + t, k, :] = in_j[b, t, k, i, :] (rank j's tokens, channel group i).
TEST_CASE("Ulysses on device buffers: the definition, its inverse, fp32 and 16-bit, every path") {
    comm::Group g(MPI_COMM_WORLD, 0, 0, "sp");
    const size_t P = static_cast<size_t>(g.size()), r = static_cast<size_t>(g.rank());
    config::DeviceConfig dc;
    dc.type = config::DeviceType::Host;
    rank::DeviceSet devs(dc, 0, nullptr);
    device::Device& d = devs.device();
    const int B = 2, Tl = 3, K = 2, X = 5;
    const size_t n = static_cast<size_t>(B) * Tl * K * P * X;
    auto at_tokens = [&](size_t b, size_t t, size_t k, size_t i, size_t x) {
        return (((b * Tl + t) * K + k) * P + i) * X + x;
    };
    auto at_heads = [&](size_t b, size_t t, size_t k, size_t x) { // t < P*Tl
        return ((b * P * Tl + t) * K + k) * X + x;
    };
    std::vector<float> want(n);
    for (size_t j = 0; j < P; j++) {
        std::vector<float> in_j = input_of(static_cast<int>(j), n);
        for (size_t b = 0; b < static_cast<size_t>(B); b++)
            for (size_t t = 0; t < static_cast<size_t>(Tl); t++)
                for (size_t k = 0; k < static_cast<size_t>(K); k++)
                    for (size_t x = 0; x < static_cast<size_t>(X); x++)
                        want[at_heads(b, j * Tl + t, k, x)] = in_j[at_tokens(b, t, k, r, x)];
    }
    const std::vector<float> in = input_of(static_cast<int>(r), n);
    for (rank::Transport t :
         {rank::Transport::Direct, rank::Transport::CudaAware, rank::Transport::Staged}) {
        INFO(rank::transport_name(t));
        auto stream = d.create_stream("sp comm");
        rank::DeviceComm dcomm(devs, g, t, 64, stream.get()); // staged: several chunks
        sp::Ulysses u(dcomm, devs.compute());
        CHECK(u.degree() == g.size());
        float* a = static_cast<float*>(d.alloc(n * 4, "a"));
        float* b = static_cast<float*>(d.alloc(n * 4, "b"));
        void* recv = d.alloc(n * 4, "recv"); // the caller's receive buffer (n elements)
        d.copy(a, in.data(), n * 4, device::CopyKind::HostToDevice, devs.compute());
        u.to_heads(a, b, recv, 4, B, Tl, K, X); // fp32: ready when it returns here (host device)
        std::vector<float> heads(b, b + n);
        CHECK(bits_equal(heads, want));
        d.memset(a, 0, n * 4, devs.compute());
        u.to_tokens(b, a, recv, 4, B, Tl, K, X);
        std::vector<float> back(a, a + n);
        CHECK(bits_equal(back, in));
        // 16-bit elements (bf16 activations): the low halves of the fp32 data, moved alike
        std::vector<uint16_t> in16(n), want16(n);
        for (size_t i = 0; i < n; i++) {
            uint32_t w, v;
            std::memcpy(&w, &in[i], 4);
            std::memcpy(&v, &want[i], 4);
            in16[i] = static_cast<uint16_t>(w);
            want16[i] = static_cast<uint16_t>(v);
        }
        uint16_t* a16 = static_cast<uint16_t*>(d.alloc(n * 2, "a16"));
        uint16_t* b16 = static_cast<uint16_t*>(d.alloc(n * 2, "b16"));
        std::memcpy(a16, in16.data(), n * 2);
        u.to_heads(a16, b16, recv, 2, B, Tl, K, X);
        CHECK(std::vector<uint16_t>(b16, b16 + n) == want16);
        u.to_tokens(b16, a16, recv, 2, B, Tl, K, X);
        CHECK(std::vector<uint16_t>(a16, a16 + n) == in16);
        CHECK_THROWS_WITH(u.to_heads(a16, a16 + 1, recv, 2, B, Tl, K, X),
                          doctest::Contains("overlap"));
        CHECK_THROWS_WITH(u.to_heads(a16, b16, b16 + 1, 2, B, Tl, K, X),
                          doctest::Contains("overlap"));
        d.free(recv);
        d.free(a16);
        d.free(b16);
        d.free(a);
        d.free(b);
    }
}

TEST_CASE("comm lane: jobs in submission order, waits rethrow a failed job") {
    comm::Lane lane("lane");
    std::vector<int> order;
    uint64_t t1 = lane.submit([&] { order.push_back(1); });
    uint64_t t2 = lane.submit([&] { order.push_back(2); });
    lane.wait(t2);
    CHECK(lane.done(t1));
    CHECK(order == std::vector<int>{1, 2});
    uint64_t t3 = lane.submit([] { throw std::runtime_error("boom"); });
    CHECK_THROWS_WITH(lane.wait(t3), "boom");
}
