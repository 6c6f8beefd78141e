"""What a person or a scraper watches while a command runs, fed by the engine's events
(loadtest.engine.events) and never imported by it: the progress bars (progress.py), the client's
/metrics (metrics_server.py), the web UI's live board (board.py), and the web UI's session, which
waits for Start and hands each run to the engine (web.py)."""
