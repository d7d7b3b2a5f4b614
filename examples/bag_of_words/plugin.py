"""Registration: published under the entry-point group ``clipmag.plugins`` by a package that ships
this front end (``bag-of-words = "examples.bag_of_words.plugin:register"``), so a sweep's groups can
say ``kind: bag-of-words``."""

from clipmag.registry.front_ends import register_front_end


def register() -> None:
    register_front_end("bag-of-words", "examples.bag_of_words.cli")
