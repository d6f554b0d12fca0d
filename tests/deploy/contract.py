"""The parts of the shared controller contract (RBAC, controller metrics) that the deploy tests
compare manifests, the chart and the dashboards against. One place, so a change to the contract
is one edit here plus the manifests it governs."""

# ClusterRole rules: (apiGroup, resource) -> verbs, exactly the calls hptrain-controller makes
# (tests/controller/manager/controller_rbac_test.cc runs it under deploy/rbac and fails on a
# missing or an unused verb). delete on trainingjobs: runPolicy.ttlSecondsAfterFinished.
CLUSTER_RULES = {
    ("hptrain.io", "trainingjobs"): {"list", "watch", "delete"},
    ("hptrain.io", "trainingjobs/status"): {"update"},
    ("", "pods"): {"list", "watch", "create", "delete"},
    ("", "services"): {"list", "watch", "create", "delete"},
    ("", "secrets"): {"list", "watch", "create", "delete"},
    ("", "events"): {"create", "patch"},
    # spec.gangScheduling: the job's PodGroup, of either provider.
    ("scheduling.volcano.sh", "podgroups"): {"list", "watch", "create", "delete"},
    ("scheduling.x-k8s.io", "podgroups"): {"list", "watch", "create", "delete"},
}

# Role in the leader-election namespace.
LEASE_RULES = {
    ("coordination.k8s.io", "leases"): {"get", "create", "update"},
}

# The aggregated ClusterRoles for users (deploy/rbac/aggregate_roles.yaml and the chart's
# aggregate-roles.yaml): TrainingJobs in Kubernetes' admin/edit and view.
AGGREGATE_EDIT_RULES = {
    ("hptrain.io", "trainingjobs"): {"create", "delete", "deletecollection", "get", "list",
                                     "patch", "update", "watch"},
    ("hptrain.io", "trainingjobs/scale"): {"get", "patch", "update"},
    ("hptrain.io", "trainingjobs/status"): {"get"},
}
AGGREGATE_VIEW_RULES = {
    ("hptrain.io", "trainingjobs"): {"get", "list", "watch"},
    ("hptrain.io", "trainingjobs/scale"): {"get", "list", "watch"},
    ("hptrain.io", "trainingjobs/status"): {"get", "list", "watch"},
}
AGGREGATE_EDIT_LABELS = {"rbac.authorization.k8s.io/aggregate-to-admin": "true",
                         "rbac.authorization.k8s.io/aggregate-to-edit": "true"}
AGGREGATE_VIEW_LABELS = {"rbac.authorization.k8s.io/aggregate-to-view": "true"}

# Metrics hptrain-controller exports (name -> type).
CONTROLLER_METRICS = {
    "hptrain_controller_reconcile_duration_seconds": "histogram",
    "hptrain_controller_reconcile_errors_total": "counter",
    "hptrain_controller_queue_depth": "gauge",
    "hptrain_controller_is_leader": "gauge",
    "hptrain_controller_rebalances_total": "counter",
}

# Flags of hptrain-controller (controller/manager/flags.cc; manifests_test.py checks the two
# agree).
CONTROLLER_FLAGS = {
    "--kubeconfig", "--namespace", "--leader-elect", "--leader-election-namespace",
    "--leader-election-id", "--metrics-address", "--health-address", "--prometheus-url",
    "--workers", "--default-image", "--default-image-pull-policy", "--default-image-pull-secrets",
    "--webhook-address", "--webhook-cert-dir",
}


def flatten_rules(rules):
    """RBAC rules as {(apiGroup, resource): verbs}; a resource granted twice is an error."""
    flat = {}
    for rule in rules:
        for group in rule.get("apiGroups", []):
            for resource in rule.get("resources", []):
                key = (group, resource)
                if key in flat:
                    raise ValueError(f"{key} is granted by more than one rule")
                flat[key] = set(rule.get("verbs", []))
    return flat
