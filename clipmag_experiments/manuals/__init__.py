"""The manuals' marked numbers: every results table and value of README.md and docs/*.md, rendered
from the stored sweeps.

Writing a sweep's own ``report.md`` is :mod:`clipmag_experiments.report`; this room fills the
manuals from the same stored results. One module per sweep or topic (``budget``, ``fair_fight``,
``positive_regime``, ``clip``, ``speed``, ...) registers its renderers by mark name in ``BLOCKS``
(whole tables) and ``VALUES`` (inline numbers and words); :mod:`clipmag_experiments.manuals.sync`
gathers them and is ``clipmag-report docs``.
"""
