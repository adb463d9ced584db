// Machine discovery with hwloc: NUMA nodes (with their cores), NVIDIA GPUs from PCI devices or
// CUDA/NVML OS devices and the CPU-bearing NUMA nodes local to each GPU.
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "core/strfmt.h"
#include "topo/hwloc_topo.h"
#include "topo/topo.h"

namespace sof::topo {

HwlocTopology::HwlocTopology(const std::string& xml_or_empty) {
    if (hwloc_topology_init(&topo_) != 0)
        SOF_FAIL(Runtime, "hwloc_topology_init failed: %s", std::strerror(errno));
    hwloc_topology_set_io_types_filter(topo_, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if (!xml_or_empty.empty()) {
        source_ = xml_or_empty;
        if (hwloc_topology_set_xml(topo_, xml_or_empty.c_str()) != 0) {
            int err = errno;
            hwloc_topology_destroy(topo_);
            SOF_FAIL(Io, "cannot use hwloc XML '%s': %s (write one with `lstopo --of xml FILE`)",
                     xml_or_empty.c_str(), std::strerror(err));
        }
    } else {
        const char* env = std::getenv("HWLOC_XMLFILE");
        source_ = env && *env ? core::strfmt("%s (HWLOC_XMLFILE)", env) : "this system";
    }
    if (hwloc_topology_load(topo_) != 0) {
        int err = errno;
        hwloc_topology_destroy(topo_);
        SOF_FAIL(Runtime, "hwloc could not load the topology of %s: %s", source_.c_str(),
                 std::strerror(err));
    }
}

HwlocTopology::~HwlocTopology() {
    if (topo_) hwloc_topology_destroy(topo_);
}

std::string list_string(hwloc_const_bitmap_t set) {
    if (!set || hwloc_bitmap_iszero(set)) return "";
    char* s = nullptr;
    if (hwloc_bitmap_list_asprintf(&s, set) < 0 || !s) return "";
    std::string out(s);
    std::free(s);
    return out;
}

int count_cores(hwloc_topology_t topo, hwloc_const_bitmap_t set) {
    if (!set || hwloc_bitmap_iszero(set)) return 0;
    int n = hwloc_get_nbobjs_inside_cpuset_by_type(topo, set, HWLOC_OBJ_CORE);
    if (n <= 0) n = hwloc_get_nbobjs_inside_cpuset_by_type(topo, set, HWLOC_OBJ_PU);
    return std::max(n, 0);
}

namespace {

bool is_nvidia_gpu(hwloc_obj_t pci) {
    unsigned cls = pci->attr->pcidev.class_id;
    return pci->attr->pcidev.vendor_id == 0x10de && (cls == 0x0300 || cls == 0x0302);
}

bool cpu_bearing(hwloc_obj_t node) {
    if (!node->cpuset || hwloc_bitmap_iszero(node->cpuset)) return false;
    return !(node->subtype && std::strcmp(node->subtype, "GPUMemory") == 0);
}

// CUDA_VISIBLE_DEVICES as indexes ("0,2"); empty when unset or not purely numeric (UUIDs).
std::vector<int> visible_devices(bool* set_numeric) {
    std::vector<int> out;
    *set_numeric = false;
    const char* env = std::getenv("CUDA_VISIBLE_DEVICES");
    if (!env) return out;
    std::string s(env);
    size_t pos = 0;
    while (pos <= s.size()) {
        size_t comma = s.find(',', pos);
        std::string tok =
            s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        if (tok.empty() || tok.find_first_not_of("0123456789") != std::string::npos) return {};
        out.push_back(std::atoi(tok.c_str()));
        if (comma == std::string::npos) break;
        pos = comma + 1;
    }
    *set_numeric = true;
    return out;
}

} // namespace

Machine discover(const std::string& xml_or_empty) {
    HwlocTopology t(xml_or_empty);
    return discover_from(t);
}

Machine discover_from(const HwlocTopology& t) {
    hwloc_topology_t topo = t.get();
    Machine m;
    m.source = t.source();
    m.packages = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE);
    m.cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
    m.pus = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);

