"""Evaluation: head-aware retrieval in the COCO protocol and the printed summary (``retrieval``),
zero-shot classification (``zero_shot``), and CLIP-benchmark on clipmag checkpoints (``benchmark``),
scored with the model's head (``benchmark_scoring``)."""
