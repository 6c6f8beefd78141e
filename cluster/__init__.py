"""The serving side: fleet specs, the Ray provisioner and the vLLM-compatible simulator."""


class FleetError(ValueError):
    """A fleet file or speculative config that cannot be used; the message is one line for the user."""


class StartupCancelled(Exception):
    """The caller asked the fleet to stop while it was still starting."""
