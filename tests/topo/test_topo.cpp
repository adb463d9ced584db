// lib/topo against the GH200 4-Superchip fixture (gh200-4x.xml, written by make_gh200_xml.py):
// discovery, per-GPU placement, ranks sharing a node, bad arguments; and this machine (dry run,
// bind to the current CPU set).
#include <doctest/doctest.h>

#include <numa.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "topo/topo.h"

using namespace sof;
using namespace sof::topo;

namespace {

const std::string kFixture = std::string(SOF_SOURCE_DIR) + "/tests/topo/gh200-4x.xml";

std::string range(int lo, int hi) {
    return std::to_string(lo) + "-" + std::to_string(hi);
}

} // namespace

TEST_CASE("gh200 fixture: 4 packages x 72 cores, 4 Grace + 4 HBM NUMA nodes, 4 GPUs") {
    Machine m = discover(kFixture);
    CHECK(m.source == kFixture);
    CHECK(m.packages == 4);
    CHECK(m.cores == 288);
    CHECK(m.pus == 288);
    REQUIRE(m.numa.size() == 8);
    int with_cores = 0;
    for (const NumaNode& n : m.numa) {
        if (n.os_index < 4) {
            ++with_cores;
            CHECK(n.num_cores == 72);
            CHECK(n.cpuset == range(72 * n.os_index, 72 * n.os_index + 71));
            CHECK(n.memory_gb == doctest::Approx(120 * 1.073741824));
        } else {
            CHECK(n.cpuset.empty());
            CHECK(n.subtype == "GPUMemory");
            CHECK((n.os_index == 4 || n.os_index == 12 || n.os_index == 20 || n.os_index == 28));
        }
    }
    CHECK(with_cores == 4);
    REQUIRE(m.gpus.size() == 4);
    const char* bus[] = {"0009:01:00.0", "0019:01:00.0", "0029:01:00.0", "0039:01:00.0"};
    for (int g = 0; g < 4; ++g) {
        CAPTURE(g);
        CHECK(m.gpus[g].name == "cuda" + std::to_string(g));
        CHECK(m.gpus[g].pci == bus[g]);
        CHECK(m.gpus[g].model == "GH100 [GH200 120GB / 480GB]");
        REQUIRE(m.gpus[g].near_nodes.size() == 1);
        CHECK(m.gpus[g].near_nodes[0] == g);
        CHECK(m.gpus[g].near_cpuset == range(72 * g, 72 * g + 71));
    }
    std::string d = m.describe();
    CHECK(d.find("4 packages, 288 cores") != std::string::npos);
    CHECK(d.find("GPUMemory") != std::string::npos);
    MESSAGE(d);
}

TEST_CASE("gh200 fixture: one rank per Superchip on the Grace node next to its GPU") {
    for (int r = 0; r < 4; ++r) {
        CAPTURE(r);
        Placement p = plan_placement(kFixture, r, 4);
        CHECK(p.local_rank == r);
        CHECK(p.local_size == 4);
        CHECK(p.numa_node == r);
        CHECK(p.cpuset == range(72 * r, 72 * r + 71));
        CHECK(p.num_cores == 72);
        CHECK(p.gpu.find("cuda" + std::to_string(r)) == 0);
        CHECK(p.describe().find("local to GPU cuda" + std::to_string(r)) != std::string::npos);
    }
}

TEST_CASE("gh200 fixture: two ranks per Superchip split its cores; a single rank takes GPU 0") {
    // 8 ranks, 4 GPUs: rank r drives GPU r % 4; ranks r and r+4 share node r%4
    Placement a = plan_placement(kFixture, 1, 8);
    Placement b = plan_placement(kFixture, 5, 8);
    CHECK(a.numa_node == 1);
    CHECK(b.numa_node == 1);
    CHECK(a.cpuset == range(72, 107));
    CHECK(b.cpuset == range(108, 143));
    CHECK(a.num_cores == 36);
    CHECK(b.num_cores == 36);
    Placement one = plan_placement(kFixture, 0, 1);
    CHECK(one.numa_node == 0);
    CHECK(one.cpuset == range(0, 71));
}

TEST_CASE("placement argument errors") {
    CHECK_THROWS_AS(plan_placement(kFixture, 4, 4), core::Error);
    CHECK_THROWS_AS(plan_placement(kFixture, -1, 4), core::Error);
    CHECK_THROWS_AS(plan_placement(kFixture, 0, 0), core::Error);
    try {
        plan_placement("/nonexistent/topo.xml", 0, 1);
        FAIL("expected an error");
    } catch (const core::Error& e) {
        CHECK(std::string(e.what()).find("/nonexistent/topo.xml") != std::string::npos);
    }
}

