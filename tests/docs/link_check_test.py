#!/usr/bin/env python3
"""Every relative link in the documentation leads somewhere.

Checks README.md, every markdown file under docs/, and the README.md files under charts/,
deploy/, controller/, bench/, dashboards/ and examples/: for each relative link or image
(`[text](path)`, `[text](path#anchor)`, `[text](#anchor)`, `[label]: path`) the target file or
folder must exist, and an anchor must be one GitHub generates for a heading of the target file
(or an explicit `<a name=...>` / `id=...` in it). GitHub's heading slugs: the heading's text
(markup and link targets dropped), lowercased, every character that is not a letter, a mark, a
decimal digit, '_', '-' or a space dropped (so '²', '§' and '—' go too), spaces turned into '-';
a repeated slug gets '-1', '-2', ...
External links (http, https, mailto) are not fetched. Links inside code blocks and code spans
are not links and are skipped.

Exit status: 0 passed, 1 failed.
"""

import os
import re
import sys
import unicodedata
import unittest
from urllib.parse import unquote

sys.dont_write_bytecode = True

REPO = os.environ.get("HPTRAIN_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))

# Folders whose README.md files are checked (recursively), beside README.md and docs/**/*.md.
README_FOLDERS = ("charts", "deploy", "controller", "bench", "dashboards", "examples")
SKIP_DIRS = {".git", "build", "node_modules"}

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
# [text](target "title") and ![alt](target); text may hold one level of brackets.
INLINE_LINK = re.compile(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*(<[^>]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)"
                         r"(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)")
REFERENCE_DEF = re.compile(r"^ {0,3}\[([^\]]+)\]:\s*(<[^>]*>|\S+)")
HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
HTML_ANCHOR = re.compile(r"<a\s[^>]*\b(?:name|id)\s*=\s*[\"']([^\"']+)[\"']", re.I)
EXTERNAL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def checked_files():
    """Repository-relative paths of the markdown files this test covers, sorted."""
    files = []
    if os.path.isfile(os.path.join(REPO, "README.md")):
        files.append("README.md")
    for top in ("docs",) + README_FOLDERS:
        for root, dirs, names in os.walk(os.path.join(REPO, top)):
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
            for name in names:
                if top == "docs" and name.endswith(".md") or name == "README.md":
                    files.append(os.path.relpath(os.path.join(root, name), REPO))
    return sorted(set(files))


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def prose_lines(text, blank_code_spans=True):
    """(line number, line) outside fenced code blocks, code spans blanked unless told not to."""
    fence = None
    for number, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)[0] * len(m.group(1))
            continue
        if fence is not None:
            if line.strip().startswith(fence) and set(line.strip()) <= {fence[0]}:
                fence = None
            continue
        if blank_code_spans:
            line = CODE_SPAN.sub(lambda s: " " * len(s.group(0)), line)
        yield number, line


def heading_text(raw):
    """A heading's visible text: links and images by their text, markup and HTML dropped."""
    text = re.sub(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\([^)]*\)", r"\1", raw)
    text = re.sub(r"<[^>]+>", "", text)
    return text.replace("`", "").replace("*", "")


def slug(text):
    """The anchor GitHub gives a heading with this text (before de-duplication)."""
    out = []
    for ch in text.strip().lower():
        category = unicodedata.category(ch)
        if ch == "-" or category[0] in "LM" or category in ("Nd", "Pc"):
            out.append(ch)
        elif ch == " ":
            out.append("-")
    return "".join(out)


def anchors(text):
    """Every anchor a reader can link to in a markdown text."""
    found = set()
    counts = {}
    previous = None
    for _, line in prose_lines(text, blank_code_spans=False):
        titles = []
        m = HEADING.match(line)
        if m:
            titles.append(m.group(2) or "")
        elif previous is not None and previous.strip() and SETEXT.match(line) and \
                not HEADING.match(previous) and not previous.lstrip().startswith(("|", "-", "*")):
            titles.append(previous.strip())
        for title in titles:
            base = slug(heading_text(title))
            n = counts.get(base, 0)
            counts[base] = n + 1
            found.add(base if n == 0 else "%s-%d" % (base, n))
        found.update(a.lower() for a in HTML_ANCHOR.findall(line))
        previous = line
    return found


