"""Offline stand-in for what the Kubernetes API server does with a CRD's openAPIV3Schema.

The deploy tests have no cluster, so this module reproduces, for the subset of OpenAPI v3 that
deploy/crd uses, the steps a create request goes through:

  1. YAML is read the way kubectl reads it (load_yaml_documents): `5e-4` is a float, as in
     go-yaml, where PyYAML alone would return the string "5e-4".
  2. Null values of fields that are not `nullable` are dropped (prune_nulls), as the API server
     does before defaulting and validation.
  3. The schema is converted to JSON Schema draft 7 (to_json_schema): OpenAPI 3.0's boolean
     exclusiveMinimum/exclusiveMaximum become numbers, `nullable` adds "null" to the type,
     x-kubernetes-int-or-string becomes integer-or-string, and an object with `properties` and
     without x-kubernetes-preserve-unknown-fields rejects unknown keys (kubectl's default
     --validate=strict turns the API server's pruning of unknown fields into an error).
  4. x-kubernetes-validations (CEL) rules are evaluated by hand-written Python twins, one per
     rule text (CEL_TWINS); a rule without a twin is an error, so a new rule cannot slip in
     untested. x-kubernetes-list-type: map keys must be unique.

structural_problems() checks the rules that make a schema "structural" (the API server refuses
a CRD that is not).

Everything here is pure Python (Debian's python3-yaml and python3-jsonschema); no function
touches the network. Errors are returned as lists of one-line strings "<path>: <reason>".
"""

import copy
import re

import yaml

try:
    import jsonschema
except ImportError:  # the callers print a reason and skip
    jsonschema = None


# --- 1. YAML as kubectl reads it ------------------------------------------------------------


class KubeYamlLoader(yaml.SafeLoader):
    """SafeLoader whose floats follow go-yaml: `1e-4` and `5E3` are floats, not strings."""


KubeYamlLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
            |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
            |\.[0-9_]+(?:[eE][-+][0-9]+)?
            |[-+]?\.(?:inf|Inf|INF)
            |\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)


def load_yaml_documents(text):
    """All documents of `text`, empty ones dropped."""
    return [d for d in yaml.load_all(text, Loader=KubeYamlLoader) if d is not None]


def load_yaml_file(path):
    with open(path, encoding="utf-8") as f:
        return load_yaml_documents(f.read())


def crd_schema(crd):
    """The openAPIV3Schema of the CRD's only version."""
    (version,) = crd["spec"]["versions"]
    return version["schema"]["openAPIV3Schema"]


# --- 2. null pruning -------------------------------------------------------------------------


def prune_nulls(value, node):
    """A copy of `value` without the nulls the API server drops (fields not `nullable`)."""
    value = copy.deepcopy(value)
    _prune(value, node)
    return value


def _prune(value, node):
    if not isinstance(node, dict):
        return
    if isinstance(value, dict):
        properties = node.get("properties", {})
        extra = node.get("additionalProperties")
        for key in list(value):
            sub = properties.get(key, extra if isinstance(extra, dict) else None)
            if sub is None:
                continue
            if value[key] is None and not sub.get("nullable", False):
                del value[key]
            else:
                _prune(value[key], sub)
    elif isinstance(value, list) and isinstance(node.get("items"), dict):
        for item in value:
            _prune(item, node["items"])


# --- 3. OpenAPI v3 (Kubernetes flavour) -> JSON Schema draft 7 --------------------------------

# Keywords with the same meaning in both dialects.
_COPIED = {
    "type", "enum", "minimum", "maximum", "minLength", "maxLength", "pattern", "minItems",
    "maxItems", "uniqueItems", "required", "multipleOf", "minProperties", "maxProperties",
}
# Keywords that carry no validation here (documentation, or handled by the other steps).
_IGNORED = {
    "description", "format", "default", "example", "externalDocs", "title", "nullable",
    "exclusiveMinimum", "exclusiveMaximum", "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-int-or-string", "x-kubernetes-validations", "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys", "x-kubernetes-map-type", "x-kubernetes-embedded-resource",
}


