"""The CLIP losses sweep expands to the cells its header documents: four groups (InfoNCE both ways
and image -> text, SigLIP, LiT) of the four fixed heads with the image as the query, seeds 0-2, and
the LiT cells locking the image tower of the cosine run its prepare step trains."""

from __future__ import annotations

from pathlib import Path

from clipmag.registry.config_packages import config_path
from clipmag_experiments.sweep import run as sweep
from image_text.cli import parse_args


def test_the_clip_losses_sweep_expands_as_documented():
    path = config_path("configs/sweeps/clip_losses.yaml")
    cfg = sweep.load_sweep_config(path)
    (step,) = cfg.prepare
    source = parse_args(step.args)
    tower = Path(source.train.output_dir) / "export"
    assert step.module == "image_text.cli" and step.creates == str(tower / "open_clip_model.safetensors")
    assert (source.head.name, source.objective, source.train.seed, source.loss.kind) == ("cosine", "sym", 0, "infonce")

    cells = sweep.expand(cfg)
    sweep.check_cells(cells, str(path))  # every cell parses with the CLIP trainer's own config
    assert len(cells) == 4 * 4 * 3 and {c.seed for c in cells} == {0, 1, 2}
    groups: dict[str, set[str]] = {}
    for cell in cells:
        run = parse_args(cell.argv)
        groups.setdefault(cell.group, set()).add(run.head.name)
        assert run.model.query_side == "image" and run.train.precision == "fp32" and run.train.threads == 2
        assert (run.model.name, run.train.steps, run.data.train) == ("clipmag-tiny", 400, "bundled")
        expected = {
            "infonce-sym": ("sym", "infonce", False),
            "infonce-i2t": ("i2t", "infonce", False),
            "siglip": ("sym", "siglip", False),
            "lit": ("sym", "infonce", True),
        }[cell.group]
        assert (run.objective, run.loss.kind, run.model.lock_image) == expected, cell.label
        assert run.model.image_init == (str(tower) if cell.group == "lit" else None)
        assert not run.model.lock_text and run.model.text_init is None
    assert all(heads == {"cosine", "dot", "qnorm", "dnorm"} for heads in groups.values()) and len(groups) == 4
