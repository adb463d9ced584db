// RAII owner of an hwloc topology (internal to lib/topo): loads this system or an XML file with
// I/O devices kept, and small helpers to turn hwloc bitmaps into PU-list strings.
#pragma once

#include <hwloc.h>

#include <string>

namespace sof::topo {

class HwlocTopology {
  public:
    // xml_or_empty: a hwloc XML file, or "" for this system (honours HWLOC_XMLFILE).
    explicit HwlocTopology(const std::string& xml_or_empty);
    ~HwlocTopology();
    HwlocTopology(const HwlocTopology&) = delete;
    HwlocTopology& operator=(const HwlocTopology&) = delete;

    hwloc_topology_t get() const { return topo_; }
    const std::string& source() const { return source_; }
    bool is_this_system() const { return hwloc_topology_is_thissystem(topo_) != 0; }

  private:
    hwloc_topology_t topo_ = nullptr;
    std::string source_;
};

// Owns one hwloc bitmap.
class Bitmap {
  public:
    Bitmap() : b_(hwloc_bitmap_alloc()) {}
    explicit Bitmap(hwloc_const_bitmap_t src) : b_(hwloc_bitmap_dup(src)) {}
    ~Bitmap() { hwloc_bitmap_free(b_); }
    Bitmap(const Bitmap&) = delete;
    Bitmap& operator=(const Bitmap&) = delete;
    hwloc_bitmap_t get() const { return b_; }

  private:
    hwloc_bitmap_t b_;
};

// "0-71,144" (empty string for an empty or null set).
std::string list_string(hwloc_const_bitmap_t set);
// Physical cores inside `set` (PUs when the topology has no Core level).
int count_cores(hwloc_topology_t topo, hwloc_const_bitmap_t set);

struct Machine;
// discover() over an already loaded topology.
Machine discover_from(const HwlocTopology& t);

} // namespace sof::topo
