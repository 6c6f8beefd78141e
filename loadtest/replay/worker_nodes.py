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

from common.ray_nodes import RayNode
from loadtest.replay.options import ReplayError


def chosen_nodes(nodes: Sequence[RayNode], selector: str | None) -> tuple[list[RayNode], str]:
    """The nodes the workers may run on, and in words which and why (for the manifest). A node of
    no CPUs (a KubeRay head started with num-cpus 0) takes no worker, whatever else it has."""
    with_cpus = [n for n in nodes if n.cpus > 0]
    if selector is not None:
        key, eq, value = selector.partition("=")
        if eq:
            picked = [n for n in with_cpus if n.labels.get(key) == value]
            what = f"label {key}={value}"
        else:
            picked = [n for n in with_cpus if n.resources.get(selector, 0.0) > 0]
            what = f"resource {selector!r}"
        if not picked:
            raise ReplayError(f"--ray-worker-nodes {selector}: no alive Ray node with CPUs has the {what} "
                              f"({len(nodes)} node(s) up)")
        return picked, f"the {len(picked)} Ray node(s) with the {what} (--ray-worker-nodes)"
    if not with_cpus:
        raise ReplayError(f"--ray-workers: no alive Ray node has a CPU for a Locust worker ({len(nodes)} node(s) up)")
    without = [n for n in with_cpus if n.gpus == 0]
    if without and len(without) < len(with_cpus):
        return without, f"the {len(without)} Ray node(s) without GPUs, of {len(nodes)}"
    if without:
        return with_cpus, f"every Ray node with CPUs ({len(with_cpus)} of {len(nodes)}; none has GPUs)"
    return with_cpus, f"every Ray node with CPUs ({len(with_cpus)} of {len(nodes)}; none is without GPUs)"


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
