"""Replaying a trace with Locust: typed messages between processes (protocol), the open-loop
dispatcher and the master's coordinator (both free of Locust, tested in-process with a fake
clock), the locustfile that wires them to Locust's hooks, the Locust process that every command
starts, Locust workers on Ray nodes, and the web UI's extensions."""
