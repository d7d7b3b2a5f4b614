"""Compressed document vectors: truncation, int8 scalar and binary codes, each plain or norm-keeping.

What a compressed index stores is a code per document; what it scores is the code's reconstruction
under the head, against the full-precision query (asymmetric search: only the stored side is
compressed). Each level and why it interacts with magnitude:

* ``truncate:K``: the first K dimensions (Matryoshka-style). The query is cut to K dimensions too,
  so the scores are the head's scores of the truncated vectors; a document's norm changes by its
  own amount (whatever its tail held).
* ``int8``: our scalar quantiser, on sentence-transformers' ``quantize_embeddings`` ranges:
  per-dimension ranges (minimum, maximum) taken from calibration embeddings - here the corpus
  itself, or a seeded sample of ``CALIBRATION_ROWS`` of it - cut into 255 steps; a value is
  rounded to its nearest step and clipped to the range, so the largest norms, whose coordinates
  lie outside the typical range, are clipped.
* ``int8-floor``: sentence-transformers' own codes (6.3.0, ``util/quantization.py``): the same
  ranges, but a value is floored to the step below it (``np.floor``), and rebuilt at that step's
  lower edge as its ``_dequantize_embeddings`` does, so every value moves down by half a step on
  average.
* ``binary``: the sign bits (``x > 0``), 1 bit a dimension, reconstructed as a +-1 vector and
  scored by the +-1 inner product with the float query (not Hamming distance, which would
  binarise the query too). Every reconstruction has norm sqrt(D): the document norm is gone, and
  qnorm ranks by the direction alone.
* ``+norm`` (norm-keeping, any of the three): the unit direction ``d / |d|`` is compressed and the
  norm kept as one float32; the reconstruction is ``|d| * c / |c|`` for the direction's
  reconstruction ``c``, so the head sees the true norm again and its score is rebuilt as it
  defines it (qnorm: ``|d| cos``, dot: ``|q| |d| cos``). Four bytes a vector more.

``Compression.parse("int8+norm")`` reads a setting; ``fit`` calibrates it on documents;
``encode`` / ``decode`` give the codes (whose bytes are the memory per vector reported) and their
reconstruction; ``queries`` is the query side (a cut for truncation, else unchanged).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Compression", "Codes", "COMPRESSIONS", "CALIBRATION_ROWS"]

COMPRESSIONS = ("none", "truncate:K", "int8", "int8-floor", "binary")  # each but none also as <level>+norm
CALIBRATION_ROWS = 100_000  # documents the int8 ranges come from at the most (a seeded sample)
_LEVELS = 255  # int8 steps between a dimension's minimum and maximum
_SPEC = re.compile(r"^(none|int8-floor|int8|binary|truncate:(\d+))(\+norm)?$")
_SCALAR = ("int8", "int8-floor")  # the per-dimension scalar quantisers, rounding and flooring
_CHUNK_ROWS = 65_536


@dataclass
class Codes:
    """What a compressed index stores: ``codes`` (float32 for truncation, uint8 otherwise; binary
    packs 8 dimensions a byte) and, norm-keeping, each document's norm."""

    codes: np.ndarray
    norms: np.ndarray | None = None

    @property
    def bytes_per_vector(self) -> float:
        rows = max(1, len(self.codes))
        return (self.codes.nbytes + (0 if self.norms is None else self.norms.nbytes)) / rows


