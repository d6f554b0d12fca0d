#!/usr/bin/env python3
"""docs/guide.md's cluster steps, run with kubectl against the API server double.

Starts `hptrain-apiserver-double --kubelet` (pods it sees Pending are reported Running; nothing
runs in them) and the real `hptrain-controller` against it, then runs the guide's commands: the
CRD upgrade (`kubectl apply --server-side` of the chart's CRD, which is what `helm show crds`
prints), `kubectl get crd`, `kubectl apply -f examples/fashion-mnist.yaml`, `kubectl get tj` with
its printer columns, `kubectl get tj -o wide`, `kubectl describe tj` with its events and
`kubectl get pods -l hptrain.io/job=...`; and the first troubleshooting row: a job with a
relative data path is refused with the field path (by the controller here, which runs the same
check as the webhook). kubectl needs --validate=false against the double (no OpenAPI document).

Exit status: 0 passed, 1 failed, 77 skipped (kubectl or a binary missing).
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.dont_write_bytecode = True

REPO = os.environ.get("HPTRAIN_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
DOUBLE = os.environ.get("HPTRAIN_APISERVER_DOUBLE_BIN", "")
CONTROLLER = os.environ.get("HPTRAIN_CONTROLLER_BIN", "")
JOB = "fashion-mnist-lenet5"

RELATIVE_PATH_JOB = """\
apiVersion: hptrain.io/v1alpha1
kind: TrainingJob
metadata:
  name: relative-data
spec:
  model: {name: lenet5}
  dataset: {format: npy, name: mine, path: data/mine}
  globalBatchSize: 64
  epochs: 1
  workerGroups:
    - {name: cpu, replicas: 2}
"""


def wait_for(predicate, timeout=20.0, step=0.2):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(step)


class GuideOnTheDoubleTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="hptrain-guide-")
        cls.kubeconfig = os.path.join(cls.tmp, "kubeconfig")
        cls.double = subprocess.Popen(
            [DOUBLE, "--port", "0", "--kubeconfig", cls.kubeconfig, "--kubelet"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        first = cls.double.stdout.readline()
        if "serving" not in first:
            cls.double.kill()
            raise RuntimeError(f"hptrain-apiserver-double did not start: {first!r}")
        cls.env = dict(os.environ, KUBECONFIG=cls.kubeconfig)
        cls.controller = None

    @classmethod
    def tearDownClass(cls):
        for p in (cls.controller, cls.double):
            if p is not None and p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
        if cls.double.stdout is not None:
            cls.double.stdout.close()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def kubectl(self, *args, stdin=None, check=True):
        r = subprocess.run(["kubectl", *args], env=self.env, input=stdin, capture_output=True,
                           text=True, timeout=60, cwd=REPO)
        if check:
            self.assertEqual(r.returncode, 0, f"kubectl {' '.join(args)}: {r.stderr}")
        return r

    def start_controller(self):
        cls = type(self)
        if cls.controller is None:
            cls.controller = subprocess.Popen(
                [CONTROLLER, "--kubeconfig", self.kubeconfig, "--metrics-address", "0",
                 "--health-address", "0"],
                stdout=open(os.path.join(self.tmp, "controller.log"), "w"),
                stderr=subprocess.STDOUT)

    def test_1_the_crd_upgrade_and_get_crd(self):
        crds = os.path.join(REPO, "charts", "hptrain", "crds")
        r = self.kubectl("apply", "--server-side", "--validate=false", "-f", crds)
        self.assertIn("trainingjobs.hptrain.io serverside-applied", r.stdout)
        r = self.kubectl("get", "crd", "trainingjobs.hptrain.io")
        self.assertIn("trainingjobs.hptrain.io", r.stdout)
        self.kubectl("wait", "--for=condition=Established", "crd/trainingjobs.hptrain.io",
                     "--timeout=10s")

    def test_2_the_first_job_and_watching_it(self):
        self.start_controller()
        r = self.kubectl("apply", "--validate=false", "-f",
                         os.path.join(REPO, "examples", "fashion-mnist.yaml"))
        self.assertIn(f"trainingjob.hptrain.io/{JOB} created", r.stdout)

        def running():
            out = self.kubectl("get", "tj", JOB, check=False).stdout
            return out if re.search(rf"^{JOB}\s+Running\s+4\s+4\s+ssgd\b", out, re.M) else ""
        table = wait_for(running)
        self.assertTrue(table, self.kubectl("get", "tj", check=False).stdout)
        header = table.splitlines()[0].split()
        self.assertEqual(header, ["NAME", "PHASE", "READY", "DESIRED", "STRATEGY", "STEP",
                                  "SAMPLES/S", "AGE"])
        wide = self.kubectl("get", "tj", "-o", "wide").stdout.splitlines()[0].split()
        for column in ("LOSS", "METRIC", "RESTARTS"):
            self.assertIn(column, wide)

        described = self.kubectl("describe", "tj", JOB).stdout
        self.assertRegex(described, r"Normal\s+Created\s+.*created the ps pod, 4 worker pods")
        self.assertRegex(described, r"Normal\s+Running\s+.*all 5 pods are running")

        pods = self.kubectl("get", "pods", "-l", f"hptrain.io/job={JOB}", "-o", "name").stdout
        self.assertEqual(sorted(pods.split()),
                         [f"pod/{JOB}-ps-0"] + [f"pod/{JOB}-worker-{i}" for i in range(4)])

    def test_3_a_relative_path_is_refused_with_its_field(self):
        self.start_controller()
        self.kubectl("apply", "--validate=false", "-f", "-", stdin=RELATIVE_PATH_JOB)

        def refused():
            out = self.kubectl("describe", "tj", "relative-data", check=False).stdout
            return out if "InvalidSpec" in out else ""
        described = wait_for(refused)
        self.assertRegex(described, r"Warning\s+InvalidSpec\s+.*spec\.dataset\.path: .*absolute")
        pods = self.kubectl("get", "pods", "-l", "hptrain.io/job=relative-data", "-o",
                            "name").stdout
        self.assertEqual(pods.strip(), "", "no pod of a refused job is created")


def main():
    if shutil.which("kubectl") is None:
        print("SKIP: kubectl is not installed")
        return 77
    for name, path in (("hptrain-apiserver-double", DOUBLE), ("hptrain-controller", CONTROLLER)):
        if not path or not os.access(path, os.X_OK):
            print(f"SKIP: {name} is not built ({path or 'unset'})")
            return 77
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(GuideOnTheDoubleTest)
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