def to_json_schema(node, _path="", _root=True):
    """Draft-7 JSON Schema for the Kubernetes schema `node` (see the module comment)."""
    out = {}
    for key, sub in node.items():
        if key == "properties":
            out[key] = {
                name: to_json_schema(s, f"{_path}.{name}".lstrip("."), False)
                for name, s in sub.items()
            }
        elif key in ("items", "not"):
            out[key] = to_json_schema(sub, _path + "[]", False)
        elif key == "additionalProperties":
            out[key] = sub if isinstance(sub, bool) else to_json_schema(sub, _path + ".*", False)
        elif key in ("anyOf", "allOf", "oneOf"):
            out[key] = [to_json_schema(s, _path, False) for s in sub]
        elif key in _COPIED:
            out[key] = sub
        elif key not in _IGNORED:
            raise ValueError(f"{_path or '<root>'}: keyword {key!r} is not handled offline")
    for bound, flag in (("minimum", "exclusiveMinimum"), ("maximum", "exclusiveMaximum")):
        if node.get(flag) is True:
            out[flag] = out.pop(bound)
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out.setdefault("anyOf", [{"type": "integer"}, {"type": "string"}])
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    if node.get("x-kubernetes-list-type") == "set":
        out["uniqueItems"] = True
    is_object = out.get("type") == "object" or out.get("type") == ["object", "null"]
    if is_object and "additionalProperties" not in out:
        preserve = node.get("x-kubernetes-preserve-unknown-fields", False)
        # ObjectMeta is validated by the API server itself, not by the CRD's schema.
        root_metadata = _path == "metadata"
        if not preserve and not root_metadata:
            out["additionalProperties"] = False
    return out


# --- 4. CEL rules, by their Python twins -----------------------------------------------------


def _strategy_type(s):
    return s.get("type")  # absent = ssgd, which takes no parameter


def _applies(param, types, zero=None):
    """Twin of `!has(self.P) || [self.P == 0 ||] (has(self.type) && self.type in [...])`."""

    def twin(s):
        if param not in s:
            return True
        if zero is not None and s[param] == zero:
            return True
        return _strategy_type(s) in types

    return twin


def _dataset_format(d):
    name = d["name"]
    if name in ("fashion-mnist", "mnist"):
        return "idx"
    if name in ("cifar10", "cifar100"):
        return "cifar-binary"
    return "synthetic"


# spec.dataset.format of your own data, and those of them that decode images.
_USER_FORMATS = ("npy", "imagefolder", "filelist", "webdataset")
_DECODED_FORMATS = ("imagefolder", "filelist", "webdataset")


def _user_format(d):
    return d.get("format") in _USER_FORMATS


def _ps_shards_fit_strategy(spec):
    shards = spec.get("ps", {}).get("shards", 1)
    return shards <= 1 or spec.get("strategy", {}).get("type") in ("ps", "hps", "mp2")


def _priority_fits_strategy(spec):
    if spec.get("scheduler", {}).get("type") != "priority":
        return True
    return spec.get("strategy", {}).get("type", "ssgd") in ("ssgd", "multistep")


def _priority_fits_multistep(spec):
    strategy = spec.get("strategy", {})
    if spec.get("scheduler", {}).get("type") != "priority" or strategy.get("type") != "multistep":
        return True
    compression = strategy.get("compression", {}).get("type", "none")
    return strategy.get("delay", 0) == 0 and compression == "none"


def _bits_string(value):
    # CEL's string() of an int is its decimal form; booleans never reach here (not int-or-string).
    return str(value)


def _replicas(spec):
    """The one worker group's replicas as the spec.elastic rules read them (default 1)."""
    if "workers" in spec:
        return spec["workers"].get("replicas", 1)
    groups = spec.get("workerGroups", [])
    return groups[0].get("replicas", 1) if groups else 1


