"""Emulated multi-host network: one Linux network namespace per host, joined by veth pairs to a
bridge in a switch namespace, with a `tc tbf` rate limit on each host's link in both directions.

    host i (namespace <prefix>-h<i>)          switch (namespace <prefix>-sw)
      eth0 10.90.0.<i+1>/24  <== veth ==>  h<i> ---- br0 ---- h<j>  <== veth ==>  eth0 of host j
      tbf on eth0: upload rate                 tbf on h<i>: download rate of host i

Every address lives inside these namespaces; the machine's own network is untouched. Processes
started with `spawn()` run inside a host's namespace. `down()` kills every process still in a
namespace of the cluster, then deletes the namespaces (which deletes their links); it runs on
normal exit, on error and on SIGINT/SIGTERM when the cluster is used as a context manager.

Requires root (CAP_SYS_ADMIN and CAP_NET_ADMIN), iproute2 and the sch_tbf qdisc. `tc netem` is not
needed. `available()` says whether this machine allows it, and why not.
"""
import json
import os
import signal
import subprocess
import time

SUBNET = "10.90.0"


def _run(args, check=True):
    r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {r.stderr.strip() or 'exit ' + str(r.returncode)}")
    return r


def available():
    """Returns (True, "") when network namespaces, veth, bridges and tbf can be used here, else
    (False, reason)."""
    if os.geteuid() != 0:
        return False, "network namespaces need root"
    for tool in ("ip", "tc"):
        if subprocess.run(["sh", "-c", f"command -v {tool}"], stdout=subprocess.DEVNULL).returncode:
            return False, f"{tool} (iproute2) is not installed"
    probe = f"hpbprobe{os.getpid()}"
    try:
        _run(["ip", "netns", "add", probe])
        _run(["ip", "-n", probe, "link", "add", "p0", "type", "veth", "peer", "name", "p1"])
        _run(["ip", "-n", probe, "link", "add", "br0", "type", "bridge"])
        _run(["ip", "netns", "exec", probe, "tc", "qdisc", "add", "dev", "p0", "root", "tbf",
              "rate", "100mbit", "burst", "64kb", "latency", "50ms"])
        return True, ""
    except RuntimeError as e:
        return False, f"cannot build an emulated network here: {e}"
    finally:
        _run(["ip", "netns", "del", probe], check=False)


def parse_rate(text):
    """'100mbit', '1gbit', '500kbit' or a number of Mbit/s -> bits per second."""
    t = str(text).strip().lower()
    for suffix, scale in (("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3), ("bit", 1.0)):
        if t.endswith(suffix):
            return float(t[: -len(suffix)]) * scale
    return float(t) * 1e6


def stale_namespaces(prefix="hpb"):
    """Namespaces left behind by a cluster whose process died (names start with `prefix`)."""
    out = _run(["ip", "-j", "netns", "list"], check=False).stdout.strip()
    names = [n["name"] for n in json.loads(out)] if out else []
    return [n for n in names if n.startswith(prefix)]


def kill_namespace_processes(ns, grace=3.0):
    """SIGTERM, then SIGKILL after `grace` seconds, every process inside namespace `ns`."""
    def pids():
        out = _run(["ip", "netns", "pids", ns], check=False).stdout.split()
        return [int(p) for p in out if p.isdigit() and int(p) != os.getpid()]
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 2.0)):
        left = pids()
        if not left:
            return
        for p in left:
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass
        deadline = time.time() + wait
        while time.time() < deadline and pids():
            time.sleep(0.05)


