"""The engine under the replaying commands, which knows nothing of argparse and prints nothing:
the one replay pipeline (pipeline.py: open_run, replay, Run.record) with the events it tells its
observers (events.py), a run concluded (conclude.py), the inputs checked before anything starts
(inputs.py, levels.py, soak.py), the replays that bring a fleet up and drive every mode
(replays.py, with bringup.py, ray_cluster.py, signals.py, guard.py), the drivers composed into
them (replays.OneReplay, sweep.py, capacity.py over level_dirs.py), and the model's levels
(plan.py) and calibration (calibrate.py). The commands hand it their options record and their
views (loadtest.live) as observers."""
