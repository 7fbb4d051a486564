# SPDX-License-Identifier: MIT
"""Debian's own libvirtd, started by a test and for it alone.

No booted systemd, no libvirt-daemon-system: libvirtd runs in its own mount
and PID namespaces (unshare), where /etc/libvirt and libvirt's directories
under /run and /var are the test's, so that it neither reads nor writes a
system instance's configuration, domains or logs, and every QEMU it starts
dies with it (the namespace's PID 1).  The rest of /run is the host's: the
engine's private directory (/run/vrdma-migrate) must be the same for
vrdma-migrate and QEMU, as on an operator's host.  Where libvirt's
directories are missing (no libvirt-daemon-system), empty ones are made on
the host to mount on, and stay.  QEMU runs as root, without cgroups,
namespaces or a security driver: what a container without systemd allows.
The user libvirt runs QEMU as by default (libvirt-qemu) is looked up even
then; the namespace's /etc/passwd and /etc/group have it.

Everything the operator would do goes through virsh, on this daemon's
socket (qemu:///system?socket=...).
"""
import os
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

QEMU_USER = "libvirt-qemu"
QEMU_CONF = """\
user = "+0"
group = "+0"
dynamic_ownership = 0
remember_owner = 0
security_driver = "none"
cgroup_controllers = [ ]
namespaces = [ ]
stdio_handler = "file"
seccomp_sandbox = 0
clear_emulator_capabilities = 0
"""
QEMU_NS = "http://libvirt.org/schemas/domain/qemu/1.0"


class LibvirtError(Exception):
    """libvirtd or virsh failed; the message carries what they said."""


def available():
    """None when libvirtd can run here, else why not."""
    if os.geteuid() != 0:
        return "not root (the namespaces and bind mounts need root)"
    missing = [p for p in ("libvirtd", "virsh", "unshare") if not shutil.which(p)]
    return ", ".join(missing) + " not installed (./dev setup installs them)" if missing else None


def _with_entry(src, dst, line, name):
    with open(src) as f:
        text = f.read()
    if not any(row.split(":", 1)[0] == name for row in text.splitlines()):
        text += ("" if text.endswith("\n") or not text else "\n") + line + "\n"
    with open(dst, "w") as f:
        f.write(text)


