#!/usr/bin/env python3
"""Static lint of charts/hptrain, without helm.

Chart.yaml and values.yaml parse; values.yaml validates against values.schema.json (and the
schema refuses a misspelt key and a wrong type); every `.Values.x.y` a template reads exists in
values.yaml and every value is read by some template; template actions `{{ }}` and blocks
(if/with/range/define ... end) balance and every included template is defined; crds/ is
byte-identical to deploy/crd/ and dashboards/ to the repository's dashboards/; the RBAC
templates grant exactly the contract's rules; the README documents every value and how to
upgrade the CRD from the chart itself (`helm show crds`).

Rendered checks: with no helm binary here, chart_render.py renders templates with the subset of
Go templates and Helm functions the chart uses (it refuses what it does not implement, and
`lookup` returns nothing, as in `helm template`). They check the branches, names, kinds, rules
and values of the rendered objects: the controller's rules as one ClusterRole, or as a Role and
RoleBinding in each of `watchNamespaces` (none cluster-wide); the aggregated edit/view
ClusterRoles and their switch; the webhook's certificate from the chart, from cert-manager or
from `webhook.existingSecret` (no Secret generated and no `lookup` called; the caBundle or the
CA-injection annotation; the Deployment mounting that Secret; refused without a CA source). They
do not prove Helm renders identically (Sprig's exact output, `.Capabilities`), nor that a
cluster accepts the objects. NOTES.txt's inlined job is checked against the CRD's schema (the
runtime's parser checks it in notes_job_test.cc).

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
import chart_render  # noqa: E402
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
        defined = set()
        for text in self.texts.values():
            defined |= set(re.findall(r'define "([^"]+)"', text))
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
        # Rendered with the defaults: one ClusterRole, bound to the controller's ServiceAccount.
        renderer = chart_render.Chart(CHART)
        (role,) = renderer.objects("clusterrole.yaml")
        (binding,) = renderer.objects("clusterrolebinding.yaml")
        self.assertEqual((role["kind"], binding["kind"]), ("ClusterRole", "ClusterRoleBinding"))
        self.assertEqual(contract.flatten_rules(role["rules"]), contract.CLUSTER_RULES)
        self.assertEqual(binding["roleRef"], {"apiGroup": "rbac.authorization.k8s.io",
                                              "kind": "ClusterRole",
                                              "name": role["metadata"]["name"]})
        self.assertEqual(binding["subjects"], [{"kind": "ServiceAccount",
                                                "name": "hptrain-controller",
                                                "namespace": "hptrain-system"}])
        for name in ("clusterrole.yaml", "clusterrolebinding.yaml", "aggregate-roles.yaml"):
            self.assertEqual(renderer.objects(name, {"rbac": {"create": False}}), [], name)

    def test_watch_namespaces_grant_per_namespace(self):
        renderer = chart_render.Chart(CHART)
        values = {"watchNamespaces": ["team-a", "team-b"]}
        roles = renderer.objects("clusterrole.yaml", values)
        bindings = renderer.objects("clusterrolebinding.yaml", values)
        # Nothing cluster-wide: Secrets (and the rest) only in the watched namespaces.
        self.assertEqual([r["kind"] for r in roles], ["Role", "Role"])
        self.assertEqual([b["kind"] for b in bindings], ["RoleBinding", "RoleBinding"])
        self.assertEqual([r["metadata"]["namespace"] for r in roles], ["team-a", "team-b"])
        for role, binding in zip(roles, bindings):
            self.assertEqual(contract.flatten_rules(role["rules"]), contract.CLUSTER_RULES)
            self.assertEqual(binding["metadata"]["namespace"], role["metadata"]["namespace"])
            self.assertEqual(binding["roleRef"], {"apiGroup": "rbac.authorization.k8s.io",
                                                  "kind": "Role",
                                                  "name": role["metadata"]["name"]})
            self.assertEqual(binding["subjects"], [{"kind": "ServiceAccount",
                                                    "name": "hptrain-controller",
                                                    "namespace": "hptrain-system"}])
        # The controller is told the same namespaces.
        (deployment,) = renderer.objects("deployment.yaml", values)
        args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        self.assertIn("--namespace=team-a,team-b", args)

    def test_aggregate_roles(self):
        renderer = chart_render.Chart(CHART)
        self.assertTrue(self.values["rbac"]["aggregateToDefaultRoles"])
        edit, view = renderer.objects("aggregate-roles.yaml")
        shipped = {r["metadata"]["name"]: r for r in k8s_schema.load_yaml_file(
            os.path.join(REPO, "deploy", "rbac", "aggregate_roles.yaml"))}
        for role, rules, labels, suffix in (
                (edit, contract.AGGREGATE_EDIT_RULES, contract.AGGREGATE_EDIT_LABELS, "edit"),
                (view, contract.AGGREGATE_VIEW_RULES, contract.AGGREGATE_VIEW_LABELS, "view")):
            self.assertEqual(role["kind"], "ClusterRole")
            self.assertEqual(role["metadata"]["name"], "hptrain-" + suffix)
            self.assertNotIn("aggregationRule", role)
            self.assertEqual(contract.flatten_rules(role["rules"]), rules)
            aggregation = {k: v for k, v in role["metadata"]["labels"].items()
                           if k.startswith("rbac.authorization.k8s.io/")}
            self.assertEqual(aggregation, labels)
            # deploy/ ships the same roles.
            twin = shipped["hptrain-" + suffix]
            self.assertEqual(twin["rules"], role["rules"])
            self.assertEqual({k: v for k, v in twin["metadata"]["labels"].items()
                              if k.startswith("rbac.authorization.k8s.io/")}, labels)
        self.assertEqual(renderer.objects("aggregate-roles.yaml",
                                          {"rbac": {"aggregateToDefaultRoles": False}}), [])

    def test_webhook_certificate_sources(self):
        renderer = chart_render.Chart(CHART)
        lookups = []
        original = chart_render.FUNCTIONS["lookup"]
        chart_render.FUNCTIONS["lookup"] = lambda *a: lookups.append(a) or {}
        try:
            def render(values):
                lookups.clear()
                objects = renderer.objects("webhook.yaml", values)
                return {o["kind"]: o for o in objects}, list(lookups)

            def webhook(objects):
                (hook,) = objects["ValidatingWebhookConfiguration"]["webhooks"]
                return hook["clientConfig"]

            def volume(values):
                (deployment,) = renderer.objects("deployment.yaml", values)
                (vol,) = deployment["spec"]["template"]["spec"]["volumes"]
                return vol["secret"]["secretName"]

            # Generated by the chart (the default), with lookup: the only branch that needs it.
            objects, calls = render({})
            self.assertEqual(sorted(objects), ["Secret", "Service",
                                               "ValidatingWebhookConfiguration"])
            self.assertEqual(len(calls), 1)
            self.assertEqual(webhook(objects)["caBundle"], objects["Secret"]["data"]["ca.crt"])
            self.assertEqual(volume({}), objects["Secret"]["metadata"]["name"])
            # cert-manager: an Issuer and a Certificate, the CA injected; no lookup.
            objects, calls = render({"webhook": {"certManager": {"enabled": True}}})
            self.assertEqual(sorted(objects), ["Certificate", "Issuer", "Service",
                                               "ValidatingWebhookConfiguration"])
            self.assertEqual(calls, [])
            self.assertNotIn("caBundle", webhook(objects))
            self.assertEqual(
                objects["ValidatingWebhookConfiguration"]["metadata"]["annotations"],
                {"cert-manager.io/inject-ca-from":
                 "hptrain-system/" + objects["Certificate"]["metadata"]["name"]})
            self.assertEqual(objects["Certificate"]["spec"]["secretName"],
                             volume({"webhook": {"certManager": {"enabled": True}}}))
            # existingSecret: nothing generated, no lookup, the same objects every render.
            own = {"webhook": {"existingSecret": "webhook-tls", "caBundle": "Q0E="}}
            objects, calls = render(own)
            self.assertEqual(sorted(objects), ["Service", "ValidatingWebhookConfiguration"])
            self.assertEqual(calls, [])
            self.assertEqual(webhook(objects)["caBundle"], "Q0E=")
            self.assertNotIn("annotations", objects["ValidatingWebhookConfiguration"]["metadata"])
            self.assertEqual(volume(own), "webhook-tls")
            self.assertEqual(renderer.render("webhook.yaml", own),
                             renderer.render("webhook.yaml", own))
            injected = {"webhook": {"existingSecret": "webhook-tls",
                                    "certManager": {"enabled": True}}}
            objects, calls = render(injected)
            self.assertEqual(sorted(objects), ["Service", "ValidatingWebhookConfiguration"])
            self.assertEqual(calls, [])
            self.assertNotIn("caBundle", webhook(objects))
            self.assertEqual(
                objects["ValidatingWebhookConfiguration"]["metadata"]["annotations"],
                {"cert-manager.io/inject-ca-from": "hptrain-system/webhook-tls"})
            with self.assertRaisesRegex(chart_render.RenderFailed, "webhook.existingSecret"):
                renderer.render("webhook.yaml", {"webhook": {"existingSecret": "webhook-tls"}})
        finally:
            chart_render.FUNCTIONS["lookup"] = original
        validator = k8s_schema.jsonschema.Draft7Validator(self.schema)
        values = json.loads(json.dumps(self.values))
        values["webhook"].update(existingSecret="webhook-tls", caBundle="Q0E=")
        self.assertTrue(validator.is_valid(values))
        values["webhook"]["existingSecret"] = "Webhook_TLS"
        self.assertFalse(validator.is_valid(values))

    def test_renderer_sees_problems(self):
        renderer = chart_render.Chart(CHART)
        renderer.trees["t"] = chart_render._parse(chart_render._tokens(
            '{{- $x := "a" }}{{- if and false (index nil "k") }}no{{- else if .Values.replicas }}'
            '{{ $x }}-{{ .Values.replicas }}{{ end -}}\n{{ range $i, $v := list 1 2 }}{{ $i }}'
            '{{ $v }},{{ end }}'), 0, ())[0]
        self.assertEqual(renderer.render("t"), "a-101,12,")  # `-}}` eats the newline
        for bad in ("{{ if .Values.a }}", "{{ tpl .Values.a . }}", "{{ $undefined }}"):
            with self.assertRaises(ValueError, msg=bad):
                renderer.trees["t"] = chart_render._parse(chart_render._tokens(bad), 0, ())[0]
                renderer.render("t")

    def test_notes_job_is_valid(self):
        """NOTES.txt inlines a job (no file of the repository needed) that the CRD's schema
        accepts."""
        notes = chart_render.Chart(CHART).render("NOTES.txt")
        self.assertNotIn("examples/", notes)
        self.assertNotIn("crds/", notes)
        self.assertIn("helm show crds", notes)
        match = re.search(r"^kubectl apply --server-side -f - <<'EOF'\n(.*?)^EOF$", notes,
                          re.M | re.S)
        self.assertIsNotNone(match, "no heredoc job in NOTES.txt")
        (job,) = k8s_schema.load_yaml_documents(match.group(1))
        self.assertEqual(job["kind"], "TrainingJob")
        (crd,) = k8s_schema.load_yaml_file(os.path.join(CHART, "crds",
                                                        "trainingjobs.hptrain.io.yaml"))
        self.assertEqual(k8s_schema.validate(job, k8s_schema.crd_schema(crd)), [])
        self.assertIn(f"kubectl describe tj {job['metadata']['name']}", notes)
        # The runtime's parser and validator: tests/deploy/notes_job_test.cc.

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
        # From the chart being installed, not from a checkout of the repository.
        self.assertIn("helm show crds CHART | kubectl apply --server-side --force-conflicts -f -",
                      readme)
        self.assertNotIn("-f charts/hptrain/crds", readme)
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
