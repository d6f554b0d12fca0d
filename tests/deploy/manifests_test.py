#!/usr/bin/env python3
"""What the plain manifests in deploy/ promise, read from the files themselves.

RBAC is exactly the contract's (least privilege), and the aggregated edit/view roles for users
carry the contract's rules and aggregation labels; the controller Deployment runs one replica
with leader election, as non-root with a read-only root filesystem, no capabilities, no
privilege escalation and the RuntimeDefault seccomp profile, probes /healthz and /readyz on
8081 and serves metrics on 8080, with only flags the controller defines; the PodMonitors
scrape the job pods (label hptrain.io/job, port "metrics", the runtime's labels kept) and the
controller; the webhook component registers the same webhook as the chart (rendered with
cert-manager) and passes the controller only flags it defines; the Dockerfiles build with the
repository's scripts and run as non-root.

Exit status: 0 passed, 1 failed.
"""

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
DEPLOY = os.path.join(REPO, "deploy")


def load(*parts):
    return k8s_schema.load_yaml_file(os.path.join(DEPLOY, *parts))


def read(*parts):
    with open(os.path.join(DEPLOY, *parts), encoding="utf-8") as f:
        return f.read()


class ManifestsTest(unittest.TestCase):
    def test_cluster_role_is_the_contract(self):
        (role,) = load("rbac", "cluster_role.yaml")
        self.assertEqual(role["kind"], "ClusterRole")
        self.assertEqual(contract.flatten_rules(role["rules"]), contract.CLUSTER_RULES)

    def test_aggregate_roles_are_the_contract(self):
        edit, view = load("rbac", "aggregate_roles.yaml")
        for role, rules, labels in ((edit, contract.AGGREGATE_EDIT_RULES,
                                     contract.AGGREGATE_EDIT_LABELS),
                                    (view, contract.AGGREGATE_VIEW_RULES,
                                     contract.AGGREGATE_VIEW_LABELS)):
            self.assertEqual(role["kind"], "ClusterRole")
            self.assertEqual(contract.flatten_rules(role["rules"]), rules)
            self.assertEqual(role["metadata"]["labels"].items() & labels.items(), labels.items())
            self.assertNotIn("aggregationRule", role)
        # Users' roles never reach what only the controller writes.
        self.assertNotIn("update", contract.AGGREGATE_EDIT_RULES[("hptrain.io",
                                                                   "trainingjobs/status")])
        for verbs in contract.AGGREGATE_VIEW_RULES.values():
            self.assertEqual(verbs, {"get", "list", "watch"})

    def test_webhook_component_is_the_charts_webhook(self):
        path = os.path.join(DEPLOY, "components", "webhook")
        (config,) = k8s_schema.load_yaml_file(os.path.join(path, "validating_webhook.yaml"))
        (service,) = k8s_schema.load_yaml_file(os.path.join(path, "service.yaml"))
        chart = {o["kind"]: o for o in chart_render.Chart(
            os.path.join(REPO, "charts", "hptrain")).objects(
                "webhook.yaml", {"webhook": {"certManager": {"enabled": True}}},
                release="hptrain", namespace="hptrain-system")}
        # Release "hptrain" names its objects as the plain manifests do.
        self.assertEqual(chart["ValidatingWebhookConfiguration"]["webhooks"], config["webhooks"])
        self.assertEqual(chart["ValidatingWebhookConfiguration"]["metadata"]["annotations"],
                         config["metadata"]["annotations"])
        self.assertEqual(chart["Service"]["spec"]["ports"], service["spec"]["ports"])
        self.assertEqual(chart["Certificate"]["spec"]["dnsNames"],
                         k8s_schema.load_yaml_file(os.path.join(path, "certificate.yaml"))[1]
                         ["spec"]["dnsNames"])
        (kustomization,) = k8s_schema.load_yaml_file(os.path.join(path, "kustomization.yaml"))
        (patch,) = kustomization["patches"]
        for op in k8s_schema.load_yaml_documents(patch["patch"])[0]:
            if op["path"].endswith("/args/-"):
                self.assertIn(op["value"].split("=")[0], contract.CONTROLLER_FLAGS)

    def test_flatten_rules_sees_differences(self):
        rules = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]
        self.assertNotEqual(contract.flatten_rules(rules), {("", "pods"): {"get"}})
        with self.assertRaises(ValueError):
            contract.flatten_rules(rules + rules)

    def test_leader_election_role_and_bindings(self):
        role, binding = load("rbac", "leader_election_role.yaml")
        self.assertEqual((role["kind"], binding["kind"]), ("Role", "RoleBinding"))
        self.assertEqual(contract.flatten_rules(role["rules"]), contract.LEASE_RULES)
        (sa,) = load("rbac", "service_account.yaml")
        (cluster_binding,) = load("rbac", "cluster_role_binding.yaml")
        (cluster_role,) = load("rbac", "cluster_role.yaml")
        for b, r in ((binding, role), (cluster_binding, cluster_role)):
            self.assertEqual(b["roleRef"]["name"], r["metadata"]["name"])
            self.assertEqual(b["roleRef"]["kind"], r["kind"])
            self.assertEqual(b["subjects"], [{"kind": "ServiceAccount",
                                              "name": sa["metadata"]["name"],
                                              "namespace": "hptrain-system"}])

    def test_controller_deployment(self):
        (deployment,) = load("controller", "deployment.yaml")
        spec = deployment["spec"]
        self.assertEqual(spec["replicas"], 1)
        pod = spec["template"]["spec"]
        self.assertEqual(spec["selector"]["matchLabels"].items() -
                         spec["template"]["metadata"]["labels"].items(), set())
        (sa,) = load("rbac", "service_account.yaml")
        self.assertEqual(pod["serviceAccountName"], sa["metadata"]["name"])
        self.assertTrue(pod["securityContext"]["runAsNonRoot"])
        self.assertEqual(pod["securityContext"]["seccompProfile"], {"type": "RuntimeDefault"})
        (container,) = pod["containers"]
        security = container["securityContext"]
        self.assertIs(security["allowPrivilegeEscalation"], False)
        self.assertIs(security["readOnlyRootFilesystem"], True)
        self.assertEqual(security["capabilities"], {"drop": ["ALL"]})
        self.assertEqual(security["seccompProfile"], {"type": "RuntimeDefault"})
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        self.assertEqual(ports, {"metrics": 8080, "health": 8081})
        self.assertEqual(container["livenessProbe"]["httpGet"], {"path": "/healthz",
                                                                 "port": "health"})
        self.assertEqual(container["readinessProbe"]["httpGet"], {"path": "/readyz",
                                                                  "port": "health"})
        self.assertTrue(container["resources"]["requests"] and container["resources"]["limits"])
        args = container["args"]
        self.assertIn("--leader-elect", args)
        self.assertIn("--metrics-address=:8080", args)
        self.assertIn("--health-address=:8081", args)
        # The job pods' image follows the controller's version.
        self.assertIn("--default-image=hptrain/runtime:" + container["image"].split(":")[1],
                      args)
        for arg in args:
            self.assertIn(arg.split("=")[0], contract.CONTROLLER_FLAGS, arg)

    def test_contract_flags_are_the_controllers(self):
        path = os.path.join(REPO, "controller", "manager", "flags.cc")
        with open(path, encoding="utf-8") as f:
            text = f.read()
        # Each flag's table entry starts {"name", "HPTRAIN_..." (or nullptr for --kubeconfig).
        defined = {"--" + name for name in re.findall(
            r'^\s*\{"([a-z][a-z-]*)", (?:nullptr|"HPTRAIN_[A-Z_]+")', text, re.M)}
        self.assertGreaterEqual(len(defined), 10)
        self.assertEqual(defined, contract.CONTROLLER_FLAGS)

    def test_job_pod_monitor(self):
        (monitor,) = load("monitoring", "podmonitor-jobs.yaml")
        spec = monitor["spec"]
        self.assertEqual(spec["namespaceSelector"], {"any": True})
        self.assertEqual(spec["selector"], {"matchExpressions": [
            {"key": "hptrain.io/job", "operator": "Exists"}]})
        (endpoint,) = spec["podMetricsEndpoints"]
        self.assertEqual(endpoint["port"], "metrics")
        # The runtime's trainingjob label needs no honorLabels (which would hide the scrape job);
        # the pods' job and role labels reach `up` for the alerts.
        self.assertNotIn("honorLabels", endpoint)
        self.assertEqual(spec["podTargetLabels"], ["hptrain.io/job", "hptrain.io/role"])

    def test_controller_pod_monitor_selects_the_deployment(self):
        (monitor,) = load("monitoring", "podmonitor-controller.yaml")
        (deployment,) = load("controller", "deployment.yaml")
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        selector = monitor["spec"]["selector"]["matchLabels"]
        self.assertEqual(selector.items() - labels.items(), set())
        (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
        self.assertEqual(endpoint["port"], "metrics")

    def test_dockerfiles(self):
        for name, binary in (("runtime", "hptrain"), ("controller", "hptrain-controller"),
                             ("runtime-cuda", "hptrain")):
            text = read("docker", f"{name}.Dockerfile")
            stages = re.findall(r"^FROM\s+(\S+)", text, re.M)
            self.assertEqual(len(stages), 2, f"{name}: a build and a runtime stage")
            self.assertIn("scripts/build.sh", text, name)
            self.assertIn(f"runtime-deps.sh /build/bin/{binary}", text, name)
            self.assertIn(f"COPY --from=build /build/bin/{binary} ", text, name)
            self.assertRegex(text, r"(?m)^USER 65532:65532$", name)
            self.assertTrue(os.path.exists(os.path.join(
                DEPLOY, "docker", f"{name}.Dockerfile.dockerignore")), name)
        for name in ("runtime", "controller"):
            text = read("docker", f"{name}.Dockerfile")
            self.assertIn("scripts/install-deps.sh", text)
            self.assertIn("ARG DEBIAN_IMAGE=debian:12", text)
        cuda = read("docker", "runtime-cuda.Dockerfile")
        self.assertRegex(cuda, r"FROM nvidia/cuda:\$\{CUDA_VERSION\}-cudnn-devel-\$\{UBUNTU\}")
        self.assertIn("HPTRAIN_CUDA=ON", cuda)
        # Against PyTorch's CUDA libtorch (Ubuntu's libtorch-dev is CPU only), which no package
        # owns: the runtime stage copies it, and the build checks that the binary links it.
        self.assertNotRegex(cuda, r"(?m)^[^#]*\blibtorch-dev\b")
        self.assertRegex(cuda, r"libtorch-cxx11-abi-shared-with-deps-\$\{LIBTORCH_VERSION\}"
                               r"%2B\$\{LIBTORCH_CUDA\}\.zip")
        self.assertIn("-DCMAKE_PREFIX_PATH=/opt/libtorch", cuda)
        self.assertIn("COPY --from=build /opt/libtorch/lib /opt/libtorch/lib", cuda)
        self.assertIn("libtorch_cuda.so", cuda)


if __name__ == "__main__":
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(ManifestsTest)
    sys.exit(0 if unittest.TextTestRunner(verbosity=2).run(suite).wasSuccessful() else 1)
