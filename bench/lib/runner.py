"""Runs one system of a suite on the emulated cluster and measures it: the interface byte counters
of every host before, during (sampled every 0.5 s, for the bytes-over-time plot) and after, and
the system's own result file (hptrain's run summary, or the DDP peer's JSON), and how much of the
machine's CPU the hypervisor and other processes took meanwhile."""
import json
import os
import subprocess
import time

import nodemetrics
import systems

SAMPLE_SECONDS = 0.5


def cpu_times():
    """(steal, total) jiffies of all CPUs from /proc/stat: on a virtual machine, steal is time the
    hypervisor gave to others while this machine had work."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    return fields[7] if len(fields) > 7 else 0, sum(fields[:8])


def steal_since(cpu0):
    """Share of the machine's CPU time since `cpu0` (cpu_times()) that the hypervisor gave to
    others: a run with more than a few percent is no good measure of speed."""
    cpu1 = cpu_times()
    return (cpu1[0] - cpu0[0]) / max(1, cpu1[1] - cpu0[1])


def _worker_tx(cluster, baseline, settings):
    counters = cluster.all_counters()
    return sum(counters[h]["tx_bytes"] - baseline[h]["tx_bytes"]
               for h in systems.worker_hosts(settings))


def busy_seconds():
    """(CPU seconds all CPUs spent busy, CPU seconds this process's reaped children used): the
    first from /proc/stat (user + nice + system + irq + softirq), the second from os.times()."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    busy = sum(fields[i] for i in (0, 1, 2, 5, 6) if i < len(fields))
    t = os.times()
    return busy / os.sysconf("SC_CLK_TCK"), t.children_user + t.children_system


def others_since(busy0, wall):
    """Share of the machine's CPU capacity over the last `wall` seconds that processes other
    than this run's used (another build or test on the same host): busy CPU time less what the
    run's processes used, over cores x wall. Only meaningful once the run's processes are
    reaped (their CPU time reaches os.times() then)."""
    busy1 = busy_seconds()
    others = (busy1[0] - busy0[0]) - (busy1[1] - busy0[1])
    return max(0.0, others) / ((os.cpu_count() or 1) * wall) if wall > 0 else None


def run_system(name, settings, cluster, binary, out_dir, cap_seconds, log):
    """Runs system `name` to completion or for at most `cap_seconds`. Returns a result dict:
    name, ok, capped, error, wall_seconds, result (the system's JSON), interface (per host byte
    deltas), timeline [(seconds, cumulative worker tx bytes)], cpu_steal (fraction of CPU time
    the hypervisor took while it ran)."""
    t0 = time.time()
    cpu0 = cpu_times()
    busy0 = busy_seconds()
    baseline = cluster.all_counters()
    logs = []
    procs = []
    if systems.is_ddp(name):
        commands, result_file = systems.ddp_commands(name, settings, cluster, t0, out_dir)
        env = dict(os.environ, GLOO_SOCKET_IFNAME="eth0", OMP_NUM_THREADS=str(settings.threads))
        for rank, (host, argv) in enumerate(commands):
            f = open(os.path.join(out_dir, f"{name}.rank{rank}.log"), "w")
            logs.append(f)
            procs.append(cluster.spawn(host, argv, env=env, stdout=f, stderr=subprocess.STDOUT))
    else:
        argv, result_file = systems.hptrain_command(name, settings, cluster, binary, out_dir)
        f = open(os.path.join(out_dir, f"{name}.log"), "w")
        logs.append(f)
        procs.append(cluster.spawn(0, argv, stdout=f, stderr=subprocess.STDOUT))
    # On a two-level cluster, hptrain's own inter-node counters beside the interfaces'.
    scraper = (nodemetrics.Scraper(cluster, systems.worker_hosts(settings), binary)
               if settings.workers_per_node > 1 and not systems.is_ddp(name) else None)

    timeline = [(0.0, 0)]
    capped = False
    try:
        while any(p.poll() is None for p in procs):
            time.sleep(SAMPLE_SECONDS)
            elapsed = time.time() - t0
            timeline.append((elapsed, _worker_tx(cluster, baseline, settings)))
            if elapsed > cap_seconds:
                capped = True
                log(f"  {name}: time cap of {cap_seconds:.0f} s reached, stopping it")
                break
            if any(p.poll() not in (None, 0) for p in procs):
                break  # one rank failed: the others would wait for it forever
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for f in logs:
            f.close()
        node_metrics = scraper.stop() if scraper else None
    wall = time.time() - t0
    steal = steal_since(cpu0)
    others = others_since(busy0, wall)
    after = cluster.all_counters()
    timeline.append((wall, _worker_tx(cluster, baseline, settings)))
    interface = [{k: after[h][k] - baseline[h][k] for k in after[h]} for h in range(cluster.hosts)]
    codes = [p.returncode for p in procs]
    result = None
    error = ""
    if os.path.exists(result_file):
        with open(result_file) as f:
            result = json.load(f)
    elif not capped:
        error = f"exit codes {codes}; see {name}*.log"
    return {"name": name, "ok": result is not None, "capped": capped, "error": error,
            "wall_seconds": wall, "result": result, "interface": interface, "timeline": timeline,
            "cpu_steal": steal, "cpu_others": others, "node_metrics": node_metrics,
            "ps_hosts": systems.ps_hosts(name, settings) if not systems.is_ddp(name) else [0]}


def evaluations(result):
    """Every test-set evaluation of a system's result, in order: the list both hptrain's run
    summary and the DDP peer write, or the per-epoch results of files that predate it."""
    return result.get("evaluations") or result.get("per_epoch", [])


def summarize(run, settings):
    """The report's numbers for one system run (None where unknown)."""
    r = run["result"] or {}
    steps = r.get("steps") or 0
    workers = settings.workers
    worker_hosts = [run["interface"][h] for h in systems.worker_hosts(settings)]
    tx = sum(h["tx_bytes"] for h in worker_hosts)
    row = {"name": run["name"], "ok": run["ok"], "capped": run["capped"], "error": run["error"],
           "steps": steps, "samples_per_second": r.get("samples_per_second"),
           "final_accuracy": (r.get("final") or {}).get("test_accuracy"),
           "interface_bytes_per_worker_step": tx / workers / steps if steps else None,
           "runtime_bytes_per_worker_step": None, "time_to_target": None,
           "wall_seconds": run["wall_seconds"], "cpu_steal": run.get("cpu_steal"),
           "cpu_others": run.get("cpu_others")}
    for e in evaluations(r):
        if e["test_accuracy"] >= settings.target and e.get("elapsed_seconds") is not None:
            row["time_to_target"] = e["elapsed_seconds"]
            break
    if steps:
        # What the workers took in, and the ps host's own traffic: for the parameter-server
        # strategies the pulls leave from there (for the others it carries only the
        # coordinator's RPCs). A system whose shards 1..S-1 run on hosts of their own counts
        # theirs in too (the sum over its shard hosts), and lists each host apart.
        rx = sum(h["rx_bytes"] for h in worker_hosts)
        hosts = run.get("ps_hosts") or [0]
        row["interface_rx_bytes_per_worker_step"] = rx / workers / steps
        row["ps_host_tx_bytes_per_step"] = sum(run["interface"][h]["tx_bytes"] for h in hosts) / steps
        row["ps_host_rx_bytes_per_step"] = sum(run["interface"][h]["rx_bytes"] for h in hosts) / steps
        if len(hosts) > 1:
            row["ps_hosts_bytes_per_step"] = [
                {"host": h, "tx": run["interface"][h]["tx_bytes"] / steps,
                 "rx": run["interface"][h]["rx_bytes"] / steps} for h in hosts]
    if r.get("ranks") and steps:
        ranks = r["ranks"]
        sent = sum(rank["bytes_sent"] for rank in ranks)
        received = sum(rank["bytes_received"] for rank in ranks)
        row["runtime_bytes_per_worker_step"] = sent / workers / steps
        row["runtime_rx_bytes_per_worker_step"] = received / workers / steps
        # Of those, exchanged with the parameter server (0 for the collective strategies).
        row["runtime_ps_bytes_per_worker_step"] = (
            sum(k.get("ps_bytes_sent", 0) for k in ranks) / workers / steps)
        row["runtime_ps_rx_bytes_per_worker_step"] = (
            sum(k.get("ps_bytes_received", 0) for k in ranks) / workers / steps)
        row["interface_over_runtime"] = tx / sent if sent else None
        row["compute_seconds_per_step"] = sum(k["compute_seconds"] for k in ranks) / len(ranks) / steps
        row["comm_seconds_per_step"] = sum(k["comm_seconds"] for k in ranks) / len(ranks) / steps
        # The overlap ratio: the share of the exchange's time that training
        # did not wait for, over all workers; None for summaries without the exposed time.
        comm = sum(k["comm_seconds"] for k in ranks)
        if comm > 0 and all("exposed_comm_seconds" in k for k in ranks):
            exposed = sum(k["exposed_comm_seconds"] for k in ranks)
            row["overlap_ratio"] = min(1.0, max(0.0, 1.0 - exposed / comm))
        # Per worker: compute (slowdown included) and communication seconds per step, and idle:
        # the step's wall time (the run's time inside training steps over its steps, which every
        # rank shares, since each global step waits for all of them) less the rank's compute, i.e.
        # waiting for slower ranks and for the exchange to show. The allocation at the end too.
        order = sorted(ranks, key=lambda k: k["rank"])
        row["rank_batch_sizes"] = [k.get("batch_size") for k in order]
        row["rank_compute_seconds_per_step"] = [k["compute_seconds"] / steps for k in order]
        row["rank_comm_seconds_per_step"] = [k["comm_seconds"] / steps for k in order]
        sps = r.get("samples_per_second")
        if sps:
            step_seconds = settings.m["batch"] / sps
            row["step_seconds"] = step_seconds
            row["rank_idle_seconds_per_step"] = [max(0.0, step_seconds - c)
                                                 for c in row["rank_compute_seconds_per_step"]]
    elif r.get("samples_per_second"):
        row["step_seconds"] = settings.m["batch"] / r["samples_per_second"]
    if settings.workers_per_node > 1:
        _node_traffic(row, run, settings, steps)
    return row


def _node_traffic(row, run, settings, steps):
    """Two-level cluster: what crossed each node's link (the node host's interface, which the
    traffic between the node's own workers never reaches: it stays on the namespace's loopback),
    in all and per step, and hptrain's own inter-node bytes of the node's workers
    (hptrain_comm_node_bytes_total{link="inter"}, per step at the step each worker was last
    read; None for DDP or where no reading came)."""
    # The interface figures cover TCP/IP headers and the coordinator's RPCs; not comparable
    # with the runtime's total (its intra-node bytes never reach the interfaces).
    row["interface_over_runtime"] = None
    readings = run.get("node_metrics") or {}
    nodes = []
    for node, host in enumerate(systems.worker_hosts(settings)):
        counters = run["interface"][host]
        entry = {"node": node, "host": host, "tx_bytes": counters["tx_bytes"],
                 "rx_bytes": counters["rx_bytes"],
                 "tx_bytes_per_step": counters["tx_bytes"] / steps if steps else None,
                 "rx_bytes_per_step": counters["rx_bytes"] / steps if steps else None,
                 "runtime_inter_sent_per_step": None, "runtime_inter_received_per_step": None,
                 "runtime_read_at_step": None}
        ranks = [r for r in range(settings.workers) if systems.worker_host(settings, r) == host]
        mine = [readings.get(r) or readings.get(str(r)) for r in ranks]
        if mine and all(m and m.get("step") for m in mine):
            entry["runtime_inter_sent_per_step"] = sum(m["inter_sent"] / m["step"] for m in mine)
            entry["runtime_inter_received_per_step"] = sum(
                m.get("inter_received", 0) / m["step"] for m in mine)
            entry["runtime_read_at_step"] = int(min(m["step"] for m in mine))
        nodes.append(entry)
    row["nodes"] = nodes
    row["inter_node_tx_bytes_per_node"] = sum(n["tx_bytes"] for n in nodes) / len(nodes)
    row["inter_node_tx_bytes_per_node_step"] = (row["inter_node_tx_bytes_per_node"] / steps
                                                if steps else None)
    runtime = [n["runtime_inter_sent_per_step"] for n in nodes]
    row["runtime_inter_node_bytes_per_node_step"] = (sum(runtime) / len(runtime)
                                                     if all(v is not None for v in runtime)
                                                     else None)
