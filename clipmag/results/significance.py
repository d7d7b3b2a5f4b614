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
  per-query differences, the test Smucker, Allan and Carterette recommend for IR), computed in
  :mod:`clipmag.results.randomisation`: exact on a lattice (0/1 outcomes, alone or averaged over
  seeds, where it is McNemar's exact test for one seed, and every tie is counted in integers) or
  with few units, else seeded draws with a stated Monte Carlo error.
* Beside it, **the seed-aware test** (:mod:`clipmag.results.two_level`): a two-level bootstrap that
  resamples seed pairs and queries together, so a difference must stand out of the training noise
  as well as the query sampling; a mark needs both. The paper's paired t-test over the seeds' mean
  scores stays beside them.
* Several heads against one baseline are several tests: their p-values get Holm's step-down
  correction (:mod:`clipmag.results.family`), each p drawn until its mark at that level is
  decided, and only a corrected p below ``ALPHA`` earns a mark.
* The effect is the mean per-query difference with a 95% percentile-bootstrap interval over
  queries, or over clusters where queries share a target (``scipy.stats.bootstrap``, seeded), and
  the seed-aware test's own interval beside it.
* A claim about a whole table rests on all of its tests at once:
  :func:`~clipmag.results.family.with_family_holm` (re-exported here) adds
  Holm's correction over every comparison given (``p_family``), beside the per-row one, the MDE at
  that level, and, with the protocol's margin, the equivalence tests that let "no difference" be
  read as "level within the margin".
* Beside every "no difference", the power: the smallest true mean difference the test detects
  with 80% power at the level of its mark (:func:`detectable_difference`), so a reader sees how
  large a gain could have hidden in a comparison that found none.

The record of one comparison and its evidence is :mod:`clipmag.results.comparison`; how it is
written in the tables and the manuals (marks, verdicts, p-values) is :mod:`clipmag.results.marks`.
scipy is imported by the functions that test, so the commands that only name the tests (a sweep's
``--help``) start without it.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

import numpy as np

from clipmag.results.clusters import cluster_sums
from clipmag.results.comparison import ALPHA, POWER, Comparison, Evidence, mde_z
from clipmag.results.family import MOST_REPLICATES, Resolved, holm, resolved_holm, with_family_holm
from clipmag.results.randomisation import sign_flip
from clipmag.results.two_level import FIRST_REPLICATES, two_level_bootstrap

__all__ = [
    "ALPHA",
    "POWER",
    "Comparison",
    "cluster_sums",
    "compare_with_baseline",
    "detectable_difference",
    "Evidence",
    "holm",
    "mcnemar_p",
    "paired_query_p",
    "paired_seed_p",
    "seed_averaged",
    "standard_error",
    "with_family_holm",
]

BOOTSTRAP_RESAMPLES = 10_000
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


def _clustered(clusters: Sequence[Hashable] | None) -> bool:
    """Whether some cluster holds more than one query (else the query is the unit, as without)."""
    return clusters is not None and len(set(clusters)) < len(clusters)


def paired_query_p(a: Sequence[float], b: Sequence[float], clusters: Sequence[Hashable] | None = None) -> float:
    """Two-sided p-value that ``a`` and ``b`` (one value per query, same order) differ.

    The sign-flip randomisation test of the mean difference (:func:`~clipmag.results.randomisation.sign_flip`):
    exact where the outcomes sit on a lattice (0/1 outcomes, alone or averaged over seeds: for 0/1
    outcomes of one seed this is McNemar's exact test) or few queries differ, else drawn. With
    ``clusters`` (one label per query; queries sharing a target share a label) the signs flip per
    cluster, on each cluster's summed difference. 1.0 when the two never differ.

    Ties (queries, or clusters, both sides score alike) are counted in and change nothing: they add
    0 to the statistic under every flip, so p is the one of the differing units alone; the effect,
    its interval and the MDE of :func:`compare_with_baseline` average over every query."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape:
        raise ValueError(f"paired test: {x.size} values against {y.size}; both sides need one per query")
    return sign_flip(_units(x - y, clusters)[0]).p


def _units(d: np.ndarray, clusters: Sequence[Hashable] | None) -> tuple[np.ndarray, np.ndarray]:
    """The independent units' summed differences and sizes: clusters where queries share a target,
    else the queries themselves."""
    if _clustered(clusters):
        return cluster_sums(d, clusters)  # type: ignore[arg-type]
    return d, np.ones(d.size)


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


def standard_error(differences: Sequence[float], clusters: Sequence[Hashable] | None = None) -> float:
    """The standard error of the mean difference the query-level test sees: ``sd / sqrt(n)``, or the
    cluster-robust ``sqrt(G / (G - 1) * sum((S_g - n_g * mean)^2)) / n`` where ``G`` clusters of
    ``n_g`` queries with summed differences ``S_g`` are the units; 0.0 for fewer than two units."""
    d = np.asarray(differences, dtype=float)
    if d.size < 2:
        return 0.0
    if not _clustered(clusters):
        return float(d.std(ddof=1) / np.sqrt(d.size))
    sums, sizes = cluster_sums(d, clusters)  # type: ignore[arg-type]
    spread = np.sum((sums - sizes * d.mean()) ** 2) * sums.size / (sums.size - 1)
    return float(np.sqrt(spread) / d.size)


def detectable_difference(
    differences: Sequence[float], family: int = 1, clusters: Sequence[Hashable] | None = None
) -> float:
    """The smallest true mean difference the query-level test finds with ``POWER`` (80%), from the
    per-query differences it tested: ``(z_{1 - a/2} + z_power) * se`` (:func:`standard_error`).

    Why this form: under sign flips the mean of ``n`` differences has variance ``sum(d^2) / n^2``,
    which for the hundreds of queries of a test set is the paired z-test's ``sd^2 / n`` up to the
    mean's own share, and its distribution is normal to within a few per cent at the tails that
    matter. So the randomisation test has the z-test's power, and the closed form needs no
    simulation per table cell; a simulation of the randomisation test at this difference rejects
    about 80% of the time (checked in the tests). ``a`` is ``ALPHA / family``: in a Holm family of
    ``family`` comparisons one true difference among nulls is found only when its p passes the
    first step, ``ALPHA / family``, so that level decides the power: the MDE beside a mark is the
    one at the level the mark is drawn at (the row's, or the whole table's beside a dagger)."""
    return mde_z(family) * standard_error(differences, clusters)


def _seed_means(system: PerQuery, seeds: Sequence[int], queries: Sequence[str]) -> dict[int, float]:
    return {s: float(np.mean([system[s][q] for q in queries])) for s in seeds}


def _resolved_row(evidence: Sequence[Evidence]) -> tuple[Resolved, Resolved | None]:
    """The row's query-level and seed-aware p-values under the row's Holm, resolved at its level."""
    query = resolved_holm([e.query_p() for e in evidence], [e.query_p for e in evidence], ALPHA)
    if any(e.two_level is None for e in evidence):
        return query, None
    two_level = resolved_holm(
        [e.two_level_p() for e in evidence],  # type: ignore[misc]
        [e.two_level_p for e in evidence],
        ALPHA,
        MOST_REPLICATES,
    )
    return query, two_level


def compare_with_baseline(
    systems: Mapping[str, PerQuery], baseline: str, clusters: Clusters | None = None
) -> dict[str, Comparison]:
    """Every system other than ``baseline`` compared with it over the seeds and queries both scored.

    A system sharing no seed or no query with the baseline is left out. The Holm family is the
    systems compared here (one table row: the heads of one start on one test set). ``clusters``
    names the target each query shares with others (a caption's image): the tests then take the
    cluster as the unit (:func:`paired_query_p`). With two or more seeds the seed-aware test
    (:mod:`clipmag.results.two_level`) runs beside the query-level one, each under the row's Holm."""
    base = systems.get(baseline)
    if base is None:
        return {}
    found: dict[str, tuple] = {}
    for name, system in systems.items():
        if name == baseline:
            continue
        seeds = sorted(set(system) & set(base))
        queries = sorted(set.intersection(*(set(system[s]) & set(base[s]) for s in seeds))) if seeds else []
        if not queries:
            continue
        labels = [clusters.get(q, q) for q in queries] if clusters else None
        per_seed = np.array([[system[s][q] - base[s][q] for q in queries] for s in seeds], dtype=float)
        d = seed_averaged(system, seeds, queries) - seed_averaged(base, seeds, queries)
        units, sizes = _units(d, labels)
        evidence = Evidence(units, sizes, two_level_bootstrap(per_seed, labels))
        p_seeds = paired_seed_p(_seed_means(system, seeds, queries), _seed_means(base, seeds, queries))
        found[name] = (len(queries), len(seeds), d, labels, p_seeds, evidence)
    if not found:
        return {}
    query, two_level = _resolved_row([f[5] for f in found.values()])
    out = {}
    for i, (name, (n, k, d, labels, p_seeds, evidence)) in enumerate(found.items()):
        low, high = _bootstrap_interval(d, labels)
        tl = evidence.two_level
        tl_interval = tl.interval(FIRST_REPLICATES) if tl else (None, None)
        value = query.values[i]
        out[name] = Comparison(
            n_queries=n,
            n_seeds=k,
            difference=float(d.mean()),
            ci_low=low,
            ci_high=high,
            p=value.p,
            p_holm=query.adjusted[i],
            p_seeds=p_seeds,
            detectable=detectable_difference(d, len(found), labels),
            n_units=int(evidence.units.size) if _clustered(labels) else None,
            se=standard_error(d, labels),
            p_draws=value.draws,
            p_error=value.error,
            p_two_level=two_level.values[i].p if two_level else None,
            p_two_level_replicates=two_level.values[i].draws if two_level else 0,
            p_two_level_error=two_level.values[i].error if two_level else 0.0,
            p_two_level_holm=two_level.adjusted[i] if two_level else None,
            two_level_low=tl_interval[0],
            two_level_high=tl_interval[1],
            unresolved=not query.decided[i] or (two_level is not None and not two_level.decided[i]),
            evidence=evidence,
        )
    return out
