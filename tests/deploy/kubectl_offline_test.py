#!/usr/bin/env python3
"""kubectl, offline, on every manifest in deploy/ and charts/hptrain/crds/.

`kubectl kustomize deploy/` must render, with only built-in kinds and the CRD's (no Prometheus
Operator or cert-manager kinds, so `kubectl apply -k deploy/` works on a bare cluster); an
overlay adding the optional components (deploy/monitoring, deploy/components/webhook) renders
the PodMonitors and a wired webhook (Service, Issuer, Certificate, ValidatingWebhookConfiguration
with the CA injected, the controller's webhook flags, port and Secret); every manifest file must
parse as Kubernetes objects with `kubectl annotate --local` (which reads the files like `kubectl
apply` does, decodes each object's apiVersion/kind/metadata, and never contacts a server: the
throwaway kubeconfig points at a closed port to prove it). Negative cases show both commands
fail on broken input.

Exit status: 0 passed, 1 failed, 77 skipped (kubectl missing).
"""

import glob
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import k8s_schema  # noqa: E402

REPO = os.environ.get("HPTRAIN_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))

KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters:
  - name: offline
    cluster: {server: "https://127.0.0.1:1"}
users:
  - name: offline
    user: {token: offline}
contexts:
  - name: offline
    context: {cluster: offline, user: offline, namespace: default}
current-context: offline
"""

CLUSTER_SCOPED = {"Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding",
                  "ValidatingWebhookConfiguration"}
# The optional parts of deploy/, kustomize Components.
COMPONENTS = ("monitoring", "components/webhook")


def manifest_files():
    files = glob.glob(os.path.join(REPO, "deploy", "**", "*.yaml"), recursive=True)
    files += glob.glob(os.path.join(REPO, "charts", "hptrain", "crds", "*.yaml"))
    return sorted(f for f in files if os.path.basename(f) != "kustomization.yaml")


class KubectlOfflineTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="hptrain-kubectl-")
        kubeconfig = os.path.join(cls.tmp, "kubeconfig")
        with open(kubeconfig, "w", encoding="utf-8") as f:
            f.write(KUBECONFIG)
        cls.env = dict(os.environ, KUBECONFIG=kubeconfig, HOME=cls.tmp)
        cls.overlays = {}  # kustomize runs take seconds each: one per set of components

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def kubectl(self, *args):
        return subprocess.run(["kubectl", *args, f"--cache-dir={self.tmp}/cache"],
                              env=self.env, capture_output=True, text=True, timeout=60,
                              cwd=REPO, check=False)

    def parse(self, path):
        """`kubectl annotate --local` of one file: (returncode, object names, stderr)."""
        r = self.kubectl("annotate", "--local", "-f", path, "hptrain.io/lint=offline", "-o", "name")
        return r.returncode, r.stdout.split(), r.stderr

    def write(self, name, text):
        path = os.path.join(self.tmp, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return path

    def test_every_manifest_parses(self):
        files = manifest_files()
        self.assertGreaterEqual(len(files), 9)
        for path in files:
            rel = os.path.relpath(path, REPO)
            rc, names, err = self.parse(path)
            self.assertEqual(rc, 0, f"{rel}: {err}")
            documents = k8s_schema.load_yaml_file(path)
            self.assertEqual(len(names), len(documents), rel)
            for name in names:
                self.assertNotIn("<unknown>", name, f"{rel}: an object has no metadata.name")

    def test_broken_manifests_fail(self):
        good = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ok\ndata:\n  a: b\n"
        rc, names, err = self.parse(self.write("good.yaml", good))
        self.assertEqual((rc, names), (0, ["configmap/ok"]), err)
        broken = {
            "bad-indentation.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n data: [\n",
            "no-kind.yaml": "apiVersion: v1\nmetadata:\n  name: x\n",
            "not-an-object.yaml": "- just\n- a list\n",
        }
        for name, text in broken.items():
            rc, _, err = self.parse(self.write(name, text))
            self.assertNotEqual(rc, 0, f"{name} parsed")
            self.assertTrue(err.strip(), name)

    def assert_in_namespace(self, objects):
        for o in objects:
            ns = o["metadata"].get("namespace")
            if o["kind"] in CLUSTER_SCOPED:
                self.assertIsNone(ns, o["kind"])
            else:
                self.assertEqual(ns, "hptrain-system", f"{o['kind']}/{o['metadata']['name']}")
            for subject in o.get("subjects", []):
                self.assertEqual(subject["namespace"], "hptrain-system")

    def overlay(self, components):
        """`kubectl kustomize` of an overlay of deploy/ with `components`, as deploy/README.md
        shows it: (returncode, objects, stderr)."""
        key = tuple(components)
        if key in self.overlays:
            return self.overlays[key]
        root = os.path.join(self.tmp, "overlay-" + "-".join(c.replace("/", "_")
                                                            for c in components))
        os.makedirs(root, exist_ok=True)
        rel = os.path.relpath(os.path.join(REPO, "deploy"), root)
        lines = ["apiVersion: kustomize.config.k8s.io/v1beta1", "kind: Kustomization",
                 "namespace: hptrain-system", "resources:", f"  - {rel}"]
        if components:
            lines.append("components:")
            lines += [f"  - {rel}/{c}" for c in components]
        with open(os.path.join(root, "kustomization.yaml"), "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        r = self.kubectl("kustomize", root)
        objects = k8s_schema.load_yaml_documents(r.stdout) if r.returncode == 0 else []
        self.overlays[key] = (r.returncode, objects, r.stderr)
        return self.overlays[key]

    def test_kustomize_renders_everything_in_its_namespace(self):
        # deploy/kustomization.yaml keeps to what the kustomize of kubectl 1.20 (Debian 12's)
        # understands, so this runs with any kubectl.
        r = self.kubectl("kustomize", "deploy/")
        self.assertEqual(r.returncode, 0, r.stderr)
        objects = k8s_schema.load_yaml_documents(r.stdout)
        kinds = sorted(o["kind"] for o in objects)
        self.assertEqual(kinds, sorted([
            "Namespace", "CustomResourceDefinition", "ServiceAccount", "ClusterRole",
            "ClusterRole", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
            "Deployment"]))
        # Only kinds every cluster has (and the CRD's own): applies without the Prometheus
        # Operator or cert-manager.
        for o in objects:
            self.assertNotIn(o["apiVersion"].split("/")[0],
                             ("monitoring.coreos.com", "cert-manager.io"), o["kind"])
        self.assert_in_namespace(objects)
        roles = {o["metadata"]["name"] for o in objects if o["kind"] == "ClusterRole"}
        self.assertEqual(roles, {"hptrain-controller", "hptrain-edit", "hptrain-view"})
        # The rendered CRD is the source CRD (kustomize only sets namespaces).
        (crd,) = [o for o in objects if o["kind"] == "CustomResourceDefinition"]
        (source,) = k8s_schema.load_yaml_file(
            os.path.join(REPO, "deploy", "crd", "trainingjobs.hptrain.io.yaml"))
        self.assertEqual(crd["spec"], source["spec"])
        # Every manifest under deploy/ is part of the kustomization or of one of its components.
        listed = set()
        for where in ("",) + COMPONENTS:
            (kustomization,) = k8s_schema.load_yaml_file(
                os.path.join(REPO, "deploy", where, "kustomization.yaml"))
            self.assertEqual(kustomization["kind"], "Component" if where else "Kustomization")
            for resource in kustomization["resources"]:
                listed.add(os.path.normpath(os.path.join(REPO, "deploy", where, resource)))
        in_tree = {f for f in manifest_files() if "/deploy/" in f}
        self.assertEqual(in_tree - listed, set(), "manifests in no kustomization.yaml")
        # The base's own list names no component's file.
        (base,) = k8s_schema.load_yaml_file(os.path.join(REPO, "deploy", "kustomization.yaml"))
        for resource in base["resources"]:
            self.assertFalse(resource.startswith(COMPONENTS), resource)

    def test_overlay_without_components_is_the_base(self):
        rc, objects, err = self.overlay([])
        self.assertEqual(rc, 0, err)
        r = self.kubectl("kustomize", "deploy/")
        self.assertEqual(objects, k8s_schema.load_yaml_documents(r.stdout))

    def test_monitoring_component_adds_the_pod_monitors(self):
        rc, base, err = self.overlay([])
        self.assertEqual(rc, 0, err)
        rc, objects, err = self.overlay(["monitoring"])
        self.assertEqual(rc, 0, err)
        added = [o for o in objects if o not in base]
        monitors = []
        for name in ("podmonitor-jobs.yaml", "podmonitor-controller.yaml"):
            (monitor,) = k8s_schema.load_yaml_file(os.path.join(REPO, "deploy", "monitoring",
                                                                name))
            monitors.append(("PodMonitor", monitor["metadata"]["name"]))
        self.assertEqual(sorted((o["kind"], o["metadata"]["name"]) for o in added),
                         sorted(monitors))
        self.assertEqual(len(objects), len(base) + 2, "the base objects are unchanged")
        self.assert_in_namespace(objects)

    def test_webhook_component_is_wired(self):
        rc, objects, err = self.overlay(list(COMPONENTS))
        self.assertEqual(rc, 0, err)
        self.assert_in_namespace(objects)
        by_kind = {}
        for o in objects:
            by_kind.setdefault(o["kind"], []).append(o)
        (service,) = by_kind["Service"]
        (issuer,) = by_kind["Issuer"]
        (certificate,) = by_kind["Certificate"]
        (config,) = by_kind["ValidatingWebhookConfiguration"]
        (deployment,) = by_kind["Deployment"]
        self.assertEqual(len(by_kind["PodMonitor"]), 2)
        # The Certificate is issued by the component's Issuer for the Service's DNS name ...
        self.assertEqual(certificate["spec"]["issuerRef"],
                         {"kind": "Issuer", "name": issuer["metadata"]["name"]})
        self.assertIn("selfSigned", issuer["spec"])
        host = f"{service['metadata']['name']}.hptrain-system.svc"
        self.assertIn(host, certificate["spec"]["dnsNames"])
        # ... and its CA injected into the webhook, which calls that Service.
        self.assertEqual(config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
                         f"hptrain-system/{certificate['metadata']['name']}")
        (hook,) = config["webhooks"]
        self.assertNotIn("caBundle", hook["clientConfig"])
        self.assertEqual(hook["clientConfig"]["service"],
                         {"name": service["metadata"]["name"], "namespace": "hptrain-system",
                          "path": "/validate-trainingjob", "port": 443})
        self.assertEqual(hook["rules"][0]["resources"], ["trainingjobs"])
        # The Service selects the controller pods, on their port "webhook" ...
        pod = deployment["spec"]["template"]
        self.assertEqual(service["spec"]["selector"].items() - pod["metadata"]["labels"].items(),
                         set())
        (container,) = pod["spec"]["containers"]
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        self.assertEqual(service["spec"]["ports"][0]["targetPort"], "webhook")
        # ... which serve it with the flags of the webhook server and the Certificate's Secret.
        args = container["args"]
        self.assertIn(f"--webhook-address=:{ports['webhook']}", args)
        (cert_dir,) = [a.split("=", 1)[1] for a in args if a.startswith("--webhook-cert-dir=")]
        (mount,) = container["volumeMounts"]
        self.assertEqual((mount["mountPath"], mount.get("readOnly")), (cert_dir, True))
        (volume,) = pod["spec"]["volumes"]
        self.assertEqual(volume["name"], mount["name"])
        self.assertEqual(volume["secret"]["secretName"], certificate["spec"]["secretName"])
        # The base's flags are kept.
        rc, base, err = self.overlay([])
        (base_deployment,) = [o for o in base if o["kind"] == "Deployment"]
        base_args = base_deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        self.assertEqual(args[:len(base_args)], base_args)

    def test_kustomize_fails_on_a_missing_resource(self):
        self.write("k/kustomization.yaml",
                   "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
                   "resources:\n  - missing.yaml\n")
        r = self.kubectl("kustomize", os.path.join(self.tmp, "k"))
        self.assertNotEqual(r.returncode, 0)


def main():
    if shutil.which("kubectl") is None:
        print("SKIP: kubectl is not installed")
        return 77
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(KubectlOfflineTest)
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
