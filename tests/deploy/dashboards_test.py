#!/usr/bin/env python3
"""Grafana dashboards (dashboards/*.json) against the metrics the code exports.

Each dashboard is valid JSON with a unique uid, a Prometheus `datasource` variable that every
panel and query uses, and namespace/trainingjob variables (the controller's: namespace/pod) that
every query filters by; panels fit the 24-column grid without overlapping. Every metric a query or a
variable names is one the sources export: the "hptrain_..." string literals in runtime/ and
controller/ (histograms, registered through Histogram("..."), also as _bucket/_sum/_count).
Until controller/ exports any hptrain_controller_* metric, the contract's controller metrics
stand in for it. Every label a query uses is one the runtime or the scrape attaches, and none is
the scrape job's `job` (a TrainingJob is its `trainingjob`). With
promtool installed, every query is also parsed by Prometheus itself (as a recording rule).

Exit status: 0 passed, 1 failed.
"""

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import contract  # noqa: E402

REPO = os.environ.get("HPTRAIN_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))

# Labels the runtime's registries attach (trainingjob, role, rank constant; direction, reason,
# metric per family; le on histogram buckets) and those the Prometheus Operator's scrape adds
# (the PodMonitors' podTargetLabels too). Not `job`: on every series it is the scrape job's name,
# which depends on how Prometheus is set up, never the TrainingJob's.
KNOWN_LABELS = {"trainingjob", "role", "rank", "direction", "reason", "le", "metric",
                "namespace", "pod", "container", "instance", "hptrain_io_job", "hptrain_io_role"}
PROMQL_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool",
                   "and", "or", "unless", "offset", "inf", "nan"}
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h"}


def strip_comments(source):
    """C++ source without // comments (the ones outside string literals)."""
    lines = []
    for line in source.splitlines():
        cut = len(line)
        for m in re.finditer(r"//", line):
            if line[:m.start()].count('"') % 2 == 0:
                cut = m.start()
                break
        lines.append(line[:cut])
    return "\n".join(lines)


def exported_metrics():
    """({metric names}, {histogram names}, whether the contract stood in for the controller)."""
    names, histograms = set(), set()
    for top in ("runtime", "controller"):
        for path in glob.glob(os.path.join(REPO, top, "**", "*"), recursive=True):
            if not path.endswith((".cc", ".h")):
                continue
            with open(path, encoding="utf-8", errors="replace") as f:
                source = strip_comments(f.read())
            names.update(re.findall(r'"(hptrain_[a-z0-9_]+)"', source))
            histograms.update(re.findall(r'Histogram\(\s*"(hptrain_[a-z0-9_]+)"', source))
    stand_in = not any(n.startswith("hptrain_controller_") for n in names)
    if stand_in:
        names.update(contract.CONTROLLER_METRICS)
        histograms.update(n for n, kind in contract.CONTROLLER_METRICS.items()
                          if kind == "histogram")
    return names, histograms, stand_in


def metric_names(expr):
    """Metric names in a PromQL expression (selectors, not functions, keywords or labels)."""
    s = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    s = re.sub(r"\{[^}]*\}", " ", s)
    s = re.sub(r"\[[^\]]*\]", " ", s)
    s = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", s)
    names = []
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", s):
        before = s[:m.start()]
        if before.endswith(("$", ".")) or re.search(r"[0-9]$", before):
            continue  # a $variable, or the exponent of a number such as 1e3
        if s[m.end():].lstrip().startswith("(") or m.group(0).lower() in PROMQL_KEYWORDS:
            continue
        names.append(m.group(0))
    return names


