"""The bundled default data set: real text that installs offline with the project's dependencies.

A fresh machine has no data folder, so the default experiment builds its data from source text that
``pip install`` already put on disk. ``build_bundled(root)`` writes, under ``root``:

``train/pairs.jsonl`` (and ``train/shards/``)
    Code-search training pairs ``{"query", "positive", "doc_id"}`` from the Python standard library
    of the running interpreter (``sysconfig`` ``stdlib``; ``idlelib``, ``lib2to3``, ``ensurepip``,
    ``pydoc_data``, ``encodings``, ``__phello__`` and every ``test``/``tests`` directory left out).
    For every module-level function and class method the query is the first sentence of the
    docstring's first paragraph (4-48 words, not a signature line) and the document is the
    function's source with the docstring removed, dedented (3-80 non-blank lines, at most 4,000
    characters, not a ``pass``/``...``/``raise NotImplementedError`` stub; dunder methods other
    than ``__init__`` skipped). Files are read in sorted order; an exact copy of an earlier
    function's code is dropped, and a summary shared by several functions is not used as a query.
``beir/stdlib/`` (BEIR layout, splits ``test`` and ``dev``)
    In-domain evaluation from held-out standard-library *modules* (top-level module or package):
    modules are ordered by ``sha256(f"{seed}:{module}")``; those with at most
    ``max_module_queries`` usable queries are held out in that order until ``n_test`` test and
    then ``n_dev`` dev queries are available, and exactly that many are drawn (seeded). No training
    pair comes from a held-out module. The corpus holds the held-out modules' functions - the
    queries' positives plus every other function of those modules as distractors, with a seeded
    sample keeping it at ``corpus_size`` documents. One relevant document per query.
``beir/sklearn/`` (BEIR layout, split ``test``)
    Out-of-domain evaluation built the same way from the installed scikit-learn package (a
    dependency, so always present): ``n_test`` queries and a ``corpus_size`` corpus.
``sts/train.tsv``, ``sts/test.tsv`` (header ``text_a  text_b  score``, score in [0, 1])
    A symmetric similarity task from the human judgments that ship with gensim's test data:
    SimLex-999 and WordSim-353 word pairs (score / 10; each split 75/25 by pair, seeded) and the
    Lee et al. (2005) document-similarity matrix over 50 news articles (``lee.cor`` +
    ``similarities0-1.txt``; split by *document*, 35 train / 15 test, pairs between the two
    halves dropped, so no test article is seen in training).
``manifest.json``
    Version, parameters, interpreter and package versions, counts. A later call with the same key
    returns at once; anything else rebuilds.

Everything is deterministic for a given interpreter and installed package versions: building
twice gives byte-identical files. Other Python or scikit-learn versions give other (equally
built) sets, which the manifest records (``key.python``, ``key.packages``). An experiment whose
numbers must be read on the same code pins both (``python=``, ``scikit_learn=``; the text config's
``data.bundled.python`` and ``data.bundled.scikit_learn``): a build under any other version is
refused, never silently made from other code.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import sys
import sysconfig
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from clipmag.errors import UserError
from clipmag.results.record import installed_versions
from clipmag.storage.files import write_text_atomic
from clipmag.storage.folder_lock import FolderLock
from text_retrieval.data.bundled.extract import CodeFunction, extract_functions, installed_package_dir
from text_retrieval.data.training.pairs import pairs_from_jsonl
from text_retrieval.data.training.shards import write_text_shards

logger = logging.getLogger("clipmag")

BUNDLED_VERSION = 1  # bump whenever a change alters the files written
STDLIB_EXCLUDED = frozenset({"idlelib", "lib2to3", "ensurepip", "pydoc_data", "encodings", "__phello__"})
LEE_TEST_DOCS = 15
WORD_TEST_FRACTION = 0.25


def _jsonl(rows: Iterable[dict[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows)


def _order(keys: Iterable[str], seed: int) -> list[str]:
    return sorted(keys, key=lambda k: hashlib.sha256(f"{seed}:{k}".encode()).hexdigest())


def split_modules(
    functions: list[CodeFunction], n_test: int, n_dev: int, max_module_queries: int, seed: int
) -> tuple[set[str], set[str]]:
    """Held-out (test, dev) module names; every other module is for training."""
    usable: dict[str, int] = {}
    for fn in functions:
        usable[fn.module] = usable.get(fn.module, 0) + bool(fn.summary)
    test: set[str] = set()
    dev: set[str] = set()
    n_t = n_d = 0
    for module in _order(usable, seed):
        if not 0 < usable[module] <= max_module_queries:
            continue
        if n_t < n_test:
            test.add(module)
            n_t += usable[module]
        elif n_d < n_dev:
            dev.add(module)
            n_d += usable[module]
        else:
            break
    if len(test | dev) >= len(usable):
        raise ValueError("not enough modules to hold out test modules and keep some for training")
    return test, dev


def sample_functions(items: list[CodeFunction], n: int, seed: int, tag: str) -> list[CodeFunction]:
    items = sorted(items, key=lambda f: f.doc_id)
    if len(items) <= n:
        return items
    return random.Random(f"{seed}:{tag}").sample(items, n)


def write_beir(
    folder: Path, splits: dict[str, list[CodeFunction]], pool: list[CodeFunction], corpus_size: int, seed: int
) -> dict[str, int]:
    """A BEIR folder whose queries are the given functions' summaries, and whose corpus is their
    code plus distractors drawn from ``pool``."""
    positives = {fn.doc_id for fns in splits.values() for fn in fns}
    others = [fn for fn in pool if fn.doc_id not in positives]
    distractors = sample_functions(others, max(0, corpus_size - len(positives)), seed, f"{folder.name}:corpus")
    corpus = sorted([fn for fns in splits.values() for fn in fns] + distractors, key=lambda f: f.doc_id)
    write_text_atomic(folder / "corpus.jsonl", _jsonl({"_id": f.doc_id, "title": "", "text": f.code} for f in corpus))
    queries = sorted((fn for fns in splits.values() for fn in fns), key=lambda f: f.doc_id)
    write_text_atomic(folder / "queries.jsonl", _jsonl({"_id": "q:" + f.doc_id, "text": f.summary} for f in queries))
    for split, fns in splits.items():
        rows = "".join(f"q:{f.doc_id}\t{f.doc_id}\t1\n" for f in sorted(fns, key=lambda f: f.doc_id))
        write_text_atomic(folder / "qrels" / f"{split}.tsv", "query-id\tcorpus-id\tscore\n" + rows)
    counts = {"corpus": len(corpus)}
    counts.update({f"queries_{split}": len(fns) for split, fns in splits.items()})
    return counts


def _read_word_pairs(path: Path) -> list[tuple[str, str, float]]:
    pairs = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        a, b, score = line.split("\t")[:3]
        pairs.append((a.strip(), b.strip(), float(score) / 10.0))
    return pairs


def build_sts(folder: Path, seed: int, data_dir: Path | None = None) -> dict[str, int]:
    """``train.tsv``/``test.tsv`` from gensim's SimLex-999, WordSim-353 and Lee similarity data."""
    data_dir = data_dir or installed_package_dir("gensim", "the bundled data set") / "test" / "test_data"
    train: list[tuple[str, str, float]] = []
    test: list[tuple[str, str, float]] = []
    for name in ("simlex999.txt", "wordsim353.tsv"):
        pairs = _read_word_pairs(data_dir / name)
        order = list(range(len(pairs)))
        random.Random(f"{seed}:{name}").shuffle(order)
        n_test = round(len(pairs) * WORD_TEST_FRACTION)
        held = set(order[:n_test])
        for i, pair in enumerate(pairs):
            (test if i in held else train).append(pair)
    lee = (data_dir / "lee.cor").read_text(encoding="latin-1")  # one "\xa3" (pound sign) in it
    docs = [" ".join(d.split()) for d in lee.splitlines() if d.strip()]
    matrix = [
        [float(x) for x in row.split()]
        for row in (data_dir / "similarities0-1.txt").read_text().splitlines()
        if row.strip()
    ]
    if len(docs) != len(matrix):
        raise ValueError(f"{data_dir}: {len(docs)} Lee documents but a {len(matrix)}-row similarity matrix")
    held_docs = set(random.Random(f"{seed}:lee").sample(range(len(docs)), LEE_TEST_DOCS))
    for i in range(len(docs)):
        for j in range(i + 1, len(docs)):
            if (i in held_docs) == (j in held_docs):
                (test if i in held_docs else train).append((docs[i], docs[j], matrix[i][j]))
    for split, rows in (("train", train), ("test", test)):
        body = "".join(f"{a}\t{b}\t{s:.4f}\n" for a, b, s in rows)
        write_text_atomic(folder / f"{split}.tsv", "text_a\ttext_b\tscore\n" + body)
    return {"sts_train": len(train), "sts_test": len(test)}