    int nn = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
    for (int i = 0; i < nn; ++i) {
        hwloc_obj_t o = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, i);
        NumaNode n;
        n.os_index = static_cast<int>(o->os_index);
        n.memory_gb = static_cast<double>(o->attr->numanode.local_memory) / 1e9;
        n.subtype = o->subtype ? o->subtype : "";
        if (cpu_bearing(o)) {
            n.cpuset = list_string(o->cpuset);
            n.num_cores = count_cores(topo, o->cpuset);
        }
        m.numa.push_back(n);
    }
    std::sort(m.numa.begin(), m.numa.end(),
              [](const NumaNode& a, const NumaNode& b) { return a.os_index < b.os_index; });

    std::vector<Gpu> all;
    for (hwloc_obj_t pci = hwloc_get_next_pcidev(topo, nullptr); pci;
         pci = hwloc_get_next_pcidev(topo, pci)) {
        if (!is_nvidia_gpu(pci)) continue;
        Gpu g;
        const auto& a = pci->attr->pcidev;
        g.pci = core::strfmt("%04x:%02x:%02x.%01x", a.domain, a.bus, a.dev, a.func);
        const char* dev = hwloc_obj_get_info_by_name(pci, "PCIDevice");
        g.model = pci->name ? pci->name : dev ? dev : "";
        for (hwloc_obj_t os = pci->io_first_child; os; os = os->next_sibling) {
            if (os->type != HWLOC_OBJ_OS_DEVICE || !os->name) continue;
            if (g.name.empty() || std::strncmp(os->name, "cuda", 4) == 0) g.name = os->name;
        }
        if (g.name.empty()) g.name = core::strfmt("gpu%zu", all.size());
        hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo, pci);
        if (anc && anc->cpuset) {
            g.near_cpuset = list_string(anc->cpuset);
            // CPU-bearing nodes inside the GPU's locality first, then the ones merely overlapping
            for (int pass = 0; pass < 2; ++pass)
                for (int i = 0; i < nn; ++i) {
                    hwloc_obj_t o = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, i);
                    if (!cpu_bearing(o)) continue;
                    bool inside = hwloc_bitmap_isincluded(o->cpuset, anc->cpuset);
                    bool overlap = hwloc_bitmap_intersects(o->cpuset, anc->cpuset);
                    if ((pass == 0 && inside) || (pass == 1 && overlap && !inside))
                        g.near_nodes.push_back(static_cast<int>(o->os_index));
                }
        }
        all.push_back(g);
    }
    bool numeric = false;
    std::vector<int> vis = t.is_this_system() ? visible_devices(&numeric) : std::vector<int>();
    if (numeric && all.empty()) {
        // GPUs that hwloc cannot see as PCI devices (no /sys/bus/pci in a container): known by
        // index only, without locality
        for (int i : vis) {
            Gpu g;
            g.name = "cuda" + std::to_string(i);
            g.model = "from CUDA_VISIBLE_DEVICES, no PCI locality";
            m.gpus.push_back(g);
        }
    } else if (numeric) {
        for (int i : vis)
            if (i >= 0 && i < static_cast<int>(all.size())) m.gpus.push_back(all[i]);
    } else {
        m.gpus = all;
    }
    return m;
}

std::string Machine::describe() const {
    std::string s = core::strfmt("machine (%s): %d packages, %d cores, %d PUs, %zu NUMA nodes, "
                                 "%zu GPUs\n",
                                 source.c_str(), packages, cores, pus, numa.size(), gpus.size());
    for (const NumaNode& n : numa) {
        if (n.cpuset.empty())
            s += core::strfmt("  NUMA %d: %.1f GB, no cores%s%s\n", n.os_index, n.memory_gb,
                              n.subtype.empty() ? "" : ", ", n.subtype.c_str());
        else
            s += core::strfmt("  NUMA %d: %.1f GB, %d cores, PUs %s\n", n.os_index, n.memory_gb,
                              n.num_cores, n.cpuset.c_str());
    }
    for (const Gpu& g : gpus) {
        std::string near;
        for (int n : g.near_nodes) {
            if (!near.empty()) near += ',';
            near += std::to_string(n);
        }
        s += core::strfmt("  GPU %s: PCI %s%s%s, near NUMA %s\n", g.name.c_str(),
                          g.pci.empty() ? "?" : g.pci.c_str(), g.model.empty() ? "" : " ",
                          g.model.c_str(), near.empty() ? "(unknown)" : near.c_str());
    }
    return s;
}

} // namespace sof::topo
