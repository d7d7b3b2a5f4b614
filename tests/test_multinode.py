"""More than one node: the world as torchrun and as SLURM's srun describe it, and two "nodes" of one
process each on this machine giving the losses of one process on the same global batch."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest
from conftest import REPO, script_env

from clipmag.runtime.distributed import SLURM_PORT_BASE, _expand_node_list, launcher_environment
from clipmag.runtime.logs import read_metrics

WORKER = str(REPO / "tests" / "engine_worker.py")


def test_srun_variables_become_torchrun_variables():
    env = {"SLURM_PROCID": "3", "SLURM_NTASKS": "4", "SLURM_LOCALID": "1", "SLURM_JOB_ID": "20057"}
    env["SLURM_JOB_NODELIST"] = "gpu[07-08]"
    got = launcher_environment(env)
    assert got == {
        "RANK": "3",
        "WORLD_SIZE": "4",
        "LOCAL_RANK": "1",
        "MASTER_ADDR": "gpu07",
        "MASTER_PORT": str(SLURM_PORT_BASE + 57),
    }


def test_torchrun_wins_and_one_task_is_no_world():
    torchrun = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "SLURM_NTASKS": "8", "SLURM_PROCID": "5"}
    assert launcher_environment(torchrun)["RANK"] == "1"  # torchrun inside an allocation: its own ranks
    assert launcher_environment({"SLURM_NTASKS": "1", "SLURM_PROCID": "0"}) == {}


def test_node_lists_expand_as_scontrol_does():
    assert _expand_node_list("node[1-3,7],login") == ["node1", "node2", "node3", "node7", "login"]
    assert _expand_node_list("gpu[008-010]") == ["gpu008", "gpu009", "gpu010"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _losses(run_dir) -> list[float]:
    return [r["loss"] for r in read_metrics(run_dir / "metrics.jsonl", "train")]


def _two_nodes(commands: list[list[str]], envs: list[dict[str, str]]) -> None:
    procs = [
        subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for cmd, env in zip(commands, envs, strict=True)
    ]
    for proc in procs:
        out, err = proc.communicate(timeout=400)
        assert proc.returncode == 0, f"exit {proc.returncode}\n{out[-2000:]}\n{err[-4000:]}"


@pytest.mark.slow
def test_two_torchrun_nodes_match_one_process(tmp_path):
    subprocess.run([sys.executable, WORKER, str(tmp_path / "one"), "8"], cwd=REPO, env=script_env(), check=True)
    port = _free_port()
    commands = [
        [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc_per_node=1", f"--node_rank={node}"]
        + ["--master_addr=127.0.0.1", f"--master_port={port}", WORKER, str(tmp_path / "two"), "4"]
        for node in (0, 1)
    ]
    _two_nodes(commands, [script_env()] * 2)
    assert _losses(tmp_path / "two") == pytest.approx(_losses(tmp_path / "one"), rel=1e-6)


@pytest.mark.slow
def test_two_srun_tasks_match_one_process(tmp_path):
    """The variables srun gives two tasks on two nodes (one each), without a cluster: rank 0's node is
    the master (here this machine, named ``localhost`` in the node list)."""
    subprocess.run([sys.executable, WORKER, str(tmp_path / "one"), "8"], cwd=REPO, env=script_env(), check=True)
    port = str(_free_port())  # given, as a job script may; derived from the job id otherwise (above)
    envs = [
        {
            **script_env(),
            "MASTER_PORT": port,
            "SLURM_JOB_ID": "4242",
            "SLURM_NTASKS": "2",
            "SLURM_PROCID": str(task),
            "SLURM_LOCALID": "0",
            "SLURM_NODEID": str(task),
            "SLURM_JOB_NODELIST": "localhost",
        }
        for task in (0, 1)
    ]
    _two_nodes([[sys.executable, WORKER, str(tmp_path / "two"), "4"]] * 2, envs)
    assert _losses(tmp_path / "two") == pytest.approx(_losses(tmp_path / "one"), rel=1e-6)