TEST_CASE("HWLOC_XMLFILE stands in for this system") {
    setenv("HWLOC_XMLFILE", kFixture.c_str(), 1);
    Placement p = plan_placement("", 2, 4);
    Machine m = discover("");
    unsetenv("HWLOC_XMLFILE");
    CHECK(m.packages == 4);
    CHECK(p.numa_node == 2);
    CHECK(p.cpuset == range(144, 215));
    CHECK(p.source.find("HWLOC_XMLFILE") != std::string::npos);
}

TEST_CASE("local rank and size from the launcher environment") {
    unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
    unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    unsetenv("MPI_LOCALRANKID");
    unsetenv("PMI_LOCAL_RANK");
    setenv("SLURM_LOCALID", "3", 1);
    setenv("SLURM_NTASKS_PER_NODE", "4", 1);
    CHECK(local_rank_from_env(-1) == 3);
    CHECK(local_size_from_env(-1) == 4);
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1); // Open MPI's value wins
    CHECK(local_rank_from_env(-1) == 1);
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "x", 1); // not a number: next source
    CHECK(local_rank_from_env(-1) == 3);
    unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
    unsetenv("SLURM_LOCALID");
    unsetenv("SLURM_NTASKS_PER_NODE");
    CHECK(local_rank_from_env(-1) == -1);
    CHECK(local_size_from_env(7) == 7);
}

TEST_CASE("local size of a bare srun step (no --ntasks-per-node): SLURM_STEP_TASKS_PER_NODE") {
    unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    unsetenv("SLURM_NTASKS_PER_NODE");
    setenv("SLURM_STEP_TASKS_PER_NODE", "2(x3),1", 1);
    for (auto [node, want] : {std::pair{"0", 2}, {"2", 2}, {"3", 1}}) {
        setenv("SLURM_NODEID", node, 1);
        CHECK(local_size_from_env(-1) == want);
    }
    setenv("SLURM_STEP_TASKS_PER_NODE", "4", 1);
    unsetenv("SLURM_NODEID");
    CHECK(local_size_from_env(-1) == 4);
    setenv("SLURM_STEP_TASKS_PER_NODE", "2(y3)", 1); // malformed: the next source
    CHECK(local_size_from_env(9) == 9);
    unsetenv("SLURM_STEP_TASKS_PER_NODE");
}

TEST_CASE("this machine: dry-run placement, binding to the allowed set, binding to a foreign one") {
    Machine m = discover("");
    CHECK(m.source == "this system");
    CHECK(m.pus >= 1);
    CHECK(!m.numa.empty());
    Placement p = plan_placement("", 0, 1);
    CHECK(!p.cpuset.empty());
    CHECK(p.num_cores >= 1);
    MESSAGE(m.describe() << "placement: " << p.describe());
    std::string before = current_binding();
    CHECK(!before.empty());
    // binding to what this process may already use succeeds; a memory policy may be refused in
    // a container, which must come back as a Runtime error that names the call
    try {
        bind(p);
        CHECK(current_binding() == p.cpuset);
        // memory touched after binding lands on the rank's node (libnuma's page query)
        std::vector<char> buf(1 << 20);
        std::memset(buf.data(), 1, buf.size());
        int node = memory_node_of(buf.data() + buf.size() / 2);
        if (numa_available() >= 0) CHECK(node == p.numa_node);
        CHECK(memory_node_of(nullptr) == -1);
    } catch (const core::Error& e) {
        CHECK(e.kind() == core::ErrorKind::Runtime);
        CHECK(std::string(e.what()).find("hwloc_set_membind") != std::string::npos);
    }
    // the fixture's rank 3 (PUs 216-287) does not exist here
    Placement foreign = plan_placement(kFixture, 3, 4);
    if (m.pus <= 216) {
        try {
            bind(foreign);
            FAIL("expected a Runtime error");
        } catch (const core::Error& e) {
            CHECK(e.kind() == core::ErrorKind::Runtime);
            CHECK(std::string(e.what()).find("216-287") != std::string::npos);
        }
    }
}

TEST_CASE("this machine: GPUs hwloc cannot see come from a numeric CUDA_VISIBLE_DEVICES") {
    Machine plain = discover("");
    if (!plain.gpus.empty()) return; // a machine with PCI-visible GPUs: covered by the fixture
    setenv("CUDA_VISIBLE_DEVICES", "2,3", 1);
    Machine m = discover("");
    Placement p = plan_placement("", 1, 2);
    setenv("CUDA_VISIBLE_DEVICES", "GPU-5f1e", 1); // UUIDs: not usable as indexes
    Machine u = discover("");
    unsetenv("CUDA_VISIBLE_DEVICES");
    REQUIRE(m.gpus.size() == 2);
    CHECK(m.gpus[0].name == "cuda2");
    CHECK(m.gpus[1].near_nodes.empty());
    CHECK(p.gpu == "cuda3");
    CHECK(p.numa_node == plain.numa.front().os_index);
    CHECK(p.describe().find("no known locality") != std::string::npos);
    CHECK(u.gpus.empty());
}
