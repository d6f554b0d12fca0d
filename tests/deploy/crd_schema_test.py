#!/usr/bin/env python3
"""The TrainingJob CRD (deploy/crd) against the runtime's parser, the contract and the examples.

Checks, offline (k8s_schema.py stands in for the API server):
  * the schema is structural, and every property is documented;
  * its spec keys are exactly the keys runtime/job/job_parser.cc reads, level by level, and its
    enums and per-strategy parameters are those of runtime/job/job_validate.cc and of the
    strategy descriptors (runtime/sync/strategy_descriptors.cc, read through
    `$HPTRAIN_BIN strategies --json`; the checks that need them skip without $HPTRAIN_BIN);
  * names, scale subresource, printer columns and status fields follow the shared contract;
  * every examples/*.yaml is accepted; every examples/invalid/*.yaml and the inline invalid
    cases below are rejected, each for the reason it names.

Exit status: 0 passed, 1 failed, 77 skipped (python3-jsonschema missing).
"""

import copy
import glob
import json
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
CRD_PATH = os.path.join(REPO, "deploy", "crd", "trainingjobs.hptrain.io.yaml")

# Spec keys the CRD declares ahead of the runtime parser (path -> keys). The parser does not read
# them yet; until it does, the controller must accept them. Remove an entry once job_parser.cc
# reads it (the test then checks it like any other key).
PENDING_PARSER_KEYS = {}

# Status fields of the shared contract (name -> JSON Schema type).
CONTRACT_STATUS = {
    "phase": "string", "conditions": "array", "observedGeneration": "integer",
    "replicas": "integer", "readyWorkers": "integer", "desiredWorkers": "integer",
    "selector": "string", "workers": "array", "step": "integer", "epoch": "integer",
    "samplesPerSecond": "number", "strategy": "string", "allocationGeneration": "integer",
    "lastRebalanceTime": "string", "restarts": "integer", "startTime": "string",
    "completionTime": "string", "podGroupPhase": "string", "resume": "object",
    "trainLoss": "number", "evaluation": "object", "membership": "object",
}
CONTRACT_WORKER_FIELDS = {"name", "group", "rank", "node", "device", "phase",
                          "samplesPerSecond", "batchSize"}
CONTRACT_CONDITION_TYPES = ["Created", "Running", "Rebalanced", "Succeeded", "Failed",
                            "Suspended"]


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


# --- what the C++ side accepts -----------------------------------------------------------------


def parser_keys(source):
    """({map path: keys read}, {template paths}) from job_parser.cc's MapReader calls.

    Paths use the schema's form: "" is the document, "spec.workerGroups[]" a group. A MapReader
    variable maps to the path of its latest declaration, which is how the functions use them.
    """
    decl = re.compile(r"MapReader\s+(\w+)\((.*?)\);")
    call = re.compile(r"\b(\w+)\.(Read|Child|Template)\(\s*\"(\w+)\"")
    events = [(m.start(), "decl", m) for m in decl.finditer(source)]
    events += [(m.start(), "call", m) for m in call.finditer(source)]
    paths, keys, templates = {}, {}, set()
    for _, kind, m in sorted(events, key=lambda e: e[0]):
        if kind == "decl":
            args = m.group(2).split(",", 1)[1]
            path = "".join(re.findall(r'"([^"]*)"', args))
            paths[m.group(1)] = path
            keys.setdefault(path, set())
        elif m.group(1) in paths:
            path = paths[m.group(1)]
            keys[path].add(m.group(3))
            if m.group(2) == "Template":
                templates.add(f"{path}.{m.group(3)}".lstrip("."))
    return keys, templates


def schema_keys(node, path="", keys=None, templates=None):
    """The same maps for the CRD schema; metadata, status and pod templates are not descended."""
    keys = {} if keys is None else keys
    templates = set() if templates is None else templates
    keys[path] = set(node.get("properties", {}))
    for name, sub in node.get("properties", {}).items():
        sub_path = f"{path}.{name}".lstrip(".")
        if sub_path in ("metadata", "status"):
            continue
        # Pod templates, and opaque maps the parser keeps as YAML text (a volume source).
        if name == "template" or (sub.get("x-kubernetes-preserve-unknown-fields")
                                  and "properties" not in sub):
            templates.add(sub_path)
        elif sub.get("type") == "object" and "properties" in sub:
            schema_keys(sub, sub_path, keys, templates)
        elif sub.get("type") == "array" and "properties" in sub.get("items", {}):
            schema_keys(sub["items"], sub_path + "[]", keys, templates)
    return keys, templates


def validator_enums(source):
    """{field path: allowed values} from job_validate.cc's OneOf(...) calls."""
    lists = {name: re.findall(r'"([^"]*)"', body) for name, body in re.findall(
        r"static const std::vector<std::string> (k\w+) = \{(.*?)\};", source, re.S)}
    enums = {}
    for path, values in re.findall(r'OneOf\(\s*"([\w.]+)",\s*"[\w ]+",\s*[\w.]+,\s*(\w+|\{.*?\})\)',
                                   source, re.S):
        if values.startswith("{"):
            enums[path] = re.findall(r'"([^"]*)"', values)
        elif values in lists:
            enums[path] = lists[values]
    return enums, lists


def spec_name_lists(source):
    """{name: values} of job_spec.h's `inline constexpr const char* kXNames[] = {...};` lists."""
    return {name: re.findall(r'"([^"]*)"', body) for name, body in re.findall(
        r"inline constexpr const char\* (k\w+)\[\] = \{(.*?)\};", source, re.S)}


def strategy_descriptors():
    """The strategy descriptors, `hptrain strategies --json`'s list; None without $HPTRAIN_BIN."""
    binary = os.environ.get("HPTRAIN_BIN")
    if not binary:
        return None
    out = subprocess.run([binary, "strategies", "--json"], check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out)["strategies"]


def strategy_table(descriptors):
    """{strategy: [parameters]} from the descriptors."""
    return {d["name"]: [p["name"] for p in d["parameters"]] for d in descriptors}


def strategy_param(descriptors, strategy, name):
    (param,) = [p for d in descriptors if d["name"] == strategy for p in d["parameters"]
                if p["name"] == name]
    return param


# --- editing documents in the inline cases ---------------------------------------------------


def _walk(doc, dotted):
    parts = dotted.split(".")
    node = doc
    for part in parts[:-1]:
        node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
    return node, parts[-1]


DELETE = object()


def with_set(doc, **changes):
    """A copy of `doc` with each `a__b__0__c=value` set (DELETE removes the key)."""
    doc = copy.deepcopy(doc)
    for dotted, value in changes.items():
        node, last = _walk(doc, dotted.replace("__", "."))
        if isinstance(node, list):
            node[int(last)] = value
        elif value is DELETE:
            node.pop(last, None)
        else:
            node[last] = value
    return doc


class CrdSchemaTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        (cls.crd,) = k8s_schema.load_yaml_file(CRD_PATH)
        cls.schema = k8s_schema.crd_schema(cls.crd)
        cls.parser_source = read(os.path.join(REPO, "runtime", "job", "job_parser.cc"))
        cls.validate_source = read(os.path.join(REPO, "runtime", "job", "job_validate.cc"))
        cls.spec_source = read(os.path.join(REPO, "runtime", "job", "job_spec.h"))
        cls.descriptors = strategy_descriptors()
        cls.mlp = k8s_schema.load_yaml_file(os.path.join(REPO, "examples", "synthetic-mlp.yaml"))[0]
        cls.hetero = k8s_schema.load_yaml_file(
            os.path.join(REPO, "examples", "heterogeneous-gpus.yaml"))[0]

    def need_descriptors(self):
        if self.descriptors is None:
            self.skipTest("HPTRAIN_BIN is not set (ctest sets it to the hptrain binary)")

    def errors(self, doc):
        return k8s_schema.validate(doc, self.schema)

    def assertRejected(self, doc, expected, name=""):
        errors = self.errors(doc)
        self.assertTrue(errors, f"{name}: accepted, expected an error containing {expected!r}")
        self.assertTrue(any(expected in e for e in errors),
                        f"{name}: no error contains {expected!r}; got {errors}")

    # --- shape of the schema -----------------------------------------------------------------

    def test_schema_is_structural_and_documented(self):
        self.assertEqual(k8s_schema.structural_problems(self.schema), [])

    def test_structural_check_catches_problems(self):
        broken = {"type": "object", "properties": {
            "a": {"type": "object", "description": "no fields"},
            "b": {"description": "no type"},
            "c": {"type": "integer"},
            "d": {"description": "d", "x-kubernetes-int-or-string": True, "type": "string"},
            "e": {"description": "e", "type": "number", "exclusiveMinimum": True}}}
        problems = "\n".join(k8s_schema.structural_problems(broken))
        for expected in ("a: object without properties", "b: no type", "c: no description",
                         "d: x-kubernetes-int-or-string with a type",
                         "e: exclusiveMinimum without minimum"):
            self.assertIn(expected, problems)

    def test_converter_handles_every_keyword(self):
        k8s_schema.to_json_schema(self.schema)  # raises on a keyword it does not know

    def test_pod_templates_are_one_schema(self):
        paths = ["spec.workers.template", "spec.workerGroups[].template", "spec.ps.template"]
        first, *others = [k8s_schema.schema_at(self.schema, p) for p in paths]
        for path, other in zip(paths[1:], others):
            self.assertEqual(first, other, f"{path} differs from {paths[0]}")
        resources = k8s_schema.schema_at(first, "spec.containers[].resources.limits")
        self.assertTrue(resources["additionalProperties"]["x-kubernetes-int-or-string"])

    def test_readme_field_table_names_every_spec_field(self):
        # Every top-level spec field of the CRD has a row in the README's field table (a row
        # may name several: "| `spec.device`, `spec.deterministic` | ...").
        readme = read(os.path.join(REPO, "README.md"))
        named = set()
        for line in readme.splitlines():
            if line.startswith("| `spec."):
                named.update(re.findall(r"`spec\.([A-Za-z]+)", line.split("|")[1]))
        missing = sorted(set(self.schema["properties"]["spec"]["properties"]) - named)
        self.assertEqual(missing, [], "spec fields without a row in README.md's field table")

    # --- the C++ side ------------------------------------------------------------------------

    def test_spec_keys_equal_parser_keys(self):
        self.need_descriptors()
        parser, parser_templates = parser_keys(self.parser_source)
        # spec.strategy is read from the descriptors: `type` and every strategy's parameters.
        for d in self.descriptors:
            for p in d["parameters"]:
                parser["spec.strategy"].add(p["name"])
                if p["fields"]:
                    parser.setdefault(f"spec.strategy.{p['name']}", set()).update(
                        f["name"] for f in p["fields"])
        schema, schema_templates = schema_keys(self.schema)
        parser.pop("metadata", None)  # any key is allowed there; the API server checks ObjectMeta
        self.assertGreaterEqual(len(parser), 15, f"parser scan found too little: {parser}")
        for path in sorted(set(parser) | set(schema)):
            pending = PENDING_PARSER_KEYS.get(path, set())
            in_schema, in_parser = schema.get(path), parser.get(path)
            self.assertIsNotNone(in_schema, f"{path}: read by job_parser.cc, not in the CRD")
            if in_parser is None:
                self.assertTrue(pending, f"{path}: in the CRD, never read by job_parser.cc")
                in_parser = set()
            self.assertEqual(in_parser - in_schema, set(),
                             f"{path}: keys job_parser.cc reads but the CRD lacks")
            self.assertEqual(in_schema - in_parser - pending, set(),
                             f"{path}: keys in the CRD that job_parser.cc does not read")
            self.assertEqual(pending - in_schema, set(), f"{path}: stale PENDING_PARSER_KEYS")
        self.assertEqual(parser_templates, schema_templates)
        waiting = {f"{p}.{k}" for p, ks in PENDING_PARSER_KEYS.items() for k in ks
                   if k not in parser.get(p, set())}
        if waiting:
            print(f"note: CRD fields the runtime parser does not read yet: {sorted(waiting)}")

    def test_enums_equal_validator(self):
        self.need_descriptors()
        enums, lists = validator_enums(self.validate_source)
        table = strategy_table(self.descriptors)
        enums["spec.strategy.type"] = list(table)
        for strategy, name in (("topk", "sparseEncoding"), ("mp2", "mode")):
            enums[f"spec.strategy.{name}"] = strategy_param(self.descriptors, strategy,
                                                            name)["enum"]
        (compression_type,) = [f for f in strategy_param(self.descriptors, "multistep",
                                                         "compression")["fields"]
                               if f["name"] == "type"]
        enums["spec.strategy.compression.type"] = compression_type["enum"]
        lists["kBits"] = strategy_param(self.descriptors, "quantized", "bits")["enum"]
        lists["kHpsBits"] = strategy_param(self.descriptors, "hps", "bits")["enum"]
        # spec.task and spec.precision: job_spec.h's name lists, which the validator's OneOf reads.
        names = spec_name_lists(self.spec_source)
        for path, (name, ) in (("spec.task", ("kTaskNames",)),
                               ("spec.precision", ("kPrecisionNames",))):
            self.assertIn(f"{{std::begin({name}), std::end({name})}}", self.validate_source)
            enums[path] = names[name]
        # spec.dataset.name is free with your own formats: the built-in names are a rule's list.
        (name_rule,) = [r["rule"] for r in k8s_schema.schema_at(self.schema, "spec.dataset")[
            "x-kubernetes-validations"] if "self.name in" in r["rule"] and "? " not in r["rule"]
            and "self.format in" in r["rule"] and "size(self.path)" not in r["rule"]]
        self.assertEqual(re.findall(r"'([\w-]+)'", name_rule.split("self.name in")[1]),
                         lists["kNames"])
        self.assertEqual(re.findall(r"'([\w-]+)'", name_rule.split("self.name in")[0]),
                         [f for f in lists["kFormatNames"] if f not in
                          ("idx", "cifar-binary", "synthetic")])
        for path in ("spec.model.name", "spec.dataset.format", "spec.dataset.layout",
                     "spec.task", "spec.precision",
                     "spec.strategy.type", "spec.optimizer.type",
                     "spec.optimizer.schedule.type", "spec.device",
                     "spec.strategy.sparseEncoding", "spec.strategy.mode",
                     "spec.strategy.compression.type", "spec.scheduler.type",
                     "spec.communicator.backend"):
            self.assertIn(path, enums, f"no OneOf(\"{path}\", ...) in job_validate.cc")
            node = k8s_schema.schema_at(self.schema, path)
            self.assertEqual(node["enum"], enums[path], path)
        bits_rule = k8s_schema.schema_at(self.schema, "spec.strategy.bits")[
            "x-kubernetes-validations"][0]["rule"]
        self.assertEqual(re.findall(r"'(\w+)'", bits_rule), lists["kBits"])
        (hps_bits_rule,) = [r["rule"] for r in k8s_schema.schema_at(self.schema, "spec.strategy")[
            "x-kubernetes-validations"] if "string(self.bits)" in r["rule"]]
        self.assertEqual(re.findall(r"'(\w+)'", hps_bits_rule.split(" in ")[-1]),
                         lists["kHpsBits"])

    def test_ranges_equal_validator(self):
        shards = k8s_schema.schema_at(self.schema, "spec.ps.shards")
        self.assertIn("inline constexpr int kMaxPsShards = 64;",
                      read(os.path.join(REPO, "runtime", "job", "job_validate.h")))
        self.assertEqual((shards["minimum"], shards["maximum"], shards["default"]), (1, 64, 1))
        staleness = k8s_schema.schema_at(self.schema, "spec.strategy.staleness")
        self.assertEqual((staleness["minimum"], staleness["maximum"]), (0, 1))
        self.need_descriptors()
        self.assertEqual(strategy_param(self.descriptors, "hps", "staleness")["enum"], ["0", "1"])
        # history: 2..64 (a value written is a value: 0 is out of range, not "unset").
        history = k8s_schema.schema_at(self.schema, "spec.strategy.history")
        self.assertEqual((history["minimum"], history["maximum"]), (2, 64))
        self.assertNotIn("x-kubernetes-validations", history)
        self.assertEqual(strategy_param(self.descriptors, "mp2", "history")["range"],
                         {"min": 2, "max": 64, "minExclusive": False, "maxExclusive": False})
        collect = k8s_schema.schema_at(self.schema, "spec.collect")["properties"]
        self.assertEqual({k: v["minimum"] for k, v in collect.items() if "minimum" in v},
                         {"every": 1, "samples": 1, "windowEvery": 1, "windowLength": 2})
        for field, name, least in (("every", "every", 1), ("samples", "samples", 1),
                                   ("windowEvery", "window_every", 1),
                                   ("windowLength", "window_length", 2)):
            self.assertIn(f'AtLeast("spec.collect.{field}", spec.collect.{name}, {least})',
                          self.validate_source)
        elastic = k8s_schema.schema_at(self.schema, "spec.elastic")["properties"]
        self.assertEqual({k: v["minimum"] for k, v in elastic.items()},
                         {"minReplicas": 1, "maxReplicas": 1, "joinTimeoutSeconds": 1})
        self.assertIn('AtLeast<int64_t>("spec.elastic.joinTimeoutSeconds"', self.validate_source)
        shards_rule = [r["rule"] for r in self.schema["properties"]["spec"][
            "x-kubernetes-validations"] if "self.ps.shards" in r["rule"]]
        self.assertEqual(len(shards_rule), 1)
        self.assertEqual(re.findall(r"'(\w+)'", shards_rule[0]), ["ps", "hps", "mp2"])
        self.assertEqual([d["name"] for d in self.descriptors if d["usesParameterServer"]],
                         ["ps", "hps", "mp2"])

    def test_strategy_parameters_equal_validator(self):
        self.need_descriptors()
        table = strategy_table(self.descriptors)
        self.assertEqual(len(table), 13)
        applies = {}
        for rule in self.schema["properties"]["spec"]["properties"]["strategy"][
                "x-kubernetes-validations"]:
            if " applies only to " not in rule["message"]:
                continue  # a rule on a parameter's value, not on where it applies
            param = re.match(r"!has\(self\.(\w+)\)", rule["rule"]).group(1)
            applies[param] = sorted(re.findall(r"'(\w+)'", rule["rule"].split("has(self.type)")[1]))
        expected = {}
        for strategy, params in table.items():
            for param in params:
                expected.setdefault(param, []).append(strategy)
        self.assertEqual(applies, {k: sorted(v) for k, v in expected.items()})
        strategy_props = set(k8s_schema.schema_at(self.schema, "spec.strategy")["properties"])
        self.assertEqual(set(applies) | {"type"}, strategy_props)

    def test_every_rule_has_a_twin_and_every_twin_a_rule(self):
        # The rules generated for every strategy parameter have generic twins
        # (k8s_schema.generated_twin); every other rule has its own.
        rules = {rule for _, rule, _ in k8s_schema.cel_rules(self.schema)}
        self.assertEqual({r for r in rules if k8s_schema.twin_of(r) is None}, set())
        self.assertEqual(set(k8s_schema.CEL_TWINS) - rules, set())

    # --- the contract ------------------------------------------------------------------------

    def test_rules_point_at_the_field_their_message_names(self):
        # A rule that sits above the field it is about says which (fieldPath), so that kubectl
        # reports the error at that field: the message's leading field path, made relative to
        # the rule's place, is its fieldPath.
        schema = k8s_schema.crd_schema(self.crd)
        checked = 0
        for path, rule, message, field_path in k8s_schema.cel_rules(schema, with_field_path=True):
            lead = message.strip("'").split(" ", 1)[0]
            if not lead.startswith(path + ".") or "[" in path:
                continue
            checked += 1
            self.assertEqual(field_path, lead[len(path):], f"{path}: {rule}")
        self.assertGreaterEqual(checked, 15)

    def test_names_scope_and_subresources(self):
        spec = self.crd["spec"]
        self.assertEqual(self.crd["metadata"]["name"], "trainingjobs.hptrain.io")
        self.assertEqual(spec["group"], "hptrain.io")
        self.assertEqual(spec["scope"], "Namespaced")
        names = spec["names"]
        self.assertEqual((names["kind"], names["plural"], names["singular"], names["shortNames"]),
                         ("TrainingJob", "trainingjobs", "trainingjob", ["tj"]))
        (version,) = spec["versions"]
        self.assertEqual((version["name"], version["served"], version["storage"]),
                         ("v1alpha1", True, True))
        sub = version["subresources"]
        self.assertEqual(sub["status"], {})
        self.assertEqual(sub["scale"], {"specReplicasPath": ".spec.workers.replicas",
                                        "statusReplicasPath": ".status.replicas",
                                        "labelSelectorPath": ".status.selector"})
        # Scale paths must name plain fields (an array index makes every scale call fail).
        for path, kind in ((".spec.workers.replicas", "integer"), (".status.replicas", "integer"),
                           (".status.selector", "string")):
            self.assertNotIn("[", path)
            self.assertEqual(k8s_schema.schema_at(self.schema, path[1:])["type"], kind, path)

    def test_printer_columns_read_status_fields(self):
        (version,) = self.crd["spec"]["versions"]
        columns = {c["name"]: c for c in version["additionalPrinterColumns"]}
        expected = {"Members": ".status.membership.members",
                    "Phase": ".status.phase", "Ready": ".status.readyWorkers",
                    "Desired": ".status.desiredWorkers", "Strategy": ".status.strategy",
                    "Step": ".status.step", "Samples/s": ".status.samplesPerSecond",
                    "Loss": ".status.trainLoss", "Metric": ".status.evaluation.value",
                    "Age": ".metadata.creationTimestamp"}
        for name, path in expected.items():
            self.assertEqual(columns[name]["jsonPath"], path, name)
        # The training loss, the metric and the members show with -o wide.
        for name in ("Loss", "Metric", "Members"):
            self.assertEqual(columns[name].get("priority"), 1, name)
        for column in columns.values():
            path = column["jsonPath"]
            self.assertNotIn("conditions", path, f"{column['name']} reads a condition")
            if path.startswith(".status."):
                node = k8s_schema.schema_at(self.schema, path[1:])
                # The API server prints a list in a string column as its items, e.g. "[0 1 3]".
                shown = "string" if node["type"] == "array" else node["type"]
                self.assertEqual(shown, column["type"], column["name"])

    def test_status_matches_contract(self):
        status = self.schema["properties"]["status"]["properties"]
        self.assertEqual({k: v["type"] for k, v in status.items()}, CONTRACT_STATUS)
        self.assertEqual(status["phase"]["enum"],
                         ["Pending", "Running", "Succeeded", "Failed", "Suspended"])
        self.assertEqual(set(status["workers"]["items"]["properties"]), CONTRACT_WORKER_FIELDS)
        condition = status["conditions"]["items"]
        self.assertEqual(set(condition["properties"]),
                         {"type", "status", "reason", "message", "lastTransitionTime",
                          "observedGeneration"})
        for kind in CONTRACT_CONDITION_TYPES:
            self.assertIn(kind, status["conditions"]["description"])
        full = {
            "phase": "Running", "observedGeneration": 2, "replicas": 4, "readyWorkers": 4,
            "desiredWorkers": 4, "selector": "hptrain.io/job=j,hptrain.io/role=worker",
            "conditions": [{"type": t, "status": "True", "reason": "Started", "message": "m",
                            "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 2}
                           for t in CONTRACT_CONDITION_TYPES],
            "workers": [{"name": "j-worker-0", "group": "a100", "rank": 0, "node": "n1",
                         "device": "cuda", "phase": "Running", "samplesPerSecond": 812.5,
                         "batchSize": 160}],
            "step": 1200, "epoch": 3, "samplesPerSecond": 2600.0, "strategy": "hps",
            "allocationGeneration": 5, "lastRebalanceTime": "2026-01-01T00:10:00Z",
            "restarts": 0, "startTime": "2026-01-01T00:00:00Z", "completionTime": None,
            "trainLoss": 0.3125, "evaluation": {"metric": "accuracy", "value": 0.87},
            "membership": {"epoch": 2, "members": [0, 1, 3]},
        }
        self.assertEqual(self.errors(with_set(self.hetero, status=full)), [])
        self.assertRejected(with_set(self.hetero, status=dict(full, phase="Done")),
                            "status.phase: 'Done' is not one of")
        self.assertEqual(set(status["evaluation"]["properties"]), {"metric", "value"})
        self.assertRejected(with_set(self.hetero, status=dict(full, trainLoss="low")),
                            "status.trainLoss")
        self.assertEqual(set(status["membership"]["properties"]), {"epoch", "members"})
        self.assertRejected(with_set(self.hetero, status=dict(full, membership={
            "epoch": 1, "members": ["w0"]})), "status.membership.members[0]")
        dup = dict(full, conditions=full["conditions"][:1] * 2)
        self.assertRejected(with_set(self.hetero, status=dup), "Duplicate value")

    # --- examples ----------------------------------------------------------------------------

    def test_examples_are_accepted(self):
        paths = sorted(glob.glob(os.path.join(REPO, "examples", "*.yaml")))
        self.assertGreaterEqual(len(paths), 4)
        data = sorted(glob.glob(os.path.join(REPO, "examples", "data", "*.yaml")))
        self.assertGreaterEqual(len(data), 4)
        paths += data
        for path in paths:
            for doc in k8s_schema.load_yaml_file(path):
                self.assertEqual(self.errors(doc), [], os.path.relpath(path, REPO))

    def test_invalid_examples_are_rejected_for_their_reason(self):
        paths = sorted(glob.glob(os.path.join(REPO, "examples", "invalid", "*.yaml")))
        self.assertGreaterEqual(len(paths), 5)
        for path in paths:
            text = read(path)
            expected = re.search(r"^# schema: (.+)$", text, re.M)
            self.assertIsNotNone(expected, f"{path}: no '# schema: <error>' line")
            (doc,) = k8s_schema.load_yaml_documents(text)
            self.assertRejected(doc, expected.group(1).strip(), os.path.relpath(path, REPO))

    def test_float_without_dot_is_a_number(self):
        # fashion-mnist.yaml writes weightDecay: 5e-4, which go-yaml reads as a float.
        doc = k8s_schema.load_yaml_documents("a: 5e-4\nb: 1.5\nc: '5e-4'\nd: 7\n")[0]
        self.assertEqual(doc, {"a": 5e-4, "b": 1.5, "c": "5e-4", "d": 7})

    def test_valid_variants(self):
        quantized = with_set(self.mlp, spec__strategy={"type": "quantized"})
        cases = {
            "bits int": with_set(quantized, spec__strategy__bits=8),
            "bits string": with_set(quantized, spec__strategy__bits="4"),
            "bits dynamic": with_set(quantized, spec__strategy__bits="dynamic"),
            "hps bits 32": with_set(self.hetero, spec__strategy__bits=32),
            "hps bits dynamic": with_set(self.hetero, spec__strategy__bits="dynamic"),
            "quantized bits 1": with_set(quantized, spec__strategy__bits=1),
            "hps staleness 0": with_set(self.hetero, spec__strategy__staleness=0),
            "multistep adaptive": with_set(self.mlp, spec__strategy={
                "type": "multistep", "interval": "adaptive", "warmupEpochs": 1, "hMin": 2,
                "hMax": 16, "mu": 0.01, "update": "average", "delay": 0}),
            "multistep delayed": with_set(self.mlp, spec__strategy={
                "type": "multistep", "update": "delayed", "delay": 1}),
            "multistep fixed": with_set(self.mlp, spec__strategy={"type": "multistep",
                                                                  "interval": 4}),
            "multistep delay 1 compressed": with_set(self.mlp, spec__strategy={
                "type": "multistep", "interval": 4, "delay": 1,
                "compression": {"type": "quantized", "bits": 4}}),
            "multistep fp16": with_set(self.mlp, spec__strategy={
                "type": "multistep", "compression": {"type": "fp16"}}),
            "multistep compression none": with_set(self.mlp, spec__strategy={
                "type": "multistep", "compression": {"type": "none"}}),
            "priority with default strategy": with_set(self.mlp, spec__scheduler={
                "type": "priority"}),
            "priority with multistep": with_set(
                self.mlp, spec__strategy={"type": "multistep", "interval": 8, "delay": 0,
                                          "compression": {"type": "none"}},
                spec__scheduler={"type": "priority", "partitionElements": 1048576,
                                 "creditElements": 1048576}),
            "scheduler none": with_set(self.hetero, spec__scheduler={"type": "none"}),
            "localsgd": with_set(self.mlp, spec__strategy={"type": "localsgd", "interval": 8}),
            "hps ps shards": with_set(self.hetero, spec__ps__shards=4),
            "ps shards": with_set(self.mlp, spec__strategy={"type": "ps"},
                                  spec__ps={"shards": 64}),
            "mp2 shards": with_set(self.mlp, spec__strategy={"type": "mp2", "pushRatio": 0.5,
                                                             "predictor": "zero"},
                                   spec__ps={"shards": 2}),
            "mp2 every parameter": with_set(self.mlp, spec__strategy={
                "type": "mp2", "pushRatio": 0.1, "history": 64, "mode": "B",
                "predictor": "predictors/lenet5.mp2p", "calibration": False, "damping": 1}),
            "mp2 history 2 mode A": with_set(self.mlp, spec__strategy={
                "type": "mp2", "history": 2, "mode": "A", "predictor": "zero"}),
            "collect": with_set(self.mlp, spec__collect={
                "path": "/data/run.mp2d", "every": 2, "samples": 512, "windowEvery": 100,
                "windowLength": 2}),
            "collect path only": with_set(self.hetero, spec__collect={"path": "run.mp2d"}),
            "one shard with ssgd": with_set(self.mlp, spec__ps={"shards": 1}),
            "null means unset": with_set(self.mlp, spec__epochs=None, spec__strategy__type=None),
            "strategy absent": with_set(self.mlp, spec__strategy=DELETE),
            "elastic empty": with_set(self.mlp, spec__elastic={}),
            "elastic bounds": with_set(self.mlp, spec__elastic={
                "minReplicas": 1, "maxReplicas": 6, "joinTimeoutSeconds": 60}),
            "elastic min = replicas = max": with_set(self.mlp, spec__elastic={
                "minReplicas": 2, "maxReplicas": 2}),
            "elastic scaled within bounds": with_set(self.mlp, spec__workers__replicas=6,
                                                     spec__elastic={"maxReplicas": 6}),
            "elastic one worker group": with_set(
                self.hetero, spec__elastic={"minReplicas": 2, "maxReplicas": 4},
                spec__workerGroups=[{"name": "a100", "replicas": 3}]),
            "torchscript model": with_set(self.mlp, spec__model={"torchscript": "m.pt"}),
            "own program": with_set(self.mlp, spec__model=DELETE, spec__dataset=DELETE,
                                    spec__trainer={"command": ["python3", "train.py"],
                                                   "args": ["--epochs", "1"],
                                                   "workingDir": "/app"}),
            "own program reading the data set": with_set(
                self.mlp, spec__model=DELETE, spec__trainer={"command": ["./train.sh"]}),
            "extra pod fields pass through": with_set(self.hetero, spec__ps__template__spec={
                "hostNetwork": True, "securityContext": {"runAsUser": 1000},
                "containers": [{"name": "ps", "image": "x", "ports": [{"containerPort": 1}],
                                "env": [{"name": "A", "value": "8"},
                                        {"name": "B", "valueFrom": {"fieldRef": {
                                            "fieldPath": "status.podIP"}}}]}]}),
            "quantities": with_set(self.hetero, spec__ps__template__spec__containers=[
                {"name": "ps", "resources": {"limits": {"cpu": "500m", "memory": "1.5Gi",
                                                        "nvidia.com/gpu": 1}}}]),
            "step schedule": with_set(self.mlp, spec__optimizer__schedule={
                "type": "step", "stepSize": 2, "gamma": 0.5}),
            "gang scheduling": with_set(self.mlp, spec__schedulerName="volcano",
                                        spec__gangScheduling={"enabled": True,
                                                              "provider": "volcano",
                                                              "queue": "research"}),
            "npy with layout and targets": with_set(self.mlp, spec__dataset={
                "name": "my-arrays", "format": "npy", "path": "/data/a", "layout": "NCHW",
                "normalize": True, "mean": [0.5, 0.5, 0.5], "std": [0.25, 0.25, 0.25],
                "classes": 0, "skipCorrupt": True}),
            "imagefolder with every field": with_set(self.mlp, spec__dataset={
                "name": "My Images 2024", "format": "imagefolder", "path": "/data/i",
                "imageSize": [64, 48], "channels": 3, "classes": 100, "augment": {
                    "randomResizedCrop": {"size": 56, "scale": [0.08, 1], "ratio": [0.75, 1.33]},
                    "horizontalFlip": True}}),
            "filelist with one side": with_set(self.mlp, spec__dataset={
                "name": "list", "format": "filelist", "path": "/data/l", "imageSize": [32],
                "channels": 1}),
            "webdataset": with_set(self.mlp, spec__dataset={
                "name": "shards", "format": "webdataset", "path": "/data/w"}),
            "augment a built-in set": with_set(self.mlp, spec__dataset__augment={
                "randomCrop": {"size": 24, "padding": 2}, "horizontalFlip": True}),
            "normalize false without mean": with_set(self.mlp, spec__dataset__normalize=False),
            "regression bf16": with_set(self.mlp, spec__task="regression",
                                        spec__precision="bf16", spec__device="cpu"),
            "fp16 on cuda": with_set(self.mlp, spec__precision="fp16", spec__device="cuda"),
            "torchscript task": with_set(self.mlp, spec__task="torchscript",
                                         spec__model={"torchscript": "m.pt"}),
            "torchscript task with own program": with_set(
                self.mlp, spec__task="torchscript", spec__model=DELETE,
                spec__trainer={"command": ["python3", "train.py"]}),
            "batch on every group": with_set(self.hetero, spec__globalBatchSize=384,
                                             spec__workerGroups__0__batchSize=128,
                                             spec__workerGroups__1__batchSize=64),
        }
        for name, doc in cases.items():
            self.assertEqual(self.errors(doc), [], name)

    def test_inline_invalid_cases(self):
        mlp, hetero = self.mlp, self.hetero
        both = with_set(hetero, spec__workers={"replicas": 2})
        cases = [
            ("unknown strategy", with_set(mlp, spec__strategy__type="adasum"),
             "spec.strategy.type: 'adasum' is not one of"),
            ("negative replicas", with_set(mlp, spec__workers__replicas=-1),
             "spec.workers.replicas: -1 is less than the minimum of 1"),
            ("negative group replicas", with_set(hetero, spec__workerGroups__1__replicas=-2),
             "spec.workerGroups[1].replicas: -2 is less than the minimum of 1"),
            ("missing model", with_set(mlp, spec__model=DELETE),
             "set spec.model (a zoo model or a TorchScript file for the built-in trainer) or "
             "spec.trainer"),
            ("missing dataset", with_set(mlp, spec__dataset=DELETE),
             "spec.dataset is required unless spec.trainer"),
            ("trainer with model", with_set(mlp, spec__trainer={"command": ["python3", "t.py"]}),
             "spec.model cannot be combined with spec.trainer"),
            ("trainer without command", with_set(mlp, spec__model=DELETE,
                                                 spec__trainer={"args": ["x"]}),
             "'command' is a required property"),
            ("trainer with an empty command", with_set(mlp, spec__model=DELETE,
                                                       spec__trainer={"command": []}),
             "spec.trainer.command: []"),
            ("missing globalBatchSize", with_set(mlp, spec__globalBatchSize=DELETE),
             "'globalBatchSize' is a required property"),
            ("missing spec", with_set(mlp, spec=DELETE), "'spec' is a required property"),
            ("no workers", with_set(mlp, spec__workers=DELETE),
             "set spec.workers or spec.workerGroups"),
            ("workers and workerGroups", both, "spec.workers cannot be combined"),
            # What `kubectl scale` makes of a job with workerGroups (the scale subresource sets
            # .spec.workers.replicas): the message says scale needs the shorthand.
            ("kubectl scale on workerGroups", both,
             "kubectl scale sets spec.workers.replicas, so it needs the spec.workers shorthand"),
            ("bits 3", with_set(hetero, spec__strategy__bits=3), "must be one of 1, 2, 4, 8"),
            ("bits '3'", with_set(hetero, spec__strategy__bits="3"), "must be one of 1, 2, 4, 8"),
            ("bits on topk", with_set(mlp, spec__strategy={"type": "topk", "bits": 8}),
             "bits applies only to strategies quantized and hps"),
            ("bits on default ssgd", with_set(mlp, spec__strategy={"bits": 8}),
             "bits applies only"),
            ("bucketSize on topk", with_set(mlp, spec__strategy={"type": "topk", "bucketSize": 64}),
             "bucketSize applies only"),
            ("density on ssgd", with_set(mlp, spec__strategy__density=0.1), "density applies only"),
            ("density above 1", with_set(mlp, spec__strategy={"type": "dgc", "density": 1.5}),
             "1.5 is greater than the maximum of 1"),
            ("errorFeedback on dgc", with_set(mlp, spec__strategy={"type": "dgc",
                                                                   "errorFeedback": False}),
             "errorFeedback applies only"),
            ("interval on ssgd", with_set(mlp, spec__strategy__interval=4),
             "interval applies only"),
            ("warmupEpochs on localsgd", with_set(mlp, spec__strategy={"type": "localsgd",
                                                                       "warmupEpochs": 1}),
             "warmupEpochs applies only"),
            ("clipNorm on topk", with_set(mlp, spec__strategy={"type": "topk", "clipNorm": 5}),
             "clipNorm applies only"),
            ("momentumMasking on topk", with_set(mlp, spec__strategy={"type": "topk",
                                                                      "momentumMasking": False}),
             "momentumMasking applies only"),
            ("sparseEncoding on quantized",
             with_set(mlp, spec__strategy={"type": "quantized", "sparseEncoding": "compact"}),
             "sparseEncoding applies only"),
            ("threshold on ps", with_set(mlp, spec__strategy={"type": "ps", "threshold": 0.1}),
             "threshold applies only to strategy gossip"),
            ("maxInterval on localsgd",
             with_set(mlp, spec__strategy={"type": "localsgd", "maxInterval": 8}),
             "maxInterval applies only to strategy gossip"),
            ("minInterval on ssgd", with_set(mlp, spec__strategy={"type": "ssgd", "minInterval": 2}),
             "minInterval applies only to strategy gossip"),
            ("period on localsgd", with_set(mlp, spec__strategy={"type": "localsgd", "period": 2}),
             "period applies only to strategy gossip"),
            ("variant on ssgd", with_set(mlp, spec__strategy={"type": "ssgd", "variant": "push"}),
             "variant applies only to strategy gossip"),
            ("lockstep on ssgd", with_set(mlp, spec__strategy={"type": "ssgd", "lockstep": True}),
             "lockstep applies only to strategy gossip"),
            ("calibrate on ssgd",
             with_set(mlp, spec__strategy={"type": "ssgd", "calibrate": True}),
             "calibrate applies only to strategy gossip"),
            ("targetInterval on ssgd",
             with_set(mlp, spec__strategy={"type": "ssgd", "targetInterval": 4}),
             "targetInterval applies only to strategy gossip"),
            ("calibrationSteps on localsgd",
             with_set(mlp, spec__strategy={"type": "localsgd", "calibrationSteps": 50}),
             "calibrationSteps applies only to strategy gossip"),
            ("interval on gossip", with_set(mlp, spec__strategy={"type": "gossip", "interval": 4}),
             "interval applies only to strategies localsgd, multistep and hierarchical"),
            ("pushRatio on hps", with_set(hetero, spec__strategy__pushRatio=0.5),
             "pushRatio applies only to strategy mp2"),
            ("staleness on ps", with_set(mlp, spec__strategy={"type": "ps", "staleness": 0}),
             "staleness applies only to strategy hps"),
            ("averageOptimizerState on ssgd",
             with_set(mlp, spec__strategy={"type": "ssgd", "averageOptimizerState": True}),
             "averageOptimizerState applies only to strategy hierarchical"),
            ("warmupSteps on localsgd",
             with_set(mlp, spec__strategy={"type": "localsgd", "warmupSteps": 100}),
             "warmupSteps applies only to strategy hierarchical"),
            ("compressor on quantized",
             with_set(mlp, spec__strategy={"type": "quantized", "compressor": "fp16"}),
             "compressor applies only to strategy auto"),
            ("probeSteps on topk", with_set(mlp, spec__strategy={"type": "topk", "probeSteps": 5}),
             "probeSteps applies only to strategies quantized and auto"),
            ("compressAbove on ssgd",
             with_set(mlp, spec__strategy={"type": "ssgd", "compressAbove": 0.5}),
             "compressAbove applies only to strategies quantized and auto"),
            ("denseFallback on auto",
             with_set(mlp, spec__strategy={"type": "auto", "denseFallback": True}),
             "denseFallback applies only to strategy quantized"),
            ("history on ps", with_set(mlp, spec__strategy={"type": "ps", "history": 5}),
             "history applies only to strategy mp2"),
            ("mode on hps", with_set(hetero, spec__strategy__mode="B"),
             "mode applies only to strategy mp2"),
            ("predictor on ps", with_set(mlp, spec__strategy={"type": "ps", "predictor": "zero"}),
             "predictor applies only to strategy mp2"),
            ("calibration on default ssgd", with_set(mlp, spec__strategy={"calibration": True}),
             "calibration applies only to strategy mp2"),
            ("mp2 without predictor", with_set(mlp, spec__strategy={"type": "mp2",
                                                                    "pushRatio": 0.1}),
             "spec.strategy.predictor is required for strategy mp2"),
            ("mp2 with an empty predictor",
             with_set(mlp, spec__strategy={"type": "mp2", "predictor": ""}),
             "spec.strategy.predictor is required for strategy mp2"),
            ("mode C", with_set(mlp, spec__strategy={"type": "mp2", "mode": "C",
                                                     "predictor": "zero"}),
             "spec.strategy.mode: 'C' is not one of ['A', 'B']"),
            ("history 1", with_set(mlp, spec__strategy={"type": "mp2", "history": 1,
                                                        "predictor": "zero"}),
             "spec.strategy.history: 1 is less than the minimum of 2"),
            # A value written is a value, not "the default" (it used to mean unset).
            ("mp2 zero history", with_set(mlp, spec__strategy={"type": "mp2", "history": 0,
                                                               "predictor": "zero"}),
             "spec.strategy.history: 0 is less than the minimum of 2"),
            ("zero parameters on ssgd", with_set(mlp, spec__strategy__bucketSize=0,
                                                 spec__strategy__density=0.0),
             "spec.strategy.bucketSize: 0 is less than the minimum of 1"),
            ("empty predictor on ssgd", with_set(mlp, spec__strategy__predictor=""),
             "spec.strategy.predictor applies only to strategy mp2"),
            ("density 0 on topk", with_set(mlp, spec__strategy={"type": "topk", "density": 0}),
             "spec.strategy.density: 0 is less than or equal to the minimum of 0"),
            ("history 65", with_set(mlp, spec__strategy={"type": "mp2", "history": 65,
                                                         "predictor": "zero"}),
             "spec.strategy.history: 65 is greater than the maximum of 64"),
            ("damping above 1", with_set(mlp, spec__strategy={"type": "mp2", "damping": 1.5,
                                                              "predictor": "zero"}),
             "spec.strategy.damping: 1.5 is greater than the maximum of 1"),
            ("damping on ps", with_set(mlp, spec__strategy={"type": "ps", "damping": 0.5}),
             "damping applies only to strategy mp2"),
            ("pullBits on hps", with_set(mlp, spec__strategy={"type": "hps", "pullBits": 8}),
             "pullBits applies only to strategy mp2"),
            ("localProgress on ps", with_set(mlp, spec__strategy={"type": "ps",
                                                                  "localProgress": True}),
             "localProgress applies only to strategy mp2"),
            ("pushRatio above 1", with_set(mlp, spec__strategy={"type": "mp2", "pushRatio": 1.5,
                                                                "predictor": "zero"}),
             "spec.strategy.pushRatio: 1.5 is greater than the maximum of 1"),
            ("calibration not a boolean",
             with_set(mlp, spec__strategy={"type": "mp2", "predictor": "zero",
                                           "calibration": "yes"}),
             "'yes' is not of type 'boolean'"),
            ("collect every 0", with_set(mlp, spec__collect={"path": "d.mp2d", "every": 0}),
             "spec.collect.every: 0 is less than the minimum of 1"),
            ("collect samples 0", with_set(mlp, spec__collect={"samples": 0}),
             "spec.collect.samples: 0 is less than the minimum of 1"),
            ("collect windowEvery 0", with_set(mlp, spec__collect={"windowEvery": 0}),
             "spec.collect.windowEvery: 0 is less than the minimum of 1"),
            ("collect windowLength 1", with_set(mlp, spec__collect={"windowLength": 1}),
             "spec.collect.windowLength: 1 is less than the minimum of 2"),
            ("unknown collect key", with_set(mlp, spec__collect={"out": "d.mp2d"}),
             "'out' was unexpected"),
            ("hMin on localsgd", with_set(mlp, spec__strategy={"type": "localsgd", "hMin": 2}),
             "hMin applies only to strategy multistep"),
            ("hMax on gossip", with_set(mlp, spec__strategy={"type": "gossip", "hMax": 2}),
             "hMax applies only to strategy multistep"),
            ("mu on localsgd", with_set(mlp, spec__strategy={"type": "localsgd", "mu": 0.01}),
             "mu applies only to strategy multistep"),
            ("update on localsgd",
             with_set(mlp, spec__strategy={"type": "localsgd", "update": "average"}),
             "update applies only to strategy multistep"),
            ("update average with delay 1",
             with_set(mlp, spec__strategy={"type": "multistep", "update": "average", "delay": 1}),
             "update average applies only with spec.strategy.delay 0"),
            ("delay on ssgd", with_set(mlp, spec__strategy__delay=1),
             "delay applies only to strategy multistep"),
            ("adaptive on localsgd",
             with_set(mlp, spec__strategy={"type": "localsgd", "interval": "adaptive"}),
             "interval adaptive is only for strategy multistep"),
            ("interval word", with_set(mlp, spec__strategy={"type": "multistep",
                                                            "interval": "often"}),
             "must be a non-zero integer or adaptive"),
            ("interval 0", with_set(mlp, spec__strategy={"type": "multistep", "interval": 0}),
             "spec.strategy.interval: must be a non-zero integer or adaptive"),
            ("interval 0 on localsgd",
             with_set(mlp, spec__strategy={"type": "localsgd", "interval": 0}),
             "spec.strategy.interval: must be a non-zero integer or adaptive"),
            ("negative interval",
             with_set(mlp, spec__strategy={"type": "localsgd", "interval": -1}),
             "spec.strategy.interval must be >= 1"),
            ("compression on quantized",
             with_set(mlp, spec__strategy={"type": "quantized", "compression": {"type": "fp16"}}),
             "spec.strategy.compression applies only to strategy multistep"),
            ("compression bits on fp16",
             with_set(mlp, spec__strategy={"type": "multistep",
                                           "compression": {"type": "fp16", "bits": 8}}),
             "spec.strategy.compression.bits applies only to compression type quantized"),
            ("compression bits 3",
             with_set(mlp, spec__strategy={"type": "multistep",
                                           "compression": {"type": "quantized", "bits": 3}}),
             "spec.strategy.compression.bits: 3 is not one of [1, 2, 4, 8]"),
            ("unknown compression", with_set(mlp, spec__strategy={
                "type": "multistep", "compression": {"type": "zstd"}}),
             "spec.strategy.compression.type: 'zstd' is not one of"),
            ("unknown compression key", with_set(mlp, spec__strategy={
                "type": "multistep", "compression": {"type": "quantized", "bucket": 64}}),
             "'bucket' was unexpected"),
            ("unknown scheduler", with_set(mlp, spec__scheduler={"type": "fifo"}),
             "spec.scheduler.type: 'fifo' is not one of ['none', 'priority']"),
            ("unknown scheduler key", with_set(mlp, spec__scheduler={"priority": True}),
             "'priority' was unexpected"),
            ("zero partition", with_set(mlp, spec__scheduler={"type": "priority",
                                                              "partitionElements": 0}),
             "spec.scheduler.partitionElements: 0 is less than the minimum of 1"),
            ("partition without priority", with_set(mlp, spec__scheduler={
                "partitionElements": 1024}),
             "spec.scheduler.partitionElements applies only to spec.scheduler.type priority"),
            ("credit with scheduler none", with_set(mlp, spec__scheduler={
                "type": "none", "creditElements": 1024}),
             "spec.scheduler.creditElements applies only to spec.scheduler.type priority"),
            ("credit below partition", with_set(mlp, spec__scheduler={
                "type": "priority", "partitionElements": 4096, "creditElements": 1024}),
             "spec.scheduler.creditElements must be >= spec.scheduler.partitionElements"),
            ("credit below the default partition", with_set(mlp, spec__scheduler={
                "type": "priority", "creditElements": 1048576}),
             "spec.scheduler.creditElements must be >= spec.scheduler.partitionElements"),
            ("priority with localsgd", with_set(mlp, spec__strategy={"type": "localsgd"},
                                                spec__scheduler={"type": "priority"}),
             "spec.scheduler.type priority applies only to strategies ssgd and multistep"),
            ("priority with multistep delay 1",
             with_set(mlp, spec__strategy={"type": "multistep", "delay": 1},
                      spec__scheduler={"type": "priority"}),
             "spec.scheduler.type priority cannot be combined with spec.strategy.delay 1"),
            ("priority with multistep compression",
             with_set(mlp, spec__strategy={"type": "multistep",
                                           "compression": {"type": "quantized"}},
                      spec__scheduler={"type": "priority"}),
             "cannot be combined with spec.strategy.delay 1 or spec.strategy.compression"),
            ("hMin above hMax",
             with_set(mlp, spec__strategy={"type": "multistep", "hMin": 8, "hMax": 4}),
             "hMin must be <= spec.strategy.hMax"),
            ("negative mu", with_set(mlp, spec__strategy={"type": "multistep", "mu": -1}),
             "spec.strategy.mu: -1 is less than the minimum of 0"),
            ("negative warmupSteps",
             with_set(mlp, spec__strategy={"type": "hierarchical", "warmupSteps": -5},
                      spec__topology={"workersPerNode": 2}),
             "spec.strategy.warmupSteps: -5 is less than the minimum of 0"),
            ("delay 2", with_set(mlp, spec__strategy={"type": "multistep", "delay": 2}),
             "spec.strategy.delay: 2 is greater than the maximum of 1"),
            ("staleness 2", with_set(hetero, spec__strategy__staleness=2),
             "spec.strategy.staleness: 2 is greater than the maximum of 1"),
            ("bits 1 on hps", with_set(hetero, spec__strategy__bits=1),
             "bits for strategy hps must be one of 2, 4, 8, 16, 32, dynamic"),
            ("bits '1' on hps", with_set(hetero, spec__strategy__bits="1"),
             "bits for strategy hps must be one of 2, 4, 8, 16, 32, dynamic"),
            ("shards on ssgd", with_set(mlp, spec__ps={"shards": 2}),
             "spec.ps.shards above 1 needs a parameter-server strategy (ps, hps, mp2)"),
            ("shards on default strategy", with_set(mlp, spec__strategy=DELETE,
                                                    spec__ps={"shards": 3}),
             "spec.ps.shards above 1 needs a parameter-server strategy"),
            ("zero shards", with_set(hetero, spec__ps__shards=0),
             "spec.ps.shards: 0 is less than the minimum of 1"),
            ("65 shards", with_set(hetero, spec__ps__shards=65),
             "spec.ps.shards: 65 is greater than the maximum of 64"),
            ("unknown spec key", with_set(mlp, spec__learningRate=0.1),
             "'learningRate' was unexpected"),
            ("unknown strategy key", with_set(mlp, spec__strategy__ratio=0.1),
             "'ratio' was unexpected"),
            ("unknown top-level key", with_set(mlp, specs={}), "'specs' was unexpected"),
            ("quoted integer", with_set(mlp, spec__epochs="5"), "'5' is not of type 'integer'"),
            ("zero global batch", with_set(mlp, spec__globalBatchSize=0),
             "0 is less than the minimum of 1"),
            ("name and torchscript", with_set(mlp, spec__model__torchscript="m.pt"),
             "set exactly one of spec.model.name and spec.model.torchscript"),
            ("neither name nor torchscript", with_set(mlp, spec__model={}),
             "set exactly one of spec.model.name"),
            ("unknown model", with_set(mlp, spec__model__name="gpt2"), "'gpt2' is not one of"),
            ("hidden on lenet5", with_set(mlp, spec__model__name="lenet5"),
             "hidden applies only to model mlp"),
            ("synthetic block on mnist", with_set(mlp, spec__dataset__name="mnist"),
             "synthetic applies only to dataset synthetic"),
            ("format mismatch", with_set(mlp, spec__dataset={"name": "mnist",
                                                             "format": "cifar-binary"}),
             "format does not match the dataset"),
            ("cifar without path", with_set(hetero, spec__dataset__path=DELETE),
             "path is required for datasets cifar10 and cifar100"),
            ("unknown built-in name", with_set(mlp, spec__dataset={"name": "imagenet"}),
             "spec.dataset.name must be fashion-mnist, mnist, cifar10, cifar100 or synthetic"),
            ("user format without path", with_set(mlp, spec__dataset={"name": "x",
                                                                      "format": "npy"}),
             "spec.dataset.path is required for datasets cifar10 and cifar100 and for formats"),
            ("user format with an empty name", with_set(mlp, spec__dataset={
                "name": "", "format": "npy", "path": "/d"}),
             "spec.dataset.name: '' is too short"),
            ("unknown format", with_set(mlp, spec__dataset={"name": "x", "format": "tfrecord",
                                                            "path": "/d"}),
             "spec.dataset.format: 'tfrecord' is not one of"),
            ("mean without std", with_set(mlp, spec__dataset__mean=[0.5]),
             "set both spec.dataset.mean and spec.dataset.std, or neither"),
            ("mean and std of different lengths", with_set(
                mlp, spec__dataset__mean=[0.5, 0.5, 0.5], spec__dataset__std=[0.2]),
             "spec.dataset.std needs as many values as spec.dataset.mean"),
            ("std 0", with_set(mlp, spec__dataset__mean=[0.5], spec__dataset__std=[0]),
             "spec.dataset.std[0]: 0 is less than or equal to the minimum of 0"),
            ("mean with normalize false", with_set(mlp, spec__dataset__mean=[0.5],
                                                   spec__dataset__std=[0.2],
                                                   spec__dataset__normalize=False),
             "spec.dataset.mean cannot be combined with normalize: false"),
            ("layout on imagefolder", with_set(mlp, spec__dataset={
                "name": "x", "format": "imagefolder", "path": "/d", "layout": "NHWC"}),
             "spec.dataset.layout applies only to format npy"),
            ("unknown layout", with_set(mlp, spec__dataset={
                "name": "x", "format": "npy", "path": "/d", "layout": "HWC"}),
             "spec.dataset.layout: 'HWC' is not one of ['NHWC', 'NCHW']"),
            ("imageSize on npy", with_set(mlp, spec__dataset={
                "name": "x", "format": "npy", "path": "/d", "imageSize": [28, 28]}),
             "spec.dataset.imageSize applies only to formats imagefolder, filelist and webdataset"),
            ("three imageSize values", with_set(mlp, spec__dataset={
                "name": "x", "format": "filelist", "path": "/d", "imageSize": [3, 28, 28]}),
             "is too long"),
            ("imageSize 0", with_set(mlp, spec__dataset={
                "name": "x", "format": "filelist", "path": "/d", "imageSize": [0]}),
             "spec.dataset.imageSize[0]: 0 is less than the minimum of 1"),
            ("channels on a built-in set", with_set(mlp, spec__dataset__channels=1),
             "spec.dataset.channels applies only to formats imagefolder, filelist and webdataset"),
            ("channels 2", with_set(mlp, spec__dataset={
                "name": "x", "format": "webdataset", "path": "/d", "channels": 2}),
             "spec.dataset.channels: 2 is not one of [1, 3]"),
            ("classes on a built-in set", with_set(mlp, spec__dataset__classes=10),
             "spec.dataset.classes applies only to formats npy, imagefolder, filelist and"),
            ("skipCorrupt on a built-in set", with_set(mlp, spec__dataset__skipCorrupt=True),
             "spec.dataset.skipCorrupt applies only to formats npy, imagefolder, filelist and"),
            ("both crops", with_set(mlp, spec__dataset__augment={
                "randomCrop": {"size": 24}, "randomResizedCrop": {"size": 24}}),
             "spec.dataset.augment.randomCrop cannot be combined with randomResizedCrop"),
            ("crop without size", with_set(mlp, spec__dataset__augment={
                "randomCrop": {"padding": 4}}), "'size' is a required property"),
            ("crop size 0", with_set(mlp, spec__dataset__augment={"randomCrop": {"size": 0}}),
             "spec.dataset.augment.randomCrop.size: 0 is less than the minimum of 1"),
            ("negative padding", with_set(mlp, spec__dataset__augment={
                "randomCrop": {"size": 24, "padding": -1}}),
             "spec.dataset.augment.randomCrop.padding: -1 is less than the minimum of 0"),
            ("scale above 1", with_set(mlp, spec__dataset__augment={
                "randomResizedCrop": {"size": 24, "scale": [0.5, 1.5]}}),
             "spec.dataset.augment.randomResizedCrop.scale needs 0 < min <= max <= 1"),
            ("scale reversed", with_set(mlp, spec__dataset__augment={
                "randomResizedCrop": {"size": 24, "scale": [0.9, 0.1]}}),
             "spec.dataset.augment.randomResizedCrop.scale needs 0 < min <= max <= 1"),
            ("ratio 0", with_set(mlp, spec__dataset__augment={
                "randomResizedCrop": {"size": 24, "ratio": [0, 1]}}),
             "spec.dataset.augment.randomResizedCrop.ratio needs 0 < min <= max"),
            ("one ratio value", with_set(mlp, spec__dataset__augment={
                "randomResizedCrop": {"size": 24, "ratio": [1]}}), "is too short"),
            ("unknown augment key", with_set(mlp, spec__dataset__augment={"rotate": 10}),
             "'rotate' was unexpected"),
            ("unknown task", with_set(mlp, spec__task="detection"),
             "spec.task: 'detection' is not one of"),
            ("torchscript task on a zoo model", with_set(mlp, spec__task="torchscript"),
             "spec.task torchscript needs spec.model.torchscript"),
            ("unknown precision", with_set(mlp, spec__precision="fp8"),
             "spec.precision: 'fp8' is not one of ['fp32', 'bf16', 'fp16']"),
            ("fp16 on the cpu", with_set(mlp, spec__precision="fp16", spec__device="cpu"),
             "spec.precision fp16 needs a GPU"),
            ("unknown device", with_set(mlp, spec__device="tpu"), "'tpu' is not one of"),
            ("zero lr", with_set(mlp, spec__optimizer__lr=0),
             "0 is less than or equal to the minimum of 0"),
            ("momentum 1", with_set(mlp, spec__optimizer__momentum=1.0),
             "1.0 is greater than or equal to the maximum of 1"),
            ("three betas", with_set(mlp, spec__optimizer={"type": "adam",
                                                           "betas": [0.9, 0.99, 0.999]}),
             "is too long"),
            ("step without stepSize", with_set(mlp, spec__optimizer__schedule={"type": "step"}),
             "stepSize is required for schedule step"),
            ("group name not a label", with_set(hetero, spec__workerGroups__0__name="A100_big"),
             "does not match"),
            ("duplicate group names", with_set(hetero, spec__workerGroups__1__name="a100"),
             "Duplicate value"),
            ("batchSize on one group", with_set(hetero, spec__workerGroups__0__batchSize=64),
             "set batchSize on every worker group or on none"),
            ("maxBatch below minBatch", with_set(hetero, spec__rebalance__maxBatch=16),
             "maxBatch must be 0 or at least spec.rebalance.minBatch"),
            ("checkpoint interval without path", with_set(mlp, spec__checkpoint={
                "intervalSteps": 100}), "checkpoint.path is required"),
            ("queue for scheduler-plugins", with_set(mlp, spec__gangScheduling={
                "enabled": True, "provider": "scheduler-plugins", "queue": "q"}),
             "queue applies only to provider volcano"),
            ("unknown gang provider", with_set(mlp, spec__gangScheduling={"provider": "kueue"}),
             "'kueue' is not one of"),
            ("slowdown below 1", with_set(mlp, spec__testing__slowdown=[1.0, 0.5]),
             "0.5 is less than the minimum of 1"),
            ("slowdown window of 0", with_set(mlp, spec__testing__slowdownWindow=0),
             "0 is less than the minimum of 1"),
            ("bad quantity", with_set(hetero, spec__ps__template__spec__containers=[
                {"name": "ps", "resources": {"requests": {"cpu": "lots"}}}]), "does not match"),
            ("env value not a string", with_set(hetero, spec__ps__template__spec__containers=[
                {"name": "ps", "env": [{"name": "N", "value": 8}]}]),
             "8 is not of type 'string'"),
            ("unknown template key", with_set(mlp, spec__workers__template={"specs": {}}),
             "'specs' was unexpected"),
            ("job name not a label", with_set(mlp, metadata={"name": "Synthetic_MLP"}),
             "metadata.name: 'Synthetic_MLP' does not match"),
            # spec.elastic (synthetic-mlp has spec.workers {replicas: 2}, heterogeneous-gpus two
            # worker groups).
            ("elastic with two worker groups", with_set(hetero, spec__elastic={}),
             "spec.elastic takes one worker group"),
            ("elastic with a group batchSize", with_set(
                hetero, spec__elastic={}, spec__workerGroups=[
                    {"name": "a100", "replicas": 2, "batchSize": 32}]),
             "spec.elastic cannot be combined with a worker group's batchSize"),
            ("elastic with a trainer", with_set(mlp, spec__model=DELETE, spec__elastic={},
                                                spec__trainer={"command": ["./train"]}),
             "spec.elastic is not supported with spec.trainer"),
            ("elastic with gang scheduling", with_set(mlp, spec__elastic={},
                                                      spec__gangScheduling={"enabled": True}),
             "spec.elastic is not supported with spec.gangScheduling"),
            ("elastic minReplicas above replicas", with_set(mlp, spec__elastic={
                "minReplicas": 3, "maxReplicas": 4}),
             "spec.elastic.minReplicas must be at most the workers' replicas"),
            ("elastic minReplicas above a group's replicas", with_set(
                hetero, spec__elastic={"minReplicas": 3}, spec__workerGroups=[
                    {"name": "a100", "replicas": 2}]),
             "spec.elastic.minReplicas must be at most the workers' replicas"),
            ("elastic maxReplicas below replicas", with_set(mlp, spec__elastic={
                "maxReplicas": 1}),
             "spec.elastic.maxReplicas must be at least the workers' replicas"),
            # What `kubectl scale tj/NAME --replicas=8` makes of a job with maxReplicas 6.
            ("kubectl scale above maxReplicas", with_set(
                mlp, spec__workers__replicas=8, spec__elastic={"maxReplicas": 6}),
             "spec.elastic.maxReplicas must be at least the workers' replicas"),
            ("elastic minReplicas above maxReplicas", with_set(mlp, spec__elastic={
                "minReplicas": 5, "maxReplicas": 4}),
             "spec.elastic.minReplicas must be at most spec.elastic.maxReplicas"),
            ("elastic minReplicas 0", with_set(mlp, spec__elastic={"minReplicas": 0}),
             "spec.elastic.minReplicas: 0 is less than the minimum of 1"),
            ("elastic joinTimeoutSeconds 0", with_set(mlp, spec__elastic={
                "joinTimeoutSeconds": 0}),
             "spec.elastic.joinTimeoutSeconds: 0 is less than the minimum of 1"),
            ("unknown elastic key", with_set(mlp, spec__elastic={"replicas": 3}),
             "'replicas' was unexpected"),
        ]
        messages_hit = set()
        for name, doc, expected in cases:
            errors = self.errors(doc)
            self.assertRejected(doc, expected, name)
            messages_hit.update(errors)
        # Every CEL rule is seen failing at least once, so every twin is exercised both ways.
        for path, rule, message in k8s_schema.cel_rules(self.schema):
            if path.startswith("status"):
                continue
            self.assertTrue(any(message in e for e in messages_hit),
                            f"no inline case breaks the rule at {path}: {rule}")


def main():
    if k8s_schema.jsonschema is None:
        print("SKIP: python3-jsonschema is not installed (apt-get install python3-jsonschema)")
        return 77
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(CrdSchemaTest)
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
