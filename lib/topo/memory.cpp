// Where memory really is: the NUMA node of a page (libnuma's move_pages query), so a run can check
// that its binding put pinned buffers and optimizer state on the rank's own node.
#include <numa.h>
#include <numaif.h>

#include <cstdint>
#include <cstring>

#include "topo/topo.h"

namespace sof::topo {

int memory_node_of(const void* p) {
    if (p == nullptr || numa_available() < 0) return -1;
    void* page = const_cast<void*>(p);
    int status = -1;
    // nodes == nullptr: query only, status receives the node of the page (or -errno)
    if (numa_move_pages(0, 1, &page, nullptr, &status, 0) != 0) return -1;
    return status >= 0 ? status : -1;
}

} // namespace sof::topo
