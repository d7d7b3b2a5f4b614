"""The image-text front end's registration with the core (entry point ``clipmag.plugins: clip``)."""

from __future__ import annotations

from clipmag.registry.front_ends import register_front_end


def register() -> None:
    register_front_end("clip", "clipmag.clip.cli")
