"""Evaluation: head-aware retrieval in the COCO protocol and zero-shot (``evaluate``), and CLIP-benchmark
on clipmag checkpoints (``benchmark``), scored with the model's head (``benchmark_scoring``)."""
