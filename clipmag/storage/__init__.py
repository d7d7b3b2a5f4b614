"""Storage: atomic files, folder locks, WebDataset shards, names, publishing exports."""
