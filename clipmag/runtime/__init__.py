"""The process a run lives in: ranks and gathers (DDP), the number format, the logger and metric sinks."""
