"""report.md, results.json and PNG plots of one suite run (matplotlib from Debian, Agg)."""
import json
import os

import runner
from files import write_atomically


def _fmt(value, spec, none="—"):
    return none if value is None else format(value, spec)


def _kib(b):
    return None if b is None else b / 1024.0


def write(out_dir, header, suites):
    """`suites`: [(title, settings, [(row, run)])]. Writes report.md and the plots; returns the
    report's path."""
    lines = [f"# hptrain benchmark — {header['started']}", ""]
    lines += [f"- command: `{header['command']}`", f"- machine: {header['machine']}",
              f"- network: {header['network']}", ""]
    for title, settings, rows in suites:
        lines += _table(title, settings, rows, out_dir)
    lines += ["Time to target is the wall time from launch (process start-up included) to the end of",
              "the first evaluation at or above the target (every system evaluates the whole test",
              "set at the same steps: each epoch's end, and every `spec.evalEverySteps` steps as set",
              "in the table's heading); `—` = not reached within the epochs or",
              "the time cap. Bytes per worker per step are transmitted bytes on the workers' network",
              "interfaces (TCP/IP headers, the coordinator's RPCs and rendezvous included); `runtime`",
              "is what hptrain's communicator counted as payload. Samples/s is measured inside",
              "training steps. Compute and comm s/step are hptrain's per-worker means of data +",
              "forward + backward time and of gradient exchange time (encoding included) per step;",
              "the peer does not report them. `vs DDP` divides DDP's time to target by the system's",
              "(above 1 = faster than DDP); where either did not reach the target it compares",
              "samples/s. CPU steal is the share of the machine's CPU time that the hypervisor",
              "gave to other guests while the system ran (/proc/stat): above a few percent, the",
              "machine was shared and its times are slower than they would be alone.", ""]
    results = [{"suite": title, "model": settings.model, "workers": settings.workers,
                "target": settings.target, "rows": [row for row, _ in rows]}
               for title, settings, rows in suites]
    write_atomically(os.path.join(out_dir, "results.json"),
                     json.dumps({"header": header, "suites": results}, indent=1))
    path = os.path.join(out_dir, "report.md")
    write_atomically(path, "\n".join(lines) + "\n")
    return path


