"""A minimal virtio-pci driver of the vrdma device, over QEMU's qtest, for
the tests/qemu-rdma scripts: PCI set-up, feature negotiation, the three
queues, control commands and event buffers (docs/virtio-rdma.md)."""

import struct

from rdmarig import Abort, wait_for

# Virtio over PCI (virtio 1.x, 4.1).
CAP_COMMON, CAP_NOTIFY, CAP_ISR, CAP_DEVICE = 1, 2, 3, 4
ST_ACK, ST_DRIVER, ST_DRIVER_OK, ST_FEATURES_OK = 1, 2, 4, 8
F_VERSION_1 = 32
C_DFSELECT, C_DF, C_GFSELECT, C_GF = 0x00, 0x04, 0x08, 0x0c
C_NUMQ, C_STATUS, C_QSELECT, C_QSIZE = 0x12, 0x14, 0x16, 0x18
C_QENABLE, C_QNOTIFYOFF, C_QDESC, C_QAVAIL, C_QUSED = 0x1c, 0x1e, 0x20, 0x28, 0x30
DESC_NEXT, DESC_WRITE = 1, 2

BAR_ADDR = 0xfe000000
QUEUE_SIZE = 64
RINGS = 0x100000          # queue q: desc, avail, used at +q*0x10000, +0x1000, +0x2000
BUFS = 0x200000           # command buffers
# vrdma commands and status values (docs/virtio-rdma.md 4).
CMD_QUERY_DEVICE, CMD_CREATE_PD, CMD_DESTROY_PD = 1, 4, 5
ENOENT = 2
EV_DEVICE_FATAL = 6

class Driver:
    """A minimal virtio-pci driver for the device, over qtest."""

    def __init__(self, qt, slot):
        self.qt = qt
        self.cfg_base = 0x80000000 | (slot << 11)
        self.used_idx = [0] * 3
        self.avail_idx = [0] * 3
        self.next_desc = [0] * 3

    # PCI configuration space through ports 0xcf8/0xcfc.
    def cfg_read(self, off, width):
        self.qt.out("l", 0xcf8, self.cfg_base | (off & 0xfc))
        return self.qt.inp({1: "b", 2: "w", 4: "l"}[width], 0xcfc + (off & 3))

    def cfg_write(self, off, width, val):
        self.qt.out("l", 0xcf8, self.cfg_base | (off & 0xfc))
        self.qt.out({1: "b", 2: "w", 4: "l"}[width], 0xcfc + (off & 3), val)

    def setup_pci(self):
        """Maps the modern BAR; returns {cfg_type: (bar, offset, length, extra)}."""
        caps = {}
        ptr = self.cfg_read(0x34, 1)
        while ptr:
            ctype = self.cfg_read(ptr + 3, 1)
            # A vendor-specific capability is a virtio one; the PCI-config
            # access window (type 5) is not in the BAR.
            if self.cfg_read(ptr, 1) == 0x09 and ctype in (1, 2, 3, 4):
                caps.setdefault(ctype, (self.cfg_read(ptr + 4, 1), self.cfg_read(ptr + 8, 4),
                                        self.cfg_read(ptr + 12, 4),
                                        self.cfg_read(ptr + 16, 4) if ctype == CAP_NOTIFY else 0))
            ptr = self.cfg_read(ptr + 1, 1)
        bars = {c[0] for c in caps.values()}
        if len(bars) != 1:
            raise Abort(f"virtio capabilities in BARs {bars}, expected one")
        bar = bars.pop()
        self.cfg_write(0x10 + 4 * bar, 4, BAR_ADDR)
        self.cfg_write(0x14 + 4 * bar, 4, 0)  # the high half of a 64-bit BAR
        self.cfg_write(0x04, 2, 0x0006)  # memory space, bus master
        self.caps = caps
        self.common = BAR_ADDR + caps[CAP_COMMON][1]
        self.device = BAR_ADDR + caps[CAP_DEVICE][1]
        self.notify = BAR_ADDR + caps[CAP_NOTIFY][1]
        self.notify_mult = caps[CAP_NOTIFY][3]
        return caps

    def cw(self, width, off, val):
        self.qt.write(width, self.common + off, val)

    def cr(self, width, off):
        return self.qt.readm(width, self.common + off)

    def status(self):
        return self.cr("b", C_STATUS)

    def reset(self):
        self.cw("b", C_STATUS, 0)
        if not wait_for(lambda: self.status() == 0, 10):
            raise Abort("the device status does not go back to 0 after a reset")

    def features(self):
        self.cw("l", C_DFSELECT, 0)
        lo = self.cr("l", C_DF)
        self.cw("l", C_DFSELECT, 1)
        return lo | self.cr("l", C_DF) << 32

    def negotiate(self, features):
        self.cw("b", C_STATUS, ST_ACK)
        self.cw("b", C_STATUS, ST_ACK | ST_DRIVER)
        self.cw("l", C_GFSELECT, 0)
        self.cw("l", C_GF, features & 0xffffffff)
        self.cw("l", C_GFSELECT, 1)
        self.cw("l", C_GF, features >> 32)
        self.cw("b", C_STATUS, ST_ACK | ST_DRIVER | ST_FEATURES_OK)
        return self.status()

    def ring(self, q):
        base = RINGS + q * 0x10000
        return base, base + 0x1000, base + 0x2000

    def setup_queues(self):
        self.notify_off = []
        for q in range(3):
            desc, avail, used = self.ring(q)
            self.qt.memwrite(desc, bytes(0x3000))
            self.cw("w", C_QSELECT, q)
            self.cw("w", C_QSIZE, QUEUE_SIZE)
            for off, addr in ((C_QDESC, desc), (C_QAVAIL, avail), (C_QUSED, used)):
                self.cw("l", off, addr & 0xffffffff)
                self.cw("l", off + 4, addr >> 32)
            self.notify_off.append(self.cr("w", C_QNOTIFYOFF))
            self.cw("w", C_QENABLE, 1)
        self.used_idx = [0] * 3
        self.avail_idx = [0] * 3
        self.next_desc = [0] * 3

    def driver_ok(self):
        self.cw("b", C_STATUS, ST_ACK | ST_DRIVER | ST_FEATURES_OK | ST_DRIVER_OK)

    def command(self, opcode, payload=b"", resp_len=0, timeout=30):
        """One control command; returns (status, response payload, used length)."""
        q = 0
        desc, avail, used = self.ring(q)
        d = self.next_desc[q]
        self.next_desc[q] = (d + 2) % QUEUE_SIZE
        req_addr = BUFS + d * 0x1000
        resp_addr = req_addr + 0x800
        req = struct.pack("<HHI", opcode, 0, 0) + payload
        self.qt.memwrite(req_addr, req)
        self.qt.memwrite(resp_addr, b"\xff" * (8 + resp_len))
        self.qt.memwrite(desc + 16 * d, struct.pack("<QIHH", req_addr, len(req), DESC_NEXT, d + 1))
        self.qt.memwrite(desc + 16 * (d + 1), struct.pack("<QIHH", resp_addr, 8 + resp_len,
                                                          DESC_WRITE, 0))
        slot = self.avail_idx[q] % QUEUE_SIZE
        self.qt.memwrite(avail + 4 + 2 * slot, struct.pack("<H", d))
        self.avail_idx[q] = (self.avail_idx[q] + 1) & 0xffff
        self.qt.memwrite(avail + 2, struct.pack("<H", self.avail_idx[q]))
        self.qt.write("w", self.notify + self.notify_off[q] * self.notify_mult, q)
        want = self.avail_idx[q]
        if not wait_for(lambda: self.qt.readm("w", used + 2) == want, timeout):
            raise Abort(f"command {opcode}: the device did not return the buffer "
                        f"in {timeout} s")
        elem = used + 4 + 8 * (self.used_idx[q] % QUEUE_SIZE)
        self.used_idx[q] += 1
        uid, ulen = struct.unpack("<II", self.qt.memread(elem, 8))
        if uid != d:
            raise Abort(f"command {opcode}: used id {uid}, expected {d}")
        resp = self.qt.memread(resp_addr, 8 + resp_len)
        status = struct.unpack_from("<I", resp)[0]
        return status, resp[8:], ulen


