"""Reads result datasets and compares speculation modes: per-mode summaries and speedups
(summary.py), the server's acceptance from scraped /metrics (server.py), the printed tables
(table.py) and the error gate that turns a run into an exit code (gate.py)."""
