"""Training data: pair sources, text shards and the builders of published training sets."""
