"""Retrieval-augmented generation evaluation: retrieve with a model's head, read with an LM, score.

Modules: ``answers`` (DPR has-answer, SQuAD EM/F1), ``data`` (passage corpora and QA files),
``wiki`` and ``bundled`` (the offline bundled set), ``retrieve`` (dense heads via
``text_retrieval.retrieval.search``, BM25), ``prompts`` (template and truncation), ``reader`` (HF LMs and the
generation cache), ``pipeline`` (the evaluation), ``report`` (the comparison table), ``config``.
"""