def check_pinned_trees(python: str | None, scikit_learn: str | None) -> None:
    """Refuse to read the held-out trees from another Python or scikit-learn than the pinned one: the
    in-domain and out-of-domain test sets are that code, so another version is another test set."""
    found = {"python": sys.version.split()[0], "scikit_learn": installed_versions(["scikit-learn"])["scikit-learn"]}
    for key, pin in (("python", python), ("scikit_learn", scikit_learn)):
        if pin is not None and pin != found[key]:
            name = "Python" if key == "python" else "scikit-learn"
            raise UserError(
                f"data.bundled.{key}: the bundled code-search sets are pinned to {name} {pin}, but this machine has "
                f"{found[key]}; their test queries would be other code: run under {name} {pin} or change the pin"
            )


def _paths(root: Path, with_shards: bool) -> dict[str, Path]:
    paths = {
        "train_pairs": root / "train" / "pairs.jsonl",
        "indomain": root / "beir" / "stdlib",
        "outdomain": root / "beir" / "sklearn",
        "sts": root / "sts",
        "sts_train": root / "sts" / "train.tsv",
        "sts_test": root / "sts" / "test.tsv",
        "manifest": root / "manifest.json",
    }
    if with_shards:
        paths["train_shards"] = root / "train" / "shards"
    return paths


