"""hptrain's own inter-node byte counters, read from its workers' /metrics endpoints while a system
runs on a two-level cluster: `hptrain_comm_node_bytes_total{direction, link}` and `hptrain_step`
of every worker (docs/metrics.md), so that the report can set the runtime's inter-node bytes per
node beside the node links' interface counters.

The run summary does not carry the split, and each worker serves /metrics on its host address
at a port of its own choosing inside its host's network namespace. One thread per worker host
enters that namespace (setns(2) on the thread only) and, every second, finds the hptrain worker
processes of the namespace (/proc/<pid>/ns/net), the port of each one's metrics endpoint (the
first socket the worker listens on: it starts /metrics before its collectives,
runtime/cli/worker_command.cc) and reads the counters. A worker's last reading is taken at most a
second before it exits, so it may miss its last steps: the report divides by the step it read
(`hptrain_step`), not by the run's steps.
"""
import ctypes
import os
import re
import threading
import urllib.request

CLONE_NEWNET = 0x40000000
PERIOD_SECONDS = 1.0
_LINE = re.compile(r'^(\w+)(?:\{([^}]*)\})?\s+(\S+)$')
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def _enter_namespace(ns):
    """Moves the calling thread (only it) into network namespace `ns`."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/var/run/netns/{ns}", os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns {ns}: {os.strerror(err)}")
    finally:
        os.close(fd)


def parse(text):
    """{'step', 'inter_sent', 'inter_received', 'intra_sent', 'intra_received'} from a worker's
    /metrics text; None when it is not a worker's."""
    out = {}
    for line in text.splitlines():
        m = _LINE.match(line.strip())
        if not m:
            continue
        name, labels, value = m.group(1), dict(_LABEL.findall(m.group(2) or "")), m.group(3)
        if name == "hptrain_step":
            out["step"] = float(value)
        elif name == "hptrain_comm_node_bytes_total":
            out[f"{labels.get('link')}_{labels.get('direction')}"] = float(value)
    if "step" not in out or "inter_sent" not in out:
        return None
    return out


def _listening_ports(pid):
    """[(fd, port)] of the TCP sockets process `pid` listens on, lowest fd first."""
    inodes = {}
    for table in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{table}") as f:
                for row in f.read().splitlines()[1:]:
                    cols = row.split()
                    if len(cols) > 9 and cols[3] == "0A":  # TCP_LISTEN
                        inodes[cols[9]] = int(cols[1].rsplit(":", 1)[1], 16)
        except OSError:
            return []
    found = []
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:[") and link[8:-1] in inodes:
                found.append((int(fd), inodes[link[8:-1]]))
    except OSError:
        return []
    return sorted(found)


def _workers_in(ns_inode, binary):
    """{pid: rank} of the `hptrain worker` processes in the namespace with inode `ns_inode`."""
    workers = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.stat(f"/proc/{entry}/ns/net").st_ino != ns_inode:
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        if (len(argv) > 2 and os.path.basename(argv[0]) == os.path.basename(binary)
                and argv[1] == "worker" and "--rank" in argv):
            try:
                workers[int(entry)] = int(argv[argv.index("--rank") + 1])
            except (IndexError, ValueError):
                pass
    return workers


class Scraper:
    """Reads every hptrain worker's node byte counters on hosts `hosts` of `cluster` until
    stop(). `readings()`: {rank: {'host', 'step', 'inter_sent', ...}}, each rank's last."""

    def __init__(self, cluster, hosts, binary):
        self._cluster = cluster
        self._binary = binary
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._readings = {}
        self._threads = [threading.Thread(target=self._loop, args=(h,), daemon=True)
                         for h in hosts]
        for t in self._threads:
            t.start()

    def stop(self):
        self._stop.set()
        for t in self._threads:
            t.join(timeout=5)
        return self.readings()

    def readings(self):
        with self._lock:
            return {rank: dict(r) for rank, r in self._readings.items()}

    def _loop(self, host):
        ns = self._cluster.namespace(host)
        try:
            ns_inode = os.stat(f"/var/run/netns/{ns}").st_ino
            _enter_namespace(ns)
        except OSError:
            return  # no readings from this host; the report shows "—"
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        ports = {}  # pid -> metrics port, or None when its first listener is not /metrics
        while not self._stop.wait(PERIOD_SECONDS):
            for pid, rank in _workers_in(ns_inode, self._binary).items():
                if pid not in ports:
                    listening = _listening_ports(pid)
                    if not listening:
                        continue  # not serving yet
                    ports[pid] = listening[0][1]
                if ports[pid] is None:
                    continue
                url = f"http://{self._cluster.address(host)}:{ports[pid]}/metrics"
                try:
                    with opener.open(url, timeout=1.0) as response:
                        reading = parse(response.read().decode(errors="replace"))
                except OSError:
                    continue  # exiting, or busy: the previous reading stays
                if reading is None:
                    ports[pid] = None
                    continue
                reading["host"] = host
                with self._lock:
                    self._readings[rank] = reading
