"""Evaluation: BEIR / BRIGHT / STS pipelines, metrics, BRIGHT scores, result records, the eval CLI."""