def _table(title, settings, rows, out_dir):
    ddp = next((r for r, _ in rows if r["name"] == "ddp"), None)
    out = [f"## {title}", "",
           f"{settings.workers} workers, global batch {settings.m['batch']}, {settings.epochs} "
           f"epoch(s){f', at most {settings.max_steps} steps' if settings.max_steps else ''}, "
           f"target test accuracy {100 * settings.target:.1f} %, evaluated "
           + (f"every {settings.eval_every} steps and " if settings.eval_every else "")
           + "at each epoch's end", "",
           "| system | time to target (s) | final acc. | KiB/worker/step (interfaces) | "
           "KiB/worker/step (runtime) | compute s/step | comm s/step | samples/s | vs DDP | "
           "wall (s) | CPU steal |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row, _ in rows:
        if not row["ok"]:
            why = "time cap" if row["capped"] else row["error"]
            out.append(f"| {row['name']} | failed: {why} | | | | | | | | "
                       f"{row['wall_seconds']:.1f} | |")
            continue
        ratio = None
        if ddp and ddp["ok"]:
            if ddp["time_to_target"] and row["time_to_target"]:
                ratio = ddp["time_to_target"] / row["time_to_target"]
            elif ddp["samples_per_second"] and row["samples_per_second"]:
                ratio = row["samples_per_second"] / ddp["samples_per_second"]
        out.append(
            f"| {row['name']} | {_fmt(row['time_to_target'], '.1f')} | "
            f"{_fmt(row['final_accuracy'] and 100 * row['final_accuracy'], '.2f')} % | "
            f"{_fmt(_kib(row['interface_bytes_per_worker_step']), '.1f')} | "
            f"{_fmt(_kib(row['runtime_bytes_per_worker_step']), '.1f')} | "
            f"{_fmt(row.get('compute_seconds_per_step'), '.3f')} | "
            f"{_fmt(row.get('comm_seconds_per_step'), '.3f')} | "
            f"{_fmt(row['samples_per_second'], '.0f')} | {_fmt(ratio, '.2f')} | "
            f"{row['wall_seconds']:.1f} | "
            f"{_fmt(None if row.get('cpu_steal') is None else 100 * row['cpu_steal'], '.1f')} % |")
    out.append("")
    out += _speed_against_bytes(rows)
    plots = _plots(title, rows, out_dir)
    out += [f"![{p}]({p})" for p in plots] + [""]
    return out


def _speed_against_bytes(rows):
    """Each compressed hptrain system's speed-up over hptrain-ssgd against what its byte savings
    predict: if compression only shortened the exchange in proportion to the bytes, a system would
    run (compute + comm) / (compute + comm x bytes ratio) times ssgd's speed, with ssgd's compute
    and comm seconds per step."""
    ssgd = next((r for r, _ in rows if r["name"] == "hptrain-ssgd" and r["ok"]), None)
    if (not ssgd or not ssgd.get("comm_seconds_per_step")
            or not ssgd["runtime_bytes_per_worker_step"]):
        return []
    compute, comm = ssgd["compute_seconds_per_step"], ssgd["comm_seconds_per_step"]
    out = ["Speed against bytes: hptrain-ssgd spends "
           f"{comm:.3f} s of each {compute + comm:.3f} s step (per worker) exchanging gradients. "
           "Predicted speed-up = (compute + comm) / (compute + comm × bytes ratio) with ssgd's "
           "compute and comm; measured = samples/s over ssgd's; time to target over ssgd's.", "",
           "| system | bytes vs ssgd (runtime) | comm s/step vs ssgd | predicted speed-up | "
           "measured speed-up | measured / predicted | time to target vs ssgd |",
           "|---|---:|---:|---:|---:|---:|---:|"]
    for row, _ in rows:
        if (not row["ok"] or not row["name"].startswith("hptrain-") or row is ssgd
                or not row["runtime_bytes_per_worker_step"]):
            continue
        ratio = row["runtime_bytes_per_worker_step"] / ssgd["runtime_bytes_per_worker_step"]
        predicted = (compute + comm) / (compute + comm * ratio)
        measured = (row["samples_per_second"] / ssgd["samples_per_second"]
                    if row["samples_per_second"] and ssgd["samples_per_second"] else None)
        ttt = (ssgd["time_to_target"] / row["time_to_target"]
               if row["time_to_target"] and ssgd["time_to_target"] else None)
        out.append(f"| {row['name']} | {ratio:.3f} | "
                   f"{_fmt(row.get('comm_seconds_per_step', 0) / comm, '.3f')} | {predicted:.2f} | "
                   f"{_fmt(measured, '.2f')} | {_fmt(measured and measured / predicted, '.2f')} | "
                   f"{_fmt(ttt, '.2f')} |")
    return out + [""]


def _plots(title, rows, out_dir):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    slug = title.split()[0].lower()
    made = []
    # One colour per system (tab20 has 20, the default cycle 10: a full suite has 12 systems),
    # solid lines for hptrain, dashed for the peers.
    def style(i, name):
        return {"color": plt.cm.tab20(i % 20),
                "linestyle": "-" if name.startswith("hptrain") else "--"}

    fig, ax = plt.subplots(figsize=(8, 5))
    for i, (row, run) in enumerate(rows):
        pts = [(e["elapsed_seconds"], 100 * e["test_accuracy"])
               for e in runner.evaluations(run["result"] or {})
               if e.get("elapsed_seconds") is not None]
        if pts:
            ax.plot(*zip(*pts), marker="o", label=row["name"], **style(i, row["name"]))
    ax.set_xlabel("wall time (s)")
    ax.set_ylabel("test accuracy (%)")
    ax.set_title(f"{title}: test accuracy over time")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    name = f"{slug}-accuracy.png"
    fig.savefig(os.path.join(out_dir, name), dpi=110, bbox_inches="tight")
    plt.close(fig)
    made.append(name)

    fig, ax = plt.subplots(figsize=(8, 5))
    for i, (row, run) in enumerate(rows):
        t = [s for s, _ in run["timeline"]]
        b = [v / 2**20 for _, v in run["timeline"]]
        ax.plot(t, b, label=row["name"], **style(i, row["name"]))
    ax.set_xlabel("wall time (s)")
    ax.set_ylabel("bytes sent by all workers (MiB, interfaces)")
    ax.set_title(f"{title}: cumulative bytes over time")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    name = f"{slug}-bytes.png"
    fig.savefig(os.path.join(out_dir, name), dpi=110, bbox_inches="tight")
    plt.close(fig)
    made.append(name)
    return made
