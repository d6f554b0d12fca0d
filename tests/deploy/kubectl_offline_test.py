#!/usr/bin/env python3
"""kubectl, offline, on every manifest in deploy/ and charts/hptrain/crds/.

`kubectl kustomize deploy/` must render; every manifest file must parse as Kubernetes objects
with `kubectl annotate --local` (which reads the files like `kubectl apply` does, decodes each
object's apiVersion/kind/metadata, and never contacts a server: the throwaway kubeconfig points
at a closed port to prove it). Negative cases show both commands fail on broken input.

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

CLUSTER_SCOPED = {"Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding"}


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

    def test_kustomize_renders_everything_in_its_namespace(self):
        # deploy/kustomization.yaml keeps to what the kustomize of kubectl 1.20 (Debian 12's)
        # understands, so this runs with any kubectl.
        r = self.kubectl("kustomize", "deploy/")
        self.assertEqual(r.returncode, 0, r.stderr)
        objects = k8s_schema.load_yaml_documents(r.stdout)
        kinds = sorted(o["kind"] for o in objects)
        self.assertEqual(kinds, sorted([
            "Namespace", "CustomResourceDefinition", "ServiceAccount", "ClusterRole",
            "ClusterRoleBinding", "Role", "RoleBinding", "Deployment", "PodMonitor",
            "PodMonitor"]))
        for o in objects:
            ns = o["metadata"].get("namespace")
            if o["kind"] in CLUSTER_SCOPED:
                self.assertIsNone(ns, o["kind"])
            else:
                self.assertEqual(ns, "hptrain-system", f"{o['kind']}/{o['metadata']['name']}")
            for subject in o.get("subjects", []):
                self.assertEqual(subject["namespace"], "hptrain-system")
        # The rendered CRD is the source CRD (kustomize only sets namespaces).
        (crd,) = [o for o in objects if o["kind"] == "CustomResourceDefinition"]
        (source,) = k8s_schema.load_yaml_file(
            os.path.join(REPO, "deploy", "crd", "trainingjobs.hptrain.io.yaml"))
        self.assertEqual(crd["spec"], source["spec"])
        # Every manifest under deploy/ is part of the kustomization.
        listed = set()
        kustomization = k8s_schema.load_yaml_file(os.path.join(REPO, "deploy", "kustomization.yaml"))
        for resource in kustomization[0]["resources"]:
            listed.add(os.path.normpath(os.path.join(REPO, "deploy", resource)))
        in_tree = {f for f in manifest_files() if "/deploy/" in f}
        self.assertEqual(in_tree - listed, set(), "manifests missing from kustomization.yaml")

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
