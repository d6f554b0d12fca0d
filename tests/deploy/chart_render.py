"""A small renderer for the Go templates of charts/hptrain, for tests that have no helm binary.

It implements the part of Go's text/template and Helm's functions that the chart's templates use:
actions with whitespace trimming (`{{-`, `-}}`), comments, `if`/`else`/`else if`, `range` (with
`$v :=` or `$i, $v :=`), `with`, `define`/`include`, variables (`:=`, `=`, `$`), pipelines,
parenthesised sub-expressions, and the functions listed in FUNCTIONS, with Go's truthiness.
`lookup` returns an empty map, as `helm template` and a first `helm install` see it; genCA and
genSignedCert return fixed placeholder PEM text (no cryptography). What it does not implement
raises ValueError, so a template that outgrows it fails the tests instead of rendering wrongly.
It is no substitute for `helm template`: Sprig's other functions, `tpl`, `.Capabilities` and
`.Files` are not there.
"""

import base64
import glob
import os
import re

import yaml

ACTION = re.compile(r"\{\{(-\s)?(.*?)(\s-)?\}\}", re.S)


def _tokens(text):
    """[("text", s) | ("action", s)], with the trim markers applied to the text around."""
    out = []
    pos = 0
    for match in ACTION.finditer(text):
        chunk = text[pos:match.start()]
        if match.group(1):
            chunk = chunk.rstrip(" \t\r\n")
        out.append(["text", chunk])
        out.append(["action", match.group(2).strip(), bool(match.group(3))])
        pos = match.end()
    out.append(["text", text[pos:]])
    tokens = []
    trim_next = False
    for token in out:
        if token[0] == "text":
            tokens.append(("text", token[1].lstrip(" \t\r\n") if trim_next else token[1]))
            trim_next = False
        else:
            tokens.append(("action", token[1]))
            trim_next = token[2]
    return tokens


def _parse(tokens, i=0, stop=("end",)):
    """Nodes up to one of `stop` (returned with the stopping action and the next index)."""
    nodes = []
    while i < len(tokens):
        kind, value = tokens[i]
        i += 1
        if kind == "text":
            nodes.append(("text", value))
            continue
        if value.startswith("/*"):
            continue
        word = value.split(None, 1)[0] if value else ""
        if word in stop or (word == "else" and "else" in stop):
            return nodes, value, i
        if word in ("if", "with", "range"):
            expr = value[len(word):].strip()
            body, ending, i = _parse(tokens, i, ("end", "else"))
            branches = [(word, expr, body)]
            while ending.startswith("else"):
                rest = ending[4:].strip()
                body, ending, i = _parse(tokens, i, ("end", "else"))
                if rest.startswith("if "):
                    branches.append(("if", rest[3:].strip(), body))
                elif rest:
                    raise ValueError(f"unsupported: else {rest}")
                else:
                    branches.append(("else", "", body))
            nodes.append(("block", branches))
        elif word == "define":
            name = _string(value[len("define"):].strip())
            body, _, i = _parse(tokens, i, ("end",))
            nodes.append(("define", name, body))
        elif word in ("block", "template", "tpl"):
            raise ValueError(f"unsupported action: {value}")
        else:
            nodes.append(("action", value))
    if stop != ():
        raise ValueError(f"missing {{{{ end }}}} (wanted one of {stop})")
    return nodes, None, i


def _string(token):
    if not (token.startswith('"') and token.endswith('"')):
        raise ValueError(f"not a string literal: {token}")
    return bytes(token[1:-1], "utf-8").decode("unicode_escape")


def truthy(value):
    return not (value is None or value is False or value == 0 or value == "" or
                (isinstance(value, (list, dict, tuple)) and not value))


def _split_args(text):
    """Words of a command: strings, parenthesised sub-expressions and plain words."""
    words = []
    i = 0
    while i < len(text):
        char = text[i]
        if char.isspace():
            i += 1
        elif char == '"':
            j = i + 1
            while text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            words.append(text[i:j + 1])
            i = j + 1
        elif char == "(":
            depth, j = 0, i
            while True:
                depth += {"(": 1, ")": -1}.get(text[j], 0)
                if depth == 0:
                    break
                j += 1
            words.append(text[i:j + 1])
            i = j + 1
        else:
            j = i
            while j < len(text) and not text[j].isspace():
                j += 1
            words.append(text[i:j])
            i = j
    return words


