"""Applications built on the core: head sweeps over the registered front ends, reports, and the
paper dry run (every paper config on CPU with stand-in data and tiny models)."""

from clipmag.registry.config_packages import register_config_package

register_config_package("clipmag_experiments")  # configs/sweeps
