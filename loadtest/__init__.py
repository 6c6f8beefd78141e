"""The client side, in three places:

- `loadtest.records` and `loadtest.request`: one request in, one record out (the streaming
  client, the SSE measurement, the Parquet sink, mergeable histograms, the client's self-report);
- `loadtest.replay`: replaying a trace with Locust (typed messages between processes, the
  open-loop dispatcher, the master's coordinator, the locustfile, the Locust process, Ray workers);
- `loadtest.commands`: the wiring layer (the CLI, `run`, `ui`), the only modules that import all
  four rooms.
"""

__version__ = "0.1.0"