_REPLICAS_CEL = ("(has(self.workers) ? (has(self.workers.replicas) ? self.workers.replicas : 1) : "
                 "(has(self.workerGroups) && size(self.workerGroups) > 0 && "
                 "has(self.workerGroups[0].replicas)) ? self.workerGroups[0].replicas : 1)")


# Rule text (exactly as in the CRD) -> a function of `self` returning whether the rule holds.
CEL_TWINS = {
    "!has(self.elastic) || !has(self.workerGroups) || size(self.workerGroups) == 1":
        lambda s: "elastic" not in s or "workerGroups" not in s or len(s["workerGroups"]) == 1,
    "!has(self.elastic) || !has(self.trainer)":
        lambda s: "elastic" not in s or "trainer" not in s,
    "!has(self.elastic) || !has(self.gangScheduling) || !has(self.gangScheduling.enabled) || "
    "!self.gangScheduling.enabled":
        lambda s: "elastic" not in s or not s.get("gangScheduling", {}).get("enabled", False),
    "!has(self.elastic) || !has(self.workerGroups) || "
    "self.workerGroups.all(g, !has(g.batchSize) || g.batchSize == 0)":
        lambda s: "elastic" not in s
        or all(g.get("batchSize", 0) == 0 for g in s.get("workerGroups", [])),
    "!has(self.elastic) || !has(self.elastic.minReplicas) || self.elastic.minReplicas <= "
    + _REPLICAS_CEL:
        lambda s: "minReplicas" not in s.get("elastic", {})
        or s["elastic"]["minReplicas"] <= _replicas(s),
    "!has(self.elastic) || !has(self.elastic.maxReplicas) || self.elastic.maxReplicas >= "
    + _REPLICAS_CEL:
        lambda s: "maxReplicas" not in s.get("elastic", {})
        or s["elastic"]["maxReplicas"] >= _replicas(s),
    "!has(self.minReplicas) || !has(self.maxReplicas) || self.minReplicas <= self.maxReplicas":
        lambda s: "minReplicas" not in s or "maxReplicas" not in s
        or s["minReplicas"] <= s["maxReplicas"],
    "!(has(self.workers) && has(self.workerGroups))":
        lambda s: not ("workers" in s and "workerGroups" in s),
    "has(self.workers) || has(self.workerGroups)":
        lambda s: "workers" in s or "workerGroups" in s,
    "has(self.model) || has(self.trainer)":
        lambda s: "model" in s or "trainer" in s,
    "has(self.dataset) || has(self.trainer)":
        lambda s: "dataset" in s or "trainer" in s,
    "!(has(self.trainer) && has(self.model))":
        lambda s: not ("trainer" in s and "model" in s),
    "!has(self.ps) || !has(self.ps.shards) || self.ps.shards <= 1 || (has(self.strategy) && "
    "has(self.strategy.type) && self.strategy.type in ['ps', 'hps', 'mp2'])":
        _ps_shards_fit_strategy,
    "!has(self.scheduler) || !has(self.scheduler.type) || self.scheduler.type != 'priority' || "
    "!has(self.strategy) || !has(self.strategy.type) || self.strategy.type in ['ssgd', 'multistep']":
        _priority_fits_strategy,
    "!has(self.scheduler) || !has(self.scheduler.type) || self.scheduler.type != 'priority' || "
    "!has(self.strategy) || !has(self.strategy.type) || self.strategy.type != 'multistep' || "
    "((!has(self.strategy.delay) || self.strategy.delay == 0) && (!has(self.strategy.compression) "
    "|| !has(self.strategy.compression.type) || self.strategy.compression.type == 'none'))":
        _priority_fits_multistep,
    "!has(self.partitionElements) || (has(self.type) && self.type == 'priority')":
        lambda s: "partitionElements" not in s or s.get("type") == "priority",
    "!has(self.creditElements) || (has(self.type) && self.type == 'priority')":
        lambda s: "creditElements" not in s or s.get("type") == "priority",
    "(has(self.creditElements) ? self.creditElements : 16777216) >= "
    "(has(self.partitionElements) ? self.partitionElements : 8388608)":
        lambda s: s.get("creditElements", 16777216) >= s.get("partitionElements", 8388608),
    "has(self.name) != has(self.torchscript)":
        lambda s: ("name" in s) != ("torchscript" in s),
    "!has(self.hidden) || size(self.hidden) == 0 || (has(self.name) && self.name == 'mlp')":
        lambda s: "hidden" not in s or len(s["hidden"]) == 0 or s.get("name") == "mlp",
    "!has(self.synthetic) || self.name == 'synthetic'":
        lambda s: "synthetic" not in s or s["name"] == "synthetic",
    "(has(self.format) && self.format in ['npy', 'imagefolder', 'filelist', 'webdataset']) || "
    "self.name in ['fashion-mnist', 'mnist', 'cifar10', 'cifar100', 'synthetic']":
        lambda s: _user_format(s)
        or s["name"] in ("fashion-mnist", "mnist", "cifar10", "cifar100", "synthetic"),
    "!has(self.format) || self.format in ['npy', 'imagefolder', 'filelist', 'webdataset'] || "
    "self.format == (self.name in ['fashion-mnist', 'mnist'] ? 'idx' : "
    "self.name in ['cifar10', 'cifar100'] ? 'cifar-binary' : 'synthetic')":
        lambda s: "format" not in s or _user_format(s) or s["format"] == _dataset_format(s),
    "!(self.name in ['cifar10', 'cifar100'] || (has(self.format) && self.format in "
    "['npy', 'imagefolder', 'filelist', 'webdataset'])) || (has(self.path) && size(self.path) > 0)":
        lambda s: not (s["name"] in ("cifar10", "cifar100") or _user_format(s))
        or len(s.get("path", "")) > 0,
    "has(self.mean) == has(self.std)":
        lambda s: ("mean" in s) == ("std" in s),
    "!has(self.augment) || !has(self.augment.randomCrop) || !has(self.augment.randomResizedCrop)":
        lambda s: not ("randomCrop" in s.get("augment", {})
                       and "randomResizedCrop" in s.get("augment", {})),
    "!has(self.layout) || (has(self.format) && self.format == 'npy')":
        lambda s: "layout" not in s or s.get("format") == "npy",
    "!has(self.imageSize) || (has(self.format) && self.format in "
    "['imagefolder', 'filelist', 'webdataset'])":
        lambda s: "imageSize" not in s or s.get("format") in _DECODED_FORMATS,
    "!has(self.channels) || (has(self.format) && self.format in "
    "['imagefolder', 'filelist', 'webdataset'])":
        lambda s: "channels" not in s or s.get("format") in _DECODED_FORMATS,
    "!has(self.classes) || self.classes == 0 || (has(self.format) && self.format in "
    "['npy', 'imagefolder', 'filelist', 'webdataset'])":
        lambda s: s.get("classes", 0) == 0 or _user_format(s),
    "!has(self.skipCorrupt) || !self.skipCorrupt || (has(self.format) && self.format in "
    "['npy', 'imagefolder', 'filelist', 'webdataset'])":
        lambda s: not s.get("skipCorrupt", False) or _user_format(s),
    "!has(self.mean) || !has(self.normalize) || self.normalize":
        lambda s: "mean" not in s or s.get("normalize", True),
    "!has(self.mean) || !has(self.std) || size(self.mean) == size(self.std)":
        lambda s: "mean" not in s or "std" not in s or len(s["mean"]) == len(s["std"]),
    "size(self) != 2 || (self[0] > 0.0 && self[0] <= self[1] && self[1] <= 1.0)":
        lambda s: len(s) != 2 or 0 < s[0] <= s[1] <= 1,
    "size(self) != 2 || (self[0] > 0.0 && self[0] <= self[1])":
        lambda s: len(s) != 2 or 0 < s[0] <= s[1],
    "!has(self.task) || self.task != 'torchscript' || has(self.trainer) || "
    "(has(self.model) && has(self.model.torchscript))":
        lambda s: s.get("task") != "torchscript" or "trainer" in s
        or "torchscript" in s.get("model", {}),
    "!has(self.precision) || self.precision != 'fp16' || !has(self.device) || "
    "self.device != 'cpu'":
        lambda s: s.get("precision") != "fp16" or s.get("device") != "cpu",
        "!has(self.bits) || (has(self.type) && self.type == 'quantized')":
        lambda s: "bits" not in s or s.get("type") == "quantized",
    "!has(self.interval) || type(self.interval) != int || self.interval >= 1 || "
    "(self.interval == -1 && has(self.type) && self.type == 'hierarchical')":
        lambda s: "interval" not in s or not isinstance(s["interval"], int) or s["interval"] >= 1
        or (s["interval"] == -1 and s.get("type") == "hierarchical"),
    "!has(self.hMin) || !has(self.hMax) || self.hMin <= self.hMax":
        lambda s: "hMin" not in s or "hMax" not in s or s["hMin"] <= s["hMax"],
    "!has(self.update) || self.update != 'average' || !has(self.delay) || self.delay == 0":
        lambda s: s.get("update") != "average" or s.get("delay", 0) == 0,
    "type(self) == int ? self != 0 : self == 'adaptive'":
        lambda s: s != 0 if isinstance(s, int) else s == "adaptive",
    "!has(self.type) || self.type != 'mp2' || (has(self.predictor) && size(self.predictor) > 0)":
        lambda s: s.get("type") != "mp2" or len(s.get("predictor", "")) > 0,
    "!has(self.type) || self.type != 'hps' || !has(self.bits) || "
    "string(self.bits) in ['2', '4', '8', '16', '32', 'dynamic']":
        lambda s: s.get("type") != "hps" or "bits" not in s
        or _bits_string(s["bits"]) in ("2", "4", "8", "16", "32", "dynamic"),
    "string(self) in ['1', '2', '4', '8', '16', '32', 'dynamic']":
        lambda s: _bits_string(s) in ("1", "2", "4", "8", "16", "32", "dynamic"),
    "!has(self.type) || self.type != 'step' || (has(self.stepSize) && self.stepSize >= 1)":
        lambda s: s.get("type") != "step" or s.get("stepSize", 0) >= 1,
    "self.all(g, has(g.batchSize) && g.batchSize > 0) || "
    "self.all(g, !has(g.batchSize) || g.batchSize == 0)":
        lambda s: all(g.get("batchSize", 0) > 0 for g in s)
        or all(g.get("batchSize", 0) == 0 for g in s),
    "!has(self.maxBatch) || self.maxBatch == 0 || "
    "self.maxBatch >= (has(self.minBatch) ? self.minBatch : 1)":
        lambda s: s.get("maxBatch", 0) == 0 or s["maxBatch"] >= s.get("minBatch", 1),
    "!has(self.intervalSteps) || self.intervalSteps == 0 || (has(self.path) && size(self.path) > 0)":
        lambda s: s.get("intervalSteps", 0) == 0 or len(s.get("path", "")) > 0,
    "!has(self.queue) || !has(self.provider) || self.provider == 'volcano'":
        lambda s: "queue" not in s or "provider" not in s or s["provider"] == "volcano",
}


