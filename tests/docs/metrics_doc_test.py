#!/usr/bin/env python3
"""docs/metrics.md documents exactly the metrics the code registers, with their types.

The sources: every .cc and .h file under runtime/ and controller/ (tests and benchmarks live
elsewhere). A registration is a call of the in-tree registry (runtime/metrics/registry.h),
`x.Counter("hptrain_...", ...)`, `x->Gauge(...)` or `x.Histogram(...)`, with the name as a string
literal; comments are ignored. A registration whose name is not a literal cannot be checked and
fails the test, so that it gets a literal or this test learns to read it.

The page: every table row whose first cell is a backquoted metric name (`hptrain_...`, or any
name when the second cell is a metric type) and whose second cell is its type,
`| `hptrain_x` | counter | ... |`. A name may be listed in several tables (one per
process that exports it), always with the same type.

Fails on a registered metric missing from the page, a documented one that is not registered, a
type that differs, or a name registered with two types.

Exit status: 0 passed, 1 failed.
"""

import os
import re
import sys
import unittest

sys.dont_write_bytecode = True

REPO = os.environ.get("HPTRAIN_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
SOURCE_DIRS = ("runtime", "controller")
PAGE = os.path.join("docs", "metrics.md")
TYPES = {"Counter": "counter", "Gauge": "gauge", "Histogram": "histogram"}

# A registry call: the receiver's `.` or `->`, the family type, then the first argument.
CALL = re.compile(r"(?:\.|->)\s*(Counter|Gauge|Histogram)\s*\(\s*([^,()]*)")
LITERAL_NAME = re.compile(r'^"([a-zA-Z_:][a-zA-Z0-9_:]*)"$')
ROW = re.compile(r"^\|\s*`([a-zA-Z_:][a-zA-Z0-9_:]*)`\s*\|\s*([^|]*?)\s*\|")
PAGE_TYPES = ("counter", "gauge", "histogram", "summary", "untyped")


def strip_comments(source):
    """(code, literals): C++ `source` with // and /* */ comments blanked and every string
    literal replaced by `"<i>"`, `literals[i]` being its text without the quotes (escapes as
    written). Line breaks are kept, so line numbers stay."""
    out, literals = [], []
    i, n = 0, len(source)
    while i < n:
        c = source[i]
        if source.startswith("//", i):
            j = source.find("\n", i)
            i = n if j < 0 else j
        elif source.startswith("/*", i):
            j = source.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * source.count("\n", i, j))
            i = j
        elif source.startswith('R"', i) and (i == 0 or not (source[i - 1].isalnum() or
                                                             source[i - 1] == "_")):
            m = re.match(r'R"([^(\s]*)\(', source[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = source.find(")" + m.group(1) + '"', i + m.end())
            end = n if end < 0 else end + len(m.group(1)) + 2
            literals.append(source[i + m.end():end - len(m.group(1)) - 2])
            out.append('"<%d>"' % (len(literals) - 1) + "\n" * source.count("\n", i, end))
            i = end
        elif c == '"':
            j = i + 1
            while j < n and source[j] != c:
                j += 2 if source[j] == "\\" else 1
            literals.append(source[i + 1:j])
            out.append('"<%d>"' % (len(literals) - 1))
            i = j + 1
        elif c == "'" and i > 0 and (source[i - 1].isalnum() or source[i - 1] == "_") and \
                i + 1 < n and source[i + 1].isalnum():
            out.append(c)  # a digit separator, 1'000'000
            i += 1
        elif c == "'":
            j = i + 1
            while j < n and source[j] != c:
                j += 2 if source[j] == "\\" else 1
            out.append(source[i:j + 1])
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out), literals


def source_files():
    for top in SOURCE_DIRS:
        for root, dirs, names in os.walk(os.path.join(REPO, top)):
            dirs.sort()
            for name in sorted(names):
                if name.endswith((".cc", ".h")):
                    yield os.path.join(root, name)


def registrations(text, where):
    """[(name, type, where)] of the registry calls in C++ `text`; unreadable names as (None, ...)."""
    found = []
    code, literals = strip_comments(text)
    for m in CALL.finditer(code):
        line = code.count("\n", 0, m.start()) + 1
        argument = m.group(2).strip()
        placeholder = re.fullmatch(r'"<(\d+)>"', argument)
        if placeholder:
            argument = '"%s"' % literals[int(placeholder.group(1))]
        literal = LITERAL_NAME.match(argument)
        if literal and not literal.group(1).startswith("hptrain_"):
            found.append((None, TYPES[m.group(1)], "%s:%d: %s is not an hptrain_ name" %
                          (where, line, argument)))
        elif literal:
            found.append((literal.group(1), TYPES[m.group(1)], "%s:%d" % (where, line)))
        elif argument.startswith("const ") or argument.startswith("std::") or \
                argument.startswith("absl::"):
            continue  # a declaration or definition of the registry itself, not a call
        else:
            found.append((None, TYPES[m.group(1)], "%s:%d: name %r is not a string literal" %
                          (where, line, argument)))
    return found


def registered():
    """{name: {type: [where]}} over the sources, and the list of unreadable registrations."""
    metrics, unreadable = {}, []
    for path in source_files():
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for name, kind, where in registrations(text, os.path.relpath(path, REPO)):
            if name is None:
                unreadable.append(where)
            else:
                metrics.setdefault(name, {}).setdefault(kind, []).append(where)
    return metrics, unreadable


def documented(text):
    """{name: {type: [line]}} of the metric rows of the page."""
    metrics = {}
    for number, line in enumerate(text.split("\n"), 1):
        m = ROW.match(line)
        if m and (m.group(1).startswith("hptrain_") or m.group(2) in PAGE_TYPES):
            metrics.setdefault(m.group(1), {}).setdefault(m.group(2), []).append(number)
    return metrics


def problems(code, page):
    """Differences between {name: {type: ...}} registered in `code` and documented in `page`."""
    out = []
    for name in sorted(code):
        kinds = sorted(code[name])
        if len(kinds) > 1:
            out.append("%s is registered as %s" % (name, " and as ".join(
                "%s (%s)" % (k, ", ".join(code[name][k])) for k in kinds)))
        if name not in page:
            out.append("%s (%s, %s) is not documented in %s" %
                       (name, kinds[0], code[name][kinds[0]][0], PAGE))
            continue
        for kind in sorted(page[name]):
            if kind not in code[name]:
                out.append("%s is documented as %r (%s line %s) but registered as %s" %
                           (name, kind, PAGE, page[name][kind][0], " and ".join(kinds)))
    for name in sorted(set(page) - set(code)):
        lines = sorted(l for ls in page[name].values() for l in ls)
        out.append("%s is documented (%s line %d) but registered nowhere in %s" %
                   (name, PAGE, lines[0], ", ".join(d + "/" for d in SOURCE_DIRS)))
    return out


class MetricsDocTest(unittest.TestCase):
    def test_the_page_documents_exactly_the_registered_metrics(self):
        code, unreadable = registered()
        self.assertEqual(unreadable, [], "registrations this test cannot read")
        with open(os.path.join(REPO, PAGE), encoding="utf-8") as f:
            page = documented(f.read())
        found = problems(code, page)
        self.assertEqual(found, [], "\n  " + "\n  ".join(found))

    def test_the_sources_register_the_metrics_readers_depend_on(self):
        # The ones the controller's rebalancer and the dashboards read: if the extraction
        # stopped finding them, the comparison above would prove nothing.
        code, _ = registered()
        for name, kind in (("hptrain_compute_seconds", "histogram"),
                           ("hptrain_batch_size", "gauge"),
                           ("hptrain_comm_bytes_total", "counter"),
                           ("hptrain_ps_push_bytes_total", "counter"),
                           ("hptrain_mp2_inference_seconds", "histogram"),
                           ("hptrain_controller_queue_depth", "gauge")):
            self.assertIn(kind, code.get(name, {}), name)

    def test_extraction(self):
        source = '''
            // registry.Counter("hptrain_in_comment_total", "x");
            /* r.Gauge("hptrain_in_block", "x") */
            auto* a = r.Gauge("hptrain_a", "Help with \\"quotes\\" and // no comment.")->Get();
            auto* b = registry->Histogram(
                "hptrain_b_seconds",
                "Split over lines.")->Get();
            Counter* Counter(const std::string& name, const std::string& help);
            auto* c = r.Counter(kName, "x");
            const char* s = "r.Gauge(\\"hptrain_in_string\\", \\"x\\")";
        '''
        found = registrations(source, "x.cc")
        self.assertEqual([(n, k) for n, k, _ in found],
                         [("hptrain_a", "gauge"), ("hptrain_b_seconds", "histogram"),
                          (None, "counter")])
        self.assertIn("x.cc:5", found[1][2])  # the line of the call

    def test_comparison(self):
        page = documented("| metric | type | labels | meaning |\n|---|---|---|---|\n"
                          "| `hptrain_a` | gauge | | a |\n| `hptrain_b_total` | gauge | | b |\n"
                          "| `hptrain_gone` | counter | | c |\n")
        code = {"hptrain_a": {"gauge": ["x.cc:1"]}, "hptrain_b_total": {"counter": ["x.cc:2"]},
                "hptrain_new": {"histogram": ["x.cc:3"]}}
        found = problems(code, page)
        self.assertEqual(len(found), 3, found)
        self.assertIn("hptrain_b_total is documented as 'gauge'", found[0])
        self.assertIn("hptrain_new (histogram, x.cc:3) is not documented", found[1])
        self.assertIn("hptrain_gone is documented", found[2])


if __name__ == "__main__":
    unittest.main()
