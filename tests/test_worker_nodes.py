"""Which Ray nodes the Locust workers take (`--ray-workers`), without Ray: the nodes without GPUs
by default, the ones a resource or label names otherwise, one CPU per worker dealt in turn."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from common.ray_nodes import RayNode, alive_nodes
from loadtest.options.values import BadValue, node_selector
from loadtest.replay.options import ReplayError
from loadtest.replay.worker_nodes import chosen_nodes, deal


def node(name: str, cpus: float, gpus: float = 0, **resources: float) -> dict:
    """A node as `ray.nodes()` reports it."""
    res = {"CPU": cpus, **({"GPU": gpus, "accelerator_type:H100": gpus} if gpus else {}), **resources}
    return {"NodeID": name, "NodeManagerAddress": "10.0.0.1", "Alive": True, "Resources": res,
            "Labels": {"pool": "load"} if name.startswith("load") else {}}


CLUSTER = [node("head", 4), node("gpu-a", 16, 8), node("gpu-b", 16, 8), {**node("gone", 64), "Alive": False}]


def test_by_default_the_workers_go_to_the_nodes_without_gpus():
    nodes, where = chosen_nodes(alive_nodes(CLUSTER), None)
    assert [n.node_id for n in nodes] == ["head"] and where == "the 1 Ray node(s) without GPUs, of 3"


def test_a_cluster_of_gpu_nodes_only_or_of_none_uses_every_node_and_says_why():
    assert chosen_nodes(alive_nodes(CLUSTER[1:3]), None)[1] == "every Ray node with CPUs (2 of 2; none is without GPUs)"
    assert chosen_nodes(alive_nodes([node("a", 2), node("b", 2)]), None)[1] == (
        "every Ray node with CPUs (2 of 2; none has GPUs)")


def test_a_head_of_no_cpus_takes_no_worker():
    """KubeRay's usual head (num-cpus 0) beside GPU workers: the workers go to the GPU nodes' CPUs."""
    nodes, where = chosen_nodes(alive_nodes([node("head", 0), *CLUSTER[1:3]]), None)
    assert [n.node_id for n in nodes] == ["gpu-a", "gpu-b"]
    assert where == "every Ray node with CPUs (2 of 3; none is without GPUs)"
    with pytest.raises(ReplayError, match="no alive Ray node has a CPU for a Locust worker"):
        chosen_nodes(alive_nodes([node("head", 0)]), None)


def test_a_resource_or_a_label_names_the_nodes_instead():
    cluster = alive_nodes([*CLUSTER, node("load-1", 8, loadgen=8), node("load-2", 8)])
    assert [n.node_id for n in chosen_nodes(cluster, "loadgen")[0]] == ["load-1"]
    assert [n.node_id for n in chosen_nodes(cluster, "GPU")[0]] == ["gpu-a", "gpu-b"]
    nodes, where = chosen_nodes(cluster, "pool=load")
    assert [n.node_id for n in nodes] == ["load-1", "load-2"]
    assert where == "the 2 Ray node(s) with the label pool=load (--ray-worker-nodes)"
    with pytest.raises(ReplayError, match=r"^--ray-worker-nodes lodgen: no alive Ray node with CPUs has the resource"):
        chosen_nodes(cluster, "lodgen")


def test_workers_are_dealt_one_cpu_at_a_time_over_the_nodes_free_cpus():
    a, b = RayNode("a", {"CPU": 4}), RayNode("b", {"CPU": 4})
    assert [n.node_id for n in deal(5, [a, b], {"a": 4, "b": 2}, "them")] == ["a", "b", "a", "b", "a"]
    with pytest.raises(ReplayError, match=r"^--ray-workers: 3 CPU\(s\) are free on them, and each of the 4 Locust"):
        deal(4, [a, b], {"a": 2.5, "b": 1}, "them")


@given(st.lists(st.integers(0, 6), min_size=1, max_size=5), st.integers(1, 30))
def test_no_node_gets_more_workers_than_free_cpus_nor_a_second_while_another_has_room(free, workers):
    nodes = [RayNode(str(i), {"CPU": 8}) for i in range(len(free))]
    room = {str(i): float(f) for i, f in enumerate(free)}
    if workers > sum(free):
        with pytest.raises(ReplayError):
            deal(workers, nodes, room, "they")
        return
    got = [n.node_id for n in deal(workers, nodes, room, "they")]
    per = {k: got.count(k) for k in room}
    assert len(got) == workers and all(per[k] <= room[k] for k in room)
    for i in room:   # two more on one node than on another only when that other is full
        assert all(per[j] == room[j] for j in room if per[i] >= per[j] + 2), per


@pytest.mark.parametrize("text", ["", "=x", "pool=", "a b", "x\n", "\x00", "k" * 254])
def test_a_selector_that_names_nothing_is_refused_when_read(text):
    with pytest.raises(BadValue, match="expected a Ray resource name or a node label KEY=VALUE"):
        node_selector(text)


def test_naming_the_workers_nodes_puts_the_workers_on_ray():
    from loadtest.commands.arguments import build_parser
    from loadtest.commands.grammar import read_options
    from loadtest.options.replaying import RunOptions

    def processes(*argv: str):
        return read_options(RunOptions, build_parser().parse_args(["run", *argv])).processes

    assert not processes().on_ray and processes().workers is None   # auto, here
    assert processes("--ray-worker-nodes", "loadgen").on_ray and processes("--ray-workers").on_ray
    assert processes("--workers", "auto").workers is None and processes("--workers", "3").workers == 3
