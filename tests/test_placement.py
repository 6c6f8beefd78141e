"""The pre-flight plan and the rollout, without Ray: nodes as `ray.nodes()` reports them, and a
provisioner whose modes come up when the test says so."""

from __future__ import annotations

from concurrent.futures import Future

import pytest

from cluster.fleet import FleetSpec
from cluster.placement import Node, PlanError, fits, make_plan, nodes_from_ray, replica_bundles
from cluster.rollout import Rollout
from loadtest.engine.bringup import at_once

FIVE = ["baseline", "draft", "medusa", "eagle", "ngram"]


def fleet(engine: str = "vllm", tp: int = 4, replicas: int = 1, cpus: float = 8, accelerator: str | None = "H100",
          device: str = "gpu") -> FleetSpec:
    ngram = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}
    modes = {m: {"method": "none"} if m == "baseline" else ngram for m in FIVE}
    return FleetSpec.model_validate({"name": "f", "engine": engine, "device": device, "model": "m",
                                     "tensor_parallel_size": tp, "replicas": replicas, "cpus_per_replica": cpus,
                                     "accelerator_type": accelerator, "modes": modes})


def gpu_nodes(*gpus: int, kind: str = "H100", cpus: float = 64) -> list[Node]:
    raw = [{"NodeID": f"n{i}", "Alive": True,
            "Resources": {"CPU": cpus, "GPU": g, f"accelerator_type:{kind}": g}} for i, g in enumerate(gpus)]
    return nodes_from_ray(raw)


def test_the_five_mode_tp4_fleet_on_one_8_gpu_node_takes_three_turns_in_replay_order():
    plan = make_plan(fleet(), FIVE, gpu_nodes(8))
    assert plan.turns == [["baseline", "draft"], ["medusa", "eagle"], ["ngram"]]
    assert plan.at_once == 2 and not plan.all_at_once
    assert "plan: 5 modes x 1 replica x 4 H100 GPUs (TP4); the cluster has 8 H100 GPUs on 1 node: " \
           "2 mode(s) at a time, in 3 turns (baseline+draft, medusa+eagle, ngram)" in plan.text()


def test_twenty_gpus_hold_every_mode_at_once():
    plan = make_plan(fleet(), FIVE, gpu_nodes(8, 8, 4))
    assert plan.all_at_once and plan.turns == [FIVE]
    assert plan.text().endswith("all modes at once")


def test_a_tp8_replica_on_4_gpu_nodes_is_refused_with_the_shortfall():
    with pytest.raises(PlanError) as err:
        make_plan(fleet(tp=8), FIVE, gpu_nodes(4, 4))
    msg = str(err.value)
    assert "\n" not in msg
    assert "a replica (TP8) needs 8 H100 GPUs on one node" in msg
    assert "STRICT_PACK" in msg and "the largest node has 4 (8 H100 GPUs on 2 node(s) up in all)" in msg


def test_gpus_of_another_type_do_not_count():
    with pytest.raises(PlanError, match=r"no node has one \(the cluster has 16 GPUs of type A100"):
        make_plan(fleet(), FIVE, gpu_nodes(8, 8, kind="A100"))
    mixed = gpu_nodes(8, kind="H100") + gpu_nodes(8, kind="A100")
    assert make_plan(fleet(), FIVE, mixed).cluster_units == 8


def test_cpus_beside_the_gpus_are_checked_too():
    with pytest.raises(PlanError, match=r"needs 48 CPUs beside its 4 H100 GPUs on one node; the best such node has 32"):
        make_plan(fleet(cpus=48), FIVE, gpu_nodes(8, cpus=32))


def test_a_mode_whose_replicas_cannot_all_be_up_at_once_is_refused():
    with pytest.raises(PlanError, match=r"needs its 3 replicas up at once \(12 H100 GPUs\), but the cluster holds 2"):
        make_plan(fleet(replicas=3), FIVE, gpu_nodes(4, 4))


def test_replicas_are_packed_whole_on_nodes():
    nodes = gpu_nodes(6, 6)   # 12 GPUs, but a TP4 replica per node: 2 at once, not 3
    assert fits(nodes, [replica_bundles(fleet())] * 2)
    assert not fits(nodes, [replica_bundles(fleet())] * 3)
    assert make_plan(fleet(), FIVE, nodes).at_once == 2


def test_the_simulator_and_vllms_cpu_build_count_cpus():
    cpu_node = nodes_from_ray([{"NodeID": "a", "Resources": {"CPU": 2.0}}])
    assert make_plan(fleet(engine="sim", cpus=0.2), FIVE, cpu_node).all_at_once
    plan = make_plan(fleet(engine="vllm", device="cpu", cpus=0.5), FIVE, cpu_node)
    assert plan.turns == [["baseline", "draft", "medusa", "eagle"], ["ngram"]]
    assert "x 0.5 CPUs; the cluster has 2 CPUs on 1 node" in plan.text()
    with pytest.raises(PlanError, match="a replica needs 4 CPUs on one node; the largest node has 2"):
        make_plan(fleet(engine="sim", cpus=4), FIVE, cpu_node)


