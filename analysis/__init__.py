"""Reads result datasets and compares speculation modes: summaries, tables, reports."""
