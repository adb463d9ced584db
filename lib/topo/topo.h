// Machine topology (hwloc): NUMA nodes, cores and GPUs with their locality, the placement of one
// rank per GPU (Superchip) on the NUMA node nearest its GPU, and binding threads + memory there.
#pragma once

#include <string>
#include <vector>

namespace sof::topo {

// One NUMA node. On GH200 each Superchip shows a Grace LPDDR5X node (with cores) and an HBM node
// (GPU memory, no cores).
struct NumaNode {
    int os_index = -1;    // the kernel's node number (numactl -m N)
    double memory_gb = 0; // local memory, 1e9 bytes
    std::string cpuset;   // PU list "0-71", empty for memory-only nodes
    int num_cores = 0;    // physical cores in cpuset
    std::string subtype;  // hwloc subtype ("GPUMemory" for HBM nodes on GH200), may be empty
};

// One GPU found as a PCI device (NVIDIA display/3D controller) or a CUDA/NVML OS device.
struct Gpu {
    std::string name;            // "cuda0" / "nvml0" when hwloc has OS devices, else "gpu<i>"
    std::string pci;             // bus id "0009:01:00.0"
    std::string model;           // hwloc PCIDevice name when known
    std::vector<int> near_nodes; // os indexes of CPU-bearing NUMA nodes local to it (closest first)
    std::string near_cpuset;     // PUs local to the GPU
};

struct Machine {
    std::string source; // "this system" or the XML file
    int packages = 0;
    int cores = 0;
    int pus = 0;
    std::vector<NumaNode> numa; // by os_index
    std::vector<Gpu> gpus;      // PCI bus order, filtered by CUDA_VISIBLE_DEVICES when numeric
    std::string describe() const;
};

// Reads the machine: xml_or_empty = a hwloc XML file (lstopo --of xml), or "" for this system
// (which honours HWLOC_XMLFILE like every hwloc program). Throws Io/Runtime errors with the reason.
Machine discover(const std::string& xml_or_empty);

// Where one rank of a node runs.
struct Placement {
    int local_rank = 0;
    int local_size = 1;
    int numa_node = -1; // os index of the memory node to bind to (-1: none)
    std::string cpuset; // PU list to bind to ("0-71")
    int num_cores = 0;  // physical cores in cpuset (= optimizer/compute threads)
    std::string gpu;    // the rank's GPU ("cuda1 (0019:01:00.0)"), empty without GPUs
    std::string source; // machine source (see Machine::source)
    std::string reason; // how the node was chosen
    std::string describe() const;
};

// One rank per GPU: the rank's GPU is local_rank % #GPUs, its NUMA node the CPU-bearing node
// closest to that GPU, its cores that node's cores (split evenly when several ranks share a node).
// Without GPUs ranks spread over the CPU-bearing nodes in order. Throws Config errors for a bad
// local_rank/local_size.
Placement plan_placement(const std::string& xml_or_empty, int local_rank, int local_size);

// Binds the calling process (all its threads) to p.cpuset and its memory to node p.numa_node on
// this system. Throws a Runtime error naming the failing call and errno reason (for example a
// placement computed from another machine's XML, or a container that forbids mbind).
void bind(const Placement& p);

// The PU list the calling thread may run on now ("0-1").
std::string current_binding();

// The NUMA node (os index) holding the page of p, which must have been touched; -1 when the kernel
// cannot tell (no NUMA support, page not present). Uses libnuma.
int memory_node_of(const void* p);

// Local rank and size from the launcher: OMPI_COMM_WORLD_LOCAL_RANK/SIZE, SLURM_LOCALID /
// SLURM_NTASKS_PER_NODE, MPI_LOCALRANKID/MPI_LOCALNRANKS; `fallback` when none is set.
int local_rank_from_env(int fallback);
int local_size_from_env(int fallback);

} // namespace sof::topo
