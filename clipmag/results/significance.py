"""Paired significance tests of several heads against one baseline, the way IR and ML reviewers test.

**The unit is the query**, or the target several queries share. Each head and the baseline score
the same queries, so the test looks at how the two differ query by query. With several training
seeds, each query's score is first averaged over the seeds both ran: the seeds' differences on one
query are correlated, so pooling every (seed, query) pair would count each query once per seed and
make p-values too small. For the same reason, where several queries share one target (CLIP's text
-> image direction: five captions of each test image, all searching for it) their differences are
correlated too, and the unit is the target: the caller passes each query's cluster, the test flips
the sign of each cluster's summed difference, the interval resamples clusters and the MDE takes the
cluster-robust standard error (:func:`cluster_sums`).

* The primary test is a paired two-sided randomisation test over queries (sign flips of the
  per-query differences, the test Smucker, Allan and Carterette recommend for IR;
  ``scipy.stats.permutation_test``, exact when the flips can be enumerated, else ``RESAMPLES``
  seeded draws, so a p-value is reproducible to the digit). When every outcome is 0 or 1 (a hit,
  an exact match) the exact randomisation distribution is McNemar's binomial test on the
  discordant queries, used directly.
* Several heads against one baseline are several tests: their p-values get Holm's step-down
  correction (the same arithmetic as ``statsmodels``' ``multipletests``, without its garbage
  collection on every call, which took longer than the correction itself when the manuals' tables
  run a hundred families), and only a corrected p below ``ALPHA`` earns a mark.
* Beside it, the paper's test: a paired t-test over the seeds' mean scores.
* The effect is the mean per-query difference with a 95% percentile-bootstrap interval over
  queries, or over clusters where queries share a target (``scipy.stats.bootstrap``, seeded).
* A claim about a whole table rests on all of its tests at once: :func:`with_family_holm` adds
  Holm's correction over every comparison given (``p_family``), beside the per-row one.
* Beside every "no difference", the power: the smallest true mean difference the test detects
  with 80% power (:func:`detectable_difference`), so a reader sees how large a gain could have
  hidden in a comparison that found none.

How a comparison is written in the tables and the manuals (marks, verdicts, p-values) is
:mod:`clipmag.results.marks`. scipy is imported by the functions that test, so the commands that
only name the tests (a sweep's ``--help``) start without it.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace

import numpy as np

__all__ = [
    "ALPHA",
    "POWER",
    "Comparison",
    "cluster_sums",
    "compare_with_baseline",
    "detectable_difference",
    "holm",
    "mcnemar_p",
    "paired_query_p",
    "paired_seed_p",
    "seed_averaged",
    "with_family_holm",
]

ALPHA = 0.05
POWER = 0.8
RESAMPLES = 20_000  # Monte Carlo error of p about 0.0015 at p = 0.05
# Sign flips drawn per batch, as values (flips x queries): scipy's draws do not depend on the batch,
# but the default, every resample at once, moves 20,000 x queries values through memory several
# times; about 4 million at a time is 4-5x faster on thousands of queries, with the same p.
FLIP_VALUES_PER_BATCH = 4_000_000
BOOTSTRAP_RESAMPLES = 10_000
DIGITS = 10
SEED = 0
# one system's scores: seed -> query id -> score
PerQuery = Mapping[int, Mapping[str, float]]
# query id -> the unit it shares with other queries (the image a caption describes); a query not
# named is a unit of its own
Clusters = Mapping[str, str]


def mcnemar_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Exact two-sided McNemar p-value of paired binary outcomes (1.0 when they never disagree)."""
    from scipy import stats

    only_a = sum(1 for x, y in zip(a, b) if x and not y)
    only_b = sum(1 for x, y in zip(a, b) if y and not x)
    if only_a + only_b == 0:
        return 1.0
    return float(stats.binomtest(only_a, only_a + only_b, 0.5).pvalue)


