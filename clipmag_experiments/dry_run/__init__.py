"""The paper dry run: every paper config on stand-in data and tiny models, on a CPU."""