def build_bundled(
    root: str | Path,
    *,
    seed: int = 0,
    n_train: int = 2500,
    n_test: int = 300,
    n_dev: int = 100,
    corpus_size: int = 1000,
    max_module_queries: int = 60,
    samples_per_shard: int | None = 250,
    stdlib_dir: str | Path | None = None,
    ood_dir: str | Path | None = None,
    force: bool = False,
    python: str | None = None,
    scikit_learn: str | None = None,
) -> dict[str, Path]:
    """Build (or reuse) the bundled default data set under ``root``; see the module docstring.

    Returns the paths: ``train_pairs``, ``train_shards`` (unless ``samples_per_shard`` is None),
    ``indomain`` and ``outdomain`` (BEIR folders), ``sts`` (folder), ``sts_train``, ``sts_test``,
    ``manifest``. ``stdlib_dir``/``ood_dir`` replace the two source trees (tests use small ones).
    ``python``/``scikit_learn``: the versions the trees must come from (:func:`check_pinned_trees`).
    """
    check_pinned_trees(python, scikit_learn)
    root = Path(root)
    stdlib_root = Path(stdlib_dir) if stdlib_dir else Path(sysconfig.get_paths()["stdlib"])
    ood_root = Path(ood_dir) if ood_dir else installed_package_dir("sklearn", "the bundled data set")
    key = {
        "version": BUNDLED_VERSION,
        "python": sys.version.split()[0],
        "sources": {"stdlib": str(stdlib_root), "outdomain": str(ood_root)},
        "packages": installed_versions(("scikit-learn", "gensim")),
        "params": {
            "seed": seed,
            "n_train": n_train,
            "n_test": n_test,
            "n_dev": n_dev,
            "corpus_size": corpus_size,
            "max_module_queries": max_module_queries,
            "samples_per_shard": samples_per_shard,
        },
    }
    paths = _paths(root, samples_per_shard is not None)
    if not force and _built_with(paths["manifest"], key):
        logger.info("bundled data set up to date in %s", root)
        return paths
    lock = FolderLock(root, "bundled data build").acquire(wait=True)  # one builder; the others wait, then reuse
    try:
        if not force and _built_with(paths["manifest"], key):  # built by the process this one waited for
            logger.info("bundled data set up to date in %s", root)
            return paths
        _build(paths, key, stdlib_root, ood_root)
    finally:
        lock.release()
    return paths


