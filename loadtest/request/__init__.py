"""One request in, one record out: the streaming client, the SSE measurement, the Parquet sink,
mergeable histograms and the client's report on itself. Imports no Locust."""
