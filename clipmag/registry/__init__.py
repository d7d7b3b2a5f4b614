"""Registries through which front ends and evaluations join the core without being named."""
