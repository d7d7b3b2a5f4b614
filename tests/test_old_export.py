"""An export written by an older clipmag still loads and scores as it did.

``tests/fixtures/export-23aebd0`` is a tiny learnable-head text export written at commit 23aebd0, before
the core moved into rooms (``clipmag/heads.py`` became ``clipmag/scoring/heads.py``); its
sentence-transformers modules name ``text_retrieval.st_modules``, which stays where exports look for
it. ``export-23aebd0.expected.json`` holds the embeddings and head scores it gave then.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from clipmag.scoring.head_record import HeadRecord
from clipmag.scoring.heads import build_head
from text_retrieval.model.encoder import TextEncoder

FIXTURES = Path(__file__).resolve().parent / "fixtures"
EXPORT = FIXTURES / "export-23aebd0"
EXPECTED = json.loads((FIXTURES / "export-23aebd0.expected.json").read_text())


def test_the_old_export_loads_with_its_head_and_encodes_as_before():
    record = HeadRecord.read(EXPORT)
    assert record.head_name == "learnable"
    assert record.head["gq"] == pytest.approx(0.3) and record.head["gd"] == pytest.approx(0.8)
    encoder = TextEncoder.from_pretrained(EXPORT, precision="fp32")
    q = encoder.encode(EXPECTED["queries"], "query", show_progress=False)
    d = encoder.encode(EXPECTED["documents"], "document", show_progress=False)
    np.testing.assert_allclose(q, EXPECTED["query_embeddings"], atol=1e-5)
    np.testing.assert_allclose(d, EXPECTED["document_embeddings"], atol=1e-5)
    scores = encoder.head.score(torch.from_numpy(q), torch.from_numpy(d))
    np.testing.assert_allclose(scores.detach().numpy(), EXPECTED["scores"], atol=1e-5)
    assert build_head(record).to_dict() == encoder.head.to_dict()


def test_the_old_export_scores_as_before_in_sentence_transformers():
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(EXPORT), trust_remote_code=True, device="cpu")
    q = model.encode_query(EXPECTED["queries"], convert_to_tensor=True)
    d = model.encode_document(EXPECTED["documents"], convert_to_tensor=True)
    np.testing.assert_allclose(model.similarity(q, d).numpy(), EXPECTED["scores"], atol=1e-5)
