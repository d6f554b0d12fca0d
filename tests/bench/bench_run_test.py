#!/usr/bin/python3
"""Tests of bench/run on the emulated cluster.

  smoke      `bench/run --quick` on a 2-host, 1-epoch subset (40 steps): exit 0, a report with
             both systems and its plots, and interface bytes within 5 % above hptrain's own
             counters for ssgd.
  interrupt  SIGINT in the middle of a run: exit 130, and no namespace, link or process of the
             run is left behind.
  two_level  `bench/run --two-level` (2 nodes x 2 workers) for 30 steps of flat ssgd, ssgd over
             the hierarchical all-reduce and `hierarchical` once per epoch: what crossed each
             node's link, from the interfaces and from hptrain's own inter-node counters, matches
             docs/algorithms.md §2c.

Exits 77 (skipped) with the reason when this machine cannot create network namespaces.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench", "lib"))
import netcluster  # noqa: E402

RUN = os.path.join(ROOT, "bench", "run")


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def namespace_pids(prefix):
    pids = set()
    for ns in netcluster.stale_namespaces(prefix):
        out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout
        pids.update(int(p) for p in out.split() if p.isdigit())
    return pids


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purpose; it is reaped by its parent.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def smoke(binary, out):
    prefix = f"hpbs{os.getpid()}"
    r = subprocess.run([RUN, "--quick", "--workers", "2", "--systems", "hptrain-ssgd,ddp",
                        "--max-steps", "40", "--target", "0.3", "--binary", binary,
                        "--out", out, "--prefix", prefix], capture_output=True, text=True,
                       timeout=240)
    print(r.stdout[-3000:], r.stderr[-3000:])
    if r.returncode != 0:
        fail(f"bench/run exited {r.returncode}")
    report = open(os.path.join(out, "report.md")).read()
    for needle in ("| hptrain-ssgd |", "| ddp |", "lenet5-accuracy.png", "lenet5-bytes.png"):
        if needle not in report:
            fail(f"report.md lacks {needle!r}")
    for png in ("lenet5-accuracy.png", "lenet5-bytes.png"):
        if os.path.getsize(os.path.join(out, png)) < 1000:
            fail(f"{png} is empty")
    rows = {row["name"]: row for row in json.load(open(os.path.join(out, "results.json")))
            ["suites"][0]["rows"]}
    ssgd = rows["hptrain-ssgd"]
    ratio = ssgd["interface_over_runtime"]
    print(f"hptrain-ssgd: interface bytes / runtime bytes = {ratio:.4f} "
          f"({ssgd['interface_bytes_per_worker_step']:.0f} vs "
          f"{ssgd['runtime_bytes_per_worker_step']:.0f} B/worker/step)")
    if not 1.0 <= ratio <= 1.05:
        fail(f"interface bytes are {ratio:.4f} x the runtime's, not within 5 % above")
    if not rows["ddp"]["ok"] or not rows["ddp"]["interface_bytes_per_worker_step"]:
        fail("the DDP peer did not report")
    if netcluster.stale_namespaces(prefix):
        fail("namespaces left behind after a normal run")


def interrupt(binary, out):
    prefix = f"hpbi{os.getpid()}"
    run = subprocess.Popen([RUN, "--workers", "2", "--models", "lenet5", "--systems",
                            "hptrain-ssgd", "--epochs", "1", "--binary", binary, "--out", out,
                            "--prefix", prefix], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
    # Wait until both workers train (processes in the workers' namespaces), then interrupt.
    deadline = time.time() + 120
    pids = set()
    while time.time() < deadline:
        pids = namespace_pids(prefix)
        hosts = [ns for ns in netcluster.stale_namespaces(prefix) if not ns.endswith("-sw")]
        busy = [ns for ns in hosts
                if subprocess.run(["ip", "netns", "pids", ns], capture_output=True,
                                  text=True).stdout.strip()]
        if len(busy) == 3:  # the ps host and both worker hosts
            break
        if run.poll() is not None:
            fail(f"bench/run ended early:\n{run.stdout.read()}")
        time.sleep(0.2)
    else:
        fail("the workers never started")
    time.sleep(2)
    pids |= namespace_pids(prefix)
    run.send_signal(signal.SIGINT)
    try:
        output, _ = run.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        run.kill()
        fail("bench/run did not exit within 60 s of SIGINT")
    print(output[-2000:])
    if run.returncode != 130:
        fail(f"bench/run exited {run.returncode}, expected 130")
    left = netcluster.stale_namespaces(prefix)
    if left:
        fail(f"namespaces left behind: {left}")
    living = [p for p in pids if alive(p)]
    if living:
        fail(f"processes left behind: {living}")
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    if prefix in links:
        fail("links of the run left in the root namespace")
    print(f"interrupted cleanly: {len(pids)} processes and 3 host namespaces + 1 switch removed")


LENET5_BYTES = 4 * 61706  # one copy of LeNet-5's parameters or gradients


def two_level(binary, out):
    prefix = f"hpbt{os.getpid()}"
    steps = 30
    r = subprocess.run([RUN, "--two-level", "--models", "lenet5", "--epochs", "1",
                        "--max-steps", str(steps), "--target", "0.3", "--systems",
                        "hptrain-ssgd,hptrain-ssgd-hier,hptrain-hierarchical-epoch",
                        "--binary", binary, "--out", out, "--prefix", prefix],
                       capture_output=True, text=True, timeout=240)
    print(r.stdout[-3000:], r.stderr[-3000:])
    if r.returncode != 0:
        fail(f"bench/run exited {r.returncode}")
    report = open(os.path.join(out, "report.md")).read()
    for needle in ("lenet5 (2 nodes × 2 workers)", "Between nodes",
                   "| hptrain-hierarchical-epoch | 468 | 117 |"):
        if needle not in report:
            fail(f"report.md lacks {needle!r}")
    rows = {row["name"]: row for row in json.load(open(os.path.join(out, "results.json")))
            ["suites"][0]["rows"]}
    # Per step and node, the runtime's inter-node bytes: the flat ring (ranks in node order)
    # leaves each node by one hop, 2(N-1)/N * 4P; the hierarchical all-reduce among the two
    # leaders, 2(M-1)/M * 4P = 4P.
    expected = {"hptrain-ssgd": 2 * 3 / 4 * LENET5_BYTES, "hptrain-ssgd-hier": LENET5_BYTES}
    for name, want in expected.items():
        row = rows[name]
        if not row["ok"] or row["steps"] != steps:
            fail(f"{name} did not run {steps} steps: {row}")
        for node in row["nodes"]:
            runtime = node["runtime_inter_sent_per_step"]
            iface = node["tx_bytes_per_step"]
            print(f"{name} node {node['node']}: runtime {runtime} B/step "
                  f"(expected {want:.0f}), interface {iface:.0f} B/step")
            if runtime is None or abs(runtime - want) > 0.005 * want:
                fail(f"{name} node {node['node']}: runtime inter-node bytes per step {runtime}, "
                     f"expected {want:.0f} within 0.5 %")
            # The interface adds TCP/IP headers and the coordinator's RPCs, nothing else: the
            # traffic between a node's own workers stays on its loopback.
            if not 1.0 <= iface / runtime <= 1.05:
                fail(f"{name} node {node['node']}: interface bytes {iface:.0f} per step are "
                     f"{iface / runtime:.3f} x the runtime's, not within 5 % above")
    # One epoch cut at 30 steps: `hierarchical` with K' = one epoch syncs the nodes once, at
    # the end, so each node's link carries one parameter all-reduce among the leaders.
    for node in rows["hptrain-hierarchical-epoch"]["nodes"]:
        total = node["tx_bytes"]
        print(f"hptrain-hierarchical-epoch node {node['node']}: {total} bytes in all "
              f"(one global sync: {LENET5_BYTES})")
        if not LENET5_BYTES <= total <= 1.25 * LENET5_BYTES:
            fail(f"hptrain-hierarchical-epoch node {node['node']}: {total} bytes crossed the "
                 f"node's link, expected one all-reduce of {LENET5_BYTES} (+ at most 25 %)")
    if netcluster.stale_namespaces(prefix):
        fail("namespaces left behind after a normal run")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("test", choices=["smoke", "interrupt", "two_level"])
    p.add_argument("--binary", required=True)
    args = p.parse_args()
    ok, why = netcluster.available()
    if not ok:
        print(f"SKIPPED: {why}")
        return 77
    if not os.access(args.binary, os.X_OK):
        print(f"SKIPPED: {args.binary} is not built")
        return 77
    with tempfile.TemporaryDirectory(prefix="hptrain-bench-") as out:
        {"smoke": smoke, "interrupt": interrupt, "two_level": two_level}[args.test](
            args.binary, out)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