def links(text):
    """(line number, target) of every link and image in a markdown text."""
    for number, line in prose_lines(text):
        for m in INLINE_LINK.finditer(line):
            yield number, m.group(2)
        m = REFERENCE_DEF.match(line)
        if m:
            yield number, m.group(2)


def problems(path, anchor_cache, text=None):
    """One line per broken relative link of the markdown file at repository-relative `path`
    (its contents `text` when given, else read from the file)."""
    out = []
    if text is None:
        text = read(os.path.join(REPO, path))
    anchor_cache.setdefault(os.path.normpath(os.path.join(REPO, path)), anchors(text))
    for number, target in links(text):
        target = target.strip("<>")
        if not target or EXTERNAL.match(target) or target.startswith("//"):
            continue
        file_part, _, anchor = target.partition("#")
        file_part = unquote(file_part.split("?")[0])
        if file_part.startswith("/"):
            resolved = os.path.normpath(os.path.join(REPO, file_part.lstrip("/")))
        elif file_part:
            resolved = os.path.normpath(os.path.join(REPO, os.path.dirname(path), file_part))
        else:
            resolved = os.path.normpath(os.path.join(REPO, path))
        where = "%s:%d: %s" % (path, number, target)
        if os.path.relpath(resolved, REPO).split(os.sep)[0] == "..":
            out.append(where + ": leads outside the repository")
            continue
        if not os.path.exists(resolved) and resolved != os.path.normpath(os.path.join(REPO, path)):
            out.append(where + ": no such file")
            continue
        if not anchor:
            continue
        if os.path.isdir(resolved) or not resolved.endswith(".md"):
            out.append(where + ": an anchor into something that is not a markdown file")
            continue
        if resolved not in anchor_cache:
            anchor_cache[resolved] = anchors(read(resolved))
        if unquote(anchor).lower() not in anchor_cache[resolved]:
            out.append(where + ": no heading with anchor #" + anchor)
    return out


class LinkCheckTest(unittest.TestCase):
    def test_the_files_are_found(self):
        files = checked_files()
        for expected in ("README.md", "docs/design.md", "docs/algorithms.md", "docs/metrics.md",
                         "charts/hptrain/README.md", "controller/README.md"):
            self.assertIn(expected, files)

    def test_every_relative_link_resolves(self):
        cache = {}
        found = []
        for path in checked_files():
            found.extend(problems(path, cache))
        self.assertEqual(found, [], "broken links:\n  " + "\n  ".join(found))

    def test_slugs_follow_github(self):
        self.assertEqual(slug(heading_text("3b. Algorithm [R]")), "3b-algorithm-r")
        self.assertEqual(slug(heading_text("Heterogeneous workers (H-PS)")),
                         "heterogeneous-workers-h-ps")
        self.assertEqual(slug(heading_text("MP² predictors (`hptrain mp2`)")),
                         "mp-predictors-hptrain-mp2")
        self.assertEqual(slug(heading_text("Run summary (`--output-json`)")),
                         "run-summary---output-json")
        self.assertEqual(slug(heading_text("Snapshot dataset (`.mp2d`), version 1")),
                         "snapshot-dataset-mp2d-version-1")
        self.assertEqual(slug(heading_text("The [link](x.md) and snake_case")),
                         "the-link-and-snake_case")
        self.assertEqual(anchors("# A\n\n## A\n\n```\n# not a heading\n```\n### A\n"
                                 "## Run summary (`--output-json`)\n"),
                         {"a", "a-1", "a-2", "run-summary---output-json"})

    def test_the_checker_catches_broken_links(self):
        text = ("[ok](#b) [bad](#c) `[code](missing.md)`\n\n```\n[x](missing.md)\n```\n"
                "[gone](no/such/file.md) [ext](https://example.com/x) [up](../../outside.md)\n\n"
                "## B\n")
        found = problems(os.path.join("docs", "self-test.md"), {}, text)
        self.assertEqual(len(found), 3, found)
        self.assertIn("#c: no heading", found[0])
        self.assertIn("no/such/file.md: no such file", found[1])
        self.assertIn("leads outside the repository", found[2])


if __name__ == "__main__":
    unittest.main()