def _split_pipeline(text):
    parts, depth, quoted, start = [], 0, False, 0
    for i, char in enumerate(text):
        if char == '"' and (i == 0 or text[i - 1] != "\\"):
            quoted = not quoted
        elif not quoted and char in "()":
            depth += 1 if char == "(" else -1
        elif not quoted and depth == 0 and char == "|":
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return parts


def _to_yaml(value):
    if isinstance(value, (dict, list)) and not value:
        return "{}" if isinstance(value, dict) else "[]"
    return yaml.safe_dump(value, default_flow_style=False, sort_keys=True).rstrip("\n")


def _go_printf(fmt, *args):
    return re.sub(r"%[sdv]", "{}", fmt).format(*args)


def _default(fallback, value=None):
    return value if truthy(value) else fallback


def _index(value, *keys):
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else value[key]
    return value


class RenderFailed(Exception):
    """Helm's `fail`: the install is refused with the message."""


def _fail(message):
    raise RenderFailed(message)


def _indent(n, text):
    return "\n".join(" " * n + line for line in str(text).split("\n"))


FUNCTIONS = {
    "printf": _go_printf,
    "default": _default,
    "trunc": lambda n, s: str(s)[:n],
    "trimSuffix": lambda suffix, s: s[:-len(suffix)] if suffix and s.endswith(suffix) else s,
    "replace": lambda old, new, s: str(s).replace(old, new),
    "contains": lambda sub, s: sub in str(s),
    "quote": lambda *s: " ".join('"' + str(x) + '"' for x in s),
    "toYaml": _to_yaml,
    "nindent": lambda n, s: "\n" + _indent(n, s),
    "indent": _indent,
    "not": lambda v: not truthy(v),
    "eq": lambda a, *b: any(a == x for x in b),
    "ne": lambda a, b: a != b,
    "empty": lambda v: not truthy(v),
    "join": lambda sep, items: sep.join(str(x) for x in items),
    "index": _index,
    "int": int,
    "b64enc": lambda s: base64.b64encode(str(s).encode()).decode(),
    "list": lambda *a: list(a),
    "required": lambda message, v: v if truthy(v) else (_ for _ in ()).throw(
        ValueError(message)),
    "lookup": lambda *a: {},
    "fail": _fail,
    "genCA": lambda cn, days: {"Cert": f"-----CA {cn}-----", "Key": "-----CA KEY-----"},
    "genSignedCert": lambda cn, ip, alt, days, ca: {"Cert": f"-----CERT {cn}-----",
                                                     "Key": "-----KEY-----"},
}