def cel_rules(node, path="", with_field_path=False):
    """(path, rule, message) for every x-kubernetes-validations rule under `node`; with
    `with_field_path`, (path, rule, message, fieldPath) ("" when the rule names none)."""
    found = [(path, r["rule"], r.get("message", "")) +
             ((r.get("fieldPath", ""),) if with_field_path else ())
             for r in node.get("x-kubernetes-validations", [])]
    for name, sub in node.get("properties", {}).items():
        found += cel_rules(sub, f"{path}.{name}".lstrip("."), with_field_path)
    for key, suffix in (("items", "[]"), ("additionalProperties", ".*")):
        if isinstance(node.get(key), dict):
            found += cel_rules(node[key], path + suffix, with_field_path)
    return found


# The rules `hptrain crd` generates from the strategy descriptors for every parameter
# (runtime/cli/strategy_docs.cc): where a parameter applies, and which strategies take its words.
_APPLIES = re.compile(r"^!has\(self\.(\w+)\) \|\| \(has\(self\.type\) && "
                      r"self\.type (?:== '(\w+)'|in \[([^\]]*)\])\)$")
_WORDS_FOR = re.compile(r"^!has\(self\.(\w+)\) \|\| type\(self\.\1\) == int \|\| "
                        r"\(has\(self\.type\) && self\.type (?:== '(\w+)'|in \[([^\]]*)\])\)$")