def find_slot(rig):
    for bus in rig.qmp.cmd("query-pci"):
        for d in bus["devices"]:
            if d["id"]["vendor"] == 0x1af4 and d["id"]["device"] == 0x106a:
                return d["slot"]
    raise Abort("query-pci lists no 1af4:106a device")


def virtio_status(rig):
    paths = [d["path"] for d in rig.qmp.cmd("x-query-virtio") if d["name"] == "virtio-rdma"]
    if len(paths) != 1:
        raise Abort(f"x-query-virtio lists {len(paths)} virtio-rdma devices")
    return rig.qmp.cmd("x-query-virtio-status", path=paths[0])


def event(drv, timeout=30):
    """Posts one 64-byte event buffer; returns the events written into it."""
    q = 2
    desc, avail, used = drv.ring(q)
    d = drv.next_desc[q]
    drv.next_desc[q] = (d + 1) % QUEUE_SIZE
    buf = BUFS + 0x100000 + d * 0x100
    drv.qt.memwrite(buf, bytes(64))
    drv.qt.memwrite(desc + 16 * d, struct.pack("<QIHH", buf, 64, DESC_WRITE, 0))
    drv.qt.memwrite(avail + 4 + 2 * (drv.avail_idx[q] % QUEUE_SIZE), struct.pack("<H", d))
    drv.avail_idx[q] = (drv.avail_idx[q] + 1) & 0xffff
    drv.qt.memwrite(avail + 2, struct.pack("<H", drv.avail_idx[q]))
    drv.qt.write("w", drv.notify + drv.notify_off[q] * drv.notify_mult, q)
    want = drv.avail_idx[q]
    if not wait_for(lambda: drv.qt.readm("w", used + 2) == want, timeout):
        raise Abort(f"the device returned no event buffer in {timeout} s")
    elem = used + 4 + 8 * (drv.used_idx[q] % QUEUE_SIZE)
    drv.used_idx[q] += 1
    _, ulen = struct.unpack("<II", drv.qt.memread(elem, 8))
    data = drv.qt.memread(buf, ulen)
    return [struct.unpack_from("<HHII", data, i) for i in range(0, ulen - ulen % 16, 16)]


def no_event(drv, seconds):
    """Posts an event buffer; True when the device fills none in seconds."""
    try:
        evs = event(drv, timeout=seconds)
    except Abort:
        return True
    print(f"   (events: {evs})", flush=True)
    return False
