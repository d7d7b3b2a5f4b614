"""Applications built on the core: head sweeps over the registered front ends, and reports."""
