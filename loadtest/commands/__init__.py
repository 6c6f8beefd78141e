"""The wiring layer: the command line and the commands it runs (`run`, `ui`). The only modules
that import all four rooms (scenarios, cluster, loadtest, analysis)."""
