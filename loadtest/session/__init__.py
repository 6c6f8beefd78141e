"""The engine under the replaying commands, which knows nothing of argparse: each command's typed
options (options.py, with the values' bounds in values.py), the inputs checked before anything
starts (inputs.py, levels.py, soak.py), the session that brings a fleet up and drives every mode
(engine.py, with bringup.py, ray_cluster.py, signals.py, guard.py, progress.py and the client's
/metrics in metrics_server.py), the drivers composed into it (engine.OneReplay, sweep.py,
capacity.py over level_dirs.py), the model's levels (plan.py) and the web UI's live board
(board.py). The commands build their grammar from the options records and hand the engine the
record they read."""
