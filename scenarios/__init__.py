"""The traffic model: scenarios (tenants, lengths, arrivals, SLOs) compiled to deterministic traces."""


class ScenarioError(ValueError):
    """A scenario that cannot be used; the message is one line naming the file and the key."""
