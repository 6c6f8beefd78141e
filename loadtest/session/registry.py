"""Every command's options record, by the words that name the command on the command line."""

from __future__ import annotations

from loadtest.session.options import CapacityOptions, PlanOptions, RunOptions, SoakOptions, SweepOptions, UIOptions
from loadtest.session.tool_options import (
    CalibrateOptions,
    ClusterStateOptions,
    ClusterUpOptions,
    CompareOptions,
    ReportOptions,
    ScenarioListOptions,
    ScenarioShowOptions,
    ScenarioValidateOptions,
    TraceBuildOptions,
    TraceImportOptions,
    TraceShowOptions,
)

COMMANDS: dict[str, type] = {   # in the order `loadtest --help` lists them
    "run": RunOptions, "ui": UIOptions, "report": ReportOptions, "compare": CompareOptions, "plan": PlanOptions,
    "sweep": SweepOptions, "capacity": CapacityOptions, "calibrate": CalibrateOptions, "soak": SoakOptions,
    "cluster up": ClusterUpOptions, "cluster status": ClusterStateOptions, "cluster down": ClusterStateOptions,
    "scenario list": ScenarioListOptions, "scenario show": ScenarioShowOptions,
    "scenario validate": ScenarioValidateOptions, "trace build": TraceBuildOptions,
    "trace import": TraceImportOptions, "trace show": TraceShowOptions,
}
