"""report.md, results.json and PNG plots of one suite run (matplotlib from Debian, Agg)."""
import json
import os

import runner
import systems
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
              f"- network: {header['network']}"]
    if header.get("heterogeneity"):
        lines += [f"- heterogeneity: {header['heterogeneity']}"]
    lines += [""]
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
              "the peer does not report them. Overlap is the share of that exchange time training",
              "did not wait for (1 − exposed / total, over all workers). `vs DDP`",
              "divides DDP's time to target by the system's",
              "(above 1 = faster than DDP); where either did not reach the target it compares",
              "samples/s. CPU steal is the share of the machine's CPU time that the hypervisor",
              "gave to other guests while the system ran (/proc/stat): above a few percent, the",
              "machine was shared and its times are slower than they would be alone. CPU others",
              "is the share of the machine's CPU capacity (cores × wall time) that processes",
              "outside the run used meanwhile (/proc/stat's busy time less the CPU time of the",
              "run's processes): another build or test on the same host.", ""]
    results = [{"suite": title, "model": settings.model, "workers": settings.workers,
                "target": settings.target, "slowdown": settings.slowdown,
                "rows": [row for row, _ in rows]}
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
           "KiB/worker/step (runtime) | compute s/step | comm s/step | overlap | samples/s | "
           "vs DDP | wall (s) | CPU steal | CPU others |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    if settings.workers_per_node > 1:
        out[-2] = out[-2].replace("KiB/worker/step (interfaces)",
                                  "inter-node KiB/worker/step (interfaces)").replace(
                                      "KiB/worker/step (runtime)",
                                      "KiB/worker/step (runtime, inside and between nodes)")
    for row, _ in rows:
        if not row["ok"]:
            why = "time cap" if row["capped"] else row["error"]
            out.append(f"| {row['name']} | failed: {why} | | | | | | | | | "
                       f"{row['wall_seconds']:.1f} | | |")
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
            f"{_fmt(row.get('overlap_ratio'), '.2f')} | "
            f"{_fmt(row['samples_per_second'], '.0f')} | {_fmt(ratio, '.2f')} | "
            f"{row['wall_seconds']:.1f} | "
            f"{_fmt(None if row.get('cpu_steal') is None else 100 * row['cpu_steal'], '.1f')} % | "
            f"{_fmt(row.get('cpu_others') and 100 * row['cpu_others'], '.0f')} % |")
    out.append("")
    out += _two_level(settings, rows)
    out += _gossip(settings, rows)
    out += _traffic(rows)
    out += _per_worker(settings, rows)
    # On a two-level cluster the runtime's totals mix bytes inside and between nodes: the
    # "Between nodes" table sets the systems against ssgd there instead.
    out += _speed_against_bytes(rows) if settings.workers_per_node <= 1 else []
    out += _against_ps(rows)
    plots = _plots(title, settings, rows, out_dir)
    out += [f"![{p}]({p})" for p in plots] + [""]
    return out


