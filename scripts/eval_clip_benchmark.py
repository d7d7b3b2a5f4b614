"""CLIP-benchmark's own CLI on clipmag models, its zero-shot tasks scored with the model's head
(``--head model``, the default) or cosine (``--head cosine``); see image_text.evaluation.benchmark.

    python scripts/eval_clip_benchmark.py eval --model_type clipmag --model tiny \
        --pretrained runs/clip/export --dataset wds/digits_retrieval \
        --dataset_root runs/shards/wds/{dataset} --task zeroshot_retrieval --recall_k 1 5 10 \
        --output runs/clip/benchmark_{dataset}.json --num_workers 0 --no_amp --head model

Named so that it does not shadow the ``clip_benchmark`` package it imports.
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from image_text.evaluation.benchmark import entry  # noqa: E402

if __name__ == "__main__":
    entry()
