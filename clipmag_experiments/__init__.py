"""Applications built on the core: head sweeps over the registered front ends, reports, and the
paper dry run (every paper config on CPU with stand-in data and tiny models)."""
