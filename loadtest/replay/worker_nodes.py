"""Which Ray nodes a replay's Locust workers run on (`--ray-workers`): pure functions over the
cluster's nodes as `ray.nodes()` reports them, tested without Ray.

By default the workers go to the nodes without GPUs, where the cluster has any: a load generator
on a GPU node takes the cores its replicas' servers need (a vLLM server's scheduler and
detokeniser are CPU-bound) and is measured sharing them. `--ray-worker-nodes` names the nodes
instead: a Ray resource they declare (`ray start --resources '{"loadgen": 8}'`) or a node label
KEY=VALUE (`ray start --labels ...`). Each worker takes one CPU; they are dealt out over the chosen
nodes one at a time, in turn, so none gets a second while another has a free core.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from loadtest.replay.options import ReplayError

GPU = "GPU"   # Ray's own resource name for a node's GPUs (fake ones included: `ray start --num-gpus`)


@dataclass(frozen=True)
class RayNode:
    node_id: str
    address: str
    resources: dict[str, float]   # the node's total resources (Ray's "Resources")
    labels: dict[str, str]        # its labels (Ray's "Labels")

    @property
    def has_gpus(self) -> bool:
        return self.resources.get(GPU, 0.0) > 0


def ray_nodes(nodes: Sequence[dict]) -> list[RayNode]:
    """The alive nodes of `ray.nodes()`."""
    return [RayNode(str(n.get("NodeID", "")), str(n.get("NodeManagerAddress", "")),
                    {k: float(v) for k, v in (n.get("Resources") or {}).items()}, dict(n.get("Labels") or {}))
            for n in nodes if n.get("Alive", True)]


def chosen_nodes(nodes: Sequence[RayNode], selector: str | None) -> tuple[list[RayNode], str]:
    """The nodes the workers may run on, and in words which and why (for the manifest)."""
    if selector is not None:
        key, eq, value = selector.partition("=")
        if eq:
            picked = [n for n in nodes if n.labels.get(key) == value]
            what = f"label {key}={value}"
        else:
            picked = [n for n in nodes if n.resources.get(selector, 0.0) > 0]
            what = f"resource {selector!r}"
        if not picked:
            raise ReplayError(f"--ray-worker-nodes {selector}: no alive Ray node has the {what} "
                              f"({len(nodes)} node(s) up)")
        return picked, f"the {len(picked)} Ray node(s) with the {what} (--ray-worker-nodes)"
    without = [n for n in nodes if not n.has_gpus]
    if without and len(without) < len(nodes):
        return without, f"the {len(without)} Ray node(s) without GPUs, of {len(nodes)}"
    if not without:
        return list(nodes), f"every Ray node ({len(nodes)}; none is without GPUs)"
    return list(nodes), f"every Ray node ({len(nodes)}; none has GPUs)"


def deal(workers: int, nodes: Sequence[RayNode], free: Mapping[str, float], where: str) -> list[RayNode]:
    """The node of each of `workers` workers, one CPU each, dealt over `nodes` in turn from the
    CPUs each has `free` (node id -> CPUs; other modes' workers may hold some); a line naming the
    shortfall when they are fewer than that."""
    room = {n.node_id: int(free.get(n.node_id, 0.0) + 1e-9) for n in nodes}
    if workers > sum(room.values()):
        raise ReplayError(f"--ray-workers: {sum(room.values())} CPU(s) are free on {where}, and each of the "
                          f"{workers} Locust workers takes one; use fewer --workers, more nodes, or "
                          "--ray-worker-nodes")
    seats: list[RayNode] = []
    while len(seats) < workers:
        for n in nodes:
            if room[n.node_id] > 0 and len(seats) < workers:
                room[n.node_id] -= 1
                seats.append(n)
    return seats
