"""The engine under the replaying commands: each command's typed options (options.py) and the
values they take (values.py). It knows nothing of argparse; the commands build their grammar
from these records and hand the engine the record they read."""
