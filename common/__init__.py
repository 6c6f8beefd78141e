"""What every room of the house shares and none owns: the exit-code table and the wording of
validation problems. Imports nothing of `scenarios`, `cluster`, `loadtest` or `analysis`."""
