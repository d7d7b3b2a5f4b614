"""A tiny RAG set: eight encyclopaedia-style passages and six questions (one unanswerable);
``conftest.py`` writes them as the ``tiny_rag_files`` fixture."""

from __future__ import annotations

PASSAGES = [
    (
        "1",
        "Aardvark",
        "The aardvark is a burrowing mammal native to Africa. It feeds almost only on ants and termites.",
    ),
    ("2", "Abacus", "The abacus is a calculating tool; the Chinese suanpan dates to the 2nd century BC."),
    ("3", "Alabama", "Montgomery has been the state capital since 1846, and Birmingham is the largest city."),
    ("4", "Albedo", "Fresh snow reflects up to 90 percent of sunlight, while charcoal reflects about 4 percent."),
    ("5", "Apollo 11", "Neil Armstrong and Buzz Aldrin landed on the Moon in July 1969."),
    ("6", "Algeria", "Algiers is the capital and largest city of the country, on the Mediterranean coast."),
    ("7", "Andorra", "Andorra la Vella is the capital of the small country in the Pyrenees."),
    ("8", "Ampere", "The ampere is the SI base unit of electric current, named after a French physicist."),
]
QUESTIONS = [
    ("what do aardvarks eat?", ["ants", "termites"]),
    ("what is the capital of alabama?", ["Montgomery"]),
    ("who landed on the moon with buzz aldrin?", ["Neil Armstrong", "Armstrong"]),
    ("what is the capital of algeria?", ["Algiers"]),
    ("how much sunlight does fresh snow reflect?", ["90 percent"]),
    ("who wrote hamlet?", ["Shakespeare"]),
]
