#!/usr/bin/env python3
"""Static lint of charts/hptrain, without helm.

Chart.yaml and values.yaml parse; values.yaml validates against values.schema.json (and the
schema refuses a misspelt key and a wrong type); every `.Values.x.y` a template reads exists in
values.yaml and every value is read by some template; template actions `{{ }}` and blocks
(if/with/range/define ... end) balance and every included template is defined; crds/ is
byte-identical to deploy/crd/ and dashboards/ to the repository's dashboards/; the RBAC
templates grant exactly the contract's rules; the README documents every value and how to
upgrade the CRD.

Exit status: 0 passed, 1 failed, 77 skipped (python3-jsonschema missing).
"""

import filecmp
import glob
import json
import os
import re
import sys
import unittest

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import contract  # noqa: E402
import k8s_schema  # noqa: E402

REPO = os.environ.get("HPTRAIN_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
CHART = os.path.join(REPO, "charts", "hptrain")

VALUES_REF = re.compile(r"\$?\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)")
ACTION = re.compile(r"\{\{-?\s*(.*?)\s*-?\}\}", re.S)
BLOCK_OPEN = re.compile(r"^(if|with|range|define|block)\b")


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def templates():
    return sorted(glob.glob(os.path.join(CHART, "templates", "*")))


def value_paths(node, prefix=()):
    """Every key path of a values tree, inner nodes included."""
    paths = []
    if isinstance(node, dict):
        for key, sub in node.items():
            paths.append(prefix + (key,))
            paths += value_paths(sub, prefix + (key,))
    return paths


def template_problems(text):
    """Unbalanced delimiters or blocks in one template's text (empty = balanced)."""
    problems = []
    depth = 0
    for i, char in enumerate(text):
        if text.startswith("{{", i):
            depth += 1
            if depth > 1:
                problems.append(f"'{{{{' inside an action at offset {i}")
        elif text.startswith("}}", i) and (i == 0 or text[i - 1] != "}"):
            depth -= 1
            if depth < 0:
                problems.append(f"'}}}}' without '{{{{' at offset {i}")
                depth = 0
    if depth:
        problems.append("an action is not closed")
    blocks = []
    for action in ACTION.findall(text):
        if action.startswith("/*"):
            continue
        if BLOCK_OPEN.match(action):
            blocks.append(action.split()[0])
        elif action == "end":
            if not blocks:
                problems.append("'end' without a block")
            else:
                blocks.pop()
    problems += [f"'{b}' without 'end'" for b in blocks]
    return problems


def rules_block(text):
    """The `rules:` list of an RBAC template, parsed (template actions only frame it)."""
    match = re.search(r"^rules:\n((?:  .*\n)+)", text, re.M)
    return k8s_schema.load_yaml_documents("rules:\n" + match.group(1))[0]["rules"]


class ChartLintTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        (cls.chart,) = k8s_schema.load_yaml_file(os.path.join(CHART, "Chart.yaml"))
        (cls.values,) = k8s_schema.load_yaml_file(os.path.join(CHART, "values.yaml"))
        with open(os.path.join(CHART, "values.schema.json"), encoding="utf-8") as f:
            cls.schema = json.load(f)
        cls.texts = {os.path.basename(p): read(p) for p in templates()}

    def test_chart_yaml(self):
        chart = self.chart
        self.assertEqual(chart["apiVersion"], "v2")
        self.assertEqual(chart["name"], "hptrain")
        self.assertRegex(chart["version"], r"^\d+\.\d+\.\d+")
        self.assertIsInstance(chart["appVersion"], str)
        self.assertIn("kubeVersion", chart)

    def test_kube_version_floor_admits_the_crd(self):
        # A validation rule's fieldPath is accepted by the API server from Kubernetes 1.28 on: a
        # CRD that uses it needs a floor of at least 1.28, and the README says the same floor.
        crd = read(os.path.join(CHART, "crds", "trainingjobs.hptrain.io.yaml"))
        floor = re.match(r"^>=\s*(\d+)\.(\d+)", self.chart["kubeVersion"])
        self.assertIsNotNone(floor, self.chart["kubeVersion"])
        major, minor = int(floor.group(1)), int(floor.group(2))
        if re.search(r"^\s*fieldPath:", crd, re.M):
            self.assertGreaterEqual((major, minor), (1, 28), "fieldPath needs Kubernetes 1.28")
        readme = read(os.path.join(CHART, "README.md"))
        self.assertIn(f"Kubernetes {major}.{minor} or later", readme)

    def test_values_validate_against_schema(self):
        jsonschema = k8s_schema.jsonschema
        jsonschema.Draft7Validator.check_schema(self.schema)
        validator = jsonschema.Draft7Validator(self.schema)
        self.assertEqual([e.message for e in validator.iter_errors(self.values)], [])
        misspelt = dict(self.values, replica=2)
        self.assertFalse(validator.is_valid(misspelt))
        wrong_type = dict(self.values, replicas="two")
        self.assertFalse(validator.is_valid(wrong_type))
        nested = json.loads(json.dumps(self.values))
        nested["metrics"]["serviceMonitor"]["enable"] = True
        self.assertFalse(validator.is_valid(nested))

    def test_schema_describes_every_value(self):
        def covered(path):
            node = self.schema
            for key in path:
                props = node.get("properties", {})
                if key not in props:
                    return node.get("additionalProperties", True) is not False
                node = props[key]
            return True
        for path in value_paths(self.values):
            self.assertTrue(covered(path), ".".join(path))

    def test_values_read_by_templates_exist(self):
        known = {".".join(p) for p in value_paths(self.values)}
        used = set()
        for name, text in self.texts.items():
            for ref in VALUES_REF.findall(text):
                path = ref.lstrip(".")
                used.add(path)
                self.assertIn(path, known, f"{name} reads .Values.{path}, not in values.yaml")
        self.assertGreaterEqual(len(used), 20)
        # ... and every value is read (directly, or as part of a subtree a template renders).
        for path in sorted(known):
            self.assertTrue(any(path == u or path.startswith(u + ".") or u.startswith(path + ".")
                                for u in used), f"values.yaml: {path} is read by no template")

    def test_templates_balance(self):
        self.assertGreaterEqual(len(self.texts), 10)
        for name, text in self.texts.items():
            self.assertEqual(template_problems(text), [], name)

    def test_balance_check_sees_problems(self):
        self.assertTrue(template_problems("{{ if .Values.a }}x"))
        self.assertTrue(template_problems("{{ .Values.a }"))
        self.assertTrue(template_problems("a }} b"))
        self.assertTrue(template_problems("{{ end }}"))
        self.assertEqual(template_problems("{{- with .Values.a }}{{ . }}{{- end }}"), [])

    def test_included_templates_are_defined(self):
        defined = set(re.findall(r'define "([^"]+)"', self.texts["_helpers.tpl"]))
        self.assertIn("hptrain.fullname", defined)
        for name, text in self.texts.items():
            for included in re.findall(r'include "([^"]+)"', text):
                self.assertIn(included, defined, f"{name} includes an undefined {included}")

    def test_crds_are_byte_identical_to_deploy(self):
        source = os.path.join(REPO, "deploy", "crd")
        copy = os.path.join(CHART, "crds")
        self.assertEqual(sorted(os.listdir(source)), sorted(os.listdir(copy)))
        for name in os.listdir(source):
            self.assertTrue(filecmp.cmp(os.path.join(source, name), os.path.join(copy, name),
                                        shallow=False),
                            f"charts/hptrain/crds/{name} differs from deploy/crd/{name}")

    def test_dashboards_are_copies(self):
        source = sorted(os.path.basename(p) for p in glob.glob(
            os.path.join(REPO, "dashboards", "*.json")))
        copy = sorted(os.path.basename(p) for p in glob.glob(
            os.path.join(CHART, "dashboards", "*.json")))
        self.assertEqual(source, copy)
        self.assertGreaterEqual(len(source), 4)
        for name in source:
            self.assertTrue(filecmp.cmp(os.path.join(REPO, "dashboards", name),
                                        os.path.join(CHART, "dashboards", name), shallow=False),
                            f"charts/hptrain/dashboards/{name} differs from dashboards/{name}")
        self.assertIn('.Files.Glob "dashboards/*.json"', self.texts["dashboards.yaml"])

    def test_rbac_is_the_contract(self):
        self.assertEqual(contract.flatten_rules(rules_block(self.texts["clusterrole.yaml"])),
                         contract.CLUSTER_RULES)
        self.assertEqual(
            contract.flatten_rules(rules_block(self.texts["leader-election-rbac.yaml"])),
            contract.LEASE_RULES)

    def test_deployment_template(self):
        text = self.texts["deployment.yaml"]
        for expected in ("--leader-elect", "--leader-election-namespace=",
                         "--leader-election-id=", "--namespace=", "--metrics-address=:",
                         "--health-address=:", "--prometheus-url=", "path: /healthz",
                         "path: /readyz", "name: metrics", "name: health",
                         ".Values.securityContext", ".Values.podSecurityContext",
                         ".Values.nodeSelector", ".Values.tolerations", ".Values.affinity",
                         ".Values.resources"):
            self.assertIn(expected, text)
        for flag in re.findall(r"- (--[a-z-]+)", text):
            self.assertIn(flag, contract.CONTROLLER_FLAGS)
        security = self.values["securityContext"]
        self.assertEqual((security["allowPrivilegeEscalation"], security["readOnlyRootFilesystem"],
                          security["capabilities"], security["seccompProfile"]),
                         (False, True, {"drop": ["ALL"]}, {"type": "RuntimeDefault"}))
        self.assertTrue(self.values["podSecurityContext"]["runAsNonRoot"])
        self.assertEqual(self.values["replicas"], 1)
        self.assertTrue(self.values["leaderElection"]["enabled"])

    def test_runtime_image(self):
        text = self.texts["deployment.yaml"]
        for expected in ("--default-image={{ .Values.runtime.image.repository }}:",
                         ".Values.runtime.image.tag | default .Chart.AppVersion",
                         "--default-image-pull-policy=",
                         "--default-image-pull-secrets=", "$secret.name"):
            self.assertIn(expected, text)
        # The pull settings are passed only when set: an empty flag value would be an error.
        for value in ("pullPolicy", "pullSecrets"):
            self.assertIn("{{- with .Values.runtime.image." + value + " }}", text)
        image = self.values["runtime"]["image"]
        # The controller's own default (hptrain/runtime:<version>) when the tag is left empty.
        self.assertEqual((image["repository"], image["tag"]), ("hptrain/runtime", ""))
        self.assertEqual(image["pullSecrets"], [])
        validator = k8s_schema.jsonschema.Draft7Validator(self.schema)

        def with_image(**changes):
            values = json.loads(json.dumps(self.values))
            values["runtime"]["image"].update(changes)
            return values
        self.assertTrue(validator.is_valid(with_image(pullPolicy="",
                                                      pullSecrets=[{"name": "reg.cred-1"}])))
        self.assertFalse(validator.is_valid(with_image(pullPolicy="Sometimes")))
        self.assertFalse(validator.is_valid(with_image(pullSecrets=["regcred"])))
        self.assertFalse(validator.is_valid(with_image(pullSecrets=[{"name": "Reg_Cred"}])))
        self.assertFalse(validator.is_valid(with_image(repository="")))
        self.assertFalse(validator.is_valid(with_image(digest="sha256:0")))

    def test_monitors_and_dashboards_are_opt_in(self):
        for name, path in (("servicemonitor.yaml", "metrics.serviceMonitor.enabled"),
                           ("podmonitor.yaml", "metrics.podMonitor.enabled"),
                           ("dashboards.yaml", "dashboards.enabled"),
                           ("prometheusrule.yaml", "alerts.enabled")):
            self.assertRegex(self.texts[name].lstrip(), r"^\{\{- if .*\.Values\." +
                             re.escape(path), name)
        self.assertIn("hptrain.io/job", self.texts["podmonitor.yaml"])
        # The runtime's trainingjob label needs no honorLabels (which would hide the scrape job).
        self.assertNotIn("honorLabels:", self.texts["podmonitor.yaml"])
        self.assertIn("podTargetLabels:\n    - hptrain.io/job\n    - hptrain.io/role\n",
                      self.texts["podmonitor.yaml"])

    def test_readme_documents_values_and_crd_upgrade(self):
        readme = read(os.path.join(CHART, "README.md"))
        # Every leaf value is in the table, itself or through a documented parent (resources).
        paths = value_paths(self.values)
        leaves = [p for p in paths if not any(q[:len(p)] == p and q != p for q in paths)]
        for leaf in leaves:
            documented = any(f"| `{'.'.join(leaf[:n])}` |" in readme
                             for n in range(1, len(leaf) + 1))
            self.assertTrue(documented, f"README.md: no row for {'.'.join(leaf)}")
        self.assertIn("kubectl apply --server-side -f charts/hptrain/crds/", readme)
        self.assertIn("does not upgrade CRDs", readme)
        self.assertTrue(os.path.exists(os.path.join(CHART, "templates", "NOTES.txt")))


def main():
    if k8s_schema.jsonschema is None:
        print("SKIP: python3-jsonschema is not installed (apt-get install python3-jsonschema)")
        return 77
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(ChartLintTest)
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
