"""The command line: its grammar (generated from the engine's options records) and one module
per command, each wiring its arguments to options, the engine (loadtest.engine), a view and an
exit code."""
