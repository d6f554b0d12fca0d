#!/usr/bin/python3
"""Tests of bench/accuracy that train nothing.

  report  `bench/accuracy --from DIR` on saved results with known accuracies: the gaps are paired
          by seed, the mean and its standard error, the worst seed and the count within the
          target come out as computed by hand, a failed run is listed and left out, and the
          report is written whole.
  sets    with a stand-in for the hptrain binary that records its arguments: --set is passed to
          every run, a spec.strategy key to every run but the ssgd baseline's (which takes no
          strategy parameters and would refuse it).
  errors  an unknown strategy, a density that is not a number, no seeds, a missing binary and a
          folder without results each exit non-zero with one line naming the problem.
"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(ROOT, "bench", "accuracy")


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def run(*args):
    return subprocess.run([BENCH, *args], capture_output=True, text=True, cwd=ROOT)


def row(strategy, seed, accuracy, bytes_per_step, ok=True):
    r = {"strategy": strategy, "seed": seed, "ok": ok, "error": "" if ok else "exit 1",
         "wall_seconds": 1.0}
    if ok:
        r.update(accuracy=accuracy, bytes_per_step=bytes_per_step)
    return r


def test_report():
    meta = {"command": "bench/accuracy", "started": "2026-01-01 00:00", "host": "h",
            "job": "examples/fashion-mnist.yaml", "epochs": 1, "schedule": "cosine",
            "seeds": [1, 2, 3], "strategies": ["ssgd", "quantized-8", "topk-0.01"], "sets": []}
    rows = [row("ssgd", 1, 85.0, 1000), row("ssgd", 2, 86.0, 1000), row("ssgd", 3, 84.0, 1000),
            # quantized-8: gaps -0.2, -0.6, +0.1 -> mean -0.2333, s.e. 0.2028; 2 of 3 within 0.5
            row("quantized-8", 1, 84.8, 250), row("quantized-8", 2, 85.4, 250),
            row("quantized-8", 3, 84.1, 250),
            # topk: seed 3 failed; gaps -1.5, -0.5 -> mean -1.00, s.e. 0.50; 1 of 2 within 1.0
            row("topk-0.01", 1, 83.5, 40), row("topk-0.01", 2, 85.5, 60),
            row("topk-0.01", 3, 0, 0, ok=False)]
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "results.json"), "w") as f:
            json.dump({"meta": meta, "rows": rows}, f)
        r = run("--from", d)
        if r.returncode != 0:
            fail(f"--from exited {r.returncode}: {r.stderr}")
        with open(os.path.join(d, "report.md")) as f:
            text = f.read()
        expected = [
            "| quantized-8 | -0.20 | -0.60 | +0.10 | -0.23 ± 0.20 | -0.60 | 2 of 3 (>= -0.5) | "
            "250 (25.0 %) |",
            "| topk-0.01 | -1.50 | -0.50 | — | -1.00 ± 0.50 | -1.50 | 1 of 2 (>= -1.0) | "
            "50 (5.0 %) |",
            "- FAILED: topk-0.01 seed 3: exit 1",
            "| ssgd | 85.00 | 86.00 | 84.00 | 85.00 |",
        ]
        for line in expected:
            if line not in text:
                fail(f"report lacks {line!r}:\n{text}")
        if os.path.exists(os.path.join(d, "report.md.tmp")):
            fail("report.md.tmp left behind")


FAKE_HPTRAIN = """#!/usr/bin/python3
import json, os, sys
with open(os.environ["ARGS_LOG"], "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
out = sys.argv[sys.argv.index("--output-json") + 1]
with open(out, "w") as f:
    json.dump({"final": {"test_accuracy": 0.85}, "steps": 10,
               "ranks": [{"bytes_sent": 1000}, {"bytes_sent": 1000}]}, f)
"""


def test_sets():
    with tempfile.TemporaryDirectory() as d:
        binary = os.path.join(d, "hptrain")
        with open(binary, "w") as f:
            f.write(FAKE_HPTRAIN)
        os.chmod(binary, 0o755)
        log = os.path.join(d, "args.jsonl")
        r = subprocess.run([BENCH, "--binary", binary, "--seeds", "1", "--strategies", "dgc-0.01",
                            "--set", "spec.strategy.momentumMasking=false", "--set",
                            "spec.optimizer.lr=0.1", "--out", os.path.join(d, "out")],
                           capture_output=True, text=True, cwd=ROOT,
                           env=dict(os.environ, ARGS_LOG=log))
        if r.returncode != 0:
            fail(f"bench/accuracy exited {r.returncode}: {r.stderr}")
        with open(log) as f:
            runs = {}
            for line in f:
                argv = json.loads(line)
                sets = [argv[i + 1] for i, a in enumerate(argv) if a == "--set"]
                kind = [s for s in sets if s.startswith("spec.strategy.type=")][0]
                runs[kind.split("=", 1)[1]] = sets
        if sorted(runs) != ["dgc", "ssgd"]:
            fail(f"expected one ssgd and one dgc run, got {sorted(runs)}")
        for strategy in ("ssgd", "dgc"):
            if "spec.optimizer.lr=0.1" not in runs[strategy]:
                fail(f"{strategy} run lacks the job-wide --set: {runs[strategy]}")
        if "spec.strategy.momentumMasking=false" not in runs["dgc"]:
            fail(f"dgc run lacks the strategy --set: {runs['dgc']}")
        if "spec.strategy.momentumMasking=false" in runs["ssgd"]:
            fail(f"the ssgd baseline got a strategy parameter: {runs['ssgd']}")


def test_errors():
    cases = [
        (["--strategies", "ssgd,bogus"], "unknown strategy 'bogus'"),
        (["--strategies", "topk-x"], "the density 'x' is not a number"),
        (["--seeds", ""], "--seeds needs at least one seed"),
        (["--binary", "/nonexistent/hptrain"], "is not an executable"),
        (["--from", "/nonexistent"], "no readable results.json"),
    ]
    for args, message in cases:
        r = run(*args)
        lines = r.stderr.strip().splitlines()
        if r.returncode == 0 or len(lines) != 1 or message not in lines[0]:
            fail(f"{args}: exit {r.returncode}, stderr {r.stderr!r}; expected one line with "
                 f"{message!r}")


if __name__ == "__main__":
    {"report": test_report, "sets": test_sets, "errors": test_errors}[sys.argv[1]]()
    print("PASS")
