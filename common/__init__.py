"""What every room of the house shares and none owns: the exit-code table, the wording of
validation problems, files written whole or not at all.
Imports nothing of `scenarios`, `cluster`, `loadtest` or `analysis`."""
