"""Training: the generic loop, the run driver, optimizer steps, precision, DDP, checkpoints, logs."""
