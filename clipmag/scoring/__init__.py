"""Scoring: similarity heads, the head record, InfoNCE and the magnitude diagnostics."""
