"""The pre-flight: which modes of a fleet the cluster can hold at once, and so in how many turns
they run. Pure functions over the cluster's nodes (as `ray.nodes()` reports them), tested
without Ray.

A replica is one placement group of bundles that Ray packs onto one node (STRICT_PACK); a mode
is up when all its replicas are. A draft model adds no GPUs: vLLM runs it on the target's own
workers (`draft_tensor_parallel_size` is 1 or the target's TP, checked in cluster.speculation),
so every mode of a fleet needs the same bundles. Turns are formed in the fleet's mode order, as
many modes per turn as fit together, so the replay order is the same whether or not all fit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from cluster import FleetError
from cluster.fleet import FleetSpec
from common.ray_nodes import ACCELERATOR_PREFIX, GPU, RayNode, alive_nodes

ACCELERATOR_SHARE = 0.001                 # what one bundle asks of it: it only selects the node type
EPSILON = 1e-9


class PlanError(FleetError):
    """The cluster cannot hold a mode at all (or not in the way asked): bad input, exit 2."""


Node = RayNode   # the pre-flight's name for a node


def nodes_from_ray(ray_nodes: Sequence[dict]) -> list[Node]:
    """The alive nodes of `ray.nodes()`."""
    return alive_nodes(ray_nodes)


def replica_bundles(spec: FleetSpec) -> list[dict[str, float]]:
    """Placement-group bundles of one replica: one GPU bundle per TP rank for real vLLM (on the
    fleet's accelerator type), the replica's CPUs spread over them; one CPU bundle for the
    simulator and vLLM's CPU build."""
    if spec.engine == "sim" or spec.device == "cpu":
        return [{"CPU": spec.cpus_per_replica}]
    tp = spec.tensor_parallel_size
    bundle: dict[str, float] = {GPU: 1.0, "CPU": spec.cpus_per_replica / tp}
    if spec.accelerator_type:
        bundle[ACCELERATOR_PREFIX + spec.accelerator_type] = ACCELERATOR_SHARE
    return [dict(bundle) for _ in range(tp)]


def _place(free: list[dict[str, float]], bundles: list[dict[str, float]]) -> bool:
    """Put one replica (all its bundles on one node) on the first node with room; False if none."""
    need = _total(bundles)
    for node in free:
        if all(node.get(k, 0.0) + EPSILON >= v for k, v in need.items()):
            for k, v in need.items():
                node[k] = node.get(k, 0.0) - v
            return True
    return False


def _total(bundles: list[dict[str, float]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for b in bundles:
        for k, v in b.items():
            out[k] = out.get(k, 0.0) + v
    return out


def fits(nodes: Sequence[Node], replicas: Sequence[list[dict[str, float]]]) -> bool:
    """Whether these replicas can all be placed at once (first fit, each replica on one node)."""
    free = [dict(n.resources) for n in nodes]
    return all(_place(free, r) for r in replicas)


@dataclass(frozen=True)
class Plan:
    """What the pre-flight decided: the turns (modes up together) in replay order."""

    modes: list[str]
    replicas_per_mode: int
    bundles: list[dict[str, float]]          # of one replica
    turns: list[list[str]]
    unit: str                                # "H100 GPU" or "CPU": what a replica is counted in
    per_replica: float                       # units one replica takes
    cluster_units: float                     # units on the cluster's nodes (of the accelerator type)
    nodes: int = 0                           # nodes that have any
    cluster: list[dict] = field(default_factory=list)   # every alive node (Node.as_dict), those without too

    @property
    def at_once(self) -> int:
        return max(len(t) for t in self.turns)

    @property
    def all_at_once(self) -> bool:
        return len(self.turns) == 1

    def turn_of(self, mode: str) -> int:
        return next(i for i, t in enumerate(self.turns) if mode in t)

    def text(self) -> str:
        """One line for the console."""
        tp = f" (TP{len(self.bundles)})" if len(self.bundles) > 1 else ""
        head = (f"plan: {_count(len(self.modes), 'mode')} x {_count(self.replicas_per_mode, 'replica')} x "
                f"{_count(self.per_replica, self.unit)}{tp}; the cluster has "
                f"{_count(self.cluster_units, self.unit)} on {_count(self.nodes, 'node')}: ")
        if self.all_at_once:
            return head + "all modes at once"
        turns = ", ".join("+".join(t) for t in self.turns)
        return (head + f"{self.at_once} mode(s) at a time, in {len(self.turns)} turns ({turns}); a mode's replicas "
                "stop when its replay ends and the next mode's start on what they free")

    def as_dict(self) -> dict:
        return {"turns": self.turns, "at_once": self.at_once, "replicas_per_mode": self.replicas_per_mode,
                "replica_bundles": self.bundles, "unit": self.unit, "per_replica": self.per_replica,
                "cluster_units": self.cluster_units, "nodes": self.nodes, "cluster": self.cluster,
                "text": self.text()}


def _num(v: float) -> str:
    return f"{v:g}"


def _count(v: float, what: str) -> str:
    return f"{v:g} {what}" + ("" if v == 1 else "s")


def _unit(spec: FleetSpec) -> tuple[str, str]:
    """The resource key a replica is counted in, and its name for people."""
    if spec.engine == "sim" or spec.device == "cpu":
        return "CPU", "CPU"
    return GPU, f"{spec.accelerator_type} GPU" if spec.accelerator_type else GPU


def _units_on(node: Node, spec: FleetSpec, key: str) -> float:
    if key == GPU and spec.accelerator_type and ACCELERATOR_PREFIX + spec.accelerator_type not in node.resources:
        return 0.0  # GPUs of another type
    return node.resources.get(key, 0.0)


def _shortfall(spec: FleetSpec, nodes: Sequence[Node], bundles: list[dict[str, float]]) -> str:
    """Why one replica fits on no node, in the resource that is short."""
    need = _total(bundles)
    key, unit = _unit(spec)
    sizes = [_units_on(n, spec, key) for n in nodes]
    total, largest = sum(sizes), max(sizes, default=0.0)
    where = (f"one node (Ray packs a replica's {len(bundles)} bundles on one node: STRICT_PACK)"
             if len(bundles) > 1 else "one node")
    if need[key] > largest + EPSILON:
        if key == GPU and not total:
            gpus = sum(n.gpus for n in nodes)
            types = sorted({k.removeprefix(ACCELERATOR_PREFIX) for n in nodes for k in n.resources
                            if k.startswith(ACCELERATOR_PREFIX)})
            return (f"a replica needs {_num(need[key])} {unit}s, and no node has one (the cluster has "
                    f"{_num(gpus)} GPUs{' of type ' + ', '.join(types) if types else ''}; set accelerator_type "
                    "in the fleet file to the type the nodes declare; nodes still starting do not count: wait until "
                    "`ray status` lists them)")
        tp = f" (TP{len(bundles)})" if len(bundles) > 1 else ""
        return (f"a replica{tp} needs {_num(need[key])} {unit}s on {where}; the largest "
                f"node has {_num(largest)} ({_num(total)} {unit}s on {len(nodes)} node(s) up in all)")
    for k, v in need.items():  # the bundles' other resources (CPUs beside the GPUs)
        best = max((n.resources.get(k, 0.0) for n in nodes if _units_on(n, spec, key) + EPSILON >= need[key]),
                   default=0.0)
        if v > best + EPSILON:
            name = "CPUs" if k == "CPU" else k
            return (f"a replica needs {_num(v)} {name} beside its {_num(need[key])} {unit}s on one node; the "
                    f"best such node has {_num(best)} (cpus_per_replica in the fleet file)")
    return f"a replica needs {need} on one node"


def make_plan(spec: FleetSpec, modes: list[str], nodes: Sequence[Node]) -> Plan:
    """The turns `modes` take on `nodes`; PlanError naming the shortfall when a mode fits nowhere."""
    if not modes:
        raise PlanError("no mode left to run")
    bundles = replica_bundles(spec)
    key, unit = _unit(spec)
    n = spec.replicas
    if not fits(nodes, [bundles]):
        raise PlanError(f"fleet {spec.name!r} cannot run on this cluster: {_shortfall(spec, nodes, bundles)}")
    if not fits(nodes, [bundles] * n):
        held = max(k for k in range(1, n + 1) if fits(nodes, [bundles] * k))
        need = _num(_total(bundles)[key] * n)
        raise PlanError(f"fleet {spec.name!r}: a mode needs its {n} replicas up at once ({need} {unit}s), "
                        f"but the cluster holds {held} such replica(s); lower `replicas` in the fleet file")
    turns: list[list[str]] = []
    for mode in modes:
        if turns and fits(nodes, [bundles] * n * (len(turns[-1]) + 1)):
            turns[-1].append(mode)
        else:
            turns.append([mode])
    units = [_units_on(node, spec, key) for node in nodes]
    return Plan(modes=list(modes), replicas_per_mode=n, bundles=bundles, turns=turns, unit=unit,
                per_replica=_total(bundles)[key], cluster_units=sum(units), nodes=sum(u > 0 for u in units),
                cluster=[node.as_dict() for node in nodes])