class Cluster:
    """`hosts` hosts with link rates `rates` (one value for all, or one per host; bits/s).
    Use as a context manager, or call up() and down() yourself."""

    def __init__(self, hosts, rates=100e6, prefix=None, mtu=1500):
        if hosts < 1 or hosts > 250:
            raise ValueError("hosts must be in 1..250")
        self.hosts = hosts
        self.rates = list(rates) if isinstance(rates, (list, tuple)) else [rates] * hosts
        if len(self.rates) != hosts:
            raise ValueError(f"{len(self.rates)} rates for {hosts} hosts")
        self.prefix = prefix or f"hpb{os.getpid()}"
        self.mtu = mtu
        self.switch = f"{self.prefix}-sw"
        self._created = []
        self._procs = []
        self._old_handlers = {}

    # Names and addresses ---------------------------------------------------------------------
    def namespace(self, i):
        return f"{self.prefix}-h{i}"

    def address(self, i):
        return f"{SUBNET}.{i + 1}"

    def exec_prefix(self, i):
        return ["ip", "netns", "exec", self.namespace(i)]

    # Life cycle ------------------------------------------------------------------------------
    def __enter__(self):
        self._install_signal_handlers()
        try:
            self.up()
        except BaseException:
            self.down()
            self._restore_signal_handlers()
            raise
        return self

    def __exit__(self, *exc):
        try:
            self.down()
        finally:
            self._restore_signal_handlers()
        return False

    def up(self):
        self._add_namespace(self.switch)
        _run(["ip", "-n", self.switch, "link", "add", "br0", "type", "bridge"])
        _run(["ip", "-n", self.switch, "link", "set", "br0", "up"])
        for i in range(self.hosts):
            ns = self.namespace(i)
            self._add_namespace(ns)
            peer = f"h{i}"
            _run(["ip", "-n", ns, "link", "add", "eth0", "mtu", str(self.mtu), "type", "veth",
                  "peer", "name", peer, "mtu", str(self.mtu), "netns", self.switch])
            _run(["ip", "-n", ns, "addr", "add", f"{self.address(i)}/24", "dev", "eth0"])
            _run(["ip", "-n", ns, "link", "set", "eth0", "up"])
            _run(["ip", "-n", self.switch, "link", "set", peer, "master", "br0"])
            _run(["ip", "-n", self.switch, "link", "set", peer, "up"])
            self._limit(ns, "eth0", self.rates[i])          # upload
            self._limit(self.switch, peer, self.rates[i])   # download

    def down(self):
        for p in self._procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for ns in reversed(self._created):
            kill_namespace_processes(ns)
        for p in self._procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
        for ns in reversed(self._created):
            _run(["ip", "netns", "del", ns], check=False)
        self._created = []
        self._procs = []

    def _add_namespace(self, ns):
        _run(["ip", "netns", "add", ns])
        self._created.append(ns)
        _run(["ip", "-n", ns, "link", "set", "lo", "up"])

    @staticmethod
    def _limit(ns, dev, rate):
        # burst must cover at least one timer tick of traffic; the queue holds ~50 ms at the rate.
        burst = max(64 * 1024, int(rate / 8 / 250))
        _run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "tbf",
              "rate", f"{int(rate)}bit", "burst", str(burst), "latency", "50ms"])

    def _install_signal_handlers(self):
        def interrupted(signum, frame):
            raise KeyboardInterrupt(f"signal {signum}")
        for s in (signal.SIGINT, signal.SIGTERM):
            self._old_handlers[s] = signal.signal(s, interrupted)

    def _restore_signal_handlers(self):
        for s, h in self._old_handlers.items():
            signal.signal(s, h)
        self._old_handlers = {}

    # Processes and counters ------------------------------------------------------------------
    def spawn(self, i, argv, env=None, stdout=None, stderr=None, cwd=None):
        """Starts `argv` inside host i's namespace, in its own process group."""
        p = subprocess.Popen(self.exec_prefix(i) + list(argv), env=env, stdout=stdout,
                             stderr=stderr, cwd=cwd, start_new_session=True)
        self._procs.append(p)
        return p

    def counters(self, i):
        """{'tx_bytes', 'rx_bytes', 'tx_packets', 'rx_packets'} of host i's eth0."""
        out = _run(["ip", "-n", self.namespace(i), "-s", "-j", "link", "show", "dev", "eth0"]).stdout
        stats = json.loads(out)[0]["stats64"]
        return {"tx_bytes": stats["tx"]["bytes"], "rx_bytes": stats["rx"]["bytes"],
                "tx_packets": stats["tx"]["packets"], "rx_packets": stats["rx"]["packets"]}

    def all_counters(self):
        return [self.counters(i) for i in range(self.hosts)]
