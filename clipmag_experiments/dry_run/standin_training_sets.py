"""Stand-ins for the paper's training sources, in the layouts their publishers ship, for dry runs.

A dry run of the paper's configs on a CPU needs every file they read, without the gigabytes. These
writers produce a few hundred rows in exactly the published layouts, so that the project's own
builders convert them as they convert the real files (``python -m text_retrieval.data.download
msmarco ROOT --source DIR`` and ``allnli ROOT --source DIR``):

* MS MARCO v1.1 QA as the hub's parquet (``v1.1/{train,validation}-00000-of-00001.parquet``, the
  hub's arrow schema: ``passages`` a struct of lists, ``query_id`` int32);
* SNLI 1.0 and MultiNLI 1.0 as their zips (``snli_1.0/snli_1.0_train.jsonl`` with SNLI's
  ``__MACOSX`` entry, ``multinli_1.0/multinli_1.0_train.jsonl``) and the STS Benchmark tarball
  (``stsbenchmark/sts-{train,dev,test}.csv``, tab-separated, gold 0-5, no header).

The texts come from :class:`TopicText`: a query shares words with its relevant passages and little
with the rest, so a model can learn something in two steps; the numbers mean nothing else. The
evaluation sets' stand-ins are in :mod:`clipmag_experiments.dry_run.standin_test_sets`.
"""

from __future__ import annotations

import io
import json
import random
import tarfile
import zipfile
from pathlib import Path
from typing import Any

__all__ = ["WORDS", "FILLER", "TopicText", "msmarco_schema", "write_msmarco_v11", "write_nli_archives"]

WORDS = tuple(
    """acid actor anchor apple arch atlas bakery ballad bamboo banner basin beacon beetle bishop blanket bridge
    bronze cabin cactus canal candle canyon carbon castle cellar cereal chapel cherry circus cliff clover comet
    copper coral cotton crater crystal dairy desert diesel dolphin dragon drum eagle echo elbow ember engine falcon
    fern ferry fiddle fjord flannel forest fossil fountain galaxy garlic geyser glacier granite harbor harvest hazel
    helmet heron hive honey island ivory jacket jungle kettle lagoon lantern lemon lichen linen lizard magnet
    mammoth maple marble meadow meteor mint mirror monsoon mosaic mustard nectar needle oasis olive orbit orchid
    otter oyster paddle palace panda pepper pigeon pillar pine planet plaster pollen pottery prairie quartz quill
    rabbit radar raven reef ribbon rocket saddle salmon satellite scarf shovel silver sparrow spice sponge statue
    summit swamp tablet temple thunder timber tomato topaz tractor tulip tunnel turbine valley velvet violin volcano
    walnut walrus wheat willow wizard yacht zebra""".split()
)
FILLER = tuple("the a of in on with and is was for by near from about its their".split())


class TopicText:
    """Seeded sentences about topics: a topic is a few words that its passages and queries repeat."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def topic(self, size: int = 4) -> list[str]:
        return self.rng.sample(WORDS, size)

    def passage(self, topic: list[str], length: int = 16) -> str:
        words = [self.rng.choice(topic) if self.rng.random() < 0.35 else self.rng.choice(WORDS) for _ in range(length)]
        for i in range(2, length, 4):
            words[i] = self.rng.choice(FILLER)
        return " ".join(words).capitalize() + "."

    def query(self, topic: list[str]) -> str:
        return f"what is the {' '.join(self.rng.sample(topic, 2))}"

    def title(self, topic: list[str]) -> str:
        return " ".join(topic[:2]).title()


def msmarco_schema() -> Any:
    """The arrow schema of ``microsoft/ms_marco`` v1.1 as the hub's parquet files hold it."""
    import pyarrow as pa

    strings = pa.list_(pa.string())
    passages = pa.struct([("is_selected", pa.list_(pa.int32())), ("passage_text", strings), ("url", strings)])
    return pa.schema(
        [
            ("answers", strings),
            ("passages", passages),
            ("query", pa.string()),
            ("query_id", pa.int32()),
            ("query_type", pa.string()),
            ("wellFormedAnswers", strings),
        ]
    )


