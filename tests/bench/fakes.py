"""What the bench tests that run without a network share: their failure helpers and a stand-in
for bench/lib/netcluster.py's cluster (namespaces and addresses by host index, nothing made)."""
import sys


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def expect(cond, msg):
    if not cond:
        fail(msg)


class FakeCluster:
    """`hosts` hosts: host i runs under `ip netns exec hpbx-h<i>` at 10.90.0.<i + 1>."""

    def __init__(self, hosts):
        self.hosts = hosts

    def exec_prefix(self, i):
        return ["ip", "netns", "exec", f"hpbx-h{i}"]

    def address(self, i):
        return f"10.90.0.{i + 1}"
