"""The client side, in four places:

- `contract.records` and `loadtest.request`: one request in, one record out (the streaming
  client, the SSE measurement, the Parquet sink, mergeable histograms, the client's self-report);
- `loadtest.replay`: replaying a trace with Locust (typed messages between processes, the
  open-loop dispatcher, the master's coordinator, the locustfile, the Locust process, Ray workers);
- `loadtest.session`: the engine (each command's typed options, the fleet up and every mode driven,
  the drivers of sweeps, capacity searches and soaks, the model's levels), which composes the four
  rooms and knows nothing of the command line;
- `loadtest.commands`: the command line, wiring arguments to options, the engine, a view and an
  exit code.
"""

__version__ = "0.1.0"
