"""--speculative-config: vLLM's keys, vLLM's rejections, and the argv built for each method."""

from __future__ import annotations

import json

import pytest

from cluster.argv import serve_argv
from cluster.fleet import FleetSpec, load_fleet
from cluster.speculation import SpeculativeConfigError, parse_speculative_config
from tests.conftest import cli


@pytest.mark.parametrize("raw, message", [
    ({"method": "lookahead", "num_speculative_tokens": 3}, "Input should be"),
    ({"method": "ngram", "num_speculative_tokens": 0, "prompt_lookup_max": 3}, "greater than zero (0)"),
    ({"method": "draft_model", "model": "m-1B", "num_speculative_tokens": 5, "draft_tensor_parallel_size": 2},
     "cannot be other value than 1 or target model tensor_parallel_size"),
    ({"method": "medusa", "num_speculative_tokens": 5}, "needs a 'model'"),
    ({"method": "ngram", "num_speculative_tokens": 5}, "prompt_lookup_max or prompt_lookup_min"),
])
def test_rejects_what_vllm_rejects(raw, message):
    with pytest.raises(SpeculativeConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_speculative_config(json.dumps(raw), tensor_parallel_size=4)


def test_draft_tp_equal_to_target_is_accepted():
    cfg = parse_speculative_config({"method": "draft_model", "model": "m-1B", "num_speculative_tokens": 5,
                                    "draft_tensor_parallel_size": 4}, tensor_parallel_size=4)
    assert cfg.draft_tensor_parallel_size == 4


def test_legacy_ngram_model_name_is_translated():
    cfg = parse_speculative_config({"model": "[ngram]", "num_speculative_tokens": 4, "prompt_lookup_max": 3})
    assert cfg.method == "ngram" and cfg.model is None


def _fleet(engine: str, **mode) -> FleetSpec:
    return FleetSpec.model_validate({
        "name": "t", "engine": engine, "model": "meta-llama/Llama-3.3-70B-Instruct", "tensor_parallel_size": 4,
        "modes": {"m": mode},
    })


@pytest.mark.parametrize("mode, expected", [
    ({"method": "none"}, None),
    ({"method": "draft_model", "model": "meta-llama/Llama-3.2-1B-Instruct", "num_speculative_tokens": 5},
     {"method": "draft_model", "model": "meta-llama/Llama-3.2-1B-Instruct", "num_speculative_tokens": 5}),
    ({"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.3-Instruct-70B", "num_speculative_tokens": 3},
     {"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.3-Instruct-70B", "num_speculative_tokens": 3}),
    ({"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_min": 2, "prompt_lookup_max": 4},
     {"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_min": 2, "prompt_lookup_max": 4}),
    ({"method": "eagle", "model": "yuhuili/EAGLE-LLaMA3-Instruct-70B", "num_speculative_tokens": 5},
     {"method": "eagle", "model": "yuhuili/EAGLE-LLaMA3-Instruct-70B", "num_speculative_tokens": 5}),
    ({"method": "medusa", "model": "org/medusa-heads", "num_speculative_tokens": 5},
     {"method": "medusa", "model": "org/medusa-heads", "num_speculative_tokens": 5}),
    ({"method": "mlp_speculator", "model": "ibm-ai-platform/llama3-70b-accelerator", "num_speculative_tokens": 3},
     {"method": "mlp_speculator", "model": "ibm-ai-platform/llama3-70b-accelerator", "num_speculative_tokens": 3}),
    ({"method": "mtp", "num_speculative_tokens": 1}, {"method": "mtp", "num_speculative_tokens": 1}),
    ({"method": "suffix", "num_speculative_tokens": 8}, {"method": "suffix", "num_speculative_tokens": 8}),
    ({"method": "draft_model", "model": "m-1B", "num_speculative_tokens": 4, "draft_tensor_parallel_size": 4},
     {"method": "draft_model", "model": "m-1B", "num_speculative_tokens": 4, "draft_tensor_parallel_size": 4}),
])
def test_vllm_argv_per_method(mode, expected):
    argv = serve_argv(_fleet("vllm", **mode), "m", 8011)
    assert argv[:3] == ["vllm", "serve", "meta-llama/Llama-3.3-70B-Instruct"]
    flags = dict(zip(argv[3::2], argv[4::2], strict=True))
    assert flags["--host"] == "127.0.0.1" and flags["--port"] == "8011"
    assert flags["--tensor-parallel-size"] == "4"
    assert flags["--served-model-name"] == "Llama-3.3-70B-Instruct-m"
    if expected is None:
        assert "--speculative-config" not in flags
    else:
        assert json.loads(flags["--speculative-config"]) == expected


def test_sim_argv_is_vllm_argv_plus_sim_flags():
    mode = {"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_max": 4}
    vllm = serve_argv(_fleet("vllm", **mode), "m", 9000, vllm_version="0.32.0")
    sim = serve_argv(_fleet("sim", **mode), "m", 9000)
    assert sim[1:3] == ["-m", "cluster.sim"]  # the simulator starts without the client packages
    assert sim[3:3 + len(vllm) - 2] == vllm[2:]
    assert "--hardware" in sim and "--time-scale" in sim
    assert vllm[vllm.index("--per-request-spec-decode-metrics") + 1] == "summary"


def test_per_request_acceptance_is_asked_for_only_where_the_server_has_the_flag():
    mode = {"method": "eagle", "model": "yuhuili/EAGLE-LLaMA3-Instruct-70B", "num_speculative_tokens": 3}
    for version, asked in (("0.28.1", False), ("0.29.0", True), (None, False)):
        assert ("--per-request-spec-decode-metrics" in serve_argv(_fleet("vllm", **mode), "m", 1, vllm_version=version)
                ) is asked
    assert "--per-request-spec-decode-metrics" not in serve_argv(_fleet("sim", method="none"), "m", 1)
    off = FleetSpec.model_validate({"name": "t", "engine": "sim", "model": "m-8B", "per_request_spec_decode_metrics":
                                    "none", "modes": {"m": mode}})
    assert "--per-request-spec-decode-metrics" not in serve_argv(off, "m", 1)


@pytest.mark.parametrize("legacy, expected", [
    (["--speculative-model", "meta-llama/Llama-3.2-1B-Instruct", "--num-speculative-tokens", "5"],
     {"method": "draft_model", "model": "meta-llama/Llama-3.2-1B-Instruct", "num_speculative_tokens": 5}),
    (["--speculative-model", "[ngram]", "--num-speculative-tokens", "4", "--ngram-prompt-lookup-max", "3"],
     {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 3, "prompt_lookup_min": 3}),
    (["--speculative-model=yuhuili/EAGLE-LLaMA3-Instruct-70B", "--num-speculative-tokens=5"],
     {"method": "eagle", "model": "yuhuili/EAGLE-LLaMA3-Instruct-70B", "num_speculative_tokens": 5}),
])
def test_old_launch_script_flags_become_speculative_config(legacy, expected):
    fleet = FleetSpec.model_validate({"name": "t", "engine": "vllm", "model": "m-70B", "tensor_parallel_size": 4,
                                      "modes": {"m": {"legacy_args": legacy}}})
    argv = serve_argv(fleet, "m", 8000)
    assert json.loads(argv[argv.index("--speculative-config") + 1]) == expected
    assert fleet.modes["m"].note.startswith("translated legacy flags")


def test_unknown_legacy_flag_is_named(tmp_path):
    path = tmp_path / "f.toml"
    path.write_text('name = "f"\nengine = "sim"\nmodel = "m-8B"\n[modes.x]\n'
                    'legacy_args = ["--speculative-model", "[ngram]", "--use-v2-block-manager"]\n')
    out = cli("run", "--fleet", str(path))
    assert out.returncode == 2 and "'--use-v2-block-manager' is not a speculative-decoding flag" in out.stderr


def test_builtin_h100_fleet_argv_per_mode():
    fleet, _ = load_fleet("h100-70b")
    methods = {m: fleet.speculative_config(m).method if fleet.speculative_config(m) else "none" for m in fleet.modes}
    assert methods == {"baseline": "none", "draft": "draft_model", "medusa": "medusa", "eagle": "eagle3",
                       "ngram": "ngram"}
    for mode in fleet.modes:
        argv = serve_argv(fleet, mode, 8000)
        assert argv[:3] == ["vllm", "serve", "meta-llama/Llama-3.3-70B-Instruct"]
        assert "--tensor-parallel-size" in argv and argv[argv.index("--tensor-parallel-size") + 1] == "4"


def test_the_planned_simulator_is_what_the_replicas_command_line_says():
    """`sim_config` (the plan's typed model of a replica) and `serve_argv` (the replica's flags)
    say the same: the simulator's own CLI reads the argv back to the same configuration."""
    import argparse

    from cluster.argv import serve_argv, sim_config
    from cluster.fleet import FleetSpec
    from cluster.sim.cli import add_arguments, config_of

    fleet = FleetSpec.model_validate({"name": "f", "engine": "sim", "model": "meta-llama/Llama-3.3-70B-Instruct",
                                      "tensor_parallel_size": 4, "max_model_len": 4096, "max_num_seqs": 64,
                                      "gpu_memory_utilization": 0.8, "sim": {"hardware": "h200", "seed": 3},
                                      "modes": {"baseline": {"method": "none"},
                                                "eagle": {"method": "eagle", "num_speculative_tokens": 5,
                                                          "model": "yuhuili/EAGLE-LLaMA3-Instruct-70B"}}})
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    for mode in fleet.modes:
        read = config_of(parser.parse_args(serve_argv(fleet, mode, 8000)[3:]))   # 8000: SimConfig's port
        assert sim_config(fleet, mode) == read


@pytest.mark.parametrize("flag", ["--max-model-len", "--tensor-parallel-size", "--max-num-seqs"])
def test_a_flag_the_fleet_has_a_field_for_is_refused_in_extra_args(flag):
    from pydantic import ValidationError

    from cluster.fleet import FleetSpec

    with pytest.raises(ValidationError, match=f"{flag} is the fleet's .* field: set it there, not in extra_args"):
        FleetSpec.model_validate({"name": "f", "model": "m", "extra_args": [flag, "8"],
                                  "modes": {"baseline": {"method": "none"}}})