def _msmarco_rows(text: TopicText, first_id: int, count: int) -> list[dict[str, Any]]:
    """Rows as the hub holds them: ten-ish Bing passages, one or two selected, some rows with none."""
    rows = []
    for i in range(count):
        topic = text.topic()
        n = text.rng.randint(4, 8)
        passages = [text.passage(topic if j < 2 else text.topic()) for j in range(n)]
        selected = [0] * n
        if i % 10 != 9:  # about one row in ten has no selected passage, as in v1.1
            selected[text.rng.randrange(n)] = 1
        rows.append(
            {
                "answers": [topic[0]] if any(selected) else ["No Answer Present."],
                "passages": {
                    "is_selected": selected,
                    "passage_text": passages,
                    "url": [f"http://www.example.com/{first_id + i}/{j}" for j in range(n)],
                },
                "query": text.query(topic),
                "query_id": first_id + i,
                "query_type": "DESCRIPTION",
                "wellFormedAnswers": [],
            }
        )
    return rows


def write_msmarco_v11(root: str | Path, train_queries: int = 400, validation_queries: int = 80, seed: int = 0) -> Path:
    """``root/v1.1/{train,validation}-00000-of-00001.parquet`` with the hub's schema; returns ``root``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    root, text = Path(root), TopicText(seed)
    splits = {
        "train": _msmarco_rows(text, 1, train_queries),
        "validation": _msmarco_rows(text, 900_000, validation_queries),
    }
    for split, rows in splits.items():
        path = root / "v1.1" / f"{split}-00000-of-00001.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(rows, schema=msmarco_schema()), path)
    return root


def _sentence_pair(text: TopicText, label: str) -> tuple[str, str]:
    topic = text.topic()
    first = text.passage(topic, 10)
    second = {"entailment": topic, "neutral": topic[:2] + text.topic(2), "contradiction": text.topic()}[label]
    return first, text.passage(second, 8)


def _nli_jsonl(text: TopicText, count: int, genre: str | None) -> str:
    """NLI train lines with every published field; SNLI's unlabelled pairs carry gold label ``-``."""
    lines = []
    for i in range(count):
        label = ("entailment", "neutral", "contradiction", "-")[i % 4 if genre is None else i % 3]
        s1, s2 = _sentence_pair(text, "neutral" if label == "-" else label)
        record = {"annotator_labels": [label], "gold_label": label, "pairID": f"{i}e", "promptID": str(i)}
        record |= {"sentence1": s1, "sentence1_binary_parse": "( )", "sentence1_parse": "(ROOT)"}
        record |= {"sentence2": s2, "sentence2_binary_parse": "( )", "sentence2_parse": "(ROOT)"}
        lines.append(json.dumps(record | ({"genre": genre} if genre else {"captionID": f"{i}.jpg#0"})) + "\n")
    return "".join(lines)


def _stsb_lines(text: TopicText, count: int, split: str) -> str:
    """STS Benchmark rows: ``genre file year id score s1 s2``, some with the two trailing source columns."""
    rows = []
    for i in range(count):
        label = ("entailment", "neutral", "contradiction")[i % 3]
        s1, s2 = _sentence_pair(text, label)
        score = {"entailment": 4.6, "neutral": 2.8, "contradiction": 0.4}[label] + text.rng.uniform(-0.4, 0.4)
        extra = "\tsrc-a\tsrc-b" if i % 5 == 4 else ""
        rows.append(f"main-captions\tMSRvid\t2012{split}\t{i:04d}\t{score:.3f}\t{s1}\t{s2}{extra}\n")
    return "".join(rows)


def write_nli_archives(root: str | Path, pairs: int = 240, seed: int = 0) -> Path:
    """``snli_1.0.zip``, ``multinli_1.0.zip`` and ``Stsbenchmark.tar.gz`` in ``root`` as published."""
    root, text = Path(root), TopicText(seed)
    root.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(root / "snli_1.0.zip", "w") as zf:
        zf.writestr("snli_1.0/snli_1.0_train.jsonl", _nli_jsonl(text, pairs, None))
        zf.writestr("__MACOSX/snli_1.0/._snli_1.0_train.jsonl", "")
    with zipfile.ZipFile(root / "multinli_1.0.zip", "w") as zf:
        zf.writestr("multinli_1.0/multinli_1.0_train.jsonl", _nli_jsonl(text, pairs, "government"))
    with tarfile.open(root / "Stsbenchmark.tar.gz", "w:gz") as tf:
        for split, count in (("train", pairs // 2), ("dev", 40), ("test", 60)):
            data = _stsb_lines(text, count, split).encode()
            info = tarfile.TarInfo(f"stsbenchmark/sts-{split}.csv")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return root
