"""The KubeRay manifests in ops/kuberay/ are what KubeRay and Kubernetes accept and what loadtest
needs, checked offline (no cluster here):

- each custom resource against the CRD of KubeRay v1.7.0 vendored in tests/data/kuberay/ (its
  `openAPIV3Schema`, with jsonschema), made strict: a CRD's structural schema leaves unknown
  fields to the API server, which drops them without a word, so a misspelt `rayStartParams` would
  pass; here every object schema that lists its properties refuses any other;
- KubeRay's own admission rules these manifests touch (ray-operator/controllers/ray/utils/validation.go);
- each pod template, and every plain Kubernetes object, against Kubernetes' schema
  (kubernetes-validate, strict);
- each `loadtest ...` command, the entrypoints and those the comments tell people to run, with
  loadtest's own parser; and what a user relies on across them: every pod mounts the results
  volume at one path and --out is on it, the GPU pods declare the GPUs and the accelerator type the
  fleet's placement asks for (the pre-flight, `cluster.placement.make_plan`, holds every mode at
  once on them), the Locust workers fit the CPU pods, one image, and the soak's cluster is the
  standing one's.
"""

from __future__ import annotations

import copy
import functools
import gzip
import json
import re
import shlex
import tomllib
import zoneinfo
from collections.abc import Callable
from pathlib import Path, PurePosixPath

import jsonschema
import kubernetes_validate
import pytest
import yaml
from croniter import croniter
from packaging.requirements import Requirement

from cluster.fleet import available_modes, load_fleet, resolve_modes
from cluster.placement import ACCELERATOR_PREFIX, Node, make_plan
from loadtest.commands.arguments import build_parser
from loadtest.replay.worker_nodes import chosen_nodes, deal
from tests.conftest import ROOT

KUBERAY = ROOT / "ops" / "kuberay"
CRDS = ROOT / "tests" / "data" / "kuberay"
MANIFESTS = ("results-pvc.yaml", "raycluster.yaml", "rayjob.yaml", "raycronjob.yaml")
CRD_FILES = {"RayCluster": "ray.io_rayclusters.yaml.gz", "RayJob": "ray.io_rayjobs.yaml.gz",
             "RayCronJob": "ray.io_raycronjobs.yaml.gz"}
KUBERAY_TAG = "v1.7.0"
GPU = "nvidia.com/gpu"
DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
# validation.go's bounds on names (constant.go): a RayJob's cluster is named after it, a RayCronJob's jobs too
MAX_NAME = {"RayCluster": 53, "RayJob": 47, "RayCronJob": 36}


# ---------------------------------------------------------------- reading the manifests and the CRDs

def _docs(name: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((KUBERAY / name).read_text()) if d is not None]


@functools.cache
def _read_all() -> tuple[tuple[str, dict], ...]:
    return tuple((name, doc) for name in MANIFESTS for doc in _docs(name))


def _all_docs() -> list[tuple[str, dict]]:
    return copy.deepcopy(list(_read_all()))


def _one(kind: str) -> dict:
    found = [doc for _, doc in _read_all() if doc["kind"] == kind]
    assert len(found) == 1, f"{len(found)} {kind} in ops/kuberay/"
    return copy.deepcopy(found[0])