@dataclass
class Compression:
    """One compression setting; ``ranges`` (int8: per-dimension minimum and step) are set by ``fit``."""

    kind: str = "none"
    dims: int | None = None
    keep_norm: bool = False
    ranges: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False)

    @classmethod
    def parse(cls, spec: str) -> Compression:
        """``none``, ``truncate:K``, ``int8``, ``int8-floor`` or ``binary``, each but ``none`` optionally ``+norm``."""
        match = _SPEC.match(str(spec).strip())
        if not match or (match.group(1) == "none" and match.group(3)) or match.group(2) == "0":
            raise ValueError(
                f"compression {spec!r} unknown; valid: none, truncate:K (K > 0), int8, int8-floor, binary, "
                "each but none with +norm to keep the norm (e.g. int8+norm)"
            )
        kind = "truncate" if match.group(2) else match.group(1)
        return cls(kind, int(match.group(2)) if match.group(2) else None, bool(match.group(3)))

    @property
    def spec(self) -> str:
        level = f"truncate:{self.dims}" if self.kind == "truncate" else self.kind
        return level + ("+norm" if self.keep_norm else "")

    @property
    def is_none(self) -> bool:
        return self.kind == "none"

    def queries(self, queries: np.ndarray) -> np.ndarray:
        """The query side: truncation cuts the queries as it cuts the documents; the rest leave them as they are."""
        return np.ascontiguousarray(queries[:, : self.dims]) if self.kind == "truncate" else queries

    def fit(self, documents: np.ndarray, seed: int = 0) -> Compression:
        """Calibrate on ``documents`` (int8: the per-dimension ranges of at most ``CALIBRATION_ROWS``
        of them, seeded); the other levels need none. Returns self."""
        if self.kind in _SCALAR:
            rows = np.sort(np.random.default_rng(seed).permutation(len(documents))[:CALIBRATION_ROWS])
            sample = self._side(np.asarray(documents[rows], dtype=np.float32))
            low, high = sample.min(axis=0, initial=np.inf), sample.max(axis=0, initial=-np.inf)
            self.ranges = (low, (high - low) / _LEVELS)
        return self

    def encode(self, documents: np.ndarray) -> Codes:
        """The codes of ``documents`` (raw vectors), ``_CHUNK_ROWS`` rows at a time."""
        if self.kind in _SCALAR and self.ranges is None:
            raise ValueError("int8 compression: call fit() on calibration documents before encode()")
        parts, norms = [], []
        for start in range(0, max(1, len(documents)), _CHUNK_ROWS):  # one (empty) chunk for an empty set
            rows = np.asarray(documents[start : start + _CHUNK_ROWS], dtype=np.float32)
            if self.keep_norm:
                norms.append(np.linalg.norm(rows.astype(np.float64), axis=1).astype(np.float32))
            parts.append(self._code(self._side(rows)))
        return Codes(np.concatenate(parts), np.concatenate(norms) if self.keep_norm else None)

    def decode(self, codes: Codes, dim: int) -> np.ndarray:
        """The float32 reconstruction of ``codes`` (of ``dim``-wide raw vectors, truncated to K for truncation)."""
        width = self._width(dim)
        if self.kind == "binary":
            bits = np.unpackbits(codes.codes, axis=1, count=width)
            rebuilt = bits.astype(np.float32) * 2 - 1
        elif self.kind in _SCALAR:
            low, step = self.ranges  # type: ignore[misc]
            rebuilt = (low + codes.codes.astype(np.float32) * step).astype(np.float32)
        else:
            rebuilt = codes.codes.astype(np.float32, copy=True)
        if codes.norms is not None:
            length = np.linalg.norm(rebuilt.astype(np.float64), axis=1)
            scale = np.divide(codes.norms, length, out=np.zeros_like(length), where=length > 0)
            rebuilt = (rebuilt * scale[:, None]).astype(np.float32)
        return np.ascontiguousarray(rebuilt)

    def reconstruct(self, documents: np.ndarray) -> np.ndarray:
        """``decode(encode(documents))``: what the compressed index scores (``documents`` itself for none)."""
        if self.is_none:
            return documents
        return self.decode(self.encode(documents), documents.shape[1])

    def describe(self, dim: int, codes: Codes | None = None) -> dict[str, object]:
        """The setting and its memory per vector (measured from ``codes`` when given), for results."""
        if self.is_none:
            return {"compression": "none", "bytes_per_vector": 4.0 * dim}
        size = codes.bytes_per_vector if codes is not None else self._bytes(dim)
        return {"compression": self.spec, "bytes_per_vector": float(size)}

    # ------------------------------------------------------------------ internals
    def _width(self, dim: int) -> int:
        return min(self.dims, dim) if self.kind == "truncate" and self.dims else dim

    def _bytes(self, dim: int) -> float:
        width = self._width(dim)
        code = {"truncate": 4 * width, "int8": width, "int8-floor": width, "binary": -(-width // 8)}[self.kind]
        return float(code + (4 if self.keep_norm else 0))

    def _side(self, rows: np.ndarray) -> np.ndarray:
        """What is coded: the rows, or norm-keeping their unit directions; cut to K for truncation."""
        if self.keep_norm:
            length = np.linalg.norm(rows.astype(np.float64), axis=1, keepdims=True)
            rows = np.divide(rows, length, out=np.zeros_like(rows), where=length > 0).astype(np.float32)
        return rows[:, : self.dims] if self.kind == "truncate" else rows

    def _code(self, side: np.ndarray) -> np.ndarray:
        if self.kind == "binary":
            return np.packbits(side > 0, axis=1)
        if self.kind in _SCALAR:
            low, step = self.ranges  # type: ignore[misc]
            steps = np.divide(side - low, step, out=np.zeros_like(side), where=step > 0)
            level = np.floor(steps) if self.kind == "int8-floor" else np.rint(steps)
            return np.clip(level, 0, _LEVELS).astype(np.uint8)
        return np.ascontiguousarray(side, dtype=np.float32)
