#!/usr/bin/env python3
"""The alert rules (charts/hptrain/files/alerts.yaml) and the chart's PrometheusRule.

`promtool check rules` accepts the rules file and `promtool test rules` passes every case in
tests/alerts/*_test.yaml; every alert has a case where it fires and one where it stays quiet;
every metric a rule reads is one runtime/ or controller/ exports (tests/deploy/dashboards_test.py's
check); a copy of the rules with one metric name broken fails the unit tests (so they test
something), and so does one whose HptrainParameterServerDown takes any pod named *-ps-N for a ps.
No rule reads the `job` label (on every series the scrape job's, never the TrainingJob's, which
is `trainingjob`); every label a rule reads is the runtime's, the scrape's or a pod label the
PodMonitors copy (podTargetLabels). Every alert has a runbook_url into docs/runbooks.md whose
anchor is a section there (GitHub's anchors) with what it means, how to check and what to do, and
every section is an alert's. The PrometheusRule template is opt-in (alerts.enabled), renders, here without helm,
to a PrometheusRule whose groups are exactly the rules file's, and every value it reads exists.

Exit status: 0 passed, 1 failed, 77 skipped (promtool or python3-yaml missing).
"""

import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True
REPO = os.environ.get("HPTRAIN_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tests", "deploy"))
sys.path.insert(0, os.path.join(REPO, "tests", "docs"))

try:
    import yaml
except ImportError:  # checked in main()
    yaml = None

HERE = os.path.join(REPO, "tests", "alerts")
RULES = os.path.join(REPO, "charts", "hptrain", "files", "alerts.yaml")
TEMPLATE = os.path.join(REPO, "charts", "hptrain", "templates", "prometheusrule.yaml")
VALUES = os.path.join(REPO, "charts", "hptrain", "values.yaml")
RUNBOOKS = os.path.join(REPO, "docs", "runbooks.md")
POD_MONITORS = (os.path.join(REPO, "deploy", "monitoring", "podmonitor-jobs.yaml"),
                os.path.join(REPO, "charts", "hptrain", "templates", "podmonitor.yaml"))
# Where the runbook_url annotations point: docs/runbooks.md as the project's repository serves it.
RUNBOOK_BASE = "https://github.com/hptrain/hptrain/blob/main/docs/runbooks.md#"
# Labels a rule may read: the runtime's constant and family labels, the scrape's (Prometheus
# Operator: namespace, pod, container, instance) and severity. Pod labels copied by the
# PodMonitors' podTargetLabels are added from those files.
RULE_LABELS = {"trainingjob", "role", "rank", "direction", "reason", "le", "metric",
               "namespace", "pod", "container", "instance"}
SECTION_PARTS = ("**What it means.**", "**How to check.**", "**What to do.**")
ALERTS = {"HptrainJobStalled", "HptrainWorkerStraggling", "HptrainRebalanceFlapping",
          "HptrainParameterServerDown", "HptrainExposedCommunicationDominates",
          "HptrainControllerReconcileErrors", "HptrainJobBelowReplicas"}


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def unit_test_files():
    return sorted(glob.glob(os.path.join(HERE, "*_test.yaml")))


def promtool(*args, cwd=None):
    r = subprocess.run(["promtool", *args], capture_output=True, text=True, timeout=120,
                       cwd=cwd, check=False)
    return r.returncode, r.stdout + r.stderr


def indent(text, n):
    return "\n".join((" " * n + line) if line else line for line in text.split("\n"))


def render(template, values, files):
    """The template as Helm renders it, for the few actions it uses; an action not known here
    raises (extend this when the template grows)."""
    out = []
    pos = 0
    skipping = []  # one entry per open block: whether its body is dropped
    for m in re.finditer(r"(\s*)\{\{(-?)\s*(.*?)\s*(-?)\}\}", template, re.S):
        lead, trim_left, action, _ = m.groups()
        text = template[pos:m.start()] + ("" if trim_left else lead)
        if not any(skipping):
            out.append(text)
        pos = m.end()
        alerts = values["alerts"]
        if action.startswith("if "):
            assert action == "if .Values.alerts.enabled", action
            skipping.append(not alerts["enabled"])
        elif action == "with .Values.alerts.labels":
            skipping.append(not alerts["labels"])
        elif action == "end":
            skipping.pop()
        elif any(skipping):
            continue
        elif action == 'include "hptrain.fullname" .':
            out.append("hptrain")
        elif action == "default .Release.Namespace .Values.alerts.namespace":
            out.append(alerts["namespace"] or "hptrain-system")
        elif action == 'include "hptrain.labels" . | nindent 4':
            out.append("\n    app.kubernetes.io/name: hptrain"
                       "\n    app.kubernetes.io/instance: hptrain")
        elif action == "toYaml . | nindent 4":
            out.append("\n" + indent(yaml.safe_dump(alerts["labels"]).rstrip("\n"), 4))
        else:
            m2 = re.fullmatch(r'\.Files\.Get "([^"]+)" \| nindent (\d+)', action)
            assert m2, f"the test's renderer does not know the action {{{{ {action} }}}}"
            out.append("\n" + indent(files[m2.group(1)], int(m2.group(2))))
    if not any(skipping):
        out.append(template[pos:])
    return "".join(out)


class AlertsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.rules = yaml.safe_load(read(RULES))
        cls.alerts = {r["alert"]: r for g in cls.rules["groups"] for r in g["rules"]}

    def test_the_rules_are_the_seven_alerts(self):
        self.assertEqual(set(self.alerts), ALERTS)
        for name, rule in self.alerts.items():
            self.assertIn(rule["labels"]["severity"], ("warning", "critical"), name)
            self.assertTrue(rule["annotations"]["summary"], name)
            self.assertTrue(rule["annotations"]["description"], name)
            self.assertTrue(rule["annotations"]["runbook_url"], name)

    def test_promtool_checks_the_rules(self):
        code, output = promtool("check", "rules", RULES)
        self.assertEqual(code, 0, output)
        self.assertIn(f"{len(ALERTS)} rules found", output)

    def test_promtool_unit_tests_pass(self):
        files = unit_test_files()
        self.assertGreaterEqual(len(files), 2)
        code, output = promtool("test", "rules", *files, cwd=HERE)
        self.assertEqual(code, 0, output)
        self.assertNotIn("FAILED", output)

    def test_every_alert_fires_and_stays_quiet_somewhere(self):
        firing, quiet = set(), set()
        for path in unit_test_files():
            document = yaml.safe_load(read(path))
            self.assertEqual(document["rule_files"], ["../../charts/hptrain/files/alerts.yaml"],
                             path)
            for case in document["tests"]:
                for check in case.get("alert_rule_test", []):
                    (firing if check.get("exp_alerts") else quiet).add(check["alertname"])
        self.assertEqual(firing, ALERTS, "alerts without a firing case")
        self.assertEqual(quiet, ALERTS, "alerts without a quiet case")

    def test_rules_read_exported_metrics(self):
        import dashboards_test  # tests/deploy: the metric-name extraction and the source scan
        exported, histograms, _ = dashboards_test.exported_metrics()
        count = 0
        for name, rule in self.alerts.items():
            for metric in dashboards_test.metric_names(rule["expr"]):
                if metric == "up":
                    continue  # Prometheus' own, for every target
                base = re.sub(r"_(bucket|sum|count)$", "", metric)
                self.assertTrue(metric in exported or (base != metric and base in histograms),
                                f"{name}: {metric} is not exported by runtime/ or controller/")
                count += 1
        self.assertGreaterEqual(count, 10)

    def run_unit_tests_on(self, rules_text):
        """promtool test rules of tests/alerts/ against `rules_text` instead of the rules file."""
        with tempfile.TemporaryDirectory() as tmp:
            os.makedirs(os.path.join(tmp, "charts", "hptrain", "files"))
            os.makedirs(os.path.join(tmp, "tests", "alerts"))
            with open(os.path.join(tmp, "charts", "hptrain", "files", "alerts.yaml"), "w") as f:
                f.write(rules_text)
            copies = []
            for path in unit_test_files():
                copy = os.path.join(tmp, "tests", "alerts", os.path.basename(path))
                shutil.copy(path, copy)
                copies.append(copy)
            return promtool("test", "rules", *copies, cwd=os.path.join(tmp, "tests", "alerts"))

    def test_a_broken_metric_name_fails_the_unit_tests(self):
        broken = read(RULES).replace("hptrain_compute_seconds_sum", "hptrain_compute_second_sum")
        self.assertNotEqual(broken, read(RULES))
        code, output = self.run_unit_tests_on(broken)
        self.assertNotEqual(code, 0, output)
        self.assertIn("HptrainWorkerStraggling", output)

    def test_a_ps_known_by_its_pod_name_fails_the_unit_tests(self):
        # What the rule did while the runtime's label was `job`: any pod named like a ps, of any
        # application, counted. The quiet case's Kubeflow pod tf-ps-0 must make this fail.
        broken = read(RULES).replace('up{hptrain_io_role="ps"}', 'up{pod=~".+-ps-[0-9]+"}')
        self.assertNotEqual(broken, read(RULES))
        code, output = self.run_unit_tests_on(broken)
        self.assertNotEqual(code, 0, output)
        self.assertIn("HptrainParameterServerDown", output)
        self.assertIn("tf-ps-0", output)

    def test_no_rule_reads_the_scrape_job_label(self):
        import dashboards_test  # tests/deploy: the label-name extraction
        copied = set()
        for path in POD_MONITORS:
            monitor = yaml.safe_load(re.sub(r"\{\{.*?\}\}", "", read(path)))
            labels = monitor["spec"]["podTargetLabels"]
            self.assertIn("hptrain.io/role", labels, path)
            copied.update(re.sub(r"[^A-Za-z0-9_]", "_", label) for label in labels)
        allowed = RULE_LABELS | copied
        count = 0
        for name, rule in self.alerts.items():
            used = dashboards_test.label_names(rule["expr"])
            self.assertNotIn("job", used, name)
            self.assertNotIn("exported_job", used, name)
            self.assertEqual(used - allowed, set(), f"{name}: labels no scrape gives")
            for text in rule["annotations"].values():
                for label in re.findall(r"\$labels\.(\w+)", text):
                    self.assertIn(label, allowed, f"{name}: annotation reads $labels.{label}")
                    count += 1
        self.assertGreaterEqual(count, 6)
        self.assertIn("hptrain_io_role", dashboards_test.label_names(
            self.alerts["HptrainParameterServerDown"]["expr"]))

    def test_every_alert_has_a_runbook_section(self):
        import link_check_test  # tests/docs: GitHub's heading anchors
        text = read(RUNBOOKS)
        anchors = link_check_test.anchors(text)
        sections = {}  # anchor -> the section's text, up to the next level-2 heading
        for part in re.split(r"^(?=## )", text, flags=re.M)[1:]:
            heading = part.split("\n", 1)[0][3:]
            sections[link_check_test.slug(heading)] = part
        for name, rule in self.alerts.items():
            url = rule["annotations"].get("runbook_url", "")
            self.assertTrue(url.startswith(RUNBOOK_BASE), f"{name}: runbook_url {url!r}")
            anchor = url[len(RUNBOOK_BASE):]
            self.assertIn(anchor, anchors, f"{name}: docs/runbooks.md has no #{anchor}")
            self.assertIn(anchor, sections, f"{name}: #{anchor} is not a section (##)")
            body = sections[anchor]
            self.assertIn(name, body.split("\n", 1)[0], f"{name}: #{anchor} is another alert's")
            for part in SECTION_PARTS:
                self.assertIn(part, body, f"{name}: its runbook section lacks {part}")
        # No section for an alert that is gone, and the checker sees a missing anchor.
        self.assertEqual(set(sections), {n.lower() for n in self.alerts})
        self.assertNotIn("hptrainnosuchalert", anchors)

    def test_template_is_opt_in_and_renders_the_rules_file(self):
        template = read(TEMPLATE)
        self.assertRegex(template.lstrip(), r"^\{\{- if \.Values\.alerts\.enabled \}\}")
        self.assertIn('.Files.Get "files/alerts.yaml"', template)
        values = yaml.safe_load(read(VALUES))
        self.assertIs(values["alerts"]["enabled"], False)
        for ref in re.findall(r"\.Values((?:\.[A-Za-z_]\w*)+)", template):
            node = values
            for key in ref.strip(".").split("."):
                self.assertIn(key, node, f"prometheusrule.yaml reads .Values{ref}")
                node = node[key]
        files = {"files/alerts.yaml": read(RULES)}
        self.assertEqual(render(template, values, files).strip(), "")
        values["alerts"].update(enabled=True, namespace="monitoring",
                                labels={"release": "prometheus"})
        (rule,) = list(yaml.safe_load_all(render(template, values, files)))
        self.assertEqual((rule["apiVersion"], rule["kind"]),
                         ("monitoring.coreos.com/v1", "PrometheusRule"))
        self.assertEqual(rule["metadata"]["namespace"], "monitoring")
        self.assertEqual(rule["metadata"]["labels"]["release"], "prometheus")
        self.assertEqual(rule["spec"], self.rules)


def main():
    if yaml is None:
        print("SKIP: python3-yaml is not installed (apt-get install python3-yaml)")
        return 77
    if shutil.which("promtool") is None:
        print("SKIP: promtool is not installed (Debian package prometheus)")
        return 77
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(AlertsTest)
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
