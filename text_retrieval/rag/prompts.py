"""Reader prompts: one documented template, few-shot examples, and a token budget every prompt fits.

Template (with a chat template the pieces become messages; without one they are joined as text)::

    <instruction>                                  system message / first paragraph
    Question: <example question>                   few-shot: user turn
    Answer: <example answer>                       few-shot: assistant turn
    ...
    Passages:                                      final user turn
    [1] <title>: <text>
    ...
    [k] <title>: <text>

    Question: <question>
    Answer:                                        chat: the generation prompt, then "Answer:"

The reply is the model's continuation of "Answer:", cut at its first line break. A small chat model
asked a question answers in a full sentence (exact match 0 even when right); the answer-only
instruction, the few-shot answers and the "Answer:" already written into its turn make it reply
with the answer alone. Few-shot examples are questions with their first gold answer and no
passages (they teach the format, not the facts); they are drawn from the same QA set with
``random.Random(seed)``, and a question never serves as its own example, so prompts do not depend
on the retriever and two heads that retrieve the same passages give the same prompt.

Truncation rule: the ``k`` passages are kept in rank order and share the token budget equally.
With ``budget = max_input_tokens - tokens(prompt with empty passages)``, a passage longer than
``budget // k`` reader tokens is cut at the end to that length; shorter ones are left whole. So
every prompt holds all ``k`` passages and fits the reader's input limit.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from transformers import PreTrainedTokenizerBase

from text_retrieval.rag.data import Passage, Question

__all__ = ["Prompt", "PromptBuilder", "DEFAULT_INSTRUCTION", "pick_examples"]

DEFAULT_INSTRUCTION = (
    "Answer the question using the passages. Reply with the answer only: a name, number, date or short "
    "phrase of a few words, not a sentence."
)


@dataclass(frozen=True)
class Prompt:
    """A rendered prompt with what went into it (the passages as included, after truncation)."""

    question: Question
    passages: tuple[str, ...]
    text: str
    num_tokens: int
    truncated: int


def _short_answer(question: Question) -> bool:
    answer = question.answers[0]
    return question.match == "string" and answer.isascii() and answer.isprintable() and 0 < len(answer.split()) <= 5


def pick_examples(questions: Sequence[Question], count: int, seed: int) -> list[Question]:
    """``count + 1`` seeded examples (the spare replaces a question that is itself an example).

    Only questions whose first gold answer is short plain text (ASCII, 1-5 words, not a regular
    expression) qualify: TriviaQA lists aliases such as "ⓠ" first, which would teach the wrong format.
    """
    if count <= 0:
        return []
    pool = [q for q in questions if _short_answer(q)]
    random.Random(seed).shuffle(pool)
    return pool[: count + 1]


class PromptBuilder:
    """Render prompts for one reader tokenizer (chat template when it has one) within a budget."""

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerBase,
        max_input_tokens: int,
        instruction: str = DEFAULT_INSTRUCTION,
        examples: Sequence[Question] = (),
        few_shot: int = 0,
        use_chat_template: bool | None = None,
    ) -> None:
        self.tokenizer = tokenizer
        self.max_input_tokens = int(max_input_tokens)
        self.instruction = instruction
        self.examples = list(examples)
        self.few_shot = few_shot
        self.chat = bool(getattr(tokenizer, "chat_template", None)) if use_chat_template is None else use_chat_template

    def _examples_for(self, question: Question) -> list[Question]:
        return [e for e in self.examples if e.id != question.id][: self.few_shot]

    def render(self, question: Question, passages: Sequence[str]) -> str:
        """The prompt text for ``question`` with already formatted passage lines."""
        final = "Passages:\n" + "\n".join(passages) + f"\n\nQuestion: {question.text}"
        shots = self._examples_for(question)
        if self.chat:
            messages = [{"role": "system", "content": self.instruction}]
            for example in shots:
                messages.append({"role": "user", "content": f"Question: {example.text}"})
                messages.append({"role": "assistant", "content": f"Answer: {example.answers[0]}"})
            messages.append({"role": "user", "content": final})
            return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True) + "Answer:"
        parts = [self.instruction, *(f"Question: {e.text}\nAnswer: {e.answers[0]}" for e in shots)]
        return "\n\n".join([*parts, final]) + "\nAnswer:"

    def _count(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=not self.chat)["input_ids"])

    def build(self, question: Question, passages: Sequence[Passage]) -> Prompt:
        """Render with the truncation rule of the module docstring."""
        heads = [f"[{i}] {p.title}: " for i, p in enumerate(passages, start=1)]
        overhead = self._count(self.render(question, heads))
        share = (self.max_input_tokens - overhead) // max(len(passages), 1)
        if passages and share < 1:
            raise ValueError(
                f"reader input limit {self.max_input_tokens} tokens leaves no room for {len(passages)} passages "
                f"(the prompt without them takes {overhead}); raise reader.max_input_tokens or lower the top k"
            )
        lines, truncated = [], 0
        for head, passage in zip(heads, passages):
            ids = self.tokenizer(passage.text, add_special_tokens=False)["input_ids"]
            text = passage.text
            if len(ids) > share:
                text = self.tokenizer.decode(ids[:share], skip_special_tokens=True)
                truncated += 1
            lines.append(head + text)
        rendered = self.render(question, lines)
        return Prompt(question, tuple(lines), rendered, self._count(rendered), truncated)
