"""The fast CPU dropout keeps torch's dropout semantics (rate, scale, one mask for both passes,
identity at p=0 and in eval mode, seeded masks, bf16), its attention function is exact where it
does not drop, and the text trainer trains with it (and refuses a resume that switches it)."""

from __future__ import annotations

import math

import pytest
import torch
from text_fixtures import minilm_path, tiny_train_args, write_code_search_set, write_tiny_bert
from torch import nn

from clipmag.runtime.distributed import DistributedContext
from clipmag.runtime.logs import read_metrics
from clipmag.train.checkpoint.resume_check import ResumeMismatch
from clipmag.train.dropout import active_dropout, set_layer_dropout
from clipmag.train.dropout.fast import FastDropout, fast_dropout, keep_mask, swap_dropout_layers
from clipmag.train.dropout.hf_attention import ATTENTION_NAME, fast_dropout_attention
from clipmag.train.loop_config import uses_fast_dropout
from text_retrieval.cli import main, parse_args
from text_retrieval.task import TextRetrievalTask

N = 1_000_000


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_the_drop_rate_is_p_within_five_sigma(p):
    torch.manual_seed(0)
    dropped = 1.0 - keep_mask((1000, 1000), p).double().mean().item()
    assert abs(dropped - p) < 5 * math.sqrt(p * (1 - p) / N)


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_kept_values_are_scaled_so_the_expectation_is_the_input(p):
    torch.manual_seed(1)
    x = torch.rand(N) + 0.5
    out = fast_dropout(x, p)
    kept = out != 0
    assert torch.equal(out[kept], x[kept] * (1 / (1 - p)))
    ones = fast_dropout(torch.ones(N), p)  # 0 or 1/(1-p): mean 1, standard deviation sqrt(p/(1-p))
    assert abs(ones.double().mean().item() - 1.0) < 5 * math.sqrt(p / (1 - p) / N)


def test_the_backward_pass_uses_the_forward_mask():
    torch.manual_seed(2)
    x = (torch.rand(64, 33) + 0.5).requires_grad_()
    out = fast_dropout(x, 0.3)
    out.backward(torch.full_like(out, 2.0))
    assert torch.equal(x.grad, (out != 0) * (2.0 / 0.7))


def test_p0_and_eval_mode_return_the_input_without_drawing():
    x = torch.randn(8, 16, requires_grad=True)
    state = torch.get_rng_state()
    assert fast_dropout(x, 0.0) is x
    assert FastDropout(0.3).eval()(x) is x
    assert torch.equal(torch.get_rng_state(), state)


def test_the_same_seed_draws_the_same_masks():
    masks = []
    for seed in (5, 5, 6):
        torch.manual_seed(seed)
        masks.append(keep_mask((257, 31), 0.2))
    assert torch.equal(masks[0], masks[1]) and not torch.equal(masks[0], masks[2])


def test_bf16_under_autocast():
    torch.manual_seed(3)
    x = (torch.rand(512, 512) + 0.5).requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        hidden = x @ torch.eye(512)  # bf16 under autocast, as a layer's output is
        out = fast_dropout(hidden, 0.25)
    assert out.dtype == torch.bfloat16
    kept = out != 0
    assert abs(1 - kept.float().mean().item() - 0.25) < 5 * math.sqrt(0.25 * 0.75 / kept.numel())
    torch.testing.assert_close(out[kept], (hidden[kept].float() / 0.75).bfloat16(), atol=0, rtol=0)
    out.float().sum().backward()
    assert torch.equal(x.grad != 0, kept)


def test_swapped_layers_stay_what_model_dropout_finds_and_sets(tmp_path):
    from transformers import AutoModel

    model = AutoModel.from_pretrained(write_tiny_bert(tmp_path / "bert"))
    shared = nn.Dropout(0.1)
    model.encoder.layer[0].output.dropout = model.encoder.layer[1].output.dropout = shared
    before = active_dropout(model)
    swapped = swap_dropout_layers(model)
    layers = [m for m in model.modules() if isinstance(m, nn.Dropout)]
    assert all(type(m) is FastDropout for m in layers) and swapped == len({id(m) for m in layers})
    assert model.encoder.layer[0].output.dropout is model.encoder.layer[1].output.dropout
    assert active_dropout(model) == before
    set_layer_dropout(model, 0.0, "bert")
    assert active_dropout(model) == []


class _Heads(nn.Module):
    is_causal = False


def test_attention_with_dropout_is_torch_attention_with_the_mask_applied():
    """The math path against torch's SDPA: its probabilities (value = identity) dropped with the
    same keep-mask, then times v; a padding mask and grouped key/value heads included."""
    torch.manual_seed(4)
    q, k, v = (torch.randn(2, h, 7, 8, requires_grad=True) for h in (4, 2, 2))
    pad = torch.ones(2, 1, 7, 7, dtype=torch.bool)
    pad[1, ..., 5:] = False
    p, seed = 0.3, 11
    torch.manual_seed(seed)
    out, _ = fast_dropout_attention(_Heads(), q, k, v, pad, dropout=p, scaling=0.4)
    torch.manual_seed(seed)
    keep = keep_mask((2, 4, 7, 7), p)
    kk, vv = k.repeat_interleave(2, dim=1), v.repeat_interleave(2, dim=1)
    eye = torch.eye(7).expand(2, 4, 7, 7)
    probs = nn.functional.scaled_dot_product_attention(q, kk, eye, attn_mask=pad, scale=0.4)
    ref = ((probs * keep / (1 - p)) @ vv).transpose(1, 2)
    torch.testing.assert_close(out, ref, atol=1e-6, rtol=1e-5)
    grads = torch.autograd.grad(out.sum(), (q, k, v))
    for ours, theirs in zip(grads, torch.autograd.grad(ref.sum(), (q, k, v)), strict=True):
        torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)


