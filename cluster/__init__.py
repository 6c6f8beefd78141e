"""The serving side: fleet specs, the Ray provisioner and the vLLM-compatible simulator."""

# A held fleet's state file (`loadtest cluster up`), here so the command line names it without
# importing the cluster's modules.
DEFAULT_STATE = ".loadtest/cluster.json"


class FleetError(ValueError):
    """A fleet file or speculative config that cannot be used; the message is one line for the user."""


class ClusterAccessError(FleetError):
    """A Ray cluster that would not let this process join for want of its credentials (Ray's token):
    bad input from the environment, said in one line before anything starts (exit 2, refused)."""


class StartupCancelled(Exception):
    """The caller asked the fleet to stop while it was still starting."""
