#!/usr/bin/env python3
"""scripts/images.sh and the Dockerfiles it builds, checked without a container engine.

The script: `bash -n`; what it runs, seen by a stand-in docker or podman on an otherwise empty
PATH (the tags from VERSION, --tag, --push REGISTRY, --build-arg, podman's --ignorefile, a failed
build stopping before any push) and what --dry-run prints; one-line errors with exit 2 for bad
usage, exit 1 when there is no engine. The Dockerfiles: every COPY from the build context names
a file that exists and that the Dockerfile's own .dockerignore lets through (the context keeps
what the build reads, VERSION included, and leaves build directories and .git out), the scripts
they run are executable, and the habits hadolint checks for (apt lists removed in the RUN that
fills them, --no-install-recommends, no :latest, absolute WORKDIR, a non-root USER last). Where
hadolint is installed, it runs too (Debian 12 has no package).

Exit status: 0 passed, 1 failed.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

REPO = os.environ.get("HPTRAIN_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(REPO, "scripts", "images.sh")
DOCKER = os.path.join(REPO, "deploy", "docker")
IMAGES = ("runtime", "runtime-cuda", "controller")
BASH = shutil.which("bash") or "/bin/bash"


def version():
    with open(os.path.join(REPO, "VERSION"), encoding="utf-8") as f:
        return f.readline().strip()


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def instructions(dockerfile_text):
    """(INSTRUCTION, arguments) per instruction, continuation lines joined, comments dropped."""
    out, current = [], ""
    for line in dockerfile_text.splitlines():
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            current += line.rstrip()[:-1] + " "
            continue
        current += line
        keyword, _, rest = current.strip().partition(" ")
        out.append((keyword.upper(), rest.strip()))
        current = ""
    return out


def ignore_patterns(path):
    """The patterns of a .dockerignore, as (exclude, regex) in file order (the last match wins)."""
    patterns = []
    for line in read(path).splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        exclude = not line.startswith("!")
        pattern = os.path.normpath(line.lstrip("!").strip()).lstrip("/")
        regex, i = "", 0
        while i < len(pattern):
            if pattern.startswith("**/", i):
                regex, i = regex + "(?:.*/)?", i + 3
            elif pattern.startswith("**", i):
                regex, i = regex + ".*", i + 2
            elif pattern[i] == "*":
                regex, i = regex + "[^/]*", i + 1
            elif pattern[i] == "?":
                regex, i = regex + "[^/]", i + 1
            else:
                regex, i = regex + re.escape(pattern[i]), i + 1
        patterns.append((exclude, re.compile(regex + "$")))
    return patterns


def ignored(patterns, relpath):
    """Whether the build context leaves relpath out: it or a folder above it matches (Docker's
    rule for a folder: excluding it excludes what is under it)."""
    parts = relpath.strip("/").split("/")
    result = False
    for exclude, regex in patterns:
        for n in range(1, len(parts) + 1):
            if regex.match("/".join(parts[:n])):
                result = exclude
                break
    return result


class FakeEngine:
    """A temporary PATH holding only a stand-in engine that logs its arguments."""

    def __init__(self, name, build_exit=0):
        self.dir = tempfile.mkdtemp(prefix="images_test-")
        self.log = os.path.join(self.dir, "log")
        if name:
            path = os.path.join(self.dir, name)
            with open(path, "w", encoding="utf-8") as f:
                f.write(f"#!{BASH}\n"
                        f'echo "$* |DOCKER_BUILDKIT=${{DOCKER_BUILDKIT:-}}" >>{self.log}\n'
                        f'[ "$1" != build ] || exit {build_exit}\n')
            os.chmod(path, 0o755)

    def run(self, *args):
        return subprocess.run([BASH, SCRIPT, *args], env={"PATH": self.dir},
                              capture_output=True, text=True, timeout=30)

    def calls(self):
        if not os.path.exists(self.log):
            return []
        return [line.rsplit(" |", 1) for line in read(self.log).splitlines()]

    def close(self):
        shutil.rmtree(self.dir)


class ImagesScriptTest(unittest.TestCase):
    def setUp(self):
        self.engines = []

    def tearDown(self):
        for engine in self.engines:
            engine.close()

    def engine(self, name, **kw):
        engine = FakeEngine(name, **kw)
        self.engines.append(engine)
        return engine

    def test_syntax(self):
        subprocess.run([BASH, "-n", SCRIPT], check=True)
        self.assertTrue(os.access(SCRIPT, os.X_OK), "scripts/images.sh is executable")

    def test_builds_all_three_with_the_version_tag(self):
        docker = self.engine("docker")
        result = docker.run()
        self.assertEqual(result.returncode, 0, result.stderr)
        calls = docker.calls()
        self.assertEqual([c[0] for c in calls[:2]], ["info", "buildx version"])
        builds = [c for c in calls if c[0].startswith("build ")]
        self.assertEqual(len(builds), 3)
        for (args, env), image in zip(builds, IMAGES):
            self.assertEqual(args, f"build --file deploy/docker/{image}.Dockerfile "
                                   f"--tag hptrain/{image}:{version()} "
                                   f"--label org.opencontainers.image.version={version()} .")
            self.assertEqual(env, "DOCKER_BUILDKIT=1")
        self.assertFalse([c for c in calls if c[0].startswith("push")], "no --push, no push")

    def test_one_image_tag_registry_and_build_args(self):
        docker = self.engine("docker")
        result = docker.run("runtime-cuda", "--tag", "9.8.7", "--push", "registry.example.com/ml/",
                            "--build-arg", "CUDA_ARCHITECTURES=90")
        self.assertEqual(result.returncode, 0, result.stderr)
        name = "registry.example.com/ml/hptrain/runtime-cuda:9.8.7"
        self.assertEqual([c[0] for c in docker.calls()[2:]], [
            f"build --file deploy/docker/runtime-cuda.Dockerfile --tag {name} "
            "--label org.opencontainers.image.version=9.8.7 --build-arg CUDA_ARCHITECTURES=90 .",
            f"push {name}"])

    def test_podman_gets_the_dockerfiles_ignore_file(self):
        podman = self.engine("podman")
        result = podman.run("controller")
        self.assertEqual(result.returncode, 0, result.stderr)
        (build,) = [c[0] for c in podman.calls() if c[0].startswith("build ")]
        self.assertIn("--ignorefile deploy/docker/controller.Dockerfile.dockerignore", build)

    def test_failed_build_stops_before_pushing(self):
        docker = self.engine("docker", build_exit=3)
        result = docker.run("--push", "registry.example.com")
        self.assertNotEqual(result.returncode, 0)
        calls = [c[0] for c in docker.calls()]
        self.assertEqual(len([c for c in calls if c.startswith("build ")]), 1)
        self.assertFalse([c for c in calls if c.startswith("push")])

    def test_dry_run_prints_and_runs_nothing(self):
        docker = self.engine("docker")
        result = docker.run("runtime", "--push", "reg.example.com", "--dry-run")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(docker.calls(), [])
        name = f"reg.example.com/hptrain/runtime:{version()}"
        self.assertIn(f"+ docker build --file deploy/docker/runtime.Dockerfile --tag {name} ",
                      result.stdout)
        self.assertIn(f"+ docker push {name}\n", result.stdout)
        # No engine at all: still prints (as docker).
        bare = self.engine(None)
        result = bare.run("--dry-run")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout.count("+ docker build "), 3)

    def test_no_engine_is_one_line(self):
        result = self.engine(None).run("runtime")
        self.assertEqual(result.returncode, 1)
        self.assertEqual(len(result.stderr.splitlines()), 1, result.stderr)
        self.assertIn("neither docker nor podman", result.stderr)

    def test_bad_usage_is_one_line_and_exit_2(self):
        for args, words in ((["runtime-gpu"], 'unknown image "runtime-gpu"'),
                            (["--tags", "1"], "unknown flag --tags"),
                            (["--tag"], "--tag needs a value"),
                            (["--push", ""], "--push needs a value"),
                            (["--tag", "1 2"], 'tag "1 2"'),
                            (["--tag", "-x"], 'tag "-x"'),
                            (["--push", "https://registry.example.com"], "not a URL"),
                            (["--push", "Registry.Example.com"], "lowercase"),
                            (["--build-arg", "novalue"], "NAME=VALUE")):
            docker = self.engine("docker")
            result = docker.run(*args)
            self.assertEqual(result.returncode, 2, (args, result.stderr))
            self.assertEqual(len(result.stderr.splitlines()), 1, (args, result.stderr))
            self.assertIn(words, result.stderr, args)
            self.assertEqual(docker.calls(), [], args)

    def test_help(self):
        result = self.engine(None).run("--help")
        self.assertEqual(result.returncode, 0)
        for image in IMAGES:
            self.assertIn(image, result.stdout)


class DockerfilesTest(unittest.TestCase):
    def test_ignore_matcher_sees_differences(self):
        with tempfile.NamedTemporaryFile("w", suffix=".dockerignore", delete=False) as f:
            f.write("# c\n.git\nbuild*/\n**/__pycache__\n*.pt\n!keep.pt\n")
        try:
            patterns = ignore_patterns(f.name)
        finally:
            os.unlink(f.name)
        for path in (".git/config", "build/bin/hptrain", "build-asan", "a/b/__pycache__/x.pyc",
                     "model.pt"):
            self.assertTrue(ignored(patterns, path), path)
        for path in ("scripts/build.sh", "VERSION", "keep.pt", "examples/model.pt", "rebuild"):
            self.assertFalse(ignored(patterns, path), path)

    def test_copy_sources_exist_and_are_in_the_context(self):
        for image in IMAGES:
            dockerfile = os.path.join(DOCKER, f"{image}.Dockerfile")
            ignore = ignore_patterns(dockerfile + ".dockerignore")
            # What every build reads through `COPY . .`, and what it must not carry.
            for needed in ("VERSION", "CMakeLists.txt", "scripts/build.sh",
                           "scripts/install-deps.sh", "deploy/docker/runtime-deps.sh"):
                self.assertFalse(ignored(ignore, needed), f"{image}: {needed} left out")
            for heavy in (".git/HEAD", "build/bin/hptrain", "build-debug/CMakeCache.txt"):
                self.assertTrue(ignored(ignore, heavy), f"{image}: {heavy} sent to the engine")
            copies = 0
            for keyword, args in instructions(read(dockerfile)):
                if keyword not in ("COPY", "ADD") or "--from=" in args:
                    continue
                self.assertEqual(keyword, "COPY", f"{image}: ADD where COPY does")
                words = [w for w in args.split() if not w.startswith("--")]
                self.assertGreaterEqual(len(words), 2, f"{image}: COPY {args}")
                for source in words[:-1]:
                    copies += 1
                    path = os.path.normpath(os.path.join(REPO, source))
                    self.assertTrue(os.path.exists(path), f"{image}: COPY {source}: no such file")
                    if source != ".":
                        self.assertFalse(ignored(ignore, os.path.relpath(path, REPO)),
                                         f"{image}: COPY {source} is excluded by .dockerignore")
            self.assertGreater(copies, 0, image)

    def test_scripts_run_by_the_builds_are_executable(self):
        for image in IMAGES:
            text = read(os.path.join(DOCKER, f"{image}.Dockerfile"))
            for script in set(re.findall(r"\b((?:scripts|deploy/docker)/[\w./-]+\.sh)\b", text)):
                path = os.path.join(REPO, script)
                self.assertTrue(os.access(path, os.X_OK), f"{image}: {script} is not executable")

    def test_lint(self):
        for image in IMAGES:
            text = read(os.path.join(DOCKER, f"{image}.Dockerfile"))
            self.assertTrue(text.startswith("# syntax=docker/dockerfile:1\n"), image)
            steps = instructions(text)
            declared, seen_from = set(), False
            for keyword, args in steps:
                if keyword == "ARG" and not seen_from:
                    declared.add(args.split("=")[0])
                if keyword == "FROM":
                    seen_from = True
                    base = args.split()[0]
                    self.assertNotRegex(base, r":latest$|^[^:$]+$", f"{image}: untagged {base}")
                    for var in re.findall(r"\$\{(\w+)\}", base):
                        self.assertIn(var, declared, f"{image}: FROM uses {var} before ARG")
                if keyword == "WORKDIR":
                    self.assertTrue(args.startswith("/"), f"{image}: WORKDIR {args}")
                if keyword == "RUN" and "apt-get install" in args:
                    self.assertIn("--no-install-recommends", args, image)
                    self.assertRegex(args, r"apt-get install\b[^&;|]*\s-y\b", image)
                    self.assertIn("apt-get update", args, image)
                    self.assertIn("rm -rf /var/lib/apt/lists/*", args, image)
                if keyword == "RUN" and "install-deps.sh" in args:
                    self.assertIn("rm -rf /var/lib/apt/lists/*", args, image)
            users = [args for keyword, args in steps if keyword == "USER"]
            self.assertTrue(users, f"{image}: no USER")
            self.assertNotRegex(users[-1], r"^(root|0)(:|$)", image)

    @unittest.skipUnless(shutil.which("hadolint"), "hadolint is not installed")
    def test_hadolint(self):
        for image in IMAGES:
            subprocess.run(["hadolint", "--failure-threshold", "error",
                            os.path.join(DOCKER, f"{image}.Dockerfile")], check=True)


if __name__ == "__main__":
    loader = unittest.defaultTestLoader
    suite = unittest.TestSuite([loader.loadTestsFromTestCase(ImagesScriptTest),
                                loader.loadTestsFromTestCase(DockerfilesTest)])
    sys.exit(0 if unittest.TextTestRunner(verbosity=2).run(suite).wasSuccessful() else 1)
