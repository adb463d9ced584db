// Rank placement (one rank per GPU on the NUMA node nearest it, cores split between ranks that
// share a node), binding with hwloc (CPU set + memory policy) and the launcher's local rank.
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "core/strfmt.h"
#include "topo/hwloc_topo.h"
#include "topo/topo.h"

namespace sof::topo {

namespace {

// The CPU-bearing node rank r lands on (index into cpu_nodes), and the GPU it drives (or -1).
int node_of_rank(const Machine& m, const std::vector<int>& cpu_nodes, int r, int local_size,
                 int* gpu) {
    int K = static_cast<int>(cpu_nodes.size());
    int G = static_cast<int>(m.gpus.size());
    *gpu = -1;
    if (G > 0) {
        *gpu = r % G;
        const Gpu& g = m.gpus[static_cast<size_t>(*gpu)];
        if (!g.near_nodes.empty())
            for (int k = 0; k < K; ++k)
                if (cpu_nodes[static_cast<size_t>(k)] == g.near_nodes.front()) return k;
        return static_cast<int>(static_cast<long>(*gpu) * K / G);
    }
    return static_cast<int>(static_cast<long>(r) * K / local_size);
}

} // namespace

Placement plan_placement(const std::string& xml_or_empty, int local_rank, int local_size) {
    if (local_size < 1)
        SOF_FAIL(Config, "local_size = %d: a node runs at least one rank", local_size);
    if (local_rank < 0 || local_rank >= local_size)
        SOF_FAIL(Config,
                 "local_rank = %d is outside [0, %d) (check --local-rank or the "
                 "launcher's OMPI_COMM_WORLD_LOCAL_RANK / SLURM_LOCALID)",
                 local_rank, local_size);
    HwlocTopology t(xml_or_empty);
    hwloc_topology_t topo = t.get();
    Machine m = discover_from(t);
    Placement p;
    p.local_rank = local_rank;
    p.local_size = local_size;
    p.source = m.source;

    std::vector<int> cpu_nodes;
    for (const NumaNode& n : m.numa)
        if (!n.cpuset.empty()) cpu_nodes.push_back(n.os_index);
    if (cpu_nodes.empty()) {
        hwloc_const_cpuset_t all = hwloc_topology_get_topology_cpuset(topo);
        p.cpuset = list_string(all);
        p.num_cores = count_cores(topo, all);
        p.reason = "no NUMA node with cores: the whole machine, no memory binding";
        return p;
    }

    int gpu = -1;
    int k = node_of_rank(m, cpu_nodes, local_rank, local_size, &gpu);
    // ranks sharing node k split its cores in local-rank order
    int share = 0, sharers = 0;
    for (int r = 0; r < local_size; ++r) {
        int g = -1;
        if (node_of_rank(m, cpu_nodes, r, local_size, &g) != k) continue;
        if (r < local_rank) ++share;
        ++sharers;
    }
    p.numa_node = cpu_nodes[static_cast<size_t>(k)];
    hwloc_obj_t node = hwloc_get_numanode_obj_by_os_index(topo, static_cast<unsigned>(p.numa_node));
    SOF_CHECK(node, "NUMA node %d vanished from the topology", p.numa_node);
    int cores = hwloc_get_nbobjs_inside_cpuset_by_type(topo, node->cpuset, HWLOC_OBJ_CORE);
    hwloc_obj_type_t unit = cores > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
    if (cores <= 0) cores = hwloc_get_nbobjs_inside_cpuset_by_type(topo, node->cpuset, unit);
    Bitmap set;
    if (cores >= sharers) {
        int lo = static_cast<int>(static_cast<long>(share) * cores / sharers);
        int hi = static_cast<int>(static_cast<long>(share + 1) * cores / sharers);
        for (int c = lo; c < hi; ++c) {
            hwloc_obj_t o = hwloc_get_obj_inside_cpuset_by_type(topo, node->cpuset, unit,
                                                                static_cast<unsigned>(c));
            hwloc_bitmap_or(set.get(), set.get(), o->cpuset);
        }
    } else {
        hwloc_bitmap_copy(set.get(), node->cpuset); // more ranks than cores: share all
    }
    p.cpuset = list_string(set.get());
    p.num_cores = count_cores(topo, set.get());
    if (gpu >= 0) {
        const Gpu& g = m.gpus[static_cast<size_t>(gpu)];
        p.gpu = g.pci.empty() ? g.name : g.name + " (" + g.pci + ")";
        p.reason =
            g.near_nodes.empty()
                ? core::strfmt("GPU %s has no known locality: node by GPU index", g.name.c_str())
                : core::strfmt("NUMA node %d is local to GPU %s", p.numa_node, g.name.c_str());
    } else {
        p.reason = core::strfmt("no GPUs: %d ranks spread over %zu NUMA nodes", local_size,
                                cpu_nodes.size());
    }
    if (sharers > 1)
        p.reason +=
            core::strfmt("; %d ranks share the node, this one takes part %d", sharers, share);
    return p;
}

std::string Placement::describe() const {
    return core::strfmt("local rank %d/%d: NUMA node %d, %d cores (PUs %s)%s%s; %s", local_rank,
                        local_size, numa_node, num_cores, cpuset.c_str(),
                        gpu.empty() ? "" : ", GPU ", gpu.c_str(), reason.c_str());
}

void bind(const Placement& p) {
    HwlocTopology t("");
    hwloc_topology_t topo = t.get();
    if (!t.is_this_system())
        SOF_FAIL(Runtime,
                 "cannot bind: the topology (%s) is not this system; unset "
                 "HWLOC_XMLFILE",
                 t.source().c_str());
    Bitmap cpus;
    if (hwloc_bitmap_list_sscanf(cpus.get(), p.cpuset.c_str()) != 0 ||
        hwloc_bitmap_iszero(cpus.get()))
        SOF_FAIL(Runtime, "cannot bind local rank %d: bad CPU set '%s'", p.local_rank,
                 p.cpuset.c_str());
    if (!hwloc_bitmap_isincluded(cpus.get(), hwloc_topology_get_allowed_cpuset(topo)))
        SOF_FAIL(Runtime,
                 "cannot bind local rank %d to PUs %s: this process may only use %s "
                 "(placement from another machine, or a launcher cpuset that is too small)",
                 p.local_rank, p.cpuset.c_str(),
                 list_string(hwloc_topology_get_allowed_cpuset(topo)).c_str());
    if (hwloc_set_cpubind(topo, cpus.get(), HWLOC_CPUBIND_PROCESS) != 0) {
        int err = errno;
        // single-threaded processes (or systems without process binding) still bind the thread
        if (hwloc_set_cpubind(topo, cpus.get(), HWLOC_CPUBIND_THREAD) != 0)
            SOF_FAIL(Runtime, "hwloc_set_cpubind(%s) failed for local rank %d: %s",
                     p.cpuset.c_str(), p.local_rank, std::strerror(err));
    }
    if (p.numa_node < 0) return;
    Bitmap nodes;
    hwloc_bitmap_only(nodes.get(), static_cast<unsigned>(p.numa_node));
    if (hwloc_set_membind(topo, nodes.get(), HWLOC_MEMBIND_BIND,
                          HWLOC_MEMBIND_PROCESS | HWLOC_MEMBIND_BYNODESET) != 0 &&
        hwloc_set_membind(topo, nodes.get(), HWLOC_MEMBIND_BIND,
                          HWLOC_MEMBIND_THREAD | HWLOC_MEMBIND_BYNODESET) != 0)
        SOF_FAIL(Runtime,
                 "hwloc_set_membind(node %d) failed for local rank %d: %s (a container "
                 "without CAP_SYS_NICE or a kernel without NUMA policy; set parallel.bind: false)",
                 p.numa_node, p.local_rank, std::strerror(errno));
}

std::string current_binding() {
    HwlocTopology t("");
    Bitmap set;
    if (hwloc_get_cpubind(t.get(), set.get(), HWLOC_CPUBIND_THREAD) != 0) return "";
    return list_string(set.get());
}

namespace {

int env_int(const char* const* names, int fallback) {
    for (const char* const* n = names; *n; ++n) {
        const char* v = std::getenv(*n);
        if (!v || !*v) continue;
        char* end = nullptr;
        long x = std::strtol(v, &end, 10);
        if (end && *end == '\0' && x >= 0) return static_cast<int>(x);
    }
    return fallback;
}

} // namespace

int local_rank_from_env(int fallback) {
    static const char* const names[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID",
                                        "MPI_LOCALRANKID", "PMI_LOCAL_RANK", nullptr};
    return env_int(names, fallback);
}

// Tasks of this step on node SLURM_NODEID from SLURM_STEP_TASKS_PER_NODE ("2(x3),1": three
// nodes with 2 tasks, then one with 1); -1 when unset or malformed. Set by every srun step, also
// without --ntasks-per-node (where SLURM_NTASKS_PER_NODE is missing).
static int slurm_step_tasks_here() {
    const char* v = std::getenv("SLURM_STEP_TASKS_PER_NODE");
    const char* id = std::getenv("SLURM_NODEID");
    if (!v || !*v) return -1;
    long node = id && *id ? std::strtol(id, nullptr, 10) : 0;
    const char* p = v;
    while (*p) {
        char* end = nullptr;
        long count = std::strtol(p, &end, 10);
        if (end == p || count < 0) return -1;
        long reps = 1;
        p = end;
        if (*p == '(') {
            if (p[1] != 'x') return -1;
            reps = std::strtol(p + 2, &end, 10);
            if (end == p + 2 || *end != ')' || reps < 1) return -1;
            p = end + 1;
        }
        if (node < reps) return static_cast<int>(count);
        node -= reps;
        if (*p == ',')
            p++;
        else if (*p)
            return -1;
    }
    return -1;
}

int local_size_from_env(int fallback) {
    static const char* const ompi[] = {"OMPI_COMM_WORLD_LOCAL_SIZE", nullptr};
    int n = env_int(ompi, -1);
    if (n >= 0) return n;
    n = slurm_step_tasks_here();
    if (n > 0) return n;
    static const char* const names[] = {"SLURM_NTASKS_PER_NODE", "MPI_LOCALNRANKS",
                                        "PMI_LOCAL_SIZE", nullptr};
    return env_int(names, fallback);
}

} // namespace sof::topo
