"""Reading a sharded checkpoint without running code from it.

``torch.distributed.checkpoint`` reads a folder's ``.metadata`` with plain ``pickle.load`` and the
non-tensor values of a state dict (the optimizer's settings) with ``torch.load(weights_only=False)``:
a folder someone hands you could run any code when resumed. Here DCP is given a reader
(:class:`CheckedReader`) that unpickles the metadata with only DCP's own record types allowed, and
a planner that reads every non-tensor value weights-only first; a folder that needs more is refused
in one line. The tensors themselves DCP already reads weights-only.
"""

from __future__ import annotations

import io
import pickle
from pathlib import Path
from typing import Any

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import CheckpointException, DefaultLoadPlanner, FileSystemReader
from torch.distributed.checkpoint.metadata import Metadata, StorageMeta

from clipmag.storage.safe_load import UnsafeFileError

__all__ = ["CheckedReader", "check_metadata", "WeightsOnlyLoadPlanner", "load_checked"]

_METADATA_TYPES = {
    "torch.distributed.checkpoint.metadata": {
        "Metadata",
        "MetadataIndex",
        "StorageMeta",
        "TensorProperties",
        "TensorStorageMetadata",
        "BytesStorageMetadata",
        "ChunkStorageMetadata",
        "_MEM_FORMAT_ENCODING",
    },
    "torch.distributed.checkpoint.filesystem": {"_StorageInfo"},
    "torch.serialization": {"_get_layout"},  # a layout from its name
    "torch": {"Size"},
    "pathlib": {"Path", "PosixPath", "WindowsPath", "PurePosixPath", "PureWindowsPath"},
    "collections": {"OrderedDict"},
}
_TORCH_CONSTANTS = (torch.dtype, torch.layout, torch.memory_format)


class _MetadataUnpickler(pickle.Unpickler):
    """Unpickles DCP's metadata records, tensor sizes, dtypes and paths; refuses any other callable."""

    def find_class(self, module: str, name: str) -> Any:
        found = super().find_class(module, name) if name in _METADATA_TYPES.get(module, ()) else None
        if found is None and module == "torch":
            constant = getattr(torch, name, None)
            found = constant if isinstance(constant, _TORCH_CONSTANTS) else None
        if found is None:
            raise pickle.UnpicklingError(f"it calls {module}.{name}")
        return found


def _refusal(path: Path, reason: str) -> UnsafeFileError:
    return UnsafeFileError(
        f"{path}: refused: not plain sharded-checkpoint data ({reason}), and reading it in full would run code "
        "from the file; if it is your own, re-save its tensors and plain values from code you trust"
    )


def _read_metadata(path: Path) -> Any:
    """One metadata file unpickled with DCP's own records only; anything else is refused."""
    try:
        with open(path, "rb") as f:
            return _MetadataUnpickler(f).load()
    except pickle.UnpicklingError as err:
        raise _refusal(path, str(err)) from None


def check_metadata(folder: Path) -> None:
    """Refuse ``folder`` if a metadata file of it needs more than DCP's own records to unpickle."""
    for path in sorted(Path(folder).glob("*.metadata")):
        _read_metadata(path)


class CheckedReader(FileSystemReader):
    """DCP's file-system reader, reading the metadata through the restricted unpickler instead of
    ``pickle.load``, so neither a load nor a look at the shapes unpickles the folder unchecked."""

    def read_metadata(self, *args: Any, **kwargs: Any) -> Metadata:
        metadata = _read_metadata(Path(self._get_metadata_path(kwargs.get("rank"))))
        if getattr(metadata, "storage_meta", None) is None:
            metadata.storage_meta = StorageMeta()
        metadata.storage_meta.load_id = self.load_id
        return metadata


class WeightsOnlyLoadPlanner(DefaultLoadPlanner):
    """DCP's default load planner, but a non-tensor value is read only if it is plain data."""

    def __init__(self, folder: Path) -> None:
        super().__init__()
        self.folder = folder

    def load_bytes(self, read_item: Any, value: io.BytesIO) -> None:
        data = value.read()
        try:
            torch.load(io.BytesIO(data), weights_only=True)
        except pickle.UnpicklingError:
            raise _refusal(self.folder, f"the value of {read_item.dest_index.fqn} needs pickle") from None
        super().load_bytes(read_item, io.BytesIO(data))  # the same bytes, now known to be plain data


def load_checked(state: dict[str, Any], folder: Path) -> None:
    """``dcp.load(state)`` from ``folder``, its metadata and values checked first; a
    refusal comes out as its own one-line error, not inside DCP's per-rank report (DCP turns a
    reader's error into "metadata is None", so the metadata is checked here first)."""
    check_metadata(folder)
    try:
        dcp.load(state, storage_reader=CheckedReader(str(folder)), planner=WeightsOnlyLoadPlanner(folder))
    except CheckpointException as err:
        refused = [failure for failure, _ in err.failures.values() if isinstance(failure, UnsafeFileError)]
        if refused:
            raise refused[0] from None
        raise
