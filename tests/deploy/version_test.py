#!/usr/bin/env python3
"""One version: VERSION, and everything that names hptrain's release agrees with it.

CMake reads VERSION (project(VERSION), hence `hptrain version` and the controller's default
runtime image hptrain/runtime:<version>); scripts/images.sh tags the images with it. The chart's
version and appVersion equal it, the chart's image tags are empty (they default to appVersion) or
equal it, and every hptrain/runtime, hptrain/runtime-cuda or hptrain/controller image named with
a tag in the repository's manifests, examples, docs and sources (tests/ aside: their tags are
test data) carries it. With $HPTRAIN_BIN, `hptrain version` prints it.

Exit status: 0 passed, 1 failed.
"""

import os
import re
import subprocess
import sys
import unittest

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import k8s_schema  # noqa: E402

REPO = os.environ.get("HPTRAIN_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
CHART = os.path.join(REPO, "charts", "hptrain")
IMAGE_REF = re.compile(r"\bhptrain/(runtime-cuda|runtime|controller):([A-Za-z0-9_.<>-]+)")
# Where a release's image names live; tests/ and bench/ are left out (their tags are fixtures),
# and so are build trees.
SEARCHED = ("README.md", "charts", "deploy", "docs", "examples", "controller", "runtime",
            "python", "scripts")
TEXT_SUFFIXES = (".md", ".yaml", ".yml", ".tpl", ".txt", ".json", ".h", ".cc", ".in", ".py",
                 ".sh", ".Dockerfile")


def read(*parts):
    with open(os.path.join(REPO, *parts), encoding="utf-8") as f:
        return f.read()


def version():
    return read("VERSION").splitlines()[0].strip()


def image_refs(text):
    """(image, tag) for each tagged hptrain image named in text; placeholders like <version>
    are not tags."""
    refs = [(m.group(1), m.group(2).rstrip(".-")) for m in IMAGE_REF.finditer(text)]
    return [(image, tag) for image, tag in refs if "<" not in tag]


def searched_files():
    for top in SEARCHED:
        path = os.path.join(REPO, top)
        if os.path.isfile(path):
            yield top
            continue
        for dirpath, dirnames, filenames in os.walk(path):
            dirnames[:] = [d for d in dirnames if not d.startswith(("build", "."))
                           and d != "__pycache__" and d != "results"]
            for name in filenames:
                if name.endswith(TEXT_SUFFIXES):
                    yield os.path.relpath(os.path.join(dirpath, name), REPO)


class VersionTest(unittest.TestCase):
    def test_version_file(self):
        lines = read("VERSION").splitlines()
        self.assertEqual(len(lines), 1, "VERSION holds one line")
        # project(VERSION) takes numbers only; a tag must be a valid image tag as well.
        self.assertRegex(lines[0], r"^\d+\.\d+\.\d+$")

    def test_cmake_reads_it(self):
        cmake = read("CMakeLists.txt")
        self.assertRegex(cmake, r"file\(STRINGS \$\{CMAKE_CURRENT_SOURCE_DIR\}/VERSION "
                                r"HPTRAIN_VERSION_FILE")
        self.assertRegex(cmake, r"project\(hptrain VERSION \$\{HPTRAIN_VERSION_FILE\}")
        self.assertIn("CMAKE_CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/VERSION", cmake)

    def test_images_script_reads_it(self):
        script = read("scripts", "images.sh")
        self.assertIn("read -r version <VERSION", script)
        self.assertIn("tag=$version", script)

    def test_chart(self):
        (chart,) = k8s_schema.load_yaml_file(os.path.join(CHART, "Chart.yaml"))
        self.assertEqual(chart["appVersion"], version(), "Chart.yaml appVersion")
        # The chart is released with the images it installs.
        self.assertEqual(chart["version"], version(), "Chart.yaml version")
        (values,) = k8s_schema.load_yaml_file(os.path.join(CHART, "values.yaml"))
        for key, image in (("image", values["image"]),
                           ("runtime.image", values["runtime"]["image"])):
            self.assertIn(image["tag"], ("", version()), f"values.yaml {key}.tag")
        self.assertIn("default .Chart.AppVersion", read("charts", "hptrain", "templates",
                                                        "_helpers.tpl"))

    def test_image_tags_everywhere(self):
        wrong, seen = [], set()
        for path in searched_files():
            try:
                text = read(path)
            except UnicodeDecodeError:
                continue
            for image, tag in image_refs(text):
                seen.add(path)
                if tag != version():
                    wrong.append(f"{path}: hptrain/{image}:{tag}")
        self.maxDiff = None
        self.assertEqual(wrong, [], f"image tags other than VERSION ({version()})")
        # The places that name the images with their tag today.
        for path in ("deploy/controller/deployment.yaml",
                     "runtime/cli/crd/trainingjobs.template.yaml"):
            self.assertIn(path, seen)

    def test_image_refs_sees_differences(self):
        self.assertEqual(image_refs("image: hptrain/runtime-cuda:1.2.3 # x"),
                         [("runtime-cuda", "1.2.3")])
        self.assertEqual(image_refs("hptrain/controller:0.0.9, hptrain/runtime:<version>"),
                         [("controller", "0.0.9")])
        self.assertEqual(image_refs("e.g. hptrain/runtime:0.1.0."), [("runtime", "0.1.0")])

    @unittest.skipUnless(os.environ.get("HPTRAIN_BIN"), "HPTRAIN_BIN is not set")
    def test_hptrain_version(self):
        out = subprocess.run([os.environ["HPTRAIN_BIN"], "version"], check=True,
                             capture_output=True, text=True, timeout=60).stdout
        self.assertEqual(out.splitlines()[0], f"hptrain {version()}")


if __name__ == "__main__":
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(VersionTest)
    sys.exit(0 if unittest.TextTestRunner(verbosity=2).run(suite).wasSuccessful() else 1)
