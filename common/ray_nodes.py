"""A Ray cluster's nodes as `ray.nodes()` reports them, read once for every room: the fleet's
pre-flight (cluster/placement.py) and the Locust workers' seats (loadtest/replay/worker_nodes.py).
Plain data; no Ray import here."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

GPU = "GPU"                               # Ray's resource for a node's GPUs (fake ones too: `ray start --num-gpus`)
ACCELERATOR_PREFIX = "accelerator_type:"  # Ray's per-node accelerator resource


@dataclass(frozen=True)
class RayNode:
    node_id: str
    resources: dict[str, float]   # the node's total resources (Ray's "Resources")
    address: str = ""             # its raylet's address (Ray's "NodeManagerAddress")
    labels: dict[str, str] = field(default_factory=dict)   # its labels (Ray's "Labels")

    @property
    def cpus(self) -> float:
        return self.resources.get("CPU", 0.0)

    @property
    def gpus(self) -> float:
        return self.resources.get(GPU, 0.0)

    def as_dict(self) -> dict:
        """The node as a manifest lists it: where, and its CPUs and GPUs."""
        kinds = sorted(k.removeprefix(ACCELERATOR_PREFIX) for k in self.resources if k.startswith(ACCELERATOR_PREFIX))
        return {"node_id": self.node_id, "address": self.address, "cpus": self.cpus, "gpus": self.gpus,
                "accelerators": kinds}


def alive_nodes(ray_nodes: Sequence[dict]) -> list[RayNode]:
    """The alive nodes of `ray.nodes()`."""
    return [RayNode(str(n.get("NodeID", i)), {k: float(v) for k, v in (n.get("Resources") or {}).items()},
                    str(n.get("NodeManagerAddress", "")), dict(n.get("Labels") or {}))
            for i, n in enumerate(ray_nodes) if n.get("Alive", True)]