def test_dead_nodes_are_not_counted():
    raw = [{"NodeID": "a", "Alive": False, "Resources": {"CPU": 64, "GPU": 8, "accelerator_type:H100": 8}}]
    with pytest.raises(PlanError):
        make_plan(fleet(), FIVE, nodes_from_ray(raw))


class FakeFleet:
    """Records what the rollout starts and releases; a mode is ready when the test resolves it."""

    def __init__(self, ready_at_once: bool = False) -> None:
        self.events: list[str] = []
        self.futures: dict[str, Future] = {}
        self.ready_at_once = ready_at_once

    def provision(self, mode, on_event=None) -> Future:
        self.events.append(f"start {mode}")
        self.futures[mode] = Future()
        if self.ready_at_once:
            self.resolve(mode)
        return self.futures[mode]

    def release(self, mode) -> None:
        self.events.append(f"release {mode}")

    def resolve(self, mode) -> None:
        self.futures[mode].set_result([f"{mode}-0"])


def test_in_turns_the_next_mode_starts_as_soon_as_a_replay_ends():
    plan = make_plan(fleet(), FIVE, gpu_nodes(8))
    fake = FakeFleet()
    rollout = Rollout(fake, plan)
    with pytest.raises(TimeoutError):   # nothing is ready yet: the replay waits
        rollout.up_future("baseline").result(timeout=0)
    fake.resolve("baseline")
    assert rollout.ready("baseline") == ["baseline-0"]
    assert fake.events == ["start baseline", "start draft"]   # turn 1, both at once
    rollout.done("baseline")
    assert fake.events[-2:] == ["release baseline", "start medusa"]   # before draft replays
    fake.resolve("draft")
    assert rollout.ready("draft") == ["draft-0"]
    assert rollout.loading_during["draft"] == ["medusa"]   # medusa loads while draft replays
    rollout.done("draft")
    assert fake.events[-2:] == ["release draft", "start eagle"]
    for mode in ("medusa", "eagle", "ngram"):
        fake.resolve(mode) if not fake.futures[mode].done() else None
        rollout.ready(mode)
        rollout.done(mode)
    assert fake.events == ["start baseline", "start draft", "release baseline", "start medusa", "release draft",
                           "start eagle", "release medusa", "start ngram", "release eagle", "release ngram"]


def test_when_all_fit_every_mode_starts_together_and_stays_up():
    plan = make_plan(fleet(), FIVE, gpu_nodes(8, 8, 8))
    fake = FakeFleet(ready_at_once=True)
    rollout = Rollout(fake, plan)
    for m in FIVE:
        rollout.ready(m)
        rollout.done(m)
    assert fake.events == [f"start {m}" for m in FIVE]   # nothing released before the teardown


def test_a_failed_start_is_raised_to_the_replay_that_waits_for_it():
    plan = make_plan(fleet(), FIVE, gpu_nodes(4))
    fake = FakeFleet()
    rollout = Rollout(fake, plan)
    rollout.up_future("baseline").set_exception(RuntimeError("replica baseline-0 exited with code 1"))
    with pytest.raises(RuntimeError, match="exited with code 1"):
        rollout.ready("baseline")


@pytest.mark.parametrize("spec, nodes, order, expected", [
    (fleet(), gpu_nodes(8, 8, 4), "auto", True),                      # GPUs for every mode: side by side
    (fleet(), gpu_nodes(8), "auto", False),                           # three turns
    (fleet(), gpu_nodes(8, 8, 4), "turns", False),
    (fleet(engine="sim", tp=4, cpus=0.2, accelerator=None), gpu_nodes(0, cpus=2), "auto", True),  # the simulator
    (fleet(engine="vllm", tp=1, cpus=0.2, accelerator=None, device="cpu"), gpu_nodes(0, cpus=2), "auto", False),
    (fleet(), gpu_nodes(8), "parallel", True),                        # insisted on (and refused by the pre-flight)
])
def test_modes_replay_side_by_side_by_default_only_where_they_share_no_processor(spec, nodes, order, expected):
    assert at_once(order, spec, make_plan(spec, FIVE, nodes)) is expected
    assert at_once(order, None, None) is (order == "parallel")        # --endpoints URLs: their hardware unseen
    # held up by `cluster up` (every mode at once, or refused): as a plan that holds every mode
    shares_nothing = spec.engine == "sim" or spec.device == "gpu"
    assert at_once(order, spec, None, held=True) is (order == "parallel" or (order == "auto" and shares_nothing))
