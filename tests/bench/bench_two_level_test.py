#!/usr/bin/python3
"""bench/run's two-level network without a network: where each worker runs, which systems run by
default, reading a worker's /metrics text, and the report's "Between nodes" and "Targets" tables
from made-up runs (no root, no training).

  placement  worker hosts and the placement file of 2 nodes x 2 workers; default systems
  metrics    nodemetrics.parse on a worker's /metrics text and on text that is not a worker's
  report     summarize + report.write: per node bytes, ratios against flat ssgd and DDP, targets
"""
import argparse
import json
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench", "lib"))
import nodemetrics  # noqa: E402
import report  # noqa: E402
import runner  # noqa: E402
import systems  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fakes import expect, fail  # noqa: E402
import fakes  # noqa: E402

BUILT = ["ssgd", "quantized", "hierarchical", "localsgd"]


def FakeCluster():
    return fakes.FakeCluster(3)


def placement():
    s = systems.Settings("lenet5", 4, 1, 30, 0.3, 1, workers_per_node=2)
    expect(s.nodes == 2, f"nodes {s.nodes}")
    hosts = [systems.worker_host(s, r) for r in range(4)]
    expect(hosts == [1, 1, 2, 2], f"worker hosts {hosts}")
    expect(systems.worker_hosts(s) == [1, 2], f"node hosts {systems.worker_hosts(s)}")
    with tempfile.TemporaryDirectory() as out:
        argv, _ = systems.hptrain_command("hptrain-quantized8-hier", s, FakeCluster(), "hptrain",
                                          out)
        placed = json.load(open(os.path.join(out, "hptrain-quantized8-hier.placement.json")))
        addresses = [w["address"] for w in placed["workers"]]
        expect(addresses == ["10.90.0.2", "10.90.0.2", "10.90.0.3", "10.90.0.3"],
               f"worker addresses {addresses}: a node's workers must share its address")
        for item in ("spec.communicator.hierarchical=true",
                     "spec.communicator.compressInterNodeOnly=true", "spec.strategy.bits=8"):
            expect(item in argv, f"{item} not set: {argv}")
        ddp, _ = systems.ddp_commands("ddp", s, FakeCluster(), 0.0, out)
        expect([h for h, _ in ddp] == [1, 1, 2, 2], f"DDP hosts {[h for h, _ in ddp]}")
    two = systems.default_systems(BUILT, 2)
    expect(two == ["hptrain-hierarchical-epoch", "hptrain-hierarchical-50", "hptrain-ssgd",
                   "hptrain-ssgd-hier", "hptrain-quantized8-hier", "ddp"], f"two-level {two}")
    flat = systems.default_systems(BUILT, 1)
    expect(not set(flat) & set(systems.NODE_SYSTEMS), f"flat default has node systems: {flat}")
    expect("hptrain-ssgd" in flat and "ddp" in flat, f"flat default {flat}")


def metrics():
    text = "\n".join([
        "# HELP hptrain_step Global training steps completed.",
        "# TYPE hptrain_step gauge",
        "hptrain_step 40",
        'hptrain_comm_node_bytes_total{direction="sent",link="intra"} 1000',
        'hptrain_comm_node_bytes_total{direction="received",link="intra"} 900',
        'hptrain_comm_node_bytes_total{link="inter",direction="sent"} 246824',
        'hptrain_comm_node_bytes_total{direction="received",link="inter"} 246800',
        'hptrain_comm_bytes_total{direction="sent"} 247824'])
    got = nodemetrics.parse(text)
    want = {"step": 40.0, "intra_sent": 1000.0, "intra_received": 900.0,
            "inter_sent": 246824.0, "inter_received": 246800.0}
    expect(got == want, f"parse: {got}")
    expect(nodemetrics.parse("ps_up 1\nhptrain_step 3\n") is None,
           "text without node counters taken for a worker's")


def fake_run(name, steps, node_tx, ttt, inter_per_rank=None):
    interface = [{"tx_bytes": 1000, "rx_bytes": 1000, "tx_packets": 1, "rx_packets": 1}]
    interface += [{"tx_bytes": t, "rx_bytes": t, "tx_packets": 1, "rx_packets": 1}
                  for t in node_tx]
    result = {"steps": steps, "samples_per_second": 1000.0,
              "final": {"test_accuracy": 0.8},
              "evaluations": [{"step": steps, "test_accuracy": 0.8, "elapsed_seconds": ttt}]}
    readings = ({r: {"host": 1 + r // 2, "step": float(steps), "inter_sent": v,
                     "inter_received": v} for r, v in enumerate(inter_per_rank)}
                if inter_per_rank else None)
    return {"name": name, "ok": True, "capped": False, "error": "", "wall_seconds": ttt + 1,
            "result": result, "interface": interface, "timeline": [(0.0, 0)],
            "cpu_steal": 0.0, "cpu_others": 0.0, "node_metrics": readings, "ps_hosts": [0]}


def report_tables():
    s = systems.Settings("lenet5", 4, 1, 100, 0.5, 1, workers_per_node=2)
    p = 246824
    runs = [fake_run("hptrain-ssgd", 100, [100 * 1.5 * p] * 2, 60.0,
                     [0, 100 * 1.5 * p, 0, 100 * 1.5 * p]),
            fake_run("hptrain-hierarchical-50", 100, [2 * p, 2 * p], 15.0,
                     [2 * p, 0, 2 * p, 0]),
            fake_run("ddp", 100, [100 * 1.5 * p] * 2, 20.0)]
    rows = [(runner.summarize(run, s), run) for run in runs]
    ssgd, hier, ddp = (row for row, _ in rows)
    expect(abs(ssgd["inter_node_tx_bytes_per_node_step"] - 1.5 * p) < 1, f"ssgd {ssgd}")
    expect(abs(ssgd["runtime_inter_node_bytes_per_node_step"] - 1.5 * p) < 1, f"ssgd {ssgd}")
    expect(abs(hier["runtime_inter_node_bytes_per_node_step"] - 2 * p / 100) < 1, f"hier {hier}")
    expect(ddp["runtime_inter_node_bytes_per_node_step"] is None, "DDP has no runtime counters")
    with tempfile.TemporaryDirectory() as out:
        text = open(report.write(out, {"started": "now", "command": "bench/run --two-level",
                                       "machine": "test", "network": "test"},
                                 [("lenet5 (2 nodes × 2 workers)", s, rows)])).read()
    print(text)
    for needle in ("Between nodes",
                   "| hptrain-hierarchical-50 | 15.0 | 0.47 | 4.8 / 4.8 | 4.8 @ 100 | "
                   "0.47 / 0.47 | 75.00 | 4.00 | 1.33 |",
                   "| hptrain-hierarchical-50 | 50 | 50 | 4.00 (≥ 3: met) | 1.33 (> 1: met) | "
                   "75.0 (≥ 50: met) |",
                   "| ddp | 20.0 | 35.31 | 361.6 / 361.6 | — |", "Targets of the node-based "):
        expect(needle in text, f"report lacks {needle!r}")
    expect("Speed against bytes" not in text, "the flat cluster's bytes table on two levels")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("test", choices=["placement", "metrics", "report"])
    args = p.parse_args()
    {"placement": placement, "metrics": metrics, "report": report_tables}[args.test]()
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