def label_names(expr, legend=""):
    """Label names used by matchers, grouping clauses and a legend format."""
    labels = set()
    for matchers in re.findall(r"\{([^}]*)\}", re.sub(r"\{\{[^}]*\}\}", "", expr)):
        labels.update(re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)", matchers))
    for grouping in re.findall(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)", expr):
        labels.update(l.strip() for l in grouping.split(",") if l.strip())
    labels.update(re.findall(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}", legend))
    return labels


def label_values_query(query):
    """(expression, label) of a Grafana label_values(expr, label) variable query."""
    m = re.fullmatch(r"\s*label_values\((.*),\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*", query)
    return (m.group(1), m.group(2)) if m else (None, None)


def dashboards():
    return {os.path.basename(p): json.load(open(p, encoding="utf-8"))
            for p in sorted(glob.glob(os.path.join(REPO, "dashboards", "*.json")))}


def queries(board):
    """(where, expr, legend) of every panel target."""
    for panel in board["panels"]:
        for target in panel.get("targets", []):
            yield (f"panel {panel['title']!r}", target.get("expr", ""),
                   target.get("legendFormat", ""))


class DashboardsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.boards = dashboards()
        cls.exported, cls.histograms, stand_in = exported_metrics()
        if stand_in:
            print("note: controller/ exports no hptrain_controller_* metric yet; "
                  "checking the controller dashboard against the contract's names")

    def check_metric(self, name, where):
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        ok = name in self.exported or (base != name and base in self.histograms)
        self.assertTrue(ok, f"{where}: metric {name} is not exported by runtime/ or controller/")

    def test_there_are_four_dashboards(self):
        self.assertEqual(sorted(self.boards), ["communication.json", "controller.json",
                                               "job-overview.json", "workers.json"])
        uids = [b["uid"] for b in self.boards.values()]
        self.assertEqual(len(set(uids)), len(uids))
        for name, board in self.boards.items():
            self.assertLessEqual(len(board["uid"]), 40, name)
            self.assertTrue(board["title"].startswith("hptrain / "), name)
            self.assertIn("hptrain", board["tags"], name)

    def test_runtime_exports_what_the_design_names(self):
        for name in ("hptrain_step_duration_seconds", "hptrain_compute_seconds",
                     "hptrain_comm_seconds", "hptrain_samples_per_second", "hptrain_batch_size",
                     "hptrain_comm_bytes_total", "hptrain_compression_ratio",
                     "hptrain_train_loss", "hptrain_eval_accuracy", "hptrain_step",
                     "hptrain_rpc_rejected_total"):
            self.assertIn(name, self.exported)
        self.assertIn("hptrain_step_duration_seconds", self.histograms)

    def test_variables(self):
        for name, board in self.boards.items():
            variables = {v["name"]: v for v in board["templating"]["list"]}
            ds = variables["datasource"]
            self.assertEqual((ds["type"], ds["query"]), ("datasource", "prometheus"), name)
            wanted = (["namespace", "pod"] if name == "controller.json" else
                      ["namespace", "trainingjob"])
            for var in wanted:
                self.assertEqual(variables[var]["type"], "query", f"{name}: {var}")
            for var in variables.values():
                if var["type"] != "query":
                    continue
                self.assertEqual(var["datasource"]["uid"], "${datasource}", name)
                query = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
                expr, label = label_values_query(query)
                self.assertIsNotNone(expr, f"{name}: variable {var['name']}: {query}")
                self.assertIn(label, KNOWN_LABELS, f"{name}: variable {var['name']}")
                for metric in metric_names(expr):
                    self.check_metric(metric, f"{name}: variable {var['name']}")

    def test_panels_use_the_datasource_and_the_filters(self):
        for name, board in self.boards.items():
            scope = ['namespace="$namespace"'] + (
                ['pod=~"$pod"'] if name == "controller.json" else
                ['trainingjob="$trainingjob"'])
            self.assertGreaterEqual(len(board["panels"]), 6, name)
            for panel in board["panels"]:
                where = f"{name}: panel {panel.get('title')!r}"
                if panel.get("type") == "row":
                    # A row only heads the panels below it; expanded, so that they stay in the
                    # dashboard's own panel list (and in these checks).
                    self.assertTrue(panel.get("title"), where)
                    self.assertIs(panel.get("collapsed"), False, where)
                    self.assertEqual(panel.get("panels"), [], where)
                    self.assertEqual((panel["gridPos"]["h"], panel["gridPos"]["w"]), (1, 24), where)
                    self.assertNotIn("targets", panel, where)
                    continue
                self.assertTrue(panel.get("title") and panel.get("description"), where)
                self.assertEqual(panel["datasource"]["uid"], "${datasource}", where)
                self.assertTrue(panel["targets"], where)
                for target in panel["targets"]:
                    self.assertEqual(target["datasource"]["uid"], "${datasource}", where)
                    for selector in re.findall(r"hptrain_\w+\{[^}]*\}", target["expr"]):
                        for needed in scope:
                            self.assertIn(needed, selector, where)

    def test_every_metric_and_label_exists(self):
        count = 0
        for name, board in self.boards.items():
            for where, expr, legend in queries(board):
                where = f"{name}: {where}"
                names = metric_names(expr)
                self.assertTrue(names, f"{where}: no metric in {expr}")
                for metric in names:
                    self.check_metric(metric, where)
                    count += 1
                unknown = label_names(expr, legend) - KNOWN_LABELS
                self.assertEqual(unknown, set(), f"{where}: unknown labels")
        self.assertGreaterEqual(count, 40)

    def test_checker_catches_unknown_names(self):
        expr = ('sum by (le) (rate(hptrain_step_duration_seconds_bucket{trainingjob="$j"}[5m])) '
                '/ on (rank) up + hptrain_made_up_total * 1e3')
        self.assertEqual(metric_names(expr), ["hptrain_step_duration_seconds_bucket", "up",
                                              "hptrain_made_up_total"])
        with self.assertRaises(AssertionError):
            self.check_metric("hptrain_made_up_total", "self-test")
        with self.assertRaises(AssertionError):
            self.check_metric("hptrain_samples_per_second_bucket", "self-test")  # a gauge
        self.assertEqual(label_names('x{group="a"}', "{{gpu}}"), {"group", "gpu"})
        self.assertEqual(label_names('sum by (job) (x{job="$job"})') - KNOWN_LABELS, {"job"})

    def test_no_panels_overlap(self):
        for name, board in self.boards.items():
            cells = {}
            for panel in board["panels"]:
                g = panel["gridPos"]
                self.assertLessEqual(g["x"] + g["w"], 24, f"{name}: {panel['title']}")
                for x in range(g["x"], g["x"] + g["w"]):
                    for y in range(g["y"], g["y"] + g["h"]):
                        self.assertNotIn((x, y), cells,
                                         f"{name}: {panel['title']} overlaps {cells.get((x, y))}")
                        cells[(x, y)] = panel["title"]

    def test_promtool_parses_every_query(self):
        promtool = shutil.which("promtool")
        if promtool is None:
            self.skipTest("promtool is not installed")
        rules = []
        for name, board in self.boards.items():
            for where, expr, _ in queries(board):
                for var, value in GRAFANA_VARIABLES.items():
                    expr = expr.replace(var, value)
                expr = re.sub(r"\$(\w+)", r"\1", expr)  # $rank -> rank inside label values
                rules.append({"record": f"hptrain:dashboard_query_{len(rules)}", "expr": expr})
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            json.dump({"groups": [{"name": "dashboards", "rules": rules}]}, f)
        try:
            r = subprocess.run([promtool, "check", "rules", f.name], capture_output=True,
                               text=True, timeout=60, check=False)
        finally:
            os.unlink(f.name)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn(f"{len(rules)} rules found", r.stdout)


if __name__ == "__main__":
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(DashboardsTest)
    sys.exit(0 if unittest.TextTestRunner(verbosity=2).run(suite).wasSuccessful() else 1)
