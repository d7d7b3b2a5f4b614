"""Worked examples on clipmag, run from the repository root (``python -m examples.bag_of_words.cli``)."""
