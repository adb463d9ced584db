// Collectives: host Group ops against sums computed locally (rank order, bitwise), byte counters,
// and the device-buffer layer (direct and forced staged transport, multi-chunk) against them.
#include "train/mpi_main.h"

#include <random>

#include "comm/group.h"
#include "comm/lane.h"
#include "config/config.h"
#include "rank/device_comm.h"
#include "rank/device_set.h"

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

TEST_CASE("device collectives: direct and staged (forced, several chunks) give the host bits") {
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
    for (rank::Transport t : {rank::Transport::Direct, rank::Transport::Staged}) {
        INFO(rank::transport_name(t));
        rank::DeviceComm dcomm(devs, g, t, 1000);
        float* din = static_cast<float*>(d.alloc(P * n * 4, "in"));
        float* dout = static_cast<float*>(d.alloc(P * n * 4, "out"));
        std::vector<float> in = input_of(r, P * n);
        d.copy(din, in.data(), P * n * 4, device::CopyKind::HostToDevice, devs.compute());
        auto ev = d.create_event();
        d.record(*ev, devs.compute()); // the producer's event: the collective waits for it
        dcomm.reduce_scatter(din, dout, n, ev.get());
        std::vector<float> got(n), want(n), scratch(P * n);
        d.copy(got.data(), dout, n * 4, device::CopyKind::DeviceToHost, devs.compute());
        d.synchronize(devs.compute());
        g.reduce_scatter(in.data(), want.data(), n, scratch.data());
        CHECK(bits_equal(got, want));

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

        dcomm.allreduce(din, n, nullptr);
        std::vector<float> ar(n), har(in.begin(), in.begin() + n), s2(2 * P * ((n + P - 1) / P));
        d.copy(ar.data(), din, n * 4, device::CopyKind::DeviceToHost, devs.compute());
        d.synchronize(devs.compute());
        g.allreduce(har.data(), n, s2.data());
        CHECK(bits_equal(ar, har));
        d.free(din);
        d.free(dout);
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
