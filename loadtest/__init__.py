"""The client side, in six places:

- `contract.records` and `loadtest.request`: one request in, one record out (the streaming
  client, the SSE measurement, the Parquet sink, mergeable histograms, the client's self-report);
- `loadtest.replay`: replaying a trace with Locust (typed messages between processes, the
  open-loop dispatcher, the master's coordinator, the locustfile, the Locust process, Ray workers);
- `loadtest.options`: each command's typed options record, and every value's bounds;
- `loadtest.engine`: the engine (one replay pipeline: the inputs checked, the run folder and its
  manifest, the fleet up and every mode driven; the drivers of sweeps, capacity searches and soaks,
  the model's levels), which composes the four rooms, knows nothing of the command line and
  prints nothing: it tells its observers what happens;
- `loadtest.live`: those observers (the progress bars, the client's /metrics, the web UI's board and
  session);
- `loadtest.commands`: the command line, wiring arguments to options, the engine, a view and an
  exit code.
"""

__version__ = "0.1.0"