def _strict(schema: dict) -> dict:
    """`schema` with every object that lists its properties closed to others (unless it says
    x-kubernetes-preserve-unknown-fields), OpenAPI's `nullable` as JSON Schema's null type, and
    x-kubernetes-int-or-string as integer or string."""
    s = dict(schema)
    if "properties" in s:
        s["properties"] = {k: _strict(v) for k, v in s["properties"].items()}
        if "additionalProperties" not in s and not s.get("x-kubernetes-preserve-unknown-fields"):
            s["additionalProperties"] = False
    if isinstance(s.get("additionalProperties"), dict):
        s["additionalProperties"] = _strict(s["additionalProperties"])
    if isinstance(s.get("items"), dict):
        s["items"] = _strict(s["items"])
    for key in ("allOf", "anyOf", "oneOf"):
        if key in s:
            s[key] = [_strict(x) for x in s[key]]
    if isinstance(s.get("not"), dict):
        s["not"] = _strict(s["not"])
    if s.get("nullable") and isinstance(s.get("type"), str):
        s["type"] = [s["type"], "null"]
    if s.get("x-kubernetes-int-or-string") and "anyOf" not in s and "type" not in s:
        s["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    return s


@functools.cache
def _crd(kind: str) -> dict:
    with gzip.open(CRDS / CRD_FILES[kind], "rt") as f:
        crd = yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    assert crd["kind"] == "CustomResourceDefinition" and crd["spec"]["names"]["kind"] == kind
    return crd


@functools.cache
def _validator(kind: str, api_version: str) -> jsonschema.Draft4Validator:
    """The strict validator of `kind` at `api_version`, which the CRD must serve."""
    group, _, version = api_version.partition("/")
    crd = _crd(kind)
    assert crd["spec"]["group"] == group, f"{kind} is in {crd['spec']['group']}, not {group}"
    served = {v["name"]: v for v in crd["spec"]["versions"] if v.get("served")}
    assert version in served, f"KubeRay {KUBERAY_TAG} serves {kind} as {sorted(served)}, not {version}"
    assert not served[version].get("deprecated"), f"{kind} {api_version} is deprecated"
    return jsonschema.Draft4Validator(_strict(served[version]["schema"]["openAPIV3Schema"]))


def _crd_errors(doc: dict) -> list[str]:
    errors = _validator(doc["kind"], doc["apiVersion"]).iter_errors(doc)
    return sorted(f"{'.'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}" for e in errors)


def _cluster_specs() -> list[tuple[str, dict]]:
    """Every Ray cluster the manifests describe: the RayCluster's, and those RayJobs bring."""
    specs = [("RayCluster", _one("RayCluster")["spec"])]
    if "rayClusterSpec" in _one("RayJob")["spec"]:
        specs.append(("RayJob", _one("RayJob")["spec"]["rayClusterSpec"]))
    specs.append(("RayCronJob", _one("RayCronJob")["spec"]["jobTemplate"]["rayClusterSpec"]))
    return specs


def _groups(spec: dict) -> list[tuple[str, dict]]:
    return [("head", spec["headGroupSpec"]), *((g["groupName"], g) for g in spec["workerGroupSpecs"])]


def _gpu_group(spec: dict) -> dict:
    (group,) = [g for g in spec["workerGroupSpecs"] if GPU in _ray_container(g)["resources"].get("limits", {})]
    return group


def _ray_container(group: dict) -> dict:
    return group["template"]["spec"]["containers"][0]   # KubeRay's Ray container is the first


def _job_specs() -> list[tuple[str, dict]]:
    """The RayJob specs: the RayJob's, and the RayCronJob's template."""
    return [("RayJob", _one("RayJob")["spec"]), ("RayCronJob", _one("RayCronJob")["spec"]["jobTemplate"])]


def _cluster_of(job: dict) -> dict:
    """The cluster a RayJob spec runs on: its own, or the RayCluster its clusterSelector names."""
    if "rayClusterSpec" in job:
        return job["rayClusterSpec"]
    cluster = _one("RayCluster")
    assert job["clusterSelector"] == {"ray.io/cluster": cluster["metadata"]["name"]}, job["clusterSelector"]
    return cluster["spec"]


def _argv(command: str) -> list[str]:
    words = shlex.split(command)
    assert words[0] == "loadtest", command
    return words[1:]


def _parse(command: str):
    """`command` (`loadtest ...`) parsed by loadtest's own parser: a flag it does not know, or a
    value out of its bounds, exits 2 here (argparse says which on stderr)."""
    try:
        return build_parser().parse_args(_argv(command))
    except SystemExit:
        raise AssertionError(f"loadtest's parser refuses: {command}") from None


def _commented_commands(name: str) -> list[str]:
    """The `loadtest ...` commands a manifest's comments tell people to run (after `kubectl exec ... --`)."""
    text = "\n".join(ln.lstrip("#").strip() for ln in (KUBERAY / name).read_text().splitlines()
                     if ln.startswith("#"))
    text = re.sub(r"\\\n\s*", " ", text)   # the continued lines
    return [m.group(1).split("  (")[0].strip() for m in re.finditer(r"kubectl exec .*? -- (loadtest .+)", text)]


def _ray_cpus(group: dict) -> int:
    """The CPUs Ray offers on a pod of `group`: num-cpus, else as KubeRay reads the container's
    CPU limit, else its request (pod.go, generateRayStartCommand)."""
    if "num-cpus" in group.get("rayStartParams", {}):
        return int(group["rayStartParams"]["num-cpus"])
    resources = _ray_container(group).get("resources", {})
    quantity = str(resources.get("limits", {}).get("cpu") or resources.get("requests", {}).get("cpu") or 0)
    return -(-int(quantity[:-1]) // 1000) if quantity.endswith("m") else int(quantity)


def _ray_nodes(spec: dict) -> list[Node]:
    """The Ray nodes the cluster `spec` starts, with the resources `ray start` gives each."""
    nodes = []
    for name, group in _groups(spec):
        params = group.get("rayStartParams", {})
        gpus = float(params.get("num-gpus", _ray_container(group)["resources"].get("limits", {}).get(GPU, 0)))
        resources = {"CPU": float(_ray_cpus(group)), "GPU": gpus, **json.loads(params.get("resources", "{}"))}
        nodes += [Node(f"{name}-{i}", {k: v for k, v in resources.items() if v})
                  for i in range(1 if name == "head" else group["replicas"])]
    return nodes


def _ray_pin() -> Requirement:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (ray,) = [Requirement(d) for d in deps if Requirement(d).name == "ray"]
    return ray


def _ray_version_within_pin(version: str) -> bool:
    return _ray_pin().specifier.contains(version, prereleases=True)


# ---------------------------------------------------------------- the CRDs

@pytest.mark.parametrize("kind", ["RayCluster", "RayJob", "RayCronJob"])
def test_each_custom_resource_is_valid_against_kuberays_crd_strictly(kind):
    doc = _one(kind)
    assert doc["apiVersion"] == "ray.io/v1"
    assert _crd_errors(doc) == []


def _rename(path: list, old: str, new: str) -> Callable[[dict], None]:
    def mutate(doc: dict) -> None:
        node = doc
        for key in path:
            node = node[key]
        node[new] = node.pop(old)
    return mutate


def _set(path: list, value) -> Callable[[dict], None]:
    def mutate(doc: dict) -> None:
        node = doc
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return mutate


GPU_CONTAINER = ["spec", "workerGroupSpecs", 0, "template", "spec", "containers", 0]
CRON_HEAD = ["spec", "jobTemplate", "rayClusterSpec", "headGroupSpec"]


@pytest.mark.parametrize(("kind", "mutate", "named"), [
    ("RayCluster", _rename(["spec", "headGroupSpec"], "rayStartParams", "rayStartParam"), "'rayStartParam'"),
    ("RayCluster", _rename(GPU_CONTAINER, "volumeMounts", "volumeMount"), "'volumeMount'"),
    ("RayCronJob", _rename(CRON_HEAD, "rayStartParams", "rayStartParam"), "'rayStartParam'"),
    ("RayCronJob", _rename(["spec"], "jobTemplate", "job"), "'job'"),
    ("RayJob", _rename(["spec"], "shutdownAfterJobFinishes", "shutdownAfterJobFinished"), "'shutdownAfterJobFinished'"),
    ("RayCluster", _set(["spec", "workerGroupSpecs", 0, "minReplicas"], "2"), "'2' is not of type 'integer'"),
    ("RayCluster", _set(["spec", "headGroupSpec", "rayStartParams", "num-cpus"], 0), "0 is not of type 'string'"),
], ids=["rayStartParam", "container-volumeMount", "cron-rayStartParam", "cron-job", "rayjob-shutdown",
        "minReplicas-string", "num-cpus-integer"])
def test_a_misspelt_or_mistyped_field_fails_the_crd_check(kind, mutate, named):
    """The check can fail: each mistake here the API server would take (a misspelt field it drops
    in silence) or refuse, and the strict schema names it."""
    doc = copy.deepcopy(_one(kind))
    mutate(doc)
    errors = _crd_errors(doc)
    assert errors and any(named in e for e in errors), errors


def test_the_strict_schema_leaves_open_what_the_crd_leaves_open():
    """Maps (rayStartParams, labels, clusterSelector) and x-kubernetes-preserve-unknown-fields stay
    open: strictness only closes objects that list their properties."""
    doc = copy.deepcopy(_one("RayCluster"))
    doc["spec"]["headGroupSpec"]["rayStartParams"]["any-ray-start-flag"] = "1"
    doc["spec"]["headGroupSpec"]["template"]["metadata"]["labels"]["team"] = "serving"
    assert _crd_errors(doc) == []


def test_kuberays_own_admission_rules_hold():
    """What validation.go refuses beyond the schema, for the fields these manifests use."""
    for kind in MAX_NAME:
        name = _one(kind)["metadata"]["name"]
        assert DNS1035.match(name) and len(name) <= MAX_NAME[kind], (kind, name)
    for where, spec in _cluster_specs():
        assert spec["headGroupSpec"]["template"]["spec"]["containers"], where
        for name, group in _groups(spec):
            params = group.get("rayStartParams", {})
            assert "labels" not in params, f"{where} {name}: rayStartParams['labels'] (use the group's labels field)"
            assert not ({"num-cpus", "num-gpus", "memory", "resources"} & set(params) and group.get("resources")), \
                f"{where} {name}: resources in both rayStartParams and the group's resources field"
            if name != "head":
                low, high = group["minReplicas"], group["maxReplicas"]
                assert 0 <= low <= group.get("replicas", low) <= high, f"{where} {name}: min <= replicas <= max"
        if not spec.get("enableInTreeAutoscaling"):
            assert all("minReplicas" in g and "maxReplicas" in g for g in spec["workerGroupSpecs"]), where
    for where, job in _job_specs():
        assert ("rayClusterSpec" in job) != ("clusterSelector" in job), f"{where}: rayClusterSpec or clusterSelector"
        if "clusterSelector" in job:
            assert job["clusterSelector"].get("ray.io/cluster"), where
            assert job.get("backoffLimit", 0) <= 0, f"{where}: backoffLimit is incompatible with clusterSelector"
            assert not job.get("suspend"), where
        assert not job.get("suspend") or job.get("shutdownAfterJobFinishes"), where
        assert job.get("ttlSecondsAfterFinished", 0) == 0 or job.get("shutdownAfterJobFinishes"), \
            f"{where}: ttlSecondsAfterFinished needs shutdownAfterJobFinishes"
        assert job.get("activeDeadlineSeconds", 1) > 0 and job.get("backoffLimit", 0) >= 0, where
        assert isinstance(yaml.safe_load(job.get("runtimeEnvYAML", "{}")), dict), f"{where}: runtimeEnvYAML"
    cron = _one("RayCronJob")["spec"]
    assert "TZ" not in cron["schedule"] and croniter.is_valid(cron["schedule"]), cron["schedule"]
    if "timeZone" in cron:
        zoneinfo.ZoneInfo(cron["timeZone"])   # raises for a zone Go's time.LoadLocation would not know either


# ---------------------------------------------------------------- Kubernetes' own schemas

def _pod_template(template: dict) -> dict:
    return {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "ray-pod"}, "template": template}


def test_pod_templates_and_plain_objects_are_valid_kubernetes():
    version = kubernetes_validate.latest_version()
    plain = [doc for _, doc in _all_docs() if not doc["apiVersion"].startswith("ray.io/")]
    assert [d["kind"] for d in plain] == ["PersistentVolumeClaim"]
    for doc in plain:
        kubernetes_validate.validate(doc, version, strict=True)   # raises if invalid
    for where, spec in _cluster_specs():
        for name, group in _groups(spec):
            try:
                kubernetes_validate.validate(_pod_template(group["template"]), version, strict=True)
            except kubernetes_validate.ValidationError as exc:
                raise AssertionError(f"{where} {name}'s pod template: {exc}") from None
    broken = copy.deepcopy(_gpu_group(_one("RayCluster")["spec"])["template"])
    broken["spec"]["containers"][0]["volumeMount"] = broken["spec"]["containers"][0].pop("volumeMounts")
    with pytest.raises(kubernetes_validate.ValidationError, match="volumeMount"):
        kubernetes_validate.validate(_pod_template(broken), version, strict=True)


# ---------------------------------------------------------------- loadtest's side

def test_every_loadtest_command_parses_with_loadtests_own_parser():
    commands = [job["entrypoint"] for _, job in _job_specs()]
    for name in MANIFESTS:
        commands += _commented_commands(name)
    assert len(commands) >= 5, commands
    kinds = {_parse(c).command for c in commands}
    assert {"run", "soak", "report"} <= kinds, kinds
    assert _parse(_one("RayJob")["spec"]["entrypoint"]).requests == 50000
    with pytest.raises(AssertionError, match="refuses"):   # the check can fail: a flag loadtest does not have
        _parse(_one("RayJob")["spec"]["entrypoint"] + " --no-such-flag")


def _results_mount(group: dict, claim: str) -> str:
    volumes = [v["name"] for v in group["template"]["spec"].get("volumes", [])
               if v.get("persistentVolumeClaim", {}).get("claimName") == claim]
    assert len(volumes) == 1, f"{group.get('groupName', 'head')}: {len(volumes)} volumes of the claim {claim}"
    mounts = [m["mountPath"] for m in _ray_container(group).get("volumeMounts", []) if m["name"] == volumes[0]]
    assert len(mounts) == 1, f"{group.get('groupName', 'head')}: the results volume is not mounted once"
    return mounts[0]


def test_every_pod_mounts_the_results_volume_at_one_path_and_out_is_on_it():
    pvc = _one("PersistentVolumeClaim")
    assert pvc["spec"]["accessModes"] == ["ReadWriteMany"]   # every pod, on every node, writes to it
    claim = pvc["metadata"]["name"]
    paths = {_results_mount(g, claim) for _, spec in _cluster_specs() for _, g in _groups(spec)}
    assert len(paths) == 1, paths
    (path,) = paths
    assert yaml.safe_load((ROOT / "ops" / "schedule" / "soak-cronjob.yaml").read_text())["spec"]["jobTemplate"][
        "spec"]["template"]["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] == claim
    for where, job in _job_specs():
        args = _parse(job["entrypoint"])
        assert args.ray_workers, f"{where}: the Locust workers on the CPU pods write to --out: --ray-workers"
        out, mount = PurePosixPath(args.out), PurePosixPath(path)
        assert out == mount or mount in out.parents, f"{where}: --out {out} is not on {path}"
    for name in MANIFESTS:
        for command in _commented_commands(name):
            args = _parse(command)
            where = args.out if args.command in ("run", "soak") else args.runs[0]
            assert where.startswith(path), f"{name}: {command}"


def test_gpu_pods_declare_the_gpus_and_accelerator_type_the_fleet_asks_for_and_cpu_pods_none():
    for where, spec in _cluster_specs():
        head = spec["headGroupSpec"]
        assert head["rayStartParams"].get("num-cpus") == "0", f"{where}: no actor on the head"
        assert GPU not in str(_ray_container(head)["resources"]), where
        gpu = _gpu_group(spec)
        limits, requests = _ray_container(gpu)["resources"]["limits"], _ray_container(gpu)["resources"]["requests"]
        assert limits[GPU] == requests[GPU] == gpu["rayStartParams"]["num-gpus"], f"{where}: GPUs asked and declared"
        resources = json.loads(gpu["rayStartParams"]["resources"])   # a JSON string, as `ray start --resources` takes
        assert isinstance(resources, dict) and resources.get(ACCELERATOR_PREFIX + "H100", 0) > 0, resources
        assert "H100" in gpu["template"]["spec"]["nodeSelector"]["nvidia.com/gpu.product"], where
        for group in spec["workerGroupSpecs"]:
            if group is not gpu:
                assert group["rayStartParams"].get("num-gpus") == "0", f"{where} {group['groupName']}"
                assert GPU not in str(_ray_container(group)["resources"]), f"{where} {group['groupName']}"
                assert not any(k.startswith(ACCELERATOR_PREFIX) for k in
                               json.loads(group["rayStartParams"].get("resources", "{}"))), group["groupName"]


def test_the_fleet_fits_its_cluster_at_once_and_the_locust_workers_fit_the_cpu_pods():
    """loadtest's own pre-flight over the Ray nodes each cluster starts: every mode of the
    entrypoint at once (a soak needs that), none a placeholder, on GPUs of the fleet's accelerator
    type; and each mode's --workers Locust workers, one CPU each, on the nodes without GPUs."""
    for where, job in _job_specs():
        args = _parse(job["entrypoint"])
        fleet, _ = load_fleet(args.fleet)
        assert fleet.engine == "vllm" and fleet.accelerator_type == "H100", where
        modes = resolve_modes(fleet.name, list(fleet.modes), args.modes)
        kept, skipped = available_modes(fleet, modes, local=False, skip=False)
        assert kept == modes and not skipped, (where, skipped)
        nodes = _ray_nodes(_cluster_of(job))
        plan = make_plan(fleet, modes, nodes)
        assert plan.all_at_once, f"{where}: {plan.text()}"
        # the Locust workers' seats, as --ray-workers deals them: on the nodes without GPUs, one CPU each
        seats_on, said = chosen_nodes(nodes, args.ray_worker_nodes)
        assert said.startswith("the ") and "without GPUs" in said and all(not n.gpus for n in seats_on), said
        seats = deal((args.workers or 1) * len(modes), seats_on, {n.node_id: n.cpus for n in seats_on}, said)
        assert {n.node_id for n in seats} <= {n.node_id for n in nodes if n.node_id.startswith("cpu-")}, where
    few = [n for n in _ray_nodes(_one("RayCluster")["spec"]) if not n.node_id.startswith("gpu-h100-1")]
    fleet, _ = load_fleet("h100-70b")
    assert not make_plan(fleet, ["baseline", "draft", "eagle", "ngram"], few).all_at_once   # it can say no


def test_one_image_everywhere_and_the_soaks_cluster_is_the_standing_one():
    images = {_ray_container(g)["image"] for _, spec in _cluster_specs() for _, g in _groups(spec)}
    assert len(images) == 1, images
    (image,) = images
    assert image.rsplit(":", 1)[0].endswith("/loadtest")
    assert image == yaml.safe_load((ROOT / "ops" / "schedule" / "soak-cronjob.yaml").read_text())["spec"][
        "jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["image"]

    def sized_apart(spec: dict) -> dict:
        spec = copy.deepcopy(spec)
        for group in spec["workerGroupSpecs"]:
            for key in ("replicas", "minReplicas", "maxReplicas"):
                group.pop(key, None)
        return spec

    standing = _one("RayCluster")["spec"]
    for where, spec in _cluster_specs()[1:]:
        assert sized_apart(spec) == sized_apart(standing), f"{where}'s cluster is not raycluster.yaml's"
    for where, spec in _cluster_specs():
        if "rayVersion" in spec:
            assert _ray_version_within_pin(spec["rayVersion"]), f"{where}: rayVersion {spec['rayVersion']}"
    assert _ray_version_within_pin("2.60.0") and not _ray_version_within_pin("3.0.0")


# ---------------------------------------------------------------- the files themselves

@pytest.mark.parametrize("name", MANIFESTS)
def test_each_manifest_says_what_it_is_how_to_apply_it_and_where_the_results_are(name):
    text = (KUBERAY / name).read_text()
    header = text[:text.index("\napiVersion:")]
    assert all(ln.startswith("#") for ln in header.splitlines()), name
    assert any("kubectl apply" in ln and f"-f ops/kuberay/{name}" in ln for ln in header.splitlines()), name
    assert "/results" in header, name
    if name != "results-pvc.yaml":
        assert "kubectl exec" in header and ("loadtest report" in header or "kubectl cp" in header), name


@pytest.mark.parametrize("kind", sorted(CRD_FILES))
def test_the_vendored_crds_name_their_source_and_licence(kind):
    with gzip.open(CRDS / CRD_FILES[kind], "rt") as f:
        head = "".join(f.readline() for _ in range(4))
    assert "https://github.com/ray-project/kuberay" in head and KUBERAY_TAG in head, head
    assert "Apache License, Version 2.0" in head and "http://www.apache.org/licenses/LICENSE-2.0" in head, head
    assert Path(CRDS / "README.md").is_file()
