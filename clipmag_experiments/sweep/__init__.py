"""The commands over a whole sweep: running its cells (``run``), where each stands (``status``),
what it costs (``plan``), re-running one cell against its stored numbers (``rerun``) and keeping
its small result files (``archive``)."""