class Chart:
    """The chart's templates, rendered against values (merged over values.yaml)."""

    def __init__(self, chart_dir):
        self.dir = chart_dir
        with open(os.path.join(chart_dir, "Chart.yaml"), encoding="utf-8") as f:
            chart = yaml.safe_load(f)
        with open(os.path.join(chart_dir, "values.yaml"), encoding="utf-8") as f:
            self.default_values = yaml.safe_load(f)
        self.chart = {"Name": chart["name"], "Version": chart["version"],
                      "AppVersion": chart.get("appVersion", "")}
        self.trees = {}
        self.defines = {}
        for path in sorted(glob.glob(os.path.join(chart_dir, "templates", "*"))):
            with open(path, encoding="utf-8") as f:
                nodes, _, _ = _parse(_tokens(f.read()), 0, ())
            self.trees[os.path.basename(path)] = nodes
            self._collect_defines(nodes)

    def _collect_defines(self, nodes):
        for node in nodes:
            if node[0] == "define":
                self.defines[node[1]] = node[2]
            elif node[0] == "block":
                for _, _, body in node[1]:
                    self._collect_defines(body)

    def render(self, name, values=None, release="hptrain", namespace="hptrain-system"):
        """The text of templates/<name> for `values` merged over values.yaml."""
        root = {"Values": _merge(self.default_values, values or {}),
                "Release": {"Name": release, "Namespace": namespace, "Service": "Helm"},
                "Chart": self.chart}
        return self._render(self.trees[name], root, [{"$": root}])

    def objects(self, name, values=None, **kwargs):
        """The Kubernetes objects of templates/<name> (empty documents dropped)."""
        text = self.render(name, values, **kwargs)
        return [d for d in yaml.safe_load_all(text) if d]

    # --- evaluation ------------------------------------------------------------------------

    def _render(self, nodes, dot, scopes):
        out = []
        for node in nodes:
            kind = node[0]
            if kind == "text":
                out.append(node[1])
            elif kind == "define":
                continue
            elif kind == "action":
                value = self._action(node[1], dot, scopes)
                if value is not None:
                    out.append(str(value) if not isinstance(value, bool) else str(value).lower())
            elif kind == "block":
                out.append(self._block(node[1], dot, scopes))
        return "".join(out)

    def _block(self, branches, dot, scopes):
        for word, expr, body in branches:
            if word == "else":
                return self._render(body, dot, scopes + [{}])
            if word == "if":
                if truthy(self._pipeline(expr, dot, scopes)):
                    return self._render(body, dot, scopes + [{}])
            elif word == "with":
                value = self._pipeline(expr, dot, scopes)
                if truthy(value):
                    return self._render(body, value, scopes + [{}])
            elif word == "range":
                names, _, source = expr.rpartition(":=")
                names = [n.strip() for n in names.split(",")] if names else []
                items = self._pipeline(source.strip(), dot, scopes)
                if not truthy(items):
                    continue
                pairs = items.items() if isinstance(items, dict) else enumerate(items)
                out = []
                for key, item in pairs:
                    scope = {}
                    if len(names) == 1:
                        scope[names[0]] = item
                    elif len(names) == 2:
                        scope[names[0]], scope[names[1]] = key, item
                    out.append(self._render(body, item, scopes + [scope]))
                return "".join(out)
        return ""

    def _action(self, text, dot, scopes):
        match = re.match(r"^(\$[A-Za-z_]\w*)\s*(:?=)\s*(.*)$", text, re.S)
        if match:
            name, op, expr = match.groups()
            value = self._pipeline(expr, dot, scopes)
            if op == ":=":
                scopes[-1][name] = value
            else:
                for scope in reversed(scopes):
                    if name in scope:
                        scope[name] = value
                        break
                else:
                    raise ValueError(f"assignment to undeclared {name}")
            return None
        return self._pipeline(text, dot, scopes)

    def _pipeline(self, text, dot, scopes):
        value = _NOTHING
        for command in _split_pipeline(text):
            words = _split_args(command)
            args = [] if value is _NOTHING else [value]
            value = self._command(words, dot, scopes, args)
        return value

    def _command(self, words, dot, scopes, piped):
        head = words[0]
        if head == "include":
            name = self._operand(words[1], dot, scopes)
            context = self._operand(words[2], dot, scopes) if len(words) > 2 else None
            return self._render(self.defines[name], context, [{"$": context}])
        if head in ("and", "or") and not piped:
            # Go evaluates and/or lazily: the first falsy (and) or truthy (or) argument ends it.
            value = None
            for word in words[1:]:
                value = self._operand(word, dot, scopes)
                if truthy(value) != (head == "and"):
                    return value
            return value
        if head in FUNCTIONS:
            args = [self._operand(w, dot, scopes) for w in words[1:]] + piped
            return FUNCTIONS[head](*args)
        if len(words) == 1 and not piped:
            return self._operand(head, dot, scopes)
        raise ValueError(f"unsupported command: {' '.join(words)}")

    def _operand(self, word, dot, scopes):
        if word.startswith('"'):
            return _string(word)
        if word.startswith("("):
            return self._pipeline(word[1:-1], dot, scopes)
        if re.fullmatch(r"-?\d+", word):
            return int(word)
        if word in ("true", "false"):
            return word == "true"
        if word == "nil":
            return None
        if word.startswith("$"):
            name, _, path = word.partition(".")
            for scope in reversed(scopes):
                if name in scope:
                    return _field(scope[name], path)
            raise ValueError(f"undefined variable {name}")
        if word.startswith("."):
            return _field(dot, word[1:])
        if word in FUNCTIONS:
            return FUNCTIONS[word]()
        raise ValueError(f"unsupported operand: {word}")


_NOTHING = object()


def _field(value, path):
    for key in [k for k in path.split(".") if k]:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _merge(base, override):
    if not isinstance(base, dict) or not isinstance(override, dict):
        return override
    merged = dict(base)
    for key, value in override.items():
        merged[key] = _merge(base.get(key), value) if key in base else value
    return merged