# ---- MiniLM through the text task's model builder ---------------------------------------------------
BATCH = {
    "query": ["how to sort a list", "read a file", "open a socket", "parse json"],
    "positive": ["sorted(items)", "open(path).read()", "socket.socket()", "json.loads(text)"],
    "negatives": [[], [], [], []],
}


def _minilm_model(*overrides: str) -> nn.Module:
    settings = [f"model.name={minilm_path()}", "data.test=[]", "train.device=cpu", *overrides]
    task = TextRetrievalTask(parse_args(settings), DistributedContext(0, 1, 0, torch.device("cpu"), None))
    return task.build_model().train()


def _step(model: nn.Module, seed: int = 0) -> tuple[float, dict[str, torch.Tensor]]:
    """One training forward and backward pass from seed ``seed``: the loss and the gradients."""
    model.train().zero_grad()
    torch.manual_seed(seed)
    loss = model(BATCH)["loss"]
    loss.backward()
    return loss.item(), {name: p.grad for name, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("p", ["0", "1e-9"])
def test_without_dropout_the_fast_path_is_exact_on_minilm(p):
    """At p=0 the attention function calls transformers' sdpa; at p=1e-9 it computes attention
    itself (p > 0) but keeps every element (one in 10^9 drops): both give torch's no-dropout step."""
    fast, plain = _minilm_model(f"model.dropout={p}"), _minilm_model("model.dropout=0", "train.fast_dropout=false")
    assert fast.encoder.model.config._attn_implementation == ATTENTION_NAME
    assert plain.encoder.model.config._attn_implementation == "sdpa"
    (loss, grads), (plain_loss, plain_grads) = _step(fast), _step(plain)
    assert loss == pytest.approx(plain_loss, abs=1e-6) and grads.keys() == plain_grads.keys()
    for name, grad in grads.items():
        torch.testing.assert_close(grad, plain_grads[name], atol=1e-6, rtol=0, msg=name)


BF16_LOSS_TOLERANCE = 2e-2  # relative; docs/text.md ("Dropout on the CPU") states it


def test_in_bf16_the_fast_attention_is_within_the_stated_tolerance_of_eager_fp32():
    """Under bf16 autocast the attention's two products run in bf16 (as autocast's matmuls do) with
    the softmax in fp32, where torch's math SDPA would compute all of it in fp32: the step's loss and
    its gradient direction stay within bf16's tolerance of the eager fp32 step, and as close as
    torch's own bf16 path is."""
    fast, plain = _minilm_model("model.dropout=1e-9"), _minilm_model("model.dropout=0", "train.fast_dropout=false")
    fp32_loss, fp32_grads = _step(plain)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        fast_loss, fast_grads = _step(fast)
        torch_loss, _ = _step(plain)
    assert abs(fast_loss - fp32_loss) <= BF16_LOSS_TOLERANCE * fp32_loss
    assert abs(fast_loss - fp32_loss) <= 2 * abs(torch_loss - fp32_loss) + 1e-3
    ours = torch.cat([g.flatten() for g in fast_grads.values()])
    reference = torch.cat([fp32_grads[name].flatten() for name in fast_grads])
    assert torch.nn.functional.cosine_similarity(ours, reference, dim=0) > 0.99


def test_with_dropout_the_fast_path_trains_minilm_reproducibly():
    fast, plain = _minilm_model(), _minilm_model("train.fast_dropout=false")  # MiniLM's own dropout: 0.1
    loss, _ = _step(fast)
    again, _ = _step(fast)
    plain_loss, _ = _step(plain)
    eval_loss = fast.eval()(BATCH)["loss"].item()
    assert math.isfinite(loss) and math.isfinite(plain_loss)
    assert loss == again and loss != eval_loss  # seeded masks, and they do drop
    assert abs(loss - plain_loss) < 0.5 * max(plain_loss, 0.1)  # other masks, the same kind of step
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert abs(_step(fast)[0] - loss) < 0.1 * loss + 0.05
    assert _torch_dropout_ops(plain) and not _torch_dropout_ops(fast)  # every mask of the step is a fast one


def _torch_dropout_ops(model: nn.Module) -> set[str]:
    """The operators of torch's own dropout that one training forward pass of ``model`` runs."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        model.train()(BATCH)
    return {event.key for event in prof.key_averages()} & {"aten::bernoulli_", "aten::native_dropout"}


# ---- the text trainer ---------------------------------------------------------------------------------
def test_the_text_trainer_trains_with_it_and_a_resume_may_not_switch_it(tmp_path):
    write_code_search_set(tmp_path)
    bert = write_tiny_bert(tmp_path / "bert")  # BERT's own dropout: 0.1 on hidden states and attention
    out = tmp_path / "run"
    args = tiny_train_args(bert, tmp_path, out, "train.steps=2", "train.eval_every=0", "data.test=[]")
    assert uses_fast_dropout(parse_args(args).train)
    assert not uses_fast_dropout(parse_args([*args, "--no-fast-dropout"]).train)
    main(args)
    losses = [r["loss"] for r in read_metrics(out / "metrics.jsonl", "train")]
    assert len(losses) == 2 and all(math.isfinite(x) for x in losses)
    with pytest.raises(ResumeMismatch, match="train.fast_dropout is True there and False here"):
        main([*args, "train.resume=latest", "--no-fast-dropout"])