def _mean_difference(d: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(d, axis=axis)


def cluster_sums(differences: Sequence[float], clusters: Sequence[Hashable]) -> tuple[np.ndarray, np.ndarray]:
    """Each cluster's summed difference and its number of queries, clusters in order of first sight.

    A cluster's queries move together, so the cluster is what the tests treat as independent: its
    sum is what a sign flip flips and what the bootstrap resamples (with its size, so the resampled
    statistic stays the mean over queries)."""
    d = np.asarray(differences, dtype=float)
    labels = list(clusters)
    if len(labels) != d.size:
        raise ValueError(f"paired test: {len(labels)} cluster labels for {d.size} differences; give one per query")
    index = {label: i for i, label in enumerate(dict.fromkeys(labels))}
    inverse = np.array([index[label] for label in labels], dtype=int)
    return np.bincount(inverse, weights=d, minlength=len(index)), np.bincount(inverse, minlength=len(index))


def _clustered(clusters: Sequence[Hashable] | None) -> bool:
    """Whether some cluster holds more than one query (else the query is the unit, as without)."""
    return clusters is not None and len(set(clusters)) < len(clusters)


def _sign_flip_p(values: np.ndarray) -> float:
    """Two-sided sign-flip randomisation p of the mean of ``values`` (one per independent unit).

    A unit whose value is exactly 0 adds 0 under every flip, so the flipped means with it are those
    without it scaled by the same factor, and p is the same whether it is counted or dropped: it is
    dropped, which only saves work (and keeps few units exactly enumerable). Values are rounded so
    that float noise in the last bits cannot move one across a tie of the randomisation
    distribution."""
    from scipy import stats

    d = np.round(values, DIGITS)
    d = d[d != 0]
    if d.size < 2:
        return 1.0  # none differ, or one: its two sign flips are equally extreme
    result = stats.permutation_test(
        (d,),
        _mean_difference,
        permutation_type="samples",
        vectorized=True,
        n_resamples=RESAMPLES,
        alternative="two-sided",
        rng=np.random.default_rng(SEED),
        batch=max(1, FLIP_VALUES_PER_BATCH // d.size),
    )
    return float(result.pvalue)


def paired_query_p(a: Sequence[float], b: Sequence[float], clusters: Sequence[Hashable] | None = None) -> float:
    """Two-sided p-value that ``a`` and ``b`` (one value per query, same order) differ.

    Without ``clusters`` (or with every query its own), McNemar's exact test when every value is 0
    or 1, else the sign-flip randomisation test of the mean difference. With ``clusters`` (one
    label per query; queries sharing a target share a label) the signs flip per cluster, on each
    cluster's summed difference: the randomisation test of the mean over queries when the cluster,
    not the query, is the independent unit. 1.0 when the two never differ.

    Ties (queries, or clusters, both sides score alike) are counted in and change nothing: they add
    0 to the statistic under every flip, so p is the one of the differing units alone (exactly so
    for McNemar's test, whose concordant pairs are its ties); the effect, its interval and the MDE
    of :func:`compare_with_baseline` average over every query, ties included."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape:
        raise ValueError(f"paired test: {x.size} values against {y.size}; both sides need one per query")
    if _clustered(clusters):
        return _sign_flip_p(cluster_sums(np.round(x - y, DIGITS), clusters)[0])
    if np.isin(x, (0.0, 1.0)).all() and np.isin(y, (0.0, 1.0)).all():
        return mcnemar_p(x, y)
    return _sign_flip_p(x - y)


def paired_seed_p(values: Mapping[int, float], baseline: Mapping[int, float]) -> float | None:
    """Paired t-test p-value over the seeds both ran (None with fewer than 2, or constant differences)."""
    from scipy import stats

    seeds = sorted(set(values) & set(baseline))
    if len(seeds) < 2:
        return None
    a, b = np.array([values[s] for s in seeds]), np.array([baseline[s] for s in seeds])
    if np.allclose(a - b, (a - b)[0]):
        return None  # t-test undefined when the differences do not vary
    return float(stats.ttest_rel(a, b).pvalue)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of a family of p-values (same order)."""
    if not p_values:
        return []
    p = np.asarray(p_values, dtype=float)
    order = np.argsort(p)
    # the i-th smallest p times the number of hypotheses not yet rejected, never below an earlier one
    stepped = np.minimum(1.0, np.maximum.accumulate(p[order] * np.arange(p.size, 0, -1)))
    adjusted = np.empty_like(stepped)
    adjusted[order] = stepped
    return [float(x) for x in adjusted]


def seed_averaged(system: PerQuery, seeds: Sequence[int], queries: Sequence[str]) -> np.ndarray:
    """Each query's score averaged over ``seeds`` (the query is the unit; seeds are repeats of it)."""
    return np.array([np.mean([system[s][q] for s in seeds]) for q in queries], dtype=float)


def _ratio_of_sums(sums: np.ndarray, sizes: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.sum(sums, axis=axis) / np.sum(sizes, axis=axis)


def _bootstrap_interval(d: np.ndarray, clusters: Sequence[Hashable] | None = None) -> tuple[float, float]:
    """95% percentile-bootstrap interval of the mean difference: queries resampled, or whole
    clusters (each with its queries) where queries share a target."""
    from scipy import stats

    if d.size < 2 or np.all(d == d[0]):
        return float(d.mean()), float(d.mean())
    common = dict(confidence_level=0.95, n_resamples=BOOTSTRAP_RESAMPLES, method="percentile")
    if _clustered(clusters):
        sums, sizes = cluster_sums(d, clusters)
        result = stats.bootstrap(
            (sums, sizes), _ratio_of_sums, paired=True, vectorized=True, rng=np.random.default_rng(SEED), **common
        )
    else:
        result = stats.bootstrap((d,), np.mean, rng=np.random.default_rng(SEED), **common)
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def detectable_difference(
    differences: Sequence[float], family: int = 1, clusters: Sequence[Hashable] | None = None
) -> float:
    """The smallest true mean difference the query-level test finds with ``POWER`` (80%), from the
    per-query differences it tested: ``(z_{1 - a/2} + z_power) * se``, with ``se = sd / sqrt(n)``.

    Why this form: under sign flips the mean of ``n`` differences has variance ``sum(d^2) / n^2``,
    which for the hundreds of queries of a test set is the paired z-test's ``sd^2 / n`` up to the
    mean's own share, and its distribution is normal to within a few per cent at the tails that
    matter (the randomisation and paired z-tests give the same p at these sizes, see the tests).
    So the randomisation test has the z-test's power, and the closed form needs no simulation per
    table cell; a simulation of the randomisation test at this difference rejects about 80% of
    the time (checked in the tests). ``a`` is ``ALPHA / family``: in a Holm family of ``family``
    comparisons one true difference among nulls is found only when its p passes the first step,
    ``ALPHA / family``, so that level decides the power. ``sd`` is the sample SD of the tested
    differences (seeds averaged per query, ties counted); 0.0 for fewer than two queries.

    With ``clusters``, the test flips ``G`` cluster sums ``S_g`` of ``n_g`` queries each, and ``se``
    is the cluster-robust ``sqrt(G / (G - 1) * sum((S_g - n_g * mean)^2)) / n``, which is
    ``sd / sqrt(n)`` again when every cluster holds one query."""
    from scipy import stats

    d = np.asarray(differences, dtype=float)
    if d.size < 2:
        return 0.0
    z = stats.norm.ppf(1 - ALPHA / (2 * max(1, family))) + stats.norm.ppf(POWER)
    if not _clustered(clusters):
        return float(z * d.std(ddof=1) / np.sqrt(d.size))
    sums, sizes = cluster_sums(d, clusters)
    spread = np.sum((sums - sizes * d.mean()) ** 2) * sums.size / (sums.size - 1)
    return float(z * np.sqrt(spread) / d.size)


@dataclass(frozen=True)
class Comparison:
    """One head against the baseline on one test set: effect, tests and the mark they earn."""

    n_queries: int
    n_seeds: int
    difference: float  # mean over queries of (head - baseline), seeds averaged
    ci_low: float
    ci_high: float
    p: float  # the query-level test, uncorrected
    p_holm: float  # corrected over the heads compared with the same baseline
    p_seeds: float | None  # the paper's paired t-test over seed means
    detectable: float = float("nan")  # the smallest difference found with 80% power (detectable_difference)
    n_units: int | None = None  # the clusters the test flipped, where queries share a target; None: the queries
    p_family: float | None = None  # Holm over every comparison a claim rests on (with_family_holm)

    @property
    def significant(self) -> bool:
        return self.p_holm < ALPHA

    def to_dict(self) -> dict[str, float | int | None]:
        return asdict(self)


def _seed_means(system: PerQuery, seeds: Sequence[int], queries: Sequence[str]) -> dict[int, float]:
    return {s: float(np.mean([system[s][q] for q in queries])) for s in seeds}


def compare_with_baseline(
    systems: Mapping[str, PerQuery], baseline: str, clusters: Clusters | None = None
) -> dict[str, Comparison]:
    """Every system other than ``baseline`` compared with it over the seeds and queries both scored.

    A system sharing no seed or no query with the baseline is left out. The Holm family is the
    systems compared here (one table row: the heads of one start on one test set). ``clusters``
    names the target each query shares with others (a caption's image): the tests then take the
    cluster as the unit (:func:`paired_query_p`)."""
    base = systems.get(baseline)
    if base is None:
        return {}
    raw: dict[str, tuple] = {}
    for name, system in systems.items():
        if name == baseline:
            continue
        seeds = sorted(set(system) & set(base))
        queries = sorted(set.intersection(*(set(system[s]) & set(base[s]) for s in seeds))) if seeds else []
        if not queries:
            continue
        labels = [clusters.get(q, q) for q in queries] if clusters else None
        ours, theirs = seed_averaged(system, seeds, queries), seed_averaged(base, seeds, queries)
        d = ours - theirs
        p_seeds = paired_seed_p(_seed_means(system, seeds, queries), _seed_means(base, seeds, queries))
        interval = _bootstrap_interval(d, labels)
        units = len(set(labels)) if _clustered(labels) else None
        raw[name] = (len(queries), len(seeds), float(d.mean()), *interval, paired_query_p(ours, theirs, labels))
        raw[name] += (p_seeds, d, labels, units)
    adjusted = dict(zip(raw, holm([r[5] for r in raw.values()])))
    return {
        name: Comparison(
            n, k, diff, low, high, p, adjusted[name], p_seeds, detectable_difference(d, len(raw), labels), units
        )
        for name, (n, k, diff, low, high, p, p_seeds, d, labels, units) in raw.items()
    }


def with_family_holm(comparisons: Sequence[Comparison]) -> list[Comparison]:
    """The same comparisons, each with ``p_family``: Holm's correction over all of them.

    The per-row correction guards a sentence about one row; a sentence about a whole table (the
    budget sweep's verdict rests on its every test) needs the correction over the whole table,
    which only a p small enough to survive every test of it passes."""
    adjusted = holm([c.p for c in comparisons])
    return [replace(c, p_family=p) for c, p in zip(comparisons, adjusted)]
