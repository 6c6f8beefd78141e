"""What each command takes, as one frozen record per command composed of shared groups
(replaying.py for the commands that replay, tools.py for the rest), with every value's bounds
in values.py. The command line builds its grammar from these records; the engine reads them."""
