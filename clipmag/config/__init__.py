"""Configuration: typed config trees, their checks, the shared sections, the command line."""
