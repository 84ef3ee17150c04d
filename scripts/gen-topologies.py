#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Writes the bundled node topologies (hwloc XML, format 2.0) into
examples/topologies/. Hand-written hwloc XML is fragile (hwloc 2.9 crashes on
a missing complete_* set, silently drops matrices of a 1.x file, miscounts a
wrong length=), so every file is generated here from a short description of
the machine. examples/topologies/README.md names the facts each one encodes
and where they come from.

Usage: scripts/gen-topologies.py [OUTDIR]     (default: examples/topologies)
Standard library only. Output is deterministic: same script, same bytes.
"""
import os
import sys
from xml.sax.saxutils import quoteattr

# ---------------------------------------------------------------------------
# Facts used by several machines
# ---------------------------------------------------------------------------

NVIDIA = "10de"
MELLANOX = "15b3"
# NVLink bandwidth in hwloc's NVLinkBandwidth unit: MB/s, one direction,
# summed over the links between the two GPUs. NVLink 2, 3 and 4 carry
# 25 GB/s per link per direction, NVLink 5 50 GB/s.
MBPS_NVLINK_2_3_4 = 25000
MBPS_NVLINK_5 = 50000
GIB = 1 << 30


def bitmap(bits):
    """hwloc's bitmap string: 32-bit words, most significant first."""
    bits = sorted(set(bits))
    if not bits:
        return "0x0"
    words = [0] * (bits[-1] // 32 + 1)
    for b in bits:
        words[b // 32] |= 1 << (b % 32)
    return ",".join("0x%08x" % w for w in reversed(words))


class Obj:
    """One hwloc object: a type, XML attributes in output order, infos, and
    children. CPU-side sets are filled in by finish()."""

    def __init__(self, type_, attrs=None, infos=None):
        self.type = type_
        self.attrs = list(attrs or [])
        self.infos = list(infos or [])
        self.children = []
        self.pus = set()     # PU os indexes below (CPU-side objects)
        self.nodes = set()   # NUMA os indexes below or attached
        self.gp = None

    def add(self, child):
        self.children.append(child)
        return child


CPU_SIDE = {"Machine", "Package", "Group", "NUMANode", "Core", "PU", "L3Cache"}
IO_SIDE = {"Bridge", "PCIDev", "OSDev"}


def finish(obj, gp):
    """Assigns gp_index depth-first and computes cpusets/nodesets bottom up.
    A NUMA node's cpuset is its parent's: hwloc attaches memory to the
    object whose CPUs are local to it."""
    obj.gp = gp[0]
    gp[0] += 1
    for c in obj.children:
        finish(c, gp)
        if c.type in CPU_SIDE and c.type != "NUMANode":
            obj.pus |= c.pus
            obj.nodes |= c.nodes
        if c.type == "NUMANode":
            obj.nodes |= c.nodes
    for c in obj.children:
        if c.type == "NUMANode":
            c.pus = set(obj.pus)


def inherit_nodes(obj, parent_nodes=frozenset()):
    """Cores and PUs have no NUMA node below them: they take their
    ancestor's."""
    if obj.type in CPU_SIDE and not obj.nodes:
        obj.nodes = set(parent_nodes)
    for c in obj.children:
        inherit_nodes(c, obj.nodes)


def order_children(obj):
    """hwloc exports memory children first, then normal ones, then I/O."""
    rank = {"NUMANode": 0}
    return sorted(obj.children,
                  key=lambda c: rank.get(c.type, 2 if c.type in IO_SIDE else 1))


def write_obj(out, obj, depth):
    ind = "  " * (depth + 1)
    attrs = [("type", obj.type)]
    if obj.type in CPU_SIDE:
        attrs += [a for a in obj.attrs if a[0] == "os_index"]
        cs, ns = bitmap(obj.pus), bitmap(obj.nodes)
        attrs += [("cpuset", cs), ("complete_cpuset", cs)]
        if obj.type == "Machine":
            attrs.append(("allowed_cpuset", cs))
        attrs += [("nodeset", ns), ("complete_nodeset", ns)]
        if obj.type == "Machine":
            attrs.append(("allowed_nodeset", ns))
        attrs.append(("gp_index", str(obj.gp)))
        attrs += [a for a in obj.attrs if a[0] != "os_index"]
    else:
        attrs.append(("gp_index", str(obj.gp)))
        attrs += obj.attrs
    text = " ".join("%s=%s" % (k, quoteattr(v)) for k, v in attrs)
    kids = order_children(obj)
    if not kids and not obj.infos:
        out.append("%s<object %s/>" % (ind, text))
        return
    out.append("%s<object %s>" % (ind, text))
    for k, v in obj.infos:
        out.append("%s  <info name=%s value=%s/>" % (ind, quoteattr(k), quoteattr(v)))
    for c in kids:
        write_obj(out, c, depth + 1)
    out.append("%s</object>" % ind)


def counted(tag, content):
    """<tag length="N">content</tag> with N the exact character count."""
    return '<%s length="%d">%s</%s>' % (tag, len(content), content, tag)


# ---------------------------------------------------------------------------
# Building blocks
# ---------------------------------------------------------------------------

class Machine:
    def __init__(self, hostname):
        self.root = Obj("Machine", [("os_index", "0")],
                        [("Backend", "Linux"), ("HostName", hostname),
                         ("GeneratedBy", "par3drun scripts/gen-topologies.py")])
        self.gpus = []           # (Obj OSDev, pci busid) in creation order
        self.nvlink = None       # {(i, j): MB/s} over GPU indexes in PCI order

    def package(self, os_index, infos=None):
        return self.root.add(Obj("Package", [("os_index", str(os_index))], infos))

    @staticmethod
    def numa(parent, os_index, mem_bytes):
        n = parent.add(Obj("NUMANode", [("os_index", str(os_index)),
                                        ("local_memory", str(mem_bytes))]))
        n.nodes = {os_index}
        return n

    @staticmethod
    def group(parent):
        return parent.add(Obj("Group", [("kind", "1001"), ("subkind", "0")]))

    @staticmethod
    def cores(parent, first_core, ncores, pu_of_core):
        """ncores Core objects numbered from first_core; pu_of_core(c) lists
        the PU os indexes of core c (two with SMT)."""
        for c in range(first_core, first_core + ncores):
            core = parent.add(Obj("Core", [("os_index", str(c))]))
            for p in pu_of_core(c):
                pu = core.add(Obj("PU", [("os_index", str(p))]))
                pu.pus = {p}


def busid(domain, bus, dev=0, fn=0):
    return "%04x:%02x:%02x.%x" % (domain, bus, dev, fn)


class PciTree:
    """Builds a PCI hierarchy below one host bridge (one root bus). Bus
    numbers are handed out in depth-first order, so bridge_pci ranges are
    right by construction."""

    def __init__(self, parent, domain, root_bus):
        self.domain = domain
        self.next_bus = root_bus + 1
        self.host = parent.add(Obj("Bridge", [("bridge_type", "0-1"), ("depth", "0")]))
        self.host.first = root_bus
        self.host.bus = root_bus
        self.host.depth = 0
        self.host.ndev = 0

    def _bridge(self, parent, vendor_dev, sec=None):
        """sec: the secondary bus to use (real machines' device buses);
        must be above every bus handed out so far."""
        if sec is None:
            sec = self.next_bus
        if sec < self.next_bus:
            raise SystemExit("gen-topologies: bus %02x reused" % sec)
        self.next_bus = sec + 1
        b = parent.add(Obj("Bridge", []))
        b.busid = busid(self.domain, parent.bus, parent.ndev)
        parent.ndev += 1
        b.bus, b.first, b.depth, b.ndev = sec, sec, parent.depth + 1, 0
        b.vendor_dev = vendor_dev
        return b

    def root_port(self, sec=None, vendor_dev="8086:0000"):
        return self._bridge(self.host, vendor_dev, sec)

    def switch(self, parent, secs, vendor_dev="1000:c030", up_sec=None):
        """A PCIe switch below parent: its upstream port and one downstream
        port per entry of secs (None = next free bus), returned."""
        up = self._bridge(parent, vendor_dev, up_sec)
        return [self._bridge(up, vendor_dev, s) for s in secs]

    def upstream(self, parent, sec=None, vendor_dev="1000:c030"):
        """A switch's upstream port alone, for switches whose downstream
        ports lead to further switches (add ports with downstream())."""
        return self._bridge(parent, vendor_dev, sec)

    def downstream(self, up, sec=None, vendor_dev="1000:c030"):
        return self._bridge(up, vendor_dev, sec)

    def device(self, parent, pci_class, vendor_dev, functions=1, subsys=None):
        devs = []
        dev = parent.ndev
        parent.ndev += 1
        for fn in range(functions):
            d = parent.add(Obj("PCIDev", []))
            d.attrs = [("pci_busid", busid(self.domain, parent.bus, dev, fn)),
                       ("pci_type", "%s [%s] [%s] 00" % (pci_class, vendor_dev,
                                                         subsys or vendor_dev))]
            devs.append(d)
        return devs

    def close(self):
        """Fills in bridge attributes once all buses below are known."""
        def walk(b):
            last = b.bus
            for c in b.children:
                if c.type == "Bridge":
                    last = max(last, walk(c))
            b.last = last
            rng = "%04x:[%02x-%02x]" % (self.domain, b.bus, last)
            if b is self.host:
                b.attrs = [("bridge_type", "0-1"), ("depth", "0"), ("bridge_pci", rng)]
            else:
                b.attrs = [("bridge_type", "1-1"), ("depth", str(b.depth)),
                           ("bridge_pci", rng), ("pci_busid", b.busid),
                           ("pci_type", "0604 [%s] [%s] 00" % (b.vendor_dev, b.vendor_dev))]
            return last
        walk(self.host)


def gpu(m, pcidev, model, mem_kib, index):
    o = pcidev.add(Obj("OSDev", [("name", "cuda%d" % index), ("subtype", "CUDA"),
                                 ("osdev_type", "5")],
                       [("Backend", "CUDA"), ("GPUVendor", "NVIDIA Corporation"),
                        ("GPUModel", model), ("CUDAGlobalMemorySize", str(mem_kib))]))
    m.gpus.append(o)
    return o


def rdma_nic(pcidev, name):
    return pcidev.add(Obj("OSDev", [("name", name), ("osdev_type", "3")]))


def netdev(pcidev, name):
    return pcidev.add(Obj("OSDev", [("name", name), ("osdev_type", "2")]))


def smt_pus(ncores_total):
    """Linux numbering with SMT: core c has PUs c and c + ncores_total."""
    return lambda c: [c, c + ncores_total]


# ---------------------------------------------------------------------------
# The machines
# ---------------------------------------------------------------------------

def dgx_h100():
    m = Machine("dgx-h100")
    h100 = ("10de:2330", "NVIDIA H100 80GB HBM3", 81559 * 1024)
    cx7 = "15b3:1021"
    # Per socket: four PCIe switches, each holding one GPU and its compute
    # NIC (user guide, Network Modules table: GPU i <-> NIC), and one root
    # port with a dual-port ConnectX-7 for storage/in-band.
    layout = [  # (socket, [(switch root bus, GPU bus, NIC bus, NIC name)], storage bus, names)
        (0, [(0x15, 0x1b, 0x18, "mlx5_0"), (0x3d, 0x43, 0x40, "mlx5_3"),
             (0x4c, 0x52, 0x4f, "mlx5_4"), (0x5b, 0x61, 0x5e, "mlx5_5")],
         0x28, ("mlx5_1", "mlx5_2")),
        (1, [(0x97, 0x9d, 0x9a, "mlx5_6"), (0xbd, 0xc3, 0xc0, "mlx5_9"),
             (0xcb, 0xd1, 0xce, "mlx5_10"), (0xd9, 0xdf, 0xdc, "mlx5_11")],
         0xa9, ("mlx5_7", "mlx5_8")),
    ]
    gi = 0
    for sock, switches, sto_bus, sto_names in layout:
        pkg = m.package(sock, [("CPUVendor", "GenuineIntel"),
                               ("CPUModel", "Intel(R) Xeon(R) Platinum 8480C")])
        m.numa(pkg, sock, 1024 * GIB)
        m.cores(pkg, 56 * sock, 56, smt_pus(112))
        for root_bus, gbus, nbus, nic in switches:
            t = PciTree(pkg, 0, root_bus)
            rp = t.root_port()
            down = t.switch(rp, [nbus, gbus])
            rdma_nic(t.device(down[0], "0207", cx7)[0], nic)
            gpu(m, t.device(down[1], "0302", h100[0])[0], h100[1], h100[2], gi)
            gi += 1
            t.close()
        t = PciTree(pkg, 0, sto_bus)
        rp = t.root_port(sto_bus + 1)
        f = t.device(rp, "0200", cx7, functions=2)
        rdma_nic(f[0], sto_names[0])
        rdma_nic(f[1], sto_names[1])
        t.close()
    # All-to-all through four NVSwitches: 18 NVLink 4 links per GPU.
    m.nvlink = {(i, j): 18 * MBPS_NVLINK_2_3_4
                for i in range(8) for j in range(8) if i != j}
    return m


def dgx_a100():
    m = Machine("dgx-a100")
    a100 = ("10de:20b2", "NVIDIA A100-SXM4-80GB", 81251 * 1024)
    cx6 = "15b3:101b"
    # NPS4: NUMA node n holds cores 16n..16n+15 and their SMT siblings +128.
    # GPU pairs and NIC pairs behind two levels of PCIe switches (PXB):
    # (NUMA, root bus, [(kind, bus, name)]).
    quads = {
        3: (0x01, [("gpu", 0x07), ("gpu", 0x0f), ("nic", 0x0c, "mlx5_0"),
                   ("nic", 0x12, "mlx5_1")]),
        1: (0x41, [("gpu", 0x47), ("gpu", 0x4e), ("nic", 0x4b, "mlx5_2"),
                   ("nic", 0x54, "mlx5_3")]),
        7: (0x81, [("gpu", 0x87), ("gpu", 0x90), ("nic", 0x8d, "mlx5_6"),
                   ("nic", 0x94, "mlx5_7")]),
        5: (0xb1, [("gpu", 0xb7), ("gpu", 0xbd), ("nic", 0xba, "mlx5_8"),
                   ("nic", 0xcc, "mlx5_9")]),
    }
    storage = {2: (0x60, ("mlx5_4", "mlx5_5")), 6: (0xe0, ("mlx5_10", "mlx5_11"))}
    pending = []  # GPUs are numbered in PCI bus order after building
    for sock in range(2):
        pkg = m.package(sock, [("CPUVendor", "AuthenticAMD"),
                               ("CPUModel", "AMD EPYC 7742 64-Core Processor")])
        for numa in range(4 * sock, 4 * sock + 4):
            grp = m.group(pkg)
            m.numa(grp, numa, 128 * GIB)
            m.cores(grp, 16 * numa, 16, smt_pus(128))
            if numa in quads:
                root_bus, devs = quads[numa]
                t = PciTree(grp, 0, root_bus - 1)
                rp = t.root_port()
                devs = sorted(devs, key=lambda d: d[1])
                # one upstream switch, a second-level switch per device:
                # every GPU/NIC pair of the quad is PXB
                # (buses handed out depth-first, as firmware enumerates)
                up = t.upstream(rp)
                for d in devs:
                    port = t.downstream(up, d[1] - 2)
                    (leaf,) = t.switch(port, [d[1]], up_sec=d[1] - 1)
                    if d[0] == "gpu":
                        pending.append((d[1], t.device(leaf, "0302", a100[0])[0]))
                    else:
                        rdma_nic(t.device(leaf, "0207", cx6)[0], d[2])
                t.close()
            if numa in storage:
                bus, names = storage[numa]
                t = PciTree(grp, 0, bus)
                rp = t.root_port(bus + 1)
                f = t.device(rp, "0207", cx6, functions=2)
                rdma_nic(f[0], names[0])
                rdma_nic(f[1], names[1])
                t.close()
    for i, (_, dev) in enumerate(sorted(pending, key=lambda p: p[0])):
        gpu(m, dev, a100[1], a100[2], i)
    # Six NVSwitches: 12 NVLink 3 links per GPU, all-to-all.
    m.nvlink = {(i, j): 12 * MBPS_NVLINK_2_3_4
                for i in range(8) for j in range(8) if i != j}
    return m


def dgx1_v100():
    m = Machine("dgx1-v100")
    v100 = ("10de:1db1", "Tesla V100-SXM2-16GB", 16160 * 1024)
    cx4 = "15b3:1013"
    # Per socket one host bridge, two PLX switches, each with two GPUs and
    # one EDR NIC (GPU pair PIX, pair-to-pair PHB, across sockets SYS).
    layout = [(0, 0x00, [((0x05, "mlx5_0"), 0x06, 0x07), ((0x0c, "mlx5_1"), 0x0a, 0x0b)]),
              (1, 0x80, [((0x84, "mlx5_2"), 0x85, 0x86), ((0x8b, "mlx5_3"), 0x89, 0x8a)])]
    gi = 0
    for sock, root_bus, switches in layout:
        pkg = m.package(sock, [("CPUVendor", "GenuineIntel"),
                               ("CPUModel", "Intel(R) Xeon(R) CPU E5-2698 v4 @ 2.20GHz")])
        m.numa(pkg, sock, 256 * GIB)
        m.cores(pkg, 20 * sock, 20, smt_pus(40))
        t = PciTree(pkg, 0, root_bus)
        for (nbus, nic), g0, g1 in switches:
            rp = t.root_port()
            ports = sorted([(nbus, nic), (g0, None), (g1, None)])
            down = t.switch(rp, [p[0] for p in ports], vendor_dev="10b5:8747")
            for port, (_, nic_name) in zip(down, ports):
                if nic_name:
                    rdma_nic(t.device(port, "0207", cx4)[0], nic_name)
                else:
                    gpu(m, t.device(port, "0302", v100[0])[0], v100[1], v100[2], gi)
                    gi += 1
        t.close()
    # Hybrid cube-mesh, from tests/fixtures/realdata/topo/dgx1-v100_4nic.txt.
    links = {(0, 1): 1, (0, 2): 1, (0, 3): 2, (0, 4): 2, (1, 2): 2, (1, 3): 1,
             (1, 5): 2, (2, 3): 2, (2, 6): 1, (3, 7): 1, (4, 5): 1, (4, 6): 1,
             (4, 7): 2, (5, 6): 2, (5, 7): 1, (6, 7): 2}
    m.nvlink = {}
    for (i, j), k in links.items():
        m.nvlink[(i, j)] = m.nvlink[(j, i)] = k * MBPS_NVLINK_2_3_4
    return m


def pcie8_nvlink_pairs():
    m = Machine("pcie8-nvlink-pairs")
    a6000 = ("10de:2230", "NVIDIA RTX A6000", 49140 * 1024)
    # 2 sockets of 64 cores with SMT; each GPU on its own root bus (GPUs of
    # one socket are NODE to each other, SYS across).
    buses = [[0x01, 0x21, 0x41, 0x61], [0x81, 0xa1, 0xc1, 0xe1]]
    gi = 0
    for sock in range(2):
        pkg = m.package(sock, [("CPUVendor", "AuthenticAMD")])
        m.numa(pkg, sock, 256 * GIB)
        m.cores(pkg, 64 * sock, 64, smt_pus(128))
        for bus in buses[sock]:
            t = PciTree(pkg, 0, bus - 1)
            rp = t.root_port(bus)
            gpu(m, t.device(rp, "0300", a6000[0])[0], a6000[1], a6000[2], gi)
            gi += 1
            t.close()
    # NVLink bridges join GPU 0-1, 2-3, 4-5, 6-7: 4 links each, 112.5 GB/s
    # both directions together = 56.25 GB/s per direction.
    m.nvlink = {}
    for a in range(0, 8, 2):
        m.nvlink[(a, a + 1)] = m.nvlink[(a + 1, a)] = 56250
    return m


def pcie4():
    m = Machine("pcie4")
    l40s = ("10de:26b9", "NVIDIA L40S", 46068 * 1024)
    cx7 = "15b3:1021"
    # 2 sockets x 32 cores, SMT; two GPUs per socket on separate root buses;
    # one 400G NIC on socket 0, sharing a PCIe switch with GPU0.
    gi = 0
    for sock in range(2):
        pkg = m.package(sock, [("CPUVendor", "GenuineIntel")])
        m.numa(pkg, sock, 256 * GIB)
        m.cores(pkg, 32 * sock, 32, smt_pus(64))
        for k, bus in enumerate([0x18 + 0x80 * sock, 0x38 + 0x80 * sock]):
            t = PciTree(pkg, 0, bus - 4)
            if sock == 0 and k == 0:
                rp = t.root_port()
                down = t.switch(rp, [bus - 1, bus])
                rdma_nic(t.device(down[0], "0207", cx7)[0], "mlx5_0")
                gpu(m, t.device(down[1], "0302", l40s[0])[0], l40s[1], l40s[2], gi)
            else:
                rp = t.root_port(bus)
                gpu(m, t.device(rp, "0302", l40s[0])[0], l40s[1], l40s[2], gi)
            gi += 1
            t.close()
    m.nvlink = {}
    return m


def cpu_only():
    m = Machine("cpu-only")
    for sock in range(2):
        pkg = m.package(sock, [("CPUVendor", "GenuineIntel")])
        m.numa(pkg, sock, 128 * GIB)
        m.cores(pkg, 16 * sock, 16, smt_pus(32))
        if sock == 0:
            t = PciTree(pkg, 0, 0x00)
            rp = t.root_port()
            netdev(t.device(rp, "0200", "8086:1521")[0], "eno1")
            t.close()
    m.nvlink = {}
    return m


def gb200_tray():
    m = Machine("gb200-tray")
    gb200 = ("10de:2941", "NVIDIA GB200", 189471 * 1024)
    cx7 = "15b3:1021"
    # Two Grace CPUs (72 cores, no SMT), each with its LPDDR5X NUMA node and
    # two Blackwell GPUs over NVLink-C2C; each GPU and each NIC sits on its
    # own PCI domain (so GPU<->NIC on one Grace is NODE).
    per_grace = [(0, [0x0008, 0x0009], [(0x0000, "mlx5_0"), (0x0002, "mlx5_1")]),
                 (1, [0x0018, 0x0019], [(0x0010, "mlx5_4"), (0x0012, "mlx5_5")])]
    gi = 0
    for sock, gdoms, nics in per_grace:
        pkg = m.package(sock, [("CPUVendor", "NVIDIA"), ("CPUModel", "Grace")])
        m.numa(pkg, sock, 480 * GIB)
        m.cores(pkg, 72 * sock, 72, lambda c: [c])
        items = [(d, "nic", name) for d, name in nics] + [(d, "gpu", None) for d in gdoms]
        for dom, kind, name in sorted(items):
            t = PciTree(pkg, dom, 0x00)
            if kind == "gpu":
                rp = t.root_port()
                gpu(m, t.device(rp, "0302", gb200[0])[0], gb200[1], gb200[2], gi)
                gi += 1
            else:
                rp = t.root_port(0x03)
                rdma_nic(t.device(rp, "0207", cx7)[0], name)
            t.close()
    # NVLink 5, 18 links per GPU through the rack's NVLink switch trays: the
    # tray's four GPUs are all-to-all (the domain goes on across trays, which
    # a cluster file's nvlink_domain expresses).
    m.nvlink = {(i, j): 18 * MBPS_NVLINK_5 for i in range(4) for j in range(4) if i != j}
    return m


MACHINES = [("dgx-h100.xml", dgx_h100), ("dgx-a100.xml", dgx_a100),
            ("dgx1-v100.xml", dgx1_v100), ("pcie8-nvlink-pairs.xml", pcie8_nvlink_pairs),
            ("pcie4.xml", pcie4), ("cpu-only.xml", cpu_only),
            ("gb200-tray.xml", gb200_tray)]


# ---------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------

def pci_key(busid_):
    d, b, rest = busid_.split(":")
    dev, fn = rest.split(".")
    return (int(d, 16), int(b, 16), int(dev, 16), int(fn, 16))


def render(m):
    finish(m.root, [1])
    inherit_nodes(m.root)
    # GPUs are named cuda0.. in PCI bus order, as CUDA_DEVICE_ORDER=PCI_BUS_ID
    # numbers them; check the builders kept that promise.
    buses = []

    def find(o, parent=None):
        if o.type == "OSDev" and o in m.gpus:
            buses.append((o, dict(parent.attrs)["pci_busid"]))
        for c in o.children:
            find(c, o)
    find(m.root)
    by_name = sorted(buses, key=lambda b: int(dict(b[0].attrs)["name"][4:]))
    if [b[1] for b in by_name] != sorted((b[1] for b in buses), key=pci_key):
        raise SystemExit("gen-topologies: %s: GPU names not in PCI order"
                         % dict(m.root.infos)["HostName"])
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           '<!DOCTYPE topology SYSTEM "hwloc2.dtd">',
           '<topology version="2.0">']
    write_obj(out, m.root, 0)
    if m.nvlink:
        n = len(by_name)
        idx = "".join("%d " % b[0].gp for b in by_name)
        vals = "".join("%d " % m.nvlink.get((i, j), 0) for i in range(n) for j in range(n))
        out.append('  <distances2 type="OSDev" nbobjs="%d" kind="10" '
                   'name="NVLinkBandwidth" indexing="gp">' % n)
        out.append("    " + counted("indexes", idx))
        out.append("    " + counted("u64values", vals))
        out.append("  </distances2>")
    out.append("</topology>")
    return "\n".join(out) + "\n"


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "examples", "topologies")
    os.makedirs(outdir, exist_ok=True)
    for name, build in MACHINES:
        m = build()
        for (i, j), v in m.nvlink.items():
            if m.nvlink.get((j, i)) != v:
                raise SystemExit("gen-topologies: %s: NVLink %d-%d not symmetric" % (name, i, j))
        with open(os.path.join(outdir, name), "w") as f:
            f.write(render(m))
        print("wrote %s" % os.path.join(outdir, name))


if __name__ == "__main__":
    main()