def generated_twin(rule):
    """The twin of a generated strategy rule, or None for any other rule."""
    for pattern, word_rule in ((_APPLIES, False), (_WORDS_FOR, True)):
        m = pattern.match(rule)
        if not m:
            continue
        param = m.group(1)
        types = [m.group(2)] if m.group(2) else re.findall(r"'(\w+)'", m.group(3))
        if word_rule:
            return lambda s: param not in s or isinstance(s[param], int) or _strategy_type(s) in types
        return _applies(param, types)
    return None


def twin_of(rule):
    """The Python twin of a rule: hand-written (CEL_TWINS) or generated_twin's; None if none."""
    return CEL_TWINS.get(rule) or generated_twin(rule)


def _rule_errors(value, node, path):
    errors = []
    for rule in node.get("x-kubernetes-validations", []):
        twin = twin_of(rule["rule"])
        if twin is None:
            errors.append(f"{path}: rule {rule['rule']!r} has no Python twin in k8s_schema.py")
            continue
        try:
            holds = twin(value)
        except (KeyError, TypeError, AttributeError) as e:  # CEL would report an eval error
            errors.append(f"{path}: rule {rule['rule']!r} cannot be evaluated ({e!r})")
            continue
        if not holds:
            # As the API server reports it: at the rule's fieldPath when it names one.
            where = path + rule["fieldPath"] if rule.get("fieldPath") else path
            errors.append(f"{where}: {rule.get('message') or rule['rule']}")
    if node.get("x-kubernetes-list-type") == "map" and isinstance(value, list):
        keys = node.get("x-kubernetes-list-map-keys", [])
        seen = set()
        for i, item in enumerate(value):
            if not isinstance(item, dict):
                continue
            key = tuple(item.get(k) for k in keys)
            if key in seen:
                errors.append(f"{path}[{i}]: Duplicate value: {dict(zip(keys, key))}")
            seen.add(key)
    if isinstance(value, dict):
        properties = node.get("properties", {})
        extra = node.get("additionalProperties")
        for key, sub_value in value.items():
            sub = properties.get(key, extra if isinstance(extra, dict) else None)
            if sub is not None:
                errors += _rule_errors(sub_value, sub, f"{path}.{key}".lstrip("."))
    elif isinstance(value, list) and isinstance(node.get("items"), dict):
        for i, item in enumerate(value):
            errors += _rule_errors(item, node["items"], f"{path}[{i}]")
    return errors


