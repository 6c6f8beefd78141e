"""The record contract, beneath both the client (loadtest) and the analysis, so that no import climbs:
what one scheduled request leaves behind (`records`: the schema, the statuses and outcomes), what a
run says of itself (`manifest`), and which files of a run folder hold the records (`parts`)."""