def _built_with(manifest_path: Path, key: dict[str, Any]) -> bool:
    """Whether the set's manifest records a build with ``key`` (an unreadable one is no build)."""
    try:
        return json.loads(manifest_path.read_text(encoding="utf-8")).get("key") == key
    except (OSError, json.JSONDecodeError):
        return False


def _build(paths: dict[str, Path], key: dict[str, Any], stdlib_root: Path, ood_root: Path) -> None:
    """Write the set under ``paths`` (its manifest last) with the sizes and seed ``key`` records,
    holding the folder's lock."""
    params = key["params"]
    seed, n_train, n_test, n_dev = params["seed"], params["n_train"], params["n_test"], params["n_dev"]
    corpus_size, samples_per_shard = params["corpus_size"], params["samples_per_shard"]
    max_module_queries = params["max_module_queries"]
    manifest_path = paths["manifest"]
    logger.info(
        "building the bundled data set in %s (stdlib %s, out of domain %s)", manifest_path.parent, stdlib_root, ood_root
    )
    manifest_path.unlink(missing_ok=True)  # absent until the build completes

    functions = extract_functions(stdlib_root, STDLIB_EXCLUDED)
    test_mods, dev_mods = split_modules(functions, n_test, n_dev, max_module_queries, seed)
    held = test_mods | dev_mods
    held_fns = [f for f in functions if f.module in held]
    test_q = sample_functions([f for f in held_fns if f.summary and f.module in test_mods], n_test, seed, "test")
    dev_q = sample_functions([f for f in held_fns if f.summary and f.module in dev_mods], n_dev, seed, "dev")
    counts = write_beir(paths["indomain"], {"test": test_q, "dev": dev_q}, held_fns, corpus_size, seed)
    counts = {f"indomain_{k}": v for k, v in counts.items()}

    train = sample_functions([f for f in functions if f.summary and f.module not in held], n_train, seed, "train")
    rows = [{"query": f.summary, "positive": f.code, "doc_id": f.doc_id} for f in train]
    write_text_atomic(paths["train_pairs"], _jsonl(rows))
    counts["train_pairs"] = len(rows)
    if samples_per_shard is not None:
        shards = write_text_shards(rows, paths["train_shards"], samples_per_shard, overwrite=True)
        counts["train_shards"] = len(shards)

    ood = extract_functions(ood_root, prefix=ood_root.name + "/")
    ood_q = sample_functions([f for f in ood if f.summary], n_test, seed, "outdomain")
    counts.update(
        {
            f"outdomain_{k}": v
            for k, v in write_beir(paths["outdomain"], {"test": ood_q}, ood, corpus_size, seed).items()
        }
    )
    counts.update(build_sts(paths["sts"], seed))

    manifest = {
        "key": key,
        "counts": counts,
        "heldout_modules": {"test": sorted(test_mods), "dev": sorted(dev_mods)},
        "description": "see text_retrieval/data/bundled/build.py",
    }
    write_text_atomic(manifest_path, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    logger.info("bundled data set: %s", ", ".join(f"{k} {v}" for k, v in counts.items()))


def pairs_from_bundled(root: str | Path) -> list[dict[str, Any]]:
    """The bundled default's training pairs, building the set under ``root`` only if absent
    (any existing build's pairs are used, whatever evaluation sizes it was built with)."""
    existing = Path(root) / "train" / "pairs.jsonl"
    return pairs_from_jsonl(existing if existing.is_file() else build_bundled(root)["train_pairs"])
