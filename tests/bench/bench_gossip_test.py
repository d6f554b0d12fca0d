#!/usr/bin/python3
"""bench/run's gossip bench without a network: its systems and preset, and the report's "Gossip"
tables from made-up runs (no root, no training).

  systems  the gossip systems' job fields, kept out of the default suite; --gossip's systems
           and its one-line error with --two-level
  report   summarize + report.write: totals, exchanges, worker accuracy range, the ratios
           against fixed-period gossip (p = 1) and the paper's targets, met and not met
"""
import argparse
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench", "lib"))
import report  # noqa: E402
import runner  # noqa: E402
import systems  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fakes import expect, fail  # noqa: E402
import fakes  # noqa: E402

MIB = 2**20


def FakeCluster():
    return fakes.FakeCluster(5)


def systems_test():
    s = systems.Settings("mlp", 4, 1, 60, 0.3, 1)
    want = {"hptrain-gossip": [],
            "hptrain-gossip-p1": ["spec.strategy.period=1"],
            "hptrain-easgd": ["spec.strategy.variant=easgd"],
            "hptrain-gossip-push": ["spec.strategy.variant=push", "spec.strategy.period=1"]}
    with tempfile.TemporaryDirectory() as out:
        for name, items in want.items():
            expect(systems.is_gossip(name), f"{name} is not a gossip system")
            argv, _ = systems.hptrain_command(name, s, FakeCluster(), "hptrain", out)
            for item in ["spec.strategy.type=gossip"] + items:
                expect(item in argv, f"{name}: {item} not set: {argv}")
            # Adaptive gossip keeps the strategy's own threshold and intervals.
            if name in ("hptrain-gossip", "hptrain-easgd"):
                expect(not any(a.startswith("spec.strategy.period=") for a in argv),
                       f"{name} sets a period: {argv}")
    expect(not systems.is_gossip("hptrain-ssgd"), "ssgd taken for gossip")
    built = ["ssgd", "quantized", "gossip"]
    default = systems.default_systems(built, 1)
    expect(not set(default) & set(systems.GOSSIP_ONLY), f"default suite has gossip: {default}")
    expect("hptrain-ssgd" in default, f"default suite {default}")
    known = systems.all_systems(built)
    expect(all(n in known for n in systems.GOSSIP_SYSTEMS), f"gossip systems not known: {known}")
    expect(systems.GOSSIP_SYSTEMS == ("hptrain-gossip", "hptrain-gossip-p1", "hptrain-easgd",
                                      "hptrain-ssgd"), f"preset {systems.GOSSIP_SYSTEMS}")
    # --gossip is a flat cluster's bench: with --two-level it stops before anything runs.
    bad = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "run"), "--gossip",
                          "--two-level"], capture_output=True, text=True)
    err = bad.stderr.strip().splitlines()
    expect(bad.returncode == 2 and err and "--gossip runs on a flat cluster" in err[-1],
           f"--gossip --two-level: exit {bad.returncode}, {bad.stderr!r}")
    helptext = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "run"), "--help"],
                              capture_output=True, text=True).stdout
    expect("--gossip" in helptext and "1,1,2,3" in helptext, "--help lacks the gossip bench")