class Libvirtd:
    """One libvirtd in directory WORKDIR; spawn(name, argv) starts and owns
    the process (the test's rig kills it, and so its QEMUs, at the end)."""

    def __init__(self, workdir, spawn, timeout, log_path):
        self.dir = workdir
        self.timeout = timeout
        dirs = [("etc", "/etc/libvirt"), ("run", "/run/libvirt"),
                ("var-lib", "/var/lib/libvirt"), ("var-cache", "/var/cache/libvirt"),
                ("var-log", "/var/log/libvirt")]
        for sub in [sub for sub, _ in dirs] + ["sock"]:
            os.makedirs(os.path.join(workdir, sub), exist_ok=True)
        _with_entry("/etc/passwd", self.path("passwd"),
                    f"{QEMU_USER}:x:64055:64055:Libvirt Qemu:/var/lib/libvirt:/usr/sbin/nologin",
                    QEMU_USER)
        _with_entry("/etc/group", self.path("group"), f"{QEMU_USER}:x:64055:", QEMU_USER)
        with open(self.path("etc/qemu.conf"), "w") as f:
            f.write(QEMU_CONF)
        self.socket = self.path("sock/libvirt-sock")
        with open(self.path("libvirtd.conf"), "w") as f:
            f.write(f'unix_sock_dir = "{self.path("sock")}"\n'
                    'auth_unix_rw = "none"\nauth_unix_ro = "none"\n'
                    f'log_outputs = "2:file:{log_path}"\n')
        self.log_path = log_path
        script = "set -e;"
        for sub, dst in dirs:
            script += f" mkdir -p '{dst}'; mount --bind '{self.path(sub)}' '{dst}';"
        for name in ("passwd", "group"):
            script += f" mount --bind '{self.path(name)}' '/etc/{name}';"
        # -p: its own pid file; root's default is the host's /run/libvirtd.pid.
        script += (f" exec '{sys.executable}' '{os.path.abspath(__file__)}' init"
                   f" libvirtd -f '{self.path('libvirtd.conf')}'"
                   f" -p '{self.path('libvirtd.pid')}'")
        # --kill-child: when the test kills unshare, libvirtd (the PID
        # namespace's first process) goes, and with it every QEMU.
        self.proc = spawn("libvirtd", ["unshare", "--mount", "--pid", "--fork", "--kill-child",
                                       "--mount-proc", "--propagation", "private",
                                       "sh", "-c", script])
        deadline = time.monotonic() + timeout
        while not os.path.exists(self.socket):
            if self.proc.poll() is not None:
                raise LibvirtError(f"libvirtd exited with status {self.proc.returncode}")
            if time.monotonic() > deadline:
                raise LibvirtError(f"libvirtd made no socket in {timeout}s")
            time.sleep(0.2)
        self.uri = f"qemu:///system?socket={self.socket}"

    def path(self, name):
        return os.path.join(self.dir, name)

    def virsh(self, *args):
        """virsh ARGS on this daemon: its output; LibvirtError if it failed."""
        argv = ["virsh", "-c", self.uri, *args]
        try:
            res = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                                 text=True, timeout=self.timeout, check=False)
        except subprocess.TimeoutExpired as e:
            raise LibvirtError(f"{' '.join(argv)}: no answer in {self.timeout}s") from e
        if res.returncode != 0:
            raise LibvirtError(f"virsh {' '.join(args)}: {res.stderr.strip()}")
        return res.stdout

    def state(self, name):
        return self.virsh("domstate", name).strip()

    def qemu_log(self, name):
        """What libvirt logged of domain NAME's QEMU: its command line, stderr."""
        try:
            with open(self.path(f"var-log/qemu/{name}.log"), "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return ""



def domain_xml(name, emulator, guest, mib, console, disk_sock=None, qemu_args=(),
               accel="tcg", cpu="max"):
    """A TCG domain as an operator writes one for vrdma: guest RAM that the
    back ends can map (memfd, shared), the kernel booted directly, the
    serial console to a file, the vhost-user disk as libvirt's own element,
    and what libvirt has no element for (the RDMA and rng devices, a QMP
    socket for the engine) as QEMU arguments.  No default devices the
    patched QEMU is built without (USB, balloon).  ACCEL kvm or tcg; CPU
    as QEMU's -cpu: "max" and features turned off ("max,xsave=off")."""
    ET.register_namespace("qemu", QEMU_NS)
    dom = ET.Element("domain", type="kvm" if accel == "kvm" else "qemu")
    ET.SubElement(dom, "name").text = name
    ET.SubElement(dom, "memory", unit="MiB").text = str(mib)
    ET.SubElement(dom, "vcpu").text = "1"
    backing = ET.SubElement(dom, "memoryBacking")
    ET.SubElement(backing, "source", type="memfd")
    ET.SubElement(backing, "access", mode="shared")
    os_el = ET.SubElement(dom, "os")
    ET.SubElement(os_el, "type", arch="x86_64", machine="pc").text = "hvm"
    ET.SubElement(os_el, "kernel").text = guest["kernel"]
    ET.SubElement(os_el, "initrd").text = guest["initrd"]
    ET.SubElement(os_el, "cmdline").text = guest["append"]
    model, *features = cpu.split(",")
    if model != "max" or any(not f.endswith("=off") for f in features):
        raise ValueError(f"-cpu {cpu}: only max, with features off, is written as libvirt's")
    cpu_el = ET.SubElement(dom, "cpu", mode="maximum")
    for feature in features:
        ET.SubElement(cpu_el, "feature", policy="disable", name=feature[:-len("=off")])
    for event in ("on_poweroff", "on_reboot", "on_crash"):
        ET.SubElement(dom, event).text = "destroy"
    devices = ET.SubElement(dom, "devices")
    ET.SubElement(devices, "emulator").text = emulator
    if disk_sock:
        disk = ET.SubElement(devices, "disk", type="vhostuser", device="disk", snapshot="no")
        ET.SubElement(disk, "driver", name="qemu", type="raw")
        ET.SubElement(disk, "source", type="unix", path=disk_sock)
        ET.SubElement(disk, "target", dev="vda", bus="virtio")
    serial = ET.SubElement(devices, "serial", type="file")
    ET.SubElement(serial, "source", path=console)
    ET.SubElement(devices, "controller", type="usb", model="none")
    ET.SubElement(devices, "memballoon", model="none")
    if qemu_args:
        cmdline = ET.SubElement(dom, f"{{{QEMU_NS}}}commandline")
        for arg in qemu_args:
            ET.SubElement(cmdline, f"{{{QEMU_NS}}}arg", value=arg)
    return ET.tostring(dom, encoding="unicode")


def init(argv):
    """The PID namespace's first process: runs ARGV (libvirtd) and reaps
    every process that ends in the namespace.  libvirt's QEMUs daemonize,
    so they become this process's children; unreaped, an ended QEMU stays
    a zombie that libvirt takes for running.  Exits with ARGV's status,
    and the kernel then kills what is left in the namespace."""
    child = os.fork()
    if child == 0:
        try:
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)
    signal.signal(signal.SIGTERM, lambda *_: os.kill(child, signal.SIGTERM))
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            sys.exit(1)
        if pid == child:
            sys.exit(os.waitstatus_to_exitcode(status))


if __name__ == "__main__" and sys.argv[1:2] == ["init"]:
    init(sys.argv[2:])
