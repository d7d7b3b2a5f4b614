"""Results: the results.json record, its provenance, and the paired significance tests."""