def fake_run(name, steps, per_worker_tx, ttt, accuracy, exchanges=None, spread=None):
    """A finished run: each of the 4 worker hosts transmitted `per_worker_tx` bytes, evenly over
    the run; the first evaluation reached the target at `ttt` seconds."""
    interface = [{"tx_bytes": 1000, "rx_bytes": 1000, "tx_packets": 1, "rx_packets": 1}]
    interface += [{"tx_bytes": per_worker_tx, "rx_bytes": per_worker_tx, "tx_packets": 1,
                   "rx_packets": 1} for _ in range(4)]
    wall = 2 * ttt
    ranks = [{"rank": r, "bytes_sent": per_worker_tx - 1000, "bytes_received": per_worker_tx,
              "batch_size": 128, "compute_seconds": 1.0, "comm_seconds": 1.0}
             for r in range(4)]
    if exchanges:
        for k, e in zip(ranks, exchanges):
            k["exchanges"] = e
    final = {"test_accuracy": accuracy}
    if spread is not None:
        final["worker_test_accuracy"] = spread
    result = {"steps": steps, "samples_per_second": 1000.0, "final": final, "ranks": ranks,
              "evaluations": [{"step": steps // 2, "test_accuracy": accuracy,
                               "elapsed_seconds": ttt},
                              {"step": steps, "test_accuracy": accuracy,
                               "elapsed_seconds": wall - 1}]}
    timeline = [(t * wall / 10, 4 * per_worker_tx * t // 10) for t in range(11)]
    return {"name": name, "ok": True, "capped": False, "error": "", "wall_seconds": wall,
            "result": result, "interface": interface, "timeline": timeline,
            "cpu_steal": 0.0, "cpu_others": 0.0, "node_metrics": None, "ps_hosts": [0]}


def write_report(runs):
    s = systems.Settings("mlp", 4, 1, 100, 0.5, 1)
    rows = [(runner.summarize(run, s), run) for run in runs]
    with tempfile.TemporaryDirectory() as out:
        text = open(report.write(out, {"started": "now", "command": "bench/run --gossip",
                                       "machine": "test", "network": "test"},
                                 [("mlp (4 workers)", s, rows)])).read()
        results = open(os.path.join(out, "results.json")).read()
    print(text)
    return text, results, rows


def report_test():
    runs = [fake_run("hptrain-gossip", 100, 7 * MIB, 40.0, 0.80, [30, 31, 29, 30],
                     {"min": 0.79, "max": 0.81, "mean": 0.80, "ranks": [0.81, 0.8, 0.8, 0.79]}),
            fake_run("hptrain-gossip-p1", 100, 100 * MIB, 100.0, 0.805, [100, 100, 100, 100],
                     [0.8, 0.81, 0.8, 0.8]),
            fake_run("hptrain-easgd", 100, 50 * MIB, 80.0, 0.78, [5, 1, 1, 1]),
            fake_run("hptrain-ssgd", 100, 150 * MIB, 120.0, 0.81)]
    text, results, rows = write_report(runs)
    for needle in (
            "Gossip: totals over the whole run",
            # 4 x 7 MiB on the interfaces, half of it by the target (40 s of an 80 s run), 4 x
            # (7 MiB - 1000) from the runtime; 1 - 28 / 400 = 93 %, 1 - 40 / 100 = 60 %.
            "| hptrain-gossip | 40.0 | 80.00 % | 79.00 – 81.00 % | 28.0 | 14.0 | 28.0 | "
            "30 / 31 / 29 / 30 | +93.0 % | +60.0 % |",
            "| hptrain-gossip-p1 | 100.0 | 80.50 % | 80.00 – 81.00 % | 400.0 | 200.0 | 400.0 | "
            "100 / 100 / 100 / 100 | +0.0 % | +0.0 % |",
            "| hptrain-easgd | 80.0 | 78.00 % | — | 200.0 | 100.0 | 200.0 | 5 / 1 / 1 / 1 | "
            "+50.0 % | +20.0 % |",
            # ssgd's run summary has no exchanges: "—"; more bytes and time than p = 1.
            "| hptrain-ssgd | 120.0 | 81.00 % | — | 600.0 | 300.0 | 600.0 | — | -50.0 % | "
            "-20.0 % |",
            "Targets of adaptive gossip against fixed-period gossip (p = 1)",
            "| hptrain-gossip | 93.0 % (≥ 92: met) | 60.0 % (≥ 52: met) | -0.50 (≥ −1: met) |"):
        expect(needle in text, f"report lacks {needle!r}")
    expect(text.count("(≥ 92:") == 1, "a targets row for a system other than hptrain-gossip")
    expect('"exchanges": [' in results and '"interface_bytes": 29360128' in results,
           "results.json lacks the gossip totals")
    gossip = rows[0][0]["gossip"]
    expect(gossip["worker_accuracy_range"] == (0.79, 0.81), f"range {gossip}")

    # Short of the targets, and at a lower accuracy: "not met" for each.
    runs = [fake_run("hptrain-gossip", 100, 50 * MIB, 90.0, 0.70, [60, 60, 60, 60]),
            fake_run("hptrain-gossip-p1", 100, 100 * MIB, 100.0, 0.80, [100, 100, 100, 100])]
    text, _, _ = write_report(runs)
    expect("| hptrain-gossip | 50.0 % (≥ 92: not met) | 10.0 % (≥ 52: not met) | "
           "-10.00 (≥ −1: not met) |" in text, "not-met verdicts")

    # Without the baseline (here: it failed) there is nothing to compare with: "—" everywhere
    # it would be, and the failure in the gossip table too.
    failed = dict(fake_run("hptrain-gossip-p1", 0, 0, 1.0, 0.0), ok=False, result=None,
                  error="exit codes [1]; see hptrain-gossip-p1*.log")
    text, _, _ = write_report([fake_run("hptrain-gossip", 100, 7 * MIB, 40.0, 0.8), failed,
                               fake_run("hptrain-ssgd", 100, 150 * MIB, 120.0, 0.81)])
    expect(text.count("| hptrain-gossip-p1 | failed: exit codes [1]; see hptrain-gossip-p1*.log"
                      " |") == 2, "the failed baseline in the main and the gossip table")
    expect("| hptrain-gossip | — (≥ 92: —) | — (≥ 52: —) | — (≥ −1: —) |" in text,
           "verdicts without hptrain-gossip-p1")
    expect("| — | — | — |" in text, "ratios without hptrain-gossip-p1")
    expect("| hptrain-gossip | 0.047 |" not in text, "gossip in the speed-against-bytes table")

    # No gossip system, no gossip section.
    text, _, _ = write_report([fake_run("hptrain-ssgd", 100, 150 * MIB, 120.0, 0.81)])
    expect("Gossip:" not in text, "a gossip section without gossip systems")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("test", choices=["systems", "report"])
    args = p.parse_args()
    {"systems": systems_test, "report": report_test}[args.test]()
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
