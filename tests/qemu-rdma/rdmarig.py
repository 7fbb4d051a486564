"""Shared helpers of the tests/qemu-rdma scripts: the real back end, the
patched QEMU, QMP, qtest, and the traces QEMU writes.

The scripts run inside the Soft-RoCE guest (tests/rxe-vm/run).  UNIX sockets
do not work on 9p, so they live in a private directory under the guest's
/tmp; the logs go to a directory under BUILD_DIR (on 9p, so they reach the
host), kept when a check fails.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

# Every limit below is sized for the reference machine and scaled by
# VRDMA_SLOWDOWN, the speed factor tests/rxe-vm/run measures from the
# guest's boot (2 on a machine twice as slow).
SLOWDOWN = max(1.0, float(os.environ.get("VRDMA_SLOWDOWN") or 1))

# Quotas below any rxe limit: the configuration must show exactly these.
QUOTAS = {"max_qp": 77, "max_cq": 78, "max_mr": 79, "max_pd": 80}
QUOTA_OPTS = {"max_qp": "--max-qps", "max_cq": "--max-cqs",
              "max_mr": "--max-mrs", "max_pd": "--max-pds"}

# vhost-user requests, as QEMU's vhost_user_write/read traces print them.
VU = {"GET_FEATURES": 1, "SET_FEATURES": 2, "SET_OWNER": 3, "SET_MEM_TABLE": 5, "SET_LOG_BASE": 6,
      "SET_VRING_NUM": 8, "SET_VRING_ADDR": 9, "SET_VRING_BASE": 10,
      "GET_VRING_BASE": 11, "SET_VRING_KICK": 12, "SET_VRING_CALL": 13,
      "GET_PROTOCOL_FEATURES": 15, "SET_PROTOCOL_FEATURES": 16,
      "GET_QUEUE_NUM": 17, "SET_VRING_ENABLE": 18, "GET_CONFIG": 24,
      "RESET_DEVICE": 34, "ADD_MEM_REG": 37, "SET_STATUS": 39}


class Abort(Exception):
    """A failure after which the remaining checks cannot run."""


class Checks:
    """TAP-like "ok - ..." / "FAIL - ..." lines and a closing count."""

    def __init__(self, name):
        self.name = name
        self.passed = 0
        self.failed = 0

    def __call__(self, ok, what, detail=""):
        if ok:
            self.passed += 1
            print(f"ok - {what}", flush=True)
        else:
            self.failed += 1
            print(f"FAIL - {what}" + (f": {detail}" if detail else ""), flush=True)
        return bool(ok)

    def summary(self):
        print(f"{self.name}: {self.passed} passed, {self.failed} failed", flush=True)


def wait_for(pred, timeout, step=0.2):
    """pred()'s value once true, or its last value after timeout (seconds
    on the reference machine: scaled by SLOWDOWN)."""
    end = time.monotonic() + timeout * SLOWDOWN
    while True:
        v = pred()
        if v or time.monotonic() > end:
            return v
        time.sleep(step)


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def tail(path, n=25):
    return "\n".join("    " + l for l in read(path).splitlines()[-n:])


def ibv_attrs(dev):
    """The first value of each field `ibv_devinfo -v` prints for dev."""
    out = subprocess.run(["ibv_devinfo", "-v", "-d", dev], capture_output=True,
                         text=True, check=False).stdout
    attrs = {}
    for line in out.splitlines():
        m = re.match(r"\s*(\w+):\s*(.+?)\s*$", line)
        if m and m.group(1) not in attrs:
            attrs[m.group(1)] = m.group(2)
    return attrs


def has_atomics(attrs):
    return attrs.get("atomic_cap", "").split()[0:1] != ["ATOMIC_NONE"]


def parse_int(s):
    m = re.match(r"(0x[0-9a-fA-F]+|\d+)", s or "")
    return int(m.group(1), 0) if m else None


def guid_int(s):
    return int(s.replace(":", ""), 16) if s and re.fullmatch(r"[0-9a-fA-F:]+", s) else None


def trace_records(path, name):
    """The lines of one trace event, as dicts of their "key value" pairs."""
    recs = []
    for line in read(path).splitlines():
        m = re.search(r"\b" + name + r"(?: (.*))?$", line)
        if not m:
            continue
        toks = (m.group(1) or "").replace("back end features", "features") \
            .replace("protocol features", "protocol_features") \
            .replace("acked features", "acked_features") \
            .replace("dirty log", "dirty_log").split()
        recs.append({toks[i]: toks[i + 1] for i in range(0, len(toks) - 1, 2)})
    return recs


def vu_requests(path, event):
    """The vhost-user request numbers of vhost_user_write or _read, in order."""
    return [int(m.group(1)) for m in re.finditer(r"\b" + event + r" req:(\d+)", read(path))]


class QMP:
    def __init__(self, path, timeout):
        self.sock = None
        if not wait_for(lambda: os.path.exists(path), timeout):
            raise Abort(f"QEMU opened no QMP socket at {path} in {timeout} s")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout * SLOWDOWN)
        self.sock.connect(path)
        self.buf = b""
        if "QMP" not in self._read():
            raise Abort("no QMP greeting")
        self.cmd("qmp_capabilities")

    def _read(self):
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise Abort("QMP connection closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def cmd(self, name, **args):
        msg = {"execute": name}
        if args:
            msg["arguments"] = args
        self.sock.sendall(json.dumps(msg).encode() + b"\n")
        while True:
            r = self._read()
            if "event" in r:
                continue
            if "error" in r:
                raise Abort(f"QMP {name}: {r['error']}")
            return r["return"]

    def close(self):
        if self.sock:
            self.sock.close()


class QTest:
    """QEMU's qtest protocol: port I/O and memory access with no guest CPU."""

    def __init__(self, listener, timeout):
        listener.settimeout(timeout * SLOWDOWN)
        try:
            self.sock, _ = listener.accept()
        except socket.timeout:
            raise Abort(f"QEMU did not connect to the qtest socket in {timeout} s")
        self.sock.settimeout(timeout * SLOWDOWN)
        self.buf = b""

    def cmd(self, line):
        self.sock.sendall(line.encode() + b"\n")
        while True:
            while b"\n" not in self.buf:
                chunk = self.sock.recv(65536)
                if not chunk:
                    raise Abort(f"qtest connection closed at: {line}")
                self.buf += chunk
            reply, self.buf = self.buf.split(b"\n", 1)
            reply = reply.decode()
            if reply.startswith("IRQ"):
                continue
            if not reply.startswith("OK"):
                raise Abort(f"qtest {line}: {reply}")
            return reply[3:].strip()

    def out(self, width, addr, val):
        self.cmd(f"out{width} {addr:#x} {val:#x}")

    def inp(self, width, addr):
        return int(self.cmd(f"in{width} {addr:#x}"), 0)

    def write(self, width, addr, val):
        self.cmd(f"write{width} {addr:#x} {val:#x}")

    def readm(self, width, addr):
        return int(self.cmd(f"read{width} {addr:#x}"), 0)

    def memwrite(self, addr, data):
        self.cmd(f"write {addr:#x} {len(data):#x} 0x{data.hex()}")

    def memread(self, addr, size):
        return bytes.fromhex(self.cmd(f"read {addr:#x} {size:#x}")[2:])

    def close(self):
        self.sock.close()


