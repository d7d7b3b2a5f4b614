"""The written model contract (clipmag/train/contract.py): the engine checks a front end's model once,
when the task builds it, and a model that lacks a member gets one line naming the front end and it."""

from __future__ import annotations

import pytest
from toy_task import ToyTask, TwoTower

from clipmag.config.entry import run_entry_point
from clipmag.runtime import distributed as dist_utils
from clipmag.scoring.heads import build_head
from clipmag.scoring.losses import InfoNCE
from clipmag.train.contract import ModelContractError
from clipmag.train.engine import Trainer
from clipmag.train.loop_config import TrainLoopConfig
from clipmag.train.optim_config import OptimConfig


class WithoutLossFrom(TwoTower):
    """The toy model as a new front end might first write it: no ``loss_from`` for gradient caching."""

    loss_from = None  # type: ignore[assignment]


class WithoutHeadRecord(TwoTower):
    head_record = None  # type: ignore[assignment]


class ModelTask(ToyTask):
    def __init__(self, model_class: type[TwoTower]) -> None:
        super().__init__(build_head("cosine"), InfoNCE(direction="q2d"), batch_size=4)
        self.model_class = model_class

    def build_model(self) -> TwoTower:
        return self.model_class(self.head, self.loss)


def _trainer(task: ToyTask, tmp_path) -> Trainer:
    loop = TrainLoopConfig(output_dir=str(tmp_path / "run"), steps=1, device="cpu", progress=False, tensorboard=False)
    return Trainer(task, loop, OptimConfig(), {}, dist_utils.init_distributed("cpu"))


@pytest.mark.parametrize(
    ("model_class", "member"), [(WithoutLossFrom, "loss_from"), (WithoutHeadRecord, "head_record")]
)
def test_a_model_lacking_a_method_is_one_line_naming_front_end_and_method(model_class, member, tmp_path):
    with pytest.raises(ModelContractError) as err:
        _trainer(ModelTask(model_class), tmp_path)
    message = str(err.value)
    assert (
        message.startswith(f"front end 'toy': its model {model_class.__name__} lacks {member} ") and "\n" not in message
    )
    assert not (tmp_path / "run").exists()  # checked before anything is written


def test_the_console_scripts_end_a_contract_error_with_that_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        run_entry_point(lambda argv: _trainer(ModelTask(WithoutLossFrom), tmp_path), [])
    assert stop.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        "error: front end 'toy': its model WithoutLossFrom lacks loss_from "
        "(see ContrastiveModel in clipmag/train/contract.py and docs/architecture.md)"
    ]


def test_a_model_with_every_member_is_taken_as_it_is(tmp_path):
    trainer = _trainer(ModelTask(TwoTower), tmp_path)
    assert isinstance(trainer.model, TwoTower) and trainer.head is trainer.model.head
