"""The image-text front end's registration with the core (entry point ``clipmag.plugins: clip``)."""

from __future__ import annotations

from clipmag.registry.config_packages import register_config_package
from clipmag.registry.evaluations import register_evaluation
from clipmag.registry.front_ends import register_front_end


def register() -> None:
    register_front_end("clip", "image_text.cli")
    register_config_package("image_text")  # configs/clip
    register_evaluation(  # the image tower's own nearest neighbour, beside zero-shot
        "feature-neighbour",
        "image_text.evaluation.feature_neighbour",
        front_ends=("clip",),
        metrics=("acc1", "mean_per_class_recall"),
    )
