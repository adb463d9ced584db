#!/usr/bin/env python3
# Writes gh200-4x.xml: a hwloc 2.x XML of a 4-Superchip GH200 node (4 Grace packages x 72 cores,
# Grace LPDDR5X NUMA nodes 0-3, HBM "GPUMemory" nodes 4/12/20/28, one H100 per package).
import sys

PACKAGES, CORES = 4, 72
HBM_NODES = [4, 12, 20, 28]          # os indexes the GH200 driver gives the GPU memory nodes
GRACE_MEM = 120 * 1024**3            # bytes per Grace (Alps-like 128 GB modules, ~120 GiB usable)
HBM_MEM = 96 * 1024**3
BUSES = ["0009", "0019", "0029", "0039"]


def bitmap(bits):
    """hwloc bitmap string: 32-bit hex words, most significant first."""
    if not bits:
        return "0x0"
    top = max(bits) // 32
    words = [0] * (top + 1)
    for b in bits:
        words[b // 32] |= 1 << (b % 32)
    return ",".join("0x%08x" % w for w in reversed(words))


def main(out):
    all_pus = list(range(PACKAGES * CORES))
    all_nodes = list(range(PACKAGES)) + HBM_NODES
    gp = [1]

    def gpi():
        gp[0] += 1
        return gp[0]

    L = ['<?xml version="1.0" encoding="UTF-8"?>',
         '<!DOCTYPE topology SYSTEM "hwloc2.dtd">',
         '<topology version="2.0">',
         '  <object type="Machine" os_index="0" cpuset="%s" complete_cpuset="%s" nodeset="%s" '
         'complete_nodeset="%s" gp_index="1">' % (bitmap(all_pus), bitmap(all_pus),
                                                   bitmap(all_nodes), bitmap(all_nodes)),
         '    <info name="DMIProductName" value="GH200 4-Superchip test fixture"/>',
         '    <info name="Architecture" value="aarch64"/>']
    for p, node in enumerate(HBM_NODES):
        L.append('    <object type="NUMANode" os_index="%d" cpuset="0x0" complete_cpuset="0x0" '
                 'nodeset="%s" complete_nodeset="%s" gp_index="%d" local_memory="%d" '
                 'subtype="GPUMemory"/>' % (node, bitmap([node]), bitmap([node]), gpi(), HBM_MEM))
    for p in range(PACKAGES):
        pus = list(range(p * CORES, (p + 1) * CORES))
        cs = bitmap(pus)
        ns = bitmap([p])
        L.append('    <object type="Package" os_index="%d" cpuset="%s" complete_cpuset="%s" '
                 'nodeset="%s" complete_nodeset="%s" gp_index="%d">' % (p, cs, cs, ns, ns, gpi()))
        L.append('      <info name="CPUModel" value="Neoverse-V2"/>')
        L.append('      <object type="NUMANode" os_index="%d" cpuset="%s" complete_cpuset="%s" '
                 'nodeset="%s" complete_nodeset="%s" gp_index="%d" local_memory="%d"/>'
                 % (p, cs, cs, ns, ns, gpi(), GRACE_MEM))
        for c in pus:
            b = bitmap([c])
            L.append('      <object type="Core" os_index="%d" cpuset="%s" complete_cpuset="%s" '
                     'nodeset="%s" complete_nodeset="%s" gp_index="%d">' % (c, b, b, ns, ns, gpi()))
            L.append('        <object type="PU" os_index="%d" cpuset="%s" complete_cpuset="%s" '
                     'nodeset="%s" complete_nodeset="%s" gp_index="%d"/>' % (c, b, b, ns, ns, gpi()))
            L.append('      </object>')
        bus = BUSES[p]
        L.append('      <object type="Bridge" gp_index="%d" bridge_type="0-1" depth="0" '
                 'bridge_pci="%s:[01-01]">' % (gpi(), bus))
        L.append('        <object type="PCIDev" gp_index="%d" pci_busid="%s:01:00.0" '
                 'pci_type="0302 [10de:2342] [10de:16cb] a1" pci_link_speed="0.000000">'
                 % (gpi(), bus))
        L.append('          <info name="PCIVendor" value="NVIDIA Corporation"/>')
        L.append('          <info name="PCIDevice" value="GH100 [GH200 120GB / 480GB]"/>')
        L.append('          <object type="OSDev" gp_index="%d" name="cuda%d" subtype="CUDA" '
                 'osdev_type="5">' % (gpi(), p))
        L.append('            <info name="Backend" value="CUDA"/>')
        L.append('            <info name="CoProcType" value="CUDA"/>')
        L.append('          </object>')
        L.append('        </object>')
        L.append('      </object>')
        L.append('    </object>')
    L.append('  </object>')
    L.append('</topology>')
    with open(out, "w") as f:
        f.write("\n".join(L) + "\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "gh200-4x.xml")
