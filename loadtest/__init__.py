"""The client side: streaming requests, open-loop Locust replay, records, run orchestration."""

__version__ = "0.1.0"