def _traffic(rows):
    """Both directions of every system's traffic per step: the workers' interfaces, the ps
    host's, and hptrain's own counters with the share exchanged with the parameter server. Shown
    when a parameter-server system ran, where the pulls leave from the ps host."""
    if not any(systems.uses_ps(r["name"]) for r, _ in rows):
        return []
    out = ["Traffic per step in KiB. Interfaces: transmitted (tx) and received (rx) per worker, "
           "and the ps host's (the coordinator and every parameter-server shard; for a system "
           "whose shards 1..S-1 run on hosts of their own, the sum over the ps host and those "
           "hosts, each listed below the table; for the collective strategies only the "
           "coordinator's RPCs). Runtime: hptrain's counters per worker, sent / "
           "received, and of that the bytes exchanged with the parameter server.", "",
           "| system | worker tx | worker rx | ps host tx | ps host rx | runtime sent | "
           "runtime received | of which PS sent | of which PS received |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row, _ in rows:
        if not row["ok"]:
            continue
        cells = [row.get(k) for k in (
            "interface_bytes_per_worker_step", "interface_rx_bytes_per_worker_step",
            "ps_host_tx_bytes_per_step", "ps_host_rx_bytes_per_step",
            "runtime_bytes_per_worker_step", "runtime_rx_bytes_per_worker_step",
            "runtime_ps_bytes_per_worker_step", "runtime_ps_rx_bytes_per_worker_step")]
        out.append(f"| {row['name']} | " + " | ".join(_fmt(_kib(c), ".1f") for c in cells) + " |")
    out.append("")
    for row, _ in rows:
        hosts = row.get("ps_hosts_bytes_per_step") if row["ok"] else None
        if hosts:
            parts = [f"{'ps host (coordinator, shard 0)' if i == 0 else f'shard {i} host'} "
                     f"tx {_fmt(_kib(h['tx']), '.1f')} / rx {_fmt(_kib(h['rx']), '.1f')}"
                     for i, h in enumerate(hosts)]
            out += [f"{row['name']}, per host: " + "; ".join(parts) + ".", ""]
    return out


def _interval(name, settings):
    """K' of a `hierarchical` system: its interval, the steps of an epoch for -1; None for the
    other systems."""
    spec = systems.HPTRAIN.get(name, {})
    if spec.get("type") != "hierarchical":
        return None
    k = int(spec.get("interval", "-1"))
    return systems.TRAIN_SAMPLES // settings.m["batch"] if k < 0 else k


def _two_level(settings, rows):
    """On a two-level cluster: what crossed the links between nodes, per node, from the node
    hosts' interfaces and from hptrain's own counters, each system against flat hptrain-ssgd and
    DDP, and the issue's targets for the `hierarchical` systems."""
    if settings.workers_per_node <= 1:
        return []
    ssgd = next((r for r, _ in rows if r["name"] == "hptrain-ssgd" and r["ok"]), None)
    ddp = next((r for r, _ in rows if r["name"] == "ddp" and r["ok"]), None)
    out = [f"Between nodes ({settings.nodes} nodes × {settings.workers_per_node} workers; the "
           "workers of a node share its namespace and talk over its loopback, so a node host's "
           "interface counts only what crossed the network). Interfaces: each node's link, "
           "transmitted, averaged over the nodes (all of the run, and per step: tx / rx); "
           "per node: every node's tx in MiB. Runtime: hptrain's "
           "`hptrain_comm_node_bytes_total{link=\"inter\"}` sent by the node's workers, read "
           "from their /metrics about once a second, per step at the step read (`@`), averaged "
           "over the nodes. Bytes and time to target vs ssgd: flat hptrain-ssgd's over the "
           "system's (above 1 = fewer bytes, faster).", "",
           "| system | time to target (s) | inter-node MiB per node (interfaces) | per node "
           "KiB/step tx / rx (interfaces) | per node KiB/step (runtime) | per node tx MiB | "
           "bytes vs ssgd | time to target vs ssgd | vs DDP |",
           "|---|---:|---:|---:|---:|---|---:|---:|---:|"]
    for row, _ in rows:
        if not row["ok"] or not row.get("nodes"):
            continue
        nodes = row["nodes"]
        rx = sum(n["rx_bytes_per_step"] or 0 for n in nodes) / len(nodes)
        read_at = [n["runtime_read_at_step"] for n in nodes if n["runtime_read_at_step"]]
        runtime = row.get("runtime_inter_node_bytes_per_node_step")
        bytes_ratio = (ssgd["inter_node_tx_bytes_per_node_step"]
                       / row["inter_node_tx_bytes_per_node_step"]
                       if ssgd and row.get("inter_node_tx_bytes_per_node_step") else None)
        ttt = (ssgd["time_to_target"] / row["time_to_target"]
               if ssgd and ssgd["time_to_target"] and row["time_to_target"] else None)
        vs_ddp = (ddp["time_to_target"] / row["time_to_target"]
                  if ddp and ddp["time_to_target"] and row["time_to_target"] else None)
        out.append(
            f"| {row['name']} | {_fmt(row['time_to_target'], '.1f')} | "
            f"{row['inter_node_tx_bytes_per_node'] / 2**20:.2f} | "
            f"{_fmt(_kib(row['inter_node_tx_bytes_per_node_step']), '.1f')} / "
            f"{_fmt(_kib(rx), '.1f')} | "
            + (f"{_kib(runtime):.1f} @ {min(read_at)} | " if runtime is not None else "— | ")
            + " / ".join(f"{n['tx_bytes'] / 2**20:.2f}" for n in nodes) + " | "
            f"{_fmt(bytes_ratio, '.2f')} | {_fmt(ttt, '.2f')} | {_fmt(vs_ddp, '.2f')} |")
    out.append("")
    targets = []
    for row, _ in rows:
        k = _interval(row["name"], settings)
        if k is None or not row["ok"] or not row.get("inter_node_tx_bytes_per_node_step"):
            continue
        ttt = (ssgd["time_to_target"] / row["time_to_target"]
               if ssgd and ssgd["time_to_target"] and row["time_to_target"] else None)
        vs_ddp = (ddp["time_to_target"] / row["time_to_target"]
                  if ddp and ddp["time_to_target"] and row["time_to_target"] else None)
        fewer = (ssgd["inter_node_tx_bytes_per_node_step"]
                 / row["inter_node_tx_bytes_per_node_step"] if ssgd else None)

        def verdict(value, bound):
            return "—" if value is None else ("met" if value >= bound else "not met")
        # Strategy hierarchical also syncs before every evaluation (spec.evalEverySteps).
        every = min(k, settings.eval_every) if settings.eval_every else k
        targets.append(f"| {row['name']} | {k} | {every} | {_fmt(ttt, '.2f')} (≥ 3: "
                       f"{verdict(ttt, 3.0)}) | {_fmt(vs_ddp, '.2f')} (> 1: "
                       f"{verdict(vs_ddp, 1.0 + 1e-9)}) | {_fmt(fewer, '.1f')} (≥ {k}: "
                       f"{verdict(fewer, k)}) |")
    if targets:
        out += ["Targets of the node-based exchange: `hierarchical` at least 3× faster than "
                "flat ssgd to the target, faster than DDP, and at least K′× fewer inter-node "
                "bytes per node "
                "(interfaces, per step) than flat ssgd; `—` where a system did not reach the "
                "target or did not run. A run capped by --max-steps below K′ steps has no "
                "global sync but the final one, so its bytes say little about K′. `hierarchical` "
                "also syncs before every evaluation: with evaluations inside an epoch "
                "(--evals-per-epoch above 1) the global syncs come at least that often.", "",
                "| system | K′ (steps) | global syncs at least every (steps) | time to target "
                "vs ssgd | vs DDP | inter-node bytes per node, ssgd / system |",
                "|---|---:|---:|---:|---:|---:|"] + targets + [""]
    return out


# The paper's targets for adaptive gossip against fixed-period gossiping SGD (docs/algorithms.md
# §4): 92 % less traffic and 52 % less time to the same accuracy.
GOSSIP_TRAFFIC_TARGET = 92.0
GOSSIP_TIME_TARGET = 52.0
GOSSIP_BASELINE = "hptrain-gossip-p1"


def _worker_spread(result):
    """(min, max) of the workers' own final test accuracies: `final.worker_test_accuracy` of the
    run summary, an object with `ranks` (or `min` / `max`) or a list; None without it."""
    spread = ((result or {}).get("final") or {}).get("worker_test_accuracy")
    if isinstance(spread, dict):
        ranks = [a for a in spread.get("ranks") or [] if a is not None]
        if ranks:
            return min(ranks), max(ranks)
        if spread.get("min") is not None and spread.get("max") is not None:
            return spread["min"], spread["max"]
        return None
    if isinstance(spread, list):
        ranks = [a for a in spread if a is not None]
        return (min(ranks), max(ranks)) if ranks else None
    return None


def _bytes_to(run, seconds):
    """Cumulative bytes the workers' interfaces transmitted at `seconds` after launch, from the
    run's timeline (the first sample at or after it); None without a time."""
    if seconds is None:
        return None
    for t, b in run.get("timeline") or []:
        if t >= seconds:
            return b
    return None


def _gossip_totals(row, run, settings):
    """A system's totals for the gossip table, kept in its row (results.json): bytes the
    workers' interfaces transmitted over the whole run and up to the target, hptrain's own bytes
    sent, each worker's exchanges (None where the run summary lacks them) and the workers' final
    accuracy range."""
    result = run.get("result") or {}
    interface = run.get("interface") or []
    hosts = [h for h in systems.worker_hosts(settings) if h < len(interface)]
    ranks = sorted(result.get("ranks") or [], key=lambda k: k.get("rank", 0))
    exchanges = [k.get("exchanges") for k in ranks]
    totals = {
        "interface_bytes": sum(interface[h]["tx_bytes"] for h in hosts) if hosts else None,
        "interface_bytes_to_target": _bytes_to(run, row["time_to_target"]),
        "runtime_bytes": sum(k.get("bytes_sent", 0) for k in ranks) if ranks else None,
        "exchanges": exchanges if ranks and all(e is not None for e in exchanges) else None,
        "worker_accuracy_range": _worker_spread(result)}
    row["gossip"] = totals
    return totals


def _reduction(value, base):
    """1 − value / base in %, None where either is unknown or base is 0."""
    return None if value is None or not base else 100.0 * (1.0 - value / base)


def _gossip(settings, rows):
    """When a gossip system ran: total bytes, exchanges, time to target and accuracy of every
    system, each against fixed-period gossip (p = 1), and the paper's targets for adaptive
    gossip."""
    if not any(systems.is_gossip(r["name"]) for r, _ in rows):
        return []
    done = [(row, run, _gossip_totals(row, run, settings)) for row, run in rows if row["ok"]]
    base = next(((row, t) for row, _, t in done if row["name"] == GOSSIP_BASELINE), None)
    out = ["Gossip: totals over the whole run. Bytes: what the workers' interfaces transmitted, "
           "summed over the workers (all of the run, and up to the time to target from the "
           "0.5 s samples), and hptrain's own bytes sent; exchanges: the model exchanges each "
           "worker took part in (r0 / r1 / ...; `—` where the run summary has none); worker "
           "accuracy: the lowest and highest final test accuracy of the workers' own models "
           "(the final accuracy is the average model's). Traffic and time vs p = 1: "
           f"1 − system / {GOSSIP_BASELINE} in % (above 0 = less), on the interfaces' total "
           "bytes and the time to target.", "",
           "| system | time to target (s) | final acc. | worker acc. min – max | MiB "
           "(interfaces) | MiB to target (interfaces) | MiB (runtime) | exchanges per worker | "
           "traffic vs p = 1 | time vs p = 1 |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row, _, t in done:
        spread = t["worker_accuracy_range"]
        traffic = time = None
        if base:
            traffic = _reduction(t["interface_bytes"], base[1]["interface_bytes"])
            time = _reduction(row["time_to_target"], base[0]["time_to_target"])
        out.append(
            f"| {row['name']} | {_fmt(row['time_to_target'], '.1f')} | "
            f"{_fmt(row['final_accuracy'] and 100 * row['final_accuracy'], '.2f')} % | "
            + (f"{100 * spread[0]:.2f} – {100 * spread[1]:.2f} % | " if spread else "— | ")
            + f"{_fmt(_mib(t['interface_bytes']), '.1f')} | "
            f"{_fmt(_mib(t['interface_bytes_to_target']), '.1f')} | "
            f"{_fmt(_mib(t['runtime_bytes']), '.1f')} | "
            + (" / ".join(str(e) for e in t["exchanges"]) if t["exchanges"] else "—") + " | "
            f"{_pct(traffic, '+.1f')} | {_pct(time, '+.1f')} |")
    for row, _ in rows:
        if systems.is_gossip(row["name"]) and not row["ok"]:
            why = "time cap" if row["capped"] else row["error"]
            out.append(f"| {row['name']} | failed: {why} | | | | | | | | |")
    out.append("")

    def verdict(value, bound):
        return "—" if value is None else ("met" if value >= bound else "not met")
    targets = []
    for row, _, t in done:
        if row["name"] != "hptrain-gossip":
            continue
        traffic = time = accuracy = None
        if base:
            traffic = _reduction(t["interface_bytes"], base[1]["interface_bytes"])
            time = _reduction(row["time_to_target"], base[0]["time_to_target"])
            if row["final_accuracy"] is not None and base[0]["final_accuracy"] is not None:
                accuracy = 100 * (row["final_accuracy"] - base[0]["final_accuracy"])
        targets.append(
            f"| {row['name']} | {_pct(traffic, '.1f')} (≥ {GOSSIP_TRAFFIC_TARGET:g}: "
            f"{verdict(traffic, GOSSIP_TRAFFIC_TARGET)}) | {_pct(time, '.1f')} (≥ "
            f"{GOSSIP_TIME_TARGET:g}: {verdict(time, GOSSIP_TIME_TARGET)}) | "
            f"{_fmt(accuracy, '+.2f')} (≥ −1: {verdict(accuracy, -1.0)}) |")
    if targets:
        out += ["Targets of adaptive gossip against fixed-period gossip (p = 1), from the paper: "
                f"{GOSSIP_TRAFFIC_TARGET:g} % less traffic (interfaces, whole run) and "
                f"{GOSSIP_TIME_TARGET:g} % less time to the target, at equal accuracy (final "
                "accuracy within 1 point); `—` where a system did not reach the target or "
                f"{GOSSIP_BASELINE} did not run.", "",
                "| system | less traffic | less time to target | final acc. vs p = 1 "
                "(points) |", "|---|---:|---:|---:|"] + targets + [""]
    return out


def _pct(value, spec):
    return "—" if value is None else format(value, spec) + " %"


def _mib(b):
    return None if b is None else b / 2**20


def _ranks(values, spec):
    return " / ".join(_fmt(v, spec) for v in values) if values else "—"


def _per_worker(settings, rows):
    """Each worker's compute, communication and idle seconds per step (hptrain systems), when the
    workers are heterogeneous or a system allocates batches."""
    if not settings.slowdown and not any(
            "spec.rebalance.enabled" in systems.HPTRAIN.get(r["name"], {}) for r, _ in rows):
        return []
    ranks = " / ".join(f"r{i}" for i in range(settings.workers))
    out = ["Per worker (" + ranks + (", slowdown factors " + " / ".join(
               f"{f:g}" for f in settings.slowdown) if settings.slowdown else "") + "), "
           "seconds per step: compute (data + forward + backward, the emulated slowdown "
           "included), communication (inside the exchange, overlapped or not), and idle = the "
           "step's wall time (time inside training steps over the steps, which all ranks share) "
           "less the rank's compute: waiting for slower workers and for the exchange. Batch: "
           "each worker's batch size at the end of the run. The DDP peer does not report them.",
           "",
           "| system | step s | batch | compute s/step | comm s/step | idle s/step | "
           "idle share of the step |",
           "|---|---:|---|---|---|---|---|"]
    for row, _ in rows:
        if not row["ok"] or not row.get("rank_compute_seconds_per_step"):
            continue
        step = row.get("step_seconds")
        idle = row.get("rank_idle_seconds_per_step")
        share = [i / step for i in idle] if idle and step else None
        out.append(f"| {row['name']} | {_fmt(step, '.3f')} | "
                   f"{_ranks(row.get('rank_batch_sizes'), 'd')} | "
                   f"{_ranks(row['rank_compute_seconds_per_step'], '.3f')} | "
                   f"{_ranks(row.get('rank_comm_seconds_per_step'), '.3f')} | "
                   f"{_ranks(idle, '.3f')} | "
                   f"{_ranks(share and [100 * x for x in share], '.0f')} % |")
    return out + [""]


def _time_to(run, accuracy):
    """Seconds from launch to the end of the first evaluation at or above `accuracy`."""
    for e in runner.evaluations(run["result"] or {}):
        if e["test_accuracy"] >= accuracy and e.get("elapsed_seconds") is not None:
            return e["elapsed_seconds"]
    return None


def _best(run):
    return max((e["test_accuracy"] for e in runner.evaluations(run["result"] or {})), default=None)


def _against_ps(rows):
    """Every other parameter-server system against hptrain-ps (BSP): speed-up in time to the
    target, in time to the best accuracy both reached (equal accuracy), and in samples/s."""
    base = next(((r, run) for r, run in rows if r["name"] == "hptrain-ps" and r["ok"]), None)
    others = [(r, run) for r, run in rows
              if r["ok"] and systems.uses_ps(r["name"]) and r["name"] != "hptrain-ps"]
    if not base or not others:
        return []
    row0, run0 = base
    out = ["Against hptrain-ps (BSP parameter server): speed-up = hptrain-ps's time over the "
           "system's. Equal accuracy: the best test accuracy both runs reached at some "
           "evaluation, and the time each took to first reach it; only where both reached the "
           "target or their best accuracies are within 1 point of each other (otherwise `—`, "
           "with the system's best).",
           "",
           "| system | time to target vs ps | equal accuracy | time (s), system / ps | "
           "speed-up at equal accuracy | samples/s vs ps |",
           "|---|---:|---:|---:|---:|---:|"]
    for row, run in others:
        ttt = (row0["time_to_target"] / row["time_to_target"]
               if row0["time_to_target"] and row["time_to_target"] else None)
        best0, best = _best(run0), _best(run)
        comparable = (best0 is not None and best is not None
                      and (abs(best - best0) <= 0.01 or (row0["time_to_target"]
                                                         and row["time_to_target"])))
        common = min(best0, best) if comparable else None
        mine = _time_to(run, common) if common else None
        theirs = _time_to(run0, common) if common else None
        sps = (row["samples_per_second"] / row0["samples_per_second"]
               if row["samples_per_second"] and row0["samples_per_second"] else None)
        out.append(f"| {row['name']} | {_fmt(ttt, '.2f')} | "
                   + (f"{100 * common:.2f} % | " if common else
                      f"— (best {_fmt(best and 100 * best, '.2f')} %) | ") +
                   f"{_fmt(mine, '.1f')} / {_fmt(theirs, '.1f')} | "
                   f"{_fmt(mine and theirs and theirs / mine, '.2f')} | {_fmt(sps, '.2f')} |")
    return out + [""]


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
    compared = [row for row, _ in rows
                if row["ok"] and row["name"].startswith("hptrain-") and row is not ssgd
                and not systems.uses_ps(row["name"]) and not systems.is_gossip(row["name"])
                and row["runtime_bytes_per_worker_step"]]
    if not compared:
        return []
    out = ["Speed against bytes: hptrain-ssgd spends "
           f"{comm:.3f} s of each {compute + comm:.3f} s step (per worker) exchanging gradients. "
           "Predicted speed-up = (compute + comm) / (compute + comm × bytes ratio) with ssgd's "
           "compute and comm; measured = samples/s over ssgd's; time to target over ssgd's.", "",
           "| system | bytes vs ssgd (runtime) | comm s/step vs ssgd | predicted speed-up | "
           "measured speed-up | measured / predicted | time to target vs ssgd |",
           "|---|---:|---:|---:|---:|---:|---:|"]
    for row in compared:
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


def _plots(title, settings, rows, out_dir):
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

    # Per worker: compute and idle seconds per step, one group of bars per hptrain system.
    timed = [row for row, _ in rows if row["ok"] and row.get("rank_idle_seconds_per_step")]
    if timed and settings.slowdown:
        fig, ax = plt.subplots(figsize=(max(8, 1.2 * len(timed) + 2), 5))
        n = len(timed[0]["rank_compute_seconds_per_step"])
        width = 0.8 / n
        for s, row in enumerate(timed):
            for r, (c, i) in enumerate(zip(row["rank_compute_seconds_per_step"],
                                           row["rank_idle_seconds_per_step"])):
                x = s + (r - (n - 1) / 2) * width
                ax.bar(x, 1000 * c, width * 0.9, color="tab:blue",
                       label="compute" if s == 0 and r == 0 else None)
                ax.bar(x, 1000 * i, width * 0.9, bottom=1000 * c, color="tab:orange",
                       label="idle" if s == 0 and r == 0 else None)
        ax.set_xticks(range(len(timed)))
        ax.set_xticklabels([row["name"] for row in timed], rotation=20, fontsize="small")
        ax.set_ylabel("ms per step (bars: workers 0..N-1)")
        ax.set_title(f"{title}: compute and idle time per worker and step")
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize="small")
        name = f"{slug}-workers.png"
        fig.savefig(os.path.join(out_dir, name), dpi=110, bbox_inches="tight")
        plt.close(fig)
        made.append(name)
    return made

