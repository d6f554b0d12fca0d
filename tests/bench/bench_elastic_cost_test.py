#!/usr/bin/python3
"""Tests of bench/elastic_cost that train nothing.

  analyse  the figures of a kill from timestamped stderr lines in the launcher's and the workers'
           formats and progress samples: for an elastic job the steps done at the kill come from
           the survivors' "step N did not complete", the resumed step and the regroup time from
           their unplanned membership lines (the joiner's later line is not a survivor's), the
           rejoin from the planned ones; for a gang restart the resumed step from the launcher's
           line and the steps done from the last progress shown before it, or the checkpoint's
           step when the display lagged behind it; stale progress shown again after the kill is
           not taken for training, and the times of training and of catching up are taken back
           by the steps the display shows beyond the mark, at the step time shown before the
           kill, but never before the regroup.
  report   `bench/elastic_cost --from DIR` on saved runs: lost time is the killed runs' median
           wall time less the uninterrupted runs' median, per kind, and a failed run is left out
           of the medians and counted.
  errors   an unknown model, an unknown scenario, a malformed --steps and a missing binary each
           exit 2 with one line naming the problem.
"""
import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(ROOT, "bench", "elastic_cost")


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def load():
    loader = importlib.machinery.SourceFileLoader("elastic_cost", BENCH)
    spec = importlib.util.spec_from_loader("elastic_cost", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def expect(got, key, want):
    if key not in got:
        fail(f"{key} missing from {got}")
    if isinstance(want, float):
        if abs(got[key] - want) > 1e-9:
            fail(f"{key}: got {got[key]}, want {want}")
    elif got[key] != want:
        fail(f"{key}: got {got[key]!r}, want {want!r}")


def test_analyse():
    m = load()
    hashes = "parameters 9c4afb59c3ba8bb2"
    lines = [
        (9.5, "hptrain coordinator: membership epoch 1: lost slot 1 (killed by signal 9); "
              "members 0,2,3"),
        (9.6, "hptrain run: worker-1 (pid 15659) was killed by signal 9 (SIGKILL); the job goes on "
              "without slot 1, restarting it (restart 1 of at most 3 for slot 1)"),
        (9.7, "hptrain worker: step 183 did not complete (step 182: ...); regrouping"),
        (9.8, "hptrain worker: step 184 did not complete (step 183: ...); regrouping"),
        (10.0, f"hptrain worker 0: membership epoch 1: rank 0 of 3 from step 182, {hashes} "
               "(unplanned change, 0.06 s)"),
        (10.2, f"hptrain worker 2: membership epoch 1: rank 1 of 3 from step 182, {hashes} "
               "(unplanned change, 0.05 s)"),
        (10.1, f"hptrain worker 3: membership epoch 1: rank 2 of 3 from step 182, {hashes} "
               "(unplanned change, 0.04 s)"),
        (12.0, f"hptrain worker 0: membership epoch 2: rank 0 of 4 from step 190, {hashes} "
               "(planned change, 0.69 s)"),
        (12.5, f"hptrain worker 1: membership epoch 2: rank 3 of 4 from step 190, {hashes} "
               "(unplanned change, 0.07 s)"),
        (12.4, f"hptrain worker 2: membership epoch 2: rank 1 of 4 from step 190, {hashes} "
               "(planned change, 0.72 s)"),
    ]
    # 0.1 s per step before the kill; 182 is still on display after the regroup; training shows
    # 185 at 10.6, so it began 3 steps earlier, at 10.3.
    progress = [(8.0, 170), (9.0, 180), (10.3, 182), (10.6, 185), (11.0, 188)]
    got = m.analyse(lines, progress, {"t": 9.0, "progress_step": 180})
    expect(got, "steps_done_at_kill", 182)
    expect(got, "resumed_from_step", 182)
    expect(got, "steps_redone", 0)
    expect(got, "survivors", 3)
    expect(got, "kill_to_regrouped_s", 10.2 - 9.0)
    expect(got, "kill_to_training_s", 10.6 - 9.0)
    expect(got, "kill_to_caught_up_s", 10.6 - 9.0)
    expect(got, "kill_to_training_est_s", 10.6 - 0.3 - 9.0)
    expect(got, "kill_to_caught_up_est_s", 10.6 - 0.3 - 9.0)
    expect(got, "kill_to_rejoined_s", 12.4 - 9.0)
    expect(got, "rejoin_change_seconds", 0.72)
    expect(got, "kill_to_launcher_line_s", 9.6 - 9.0)

    lines = [
        (1.5, "hptrain ps: coordinator on 127.0.0.1:43287, metrics on port 45483"),
        (16.7, "hptrain run: worker-1 (pid 17663) was killed by signal 9 (SIGKILL); restarting "
               "the gang from the checkpoint at step 150 (restart 1 of at most 3)"),
        (20.4, "hptrain worker 2: resuming from step 150"),
    ]
    progress = [(15.0, 170), (15.8, 194), (16.5, 196), (21.0, 151), (22.0, 180), (22.6, 197)]
    got = m.analyse(lines, progress, {"t": 15.8, "progress_step": 194})
    expect(got, "steps_done_at_kill", 196)
    expect(got, "resumed_from_step", 150)
    expect(got, "steps_redone", 46)
    expect(got, "kill_to_training_s", 21.0 - 15.8)
    expect(got, "kill_to_caught_up_s", 22.6 - 15.8)
    # 24 steps in 0.8 s before the kill: 1/30 s per step; 151 shown at 21.0 began at 21.0 - 1/30,
    # and the display at 22.6 is one step past the 196 done at the kill.
    expect(got, "kill_to_training_est_s", 21.0 - 1 / 30 - 15.8)
    expect(got, "kill_to_caught_up_est_s", 22.6 - 1 / 30 - 15.8)
    if "kill_to_regrouped_s" in got:
        fail(f"a gang restart has no regroup: {got}")
    # The display still showed 199 when the checkpoint of step 200 was written.
    lines[1] = (16.7, lines[1][1].replace("at step 150", "at step 200"))
    got = m.analyse(lines, [(15.0, 170), (15.8, 199), (21.0, 201)],
                    {"t": 15.8, "progress_step": 199})
    expect(got, "steps_done_at_kill", 200)
    expect(got, "steps_redone", 0)

    got = m.analyse([], [(1.0, 5)], {})
    if got != {"killed": False}:
        fail(f"a run without a kill: {got}")


def run_row(model, scenario, rep, wall, rc=0, **extra):
    r = {"model": model, "scenario": scenario, "rep": rep, "rc": rc, "wall_seconds": wall,
         "steps": 300, "checkpoint_interval": 50}
    r.update(extra)
    return r


def test_report():
    rows = [run_row("lenet5", "elastic", 1, 20.0), run_row("lenet5", "elastic", 2, 22.0),
            run_row("lenet5", "elastic", 3, 30.0),
            run_row("lenet5", "elastic-kill", 1, 23.0, steps_redone=0, kill_to_training_est_s=0.6),
            run_row("lenet5", "elastic-kill", 2, 25.0, steps_redone=0, kill_to_training_est_s=0.8),
            run_row("lenet5", "elastic-kill", 3, 99.0, rc=1),
            run_row("lenet5", "static", 1, 21.0), run_row("lenet5", "static", 2, 19.0),
            run_row("lenet5", "gang-kill", 1, 30.0, steps_redone=25, kill_to_training_est_s=5.0),
            run_row("lenet5", "gang-kill", 2, 26.0, steps_redone=31, kill_to_training_est_s=6.0)]
    meta = {"date": "d", "command": "c", "commit": "x", "host": "h", "uptime_before": "u",
            "uptime_after": "v", "models": ["lenet5"], "kill": {"lenet5": 175}}
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "results.json"), "w") as f:
            json.dump({"meta": meta, "runs": rows}, f)
        proc = subprocess.run([BENCH, "--from", d], capture_output=True, text=True, cwd=ROOT)
        if proc.returncode != 0:
            fail(f"--from exited {proc.returncode}: {proc.stderr}")
        with open(os.path.join(d, "results.json")) as f:
            summary = json.load(f)["summary"]["lenet5"]
        with open(os.path.join(d, "report.md")) as f:
            text = f.read()
    # elastic: median(20, 22, 30) = 22, killed median(23, 25) = 24 (the failed run left out).
    expect(summary["elastic"], "lost_s", 2.0)
    expect(summary["elastic"], "reps", 2)
    expect(summary["elastic"], "kill_to_training_s", 0.7)
    # gang: median(21, 19) = 20, killed median(30, 26) = 28.
    expect(summary["gang restart"], "lost_s", 8.0)
    expect(summary["gang restart"], "steps_redone", 28.0)
    if "1 run(s) failed" not in text:
        fail("the report does not count the failed run")
    want = ("| lenet5 | 300 | 50 | 175 | gang restart | 2+2 | 20.0 (19.0–21.0) | "
            "28.0 (26.0–30.0) | 8.0 |")
    if want not in text:
        fail(f"the gang restart row is not as computed:\n{text}")


def test_errors():
    for args, needle in ((["--models", "vgg"], "unknown model 'vgg'"),
                         (["--scenarios", "elastic,nope"], "unknown 'nope'"),
                         (["--steps", "lenet5=many"], "--steps 'lenet5=many'"),
                         (["--binary", "/nonexistent/hptrain"], "/nonexistent/hptrain")):
        if "--binary" not in args:
            args = args + ["--binary", "/nonexistent"]
        proc = subprocess.run([BENCH, *args], capture_output=True, text=True, cwd=ROOT)
        out = (proc.stderr + proc.stdout).strip()
        if proc.returncode != 2 or needle not in out or len(out.splitlines()) != 1:
            fail(f"{args}: exit {proc.returncode}, output {out!r}; want one line with {needle!r}")


if __name__ == "__main__":
    {"analyse": test_analyse, "report": test_report, "errors": test_errors}[sys.argv[1]]()
    print("PASS")
