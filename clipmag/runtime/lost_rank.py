"""A collective that another rank never joined, said in one line.

Every rank of a step meets the others in its collectives (the gradient all-reduce, the gathered
embeddings); a rank that died, was stopped or hangs leaves the rest waiting. They wait as long as the
process group's timeout (``train.collective_timeout_s``, :func:`clipmag.runtime.distributed.init_distributed`),
then gloo raises a ``RuntimeError`` naming its transport ("Timed out waiting 300000ms for recv
operation", or at once "Connection reset by peer" when the other process is gone) and NCCL a
``DistBackendError``; its own watchdog may also end the process with a log line naming the rank and
the operation. :func:`is_lost_rank` recognises them; :class:`LostRank` is what a run reports instead:
this rank, the world size, the peer's address where the backend gives one, and the likely cause.
"""

from __future__ import annotations

import re

import torch.distributed as dist

from clipmag.errors import UserError

__all__ = ["LostRank", "is_lost_rank"]

_GLOO_MARK = "gloo/transport"  # gloo's errors carry the source path of its transport
_TIMED_OUT = ("Timed out", "timed out", "Timeout", "timeout")
_PEER = re.compile(r"\[([0-9A-Fa-f.:]+)\]:\d+")


def is_lost_rank(err: BaseException) -> bool:
    """Whether ``err`` is a collective (or the store behind it) that failed for want of another rank."""
    return isinstance(err, dist.DistError) or (isinstance(err, RuntimeError) and _GLOO_MARK in str(err))


class LostRank(UserError):
    """This rank's collective got no answer: the message names the rank, the world, the wait and,
    where the backend says, the peer's address; ``then`` says what survived and how to continue."""

    def __init__(self, err: BaseException, rank: int, world_size: int, timeout_s: float, then: str) -> None:
        text = str(err)
        peer = _PEER.search(text)
        at = f" at {peer.group(1)}" if peer else ""
        if any(mark in text for mark in _TIMED_OUT):
            what = (
                f"waited train.collective_timeout_s={timeout_s:g} s in a collective that another rank{at} "
                "never joined: a rank died, was stopped or hangs"
            )
        else:
            what = f"lost the connection to another rank{at} in a collective: that rank died or was killed"
        super().__init__(f"rank {rank} of {world_size} {what} (its own log says why); {then}")
