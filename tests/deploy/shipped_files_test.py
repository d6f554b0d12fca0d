#!/usr/bin/env python3
"""The files the runtime images ship for the manifests that name them.

On Kubernetes a job's files are named by absolute paths (controller/reconcile/pod_paths.h); the
MP² example names the predictor the runtime images hold. This checks that both runtime
Dockerfiles COPY the repository's predictor to exactly the path the example, the controller's
message (kShippedPredictorPath) and the CRD's description name, and that every other path field
of the examples is absolute, as the admission webhook requires.

Exit status: 0 passed, 1 failed, 77 skipped (no python3-yaml).
"""

import fnmatch
import os
import re
import sys
import unittest

try:
    import yaml
except ImportError:
    print("skipped: python3-yaml is not installed")
    sys.exit(77)

REPO = os.environ.get("HPTRAIN_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
DOCKERFILES = ("deploy/docker/runtime.Dockerfile", "deploy/docker/runtime-cuda.Dockerfile")


def read(path):
    with open(os.path.join(REPO, path), encoding="utf-8") as f:
        return f.read()


def final_stage(dockerfile):
    """The lines of the last FROM stage (the image that ships)."""
    text = read(dockerfile)
    return text[text.rindex("\nFROM "):]


def copies_from_context(stage):
    """(source, destination) of each COPY without --from in `stage`."""
    pairs = []
    for line in stage.splitlines():
        words = line.split()
        if len(words) == 3 and words[0] == "COPY" and not words[1].startswith("--"):
            pairs.append((words[1], words[2]))
    return pairs


def ignored(path, dockerignore):
    """Whether a .dockerignore excludes `path` (or a folder above it). Its patterns match path
    segment by segment (`*` stays within one), as Go's filepath.Match; `**/x` matches x at any
    depth; no `!` exceptions."""
    parts = path.split("/")
    for line in dockerignore.splitlines():
        pattern = line.strip().rstrip("/")
        if not pattern or pattern.startswith("#"):
            continue
        if pattern.startswith("**/"):
            if any(fnmatch.fnmatch(part, pattern[3:]) for part in parts):
                return True
            continue
        segments = pattern.split("/")
        if len(segments) <= len(parts) and all(
                fnmatch.fnmatch(part, segment) for part, segment in zip(parts, segments)):
            return True
    return False


def example(path):
    return yaml.safe_load(read(path))


class ShippedPredictorTest(unittest.TestCase):
    def setUp(self):
        self.predictor = example("examples/fashion-mnist-mp2.yaml")["spec"]["strategy"]["predictor"]

    def test_the_example_names_an_absolute_path(self):
        self.assertTrue(self.predictor.startswith("/"), self.predictor)

    def test_each_runtime_image_copies_the_predictor_there(self):
        for dockerfile in DOCKERFILES:
            with self.subTest(dockerfile=dockerfile):
                shipped = []
                for source, destination in copies_from_context(final_stage(dockerfile)):
                    target = destination
                    if destination.endswith("/"):
                        target = destination + os.path.basename(source)
                    if target == self.predictor:
                        shipped.append(source)
                self.assertEqual(len(shipped), 1, f"{dockerfile} does not COPY {self.predictor}")
                self.assertTrue(os.path.isfile(os.path.join(REPO, shipped[0])), shipped[0])
                # The build context is the repository less its .dockerignore; the file is in it.
                self.assertFalse(ignored(shipped[0], read(dockerfile + ".dockerignore")),
                                 f"{dockerfile}.dockerignore leaves out {shipped[0]}")

    def test_the_controller_and_the_crd_name_the_same_path(self):
        header = read("controller/reconcile/pod_paths.h")
        match = re.search(r'kShippedPredictorPath\[\] =\s*"([^"]+)"', header)
        self.assertIsNotNone(match)
        self.assertEqual(match.group(1), self.predictor)
        for crd in ("deploy/crd/trainingjobs.hptrain.io.yaml",
                    "charts/hptrain/crds/trainingjobs.hptrain.io.yaml"):
            self.assertTrue(self.predictor in read(crd), f"{crd} does not name {self.predictor}")


class DockerignoreTest(unittest.TestCase):
    def test_the_pattern_reader(self):
        text = "# comment\n.git\nbuild*/\nbench/results/\n**/__pycache__\n*.pt\n"
        for path, expected in (("examples/predictors/x.mp2p", False), ("build-x/bin/a", True),
                               ("bench/results/r.json", True), ("a/__pycache__/b.pyc", True),
                               ("model.pt", True), ("examples/model.pt", False)):
            self.assertEqual(ignored(path, text), expected, path)


class ExamplePathsTest(unittest.TestCase):
    """Every path of the examples that the webhook judges is absolute (pod_paths.h)."""

    def test_paths_are_absolute(self):
        checked = 0
        for name in sorted(os.listdir(os.path.join(REPO, "examples"))):
            if not name.endswith(".yaml"):
                continue
            spec = example(os.path.join("examples", name)).get("spec", {})
            paths = {
                "spec.model.torchscript": spec.get("model", {}).get("torchscript"),
                "spec.dataset.path": spec.get("dataset", {}).get("path"),
            }
            strategy = spec.get("strategy", {})
            if strategy.get("type") == "mp2" and strategy.get("predictor") != "zero":
                paths["spec.strategy.predictor"] = strategy.get("predictor")
            for field, value in paths.items():
                if value is None:
                    continue
                checked += 1
                with self.subTest(example=name, field=field):
                    self.assertTrue(value.startswith("/"), f"{name}: {field}: {value}")
        self.assertGreaterEqual(checked, 3)  # a dataset path, a module and the predictor


if __name__ == "__main__":
    unittest.main(verbosity=2)