# --- the whole pipeline ----------------------------------------------------------------------


def _json_path(error):
    parts = []
    for p in error.absolute_path:
        if isinstance(p, int):
            parts.append(f"[{p}]")
        else:
            parts.append(f".{p}" if parts else str(p))
    return "".join(parts) or "<root>"


def validate(obj, schema):
    """Errors the API server would answer a create of `obj` with (empty = accepted).

    Schema errors come first; CEL rules and list-map keys are checked only on an object that
    passes the schema, as a rule's twin may assume the types the schema guarantees.
    """
    obj = prune_nulls(obj, schema)
    validator = jsonschema.Draft7Validator(to_json_schema(schema))
    errors = sorted(f"{_json_path(e)}: {e.message}" for e in validator.iter_errors(obj))
    if errors:
        return errors
    return _rule_errors(obj, schema, "")


# --- structural schema rules -----------------------------------------------------------------

_JUNCTORS = ("allOf", "anyOf", "oneOf", "not")
_INT_OR_STRING = [{"type": "integer"}, {"type": "string"}]


def structural_problems(node, path="<root>", in_junctor=False):
    """Ways `node` breaks the API server's structural-schema rules (empty = structural).

    Checked: every node outside a junctor has a type, unless it is x-kubernetes-int-or-string
    or x-kubernetes-preserve-unknown-fields; every object says what it holds (properties,
    additionalProperties or preserve-unknown-fields) and not both properties and
    additionalProperties; junctors set no type, description, default, additionalProperties or
    nullable except the int-or-string pattern; exclusive bounds come with their bound; list-map
    keys are required fields of the items; every property has a description.
    """
    problems = []
    preserve = node.get("x-kubernetes-preserve-unknown-fields", False)
    int_or_string = node.get("x-kubernetes-int-or-string", False)
    if in_junctor:
        for key in ("type", "description", "default", "additionalProperties", "nullable"):
            if key in node and not (key == "type" and {"type": node["type"]} in _INT_OR_STRING):
                problems.append(f"{path}: {key} inside a junctor")
    elif "type" not in node and not (preserve or int_or_string):
        problems.append(f"{path}: no type")
    if int_or_string:
        if "type" in node:
            problems.append(f"{path}: x-kubernetes-int-or-string with a type")
        if node.get("anyOf", _INT_OR_STRING) != _INT_OR_STRING:
            problems.append(f"{path}: int-or-string anyOf must be [integer, string]")
    if node.get("type") == "object":
        if not (node.get("properties") or "additionalProperties" in node or preserve):
            problems.append(f"{path}: object without properties or preserve-unknown-fields")
        if "properties" in node and "additionalProperties" in node:
            problems.append(f"{path}: both properties and additionalProperties")
    for bound, flag in (("minimum", "exclusiveMinimum"), ("maximum", "exclusiveMaximum")):
        if flag in node and (node[flag] is not True and node[flag] is not False):
            problems.append(f"{path}: {flag} must be a boolean (OpenAPI v3.0)")
        if node.get(flag) is True and bound not in node:
            problems.append(f"{path}: {flag} without {bound}")
    if node.get("x-kubernetes-list-type") == "map":
        items = node.get("items", {})
        for key in node.get("x-kubernetes-list-map-keys", []):
            if key not in items.get("required", []):
                problems.append(f"{path}: list-map key {key!r} is not required in the items")
    for name, sub in node.get("properties", {}).items():
        sub_path = f"{path}.{name}" if path != "<root>" else name
        if not sub.get("description") and sub_path != "metadata":
            problems.append(f"{sub_path}: no description")
        problems += structural_problems(sub, sub_path, False)
    if isinstance(node.get("items"), dict):
        problems += structural_problems(node["items"], path + "[]", False)
    if isinstance(node.get("additionalProperties"), dict):
        problems += structural_problems(node["additionalProperties"], path + ".*", False)
    for junctor in _JUNCTORS:
        subs = node.get(junctor, [])
        for sub in subs if isinstance(subs, list) else [subs]:
            problems += structural_problems(sub, f"{path}({junctor})", True)
    return problems


def schema_at(schema, dotted):
    """The sub-schema at a dotted path; `[]` steps into array items ("spec.workerGroups[]")."""
    node = schema
    for part in filter(None, re.split(r"\.|(?=\[\])", dotted)):
        node = node["items"] if part == "[]" else node["properties"][part]
    return node