class Rig:
    """One back end and one QEMU, with their logs and sockets."""

    def __init__(self, build_dir, name, ibdev=None, quotas=None):
        """quotas: QUOTAS with these values instead."""
        self.build = build_dir
        self.vhost = os.path.join(build_dir, "vhost", "vrdma-vhost")
        self.qemu = os.environ.get("VRDMA_QEMU") or \
            os.path.join(build_dir, "qemu", "build", "qemu-system-x86_64")
        self.ibdev = ibdev or os.environ.get("VRDMA_RXE_DEV_A", "rxe0")
        self.quotas = {**QUOTAS, **(quotas or {})}
        self.logdir = tempfile.mkdtemp(prefix=f"qemu-rdma-{name}.", dir=build_dir)
        self.sockdir = tempfile.mkdtemp(prefix="qemu-rdma.", dir="/tmp")
        self.sock = os.path.join(self.sockdir, "vhost.sock")
        self.qmp_path = os.path.join(self.sockdir, "qmp.sock")
        self.vhost_log = os.path.join(self.logdir, "vhost.log")
        self.qemu_log = os.path.join(self.logdir, "qemu.log")
        self.trace_log = os.path.join(self.logdir, "trace.log")
        self.backend = None
        self.qemu_proc = None
        self.qmp = None
        self.qtest = None
        self.qtest_listener = None

    def missing(self):
        """Why the rig cannot run, or None."""
        for path, hint in ((self.vhost, "build the project"),
                           (self.qemu, f"build it: qemu-patches/build {self.build}/qemu")):
            if not os.access(path, os.X_OK):
                return f"{path} is missing ({hint})"
        return None

    def start_backend(self):
        args = [self.vhost, "--device", "rdma", "--ibdev", self.ibdev,
                "--socket-path", self.sock]
        for k, v in self.quotas.items():
            args += [QUOTA_OPTS[k], str(v)]
        before = read(self.vhost_log).count("device ready")
        with open(self.vhost_log, "a") as log:
            log.write(f"### {' '.join(args)}\n")
            log.flush()
            self.backend = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL)
        if not wait_for(lambda: read(self.vhost_log).count("device ready") > before
                        or self.backend.poll() is not None, 30):
            raise Abort("the back end did not get ready in 30 s:\n" + tail(self.vhost_log))
        if self.backend.poll() is not None:
            raise Abort(f"the back end exited with {self.backend.returncode}:\n"
                        + tail(self.vhost_log))

    def stop_backend(self):
        """SIGTERM; returns the exit status (or a string on timeout)."""
        self.backend.send_signal(signal.SIGTERM)
        try:
            return self.backend.wait(30 * SLOWDOWN)
        except subprocess.TimeoutExpired:
            self.backend.kill()
            self.backend.wait()
            return "timeout (killed)"

    def start_qemu(self, qtest=False, incoming=False, memory="128M", extra=()):
        """QEMU with the device; paused (-S), or driven by qtest; with
        incoming, waiting for QMP migrate-incoming.  memory: -m's value;
        extra: more arguments, after the device's."""
        args = [self.qemu, "-nodefaults", "-display", "none",
                "-machine", "pc,memory-backend=mem", "-m", memory,
                "-object", "memory-backend-memfd,id=mem,size=128M,share=on",
                "-chardev", f"socket,id=c,path={self.sock},reconnect=1",
                "-device", "vhost-user-rdma-pci,chardev=c",
                "-qmp", f"unix:{self.qmp_path},server=on,wait=off",
                "-trace", "vhost_user_rdma_*", "-trace", "vhost_user_read",
                "-trace", "vhost_user_write", "-D", self.trace_log]
        if qtest:
            qt_path = os.path.join(self.sockdir, "qtest.sock")
            self.qtest_listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.qtest_listener.bind(qt_path)
            self.qtest_listener.listen(1)
            args += ["-accel", "qtest", "-qtest", f"unix:{qt_path}",
                     "-qtest-log", "/dev/null"]
        else:
            args += ["-S", "-accel", "tcg"]
        if incoming:
            args += ["-incoming", "defer"]
        args += list(extra)
        with open(self.qemu_log, "w") as log:
            log.write(f"### {' '.join(args)}\n")
            log.flush()
            self.qemu_proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                              stdin=subprocess.DEVNULL)
        try:
            if qtest:
                self.qtest = QTest(self.qtest_listener, 60)
            # A QEMU that refuses its configuration exits before it opens
            # QMP: no need to wait out QMP's limit for it.
            wait_for(lambda: os.path.exists(self.qmp_path) or
                     self.qemu_proc.poll() is not None, 60)
            if self.qemu_proc.poll() is not None:
                raise Abort("QEMU exited before it opened QMP")
            self.qmp = QMP(self.qmp_path, 60)
        except (Abort, OSError) as e:
            if self.qemu_proc.poll() is not None:
                raise Abort(f"QEMU exited with {self.qemu_proc.returncode}:\n"
                            + tail(self.qemu_log))
            raise Abort(str(e))

    def quit_qemu(self):
        """QMP quit; returns QEMU's exit status (or a string on timeout)."""
        self.qmp.cmd("quit")
        try:
            return self.qemu_proc.wait(60 * SLOWDOWN)
        except subprocess.TimeoutExpired:
            return "timeout"

    def qemu_messages(self):
        """What QEMU printed (not the command line we logged)."""
        return [l for l in read(self.qemu_log).splitlines()
                if not l.startswith("###") and l.strip()]

    def cleanup(self):
        for c in (self.qmp, self.qtest, self.qtest_listener):
            if c:
                c.close()
        for p in (self.qemu_proc, self.backend):
            if p and p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(self.sockdir, ignore_errors=True)

    def finish_quietly(self, keep_logs):
        """For a script with several rigs and one summary: the logs' tails
        when kept, else the log directory goes."""
        if not keep_logs:
            shutil.rmtree(self.logdir, ignore_errors=True)
            return
        print(f"logs kept in {self.logdir}", flush=True)
        for path in (self.vhost_log, self.qemu_log, self.trace_log):
            print(f"--- {os.path.basename(path)} (tail)", flush=True)
            print(tail(path, 15), flush=True)

    def finish(self, checks):
        """Prints the summary (and the logs on failure); returns the exit code."""
        checks.summary()
        if checks.failed:
            print(f"{checks.name}: FAIL: logs kept in {self.logdir}", flush=True)
            for path in (self.vhost_log, self.qemu_log, self.trace_log):
                print(f"--- {os.path.basename(path)} (tail)", flush=True)
                print(tail(path, 15), flush=True)
            return 1
        shutil.rmtree(self.logdir, ignore_errors=True)
        return 0
