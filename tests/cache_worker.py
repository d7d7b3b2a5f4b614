"""Encode a toy corpus into a shared corpus cache, as one evaluation does; prints what it encoded.

usage: cache_worker.py CACHE_DIR [GO_FILE]

The encoder is a stand-in whose rows depend only on the texts. With GO_FILE, it prints ``encoding``
after its first chunk and then waits until GO_FILE exists, so that a test can start a second
evaluation while this one's build is provably live. The last line is JSON: the encode calls this
process made and the checksum of the embeddings it got.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path

import numpy as np
import torch

from text_retrieval.retrieval.corpus_cache import encode_corpus
from text_retrieval.retrieval.index import RetrievalSettings

TEXTS = [f"passage {i} " * (i % 4 + 1) for i in range(23)]
SETTINGS = RetrievalSettings(chunk_size=5, cache_dtype="fp16")


class HeldEncoder:
    """Just enough of TextEncoder for the corpus cache; holds its build open until told to go on."""

    name_or_path, pooling, document_prefix, document_max_length, dim = "fake/model", "mean", "", 16, 4
    precision, device = "fp32", torch.device("cpu")

    def __init__(self, go: Path | None) -> None:
        self.go, self.calls = go, 0

    def weights_fingerprint(self) -> str:
        return "w0"

    def encode(self, texts, side, batch_size=64, show_progress=True):
        if self.calls == 1 and self.go is not None:
            print("encoding", flush=True)
            while not self.go.exists():
                time.sleep(0.05)
        self.calls += 1
        return np.array([[len(t), i, 1.5, -len(t) / 3] for i, t in enumerate(texts)], dtype=np.float32)


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s", stream=sys.stderr)
    encoder = HeldEncoder(Path(sys.argv[2]) if len(sys.argv) > 2 else None)
    embeddings = encode_corpus(encoder, TEXTS, sys.argv[1], "toy", settings=SETTINGS)
    print(json.dumps({"calls": encoder.calls, "sum": float(np.asarray(embeddings, dtype=np.float64).sum())}))


if __name__ == "__main__":
    main()
