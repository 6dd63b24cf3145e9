"""Files under the checkpoint through `pyarrow.fs`, so local paths, HDFS and S3 all work."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from pyarrow import fs as pafs


def resolve_location(location: str) -> str:
    """A URI for `location`; a bare path becomes an absolute local one (on a cluster, use a
    shared URI such as s3://bucket/path or hdfs://: every executor must see the same files)."""
    if "://" in location:
        return location
    return "file://" + os.path.abspath(location)


def filesystem(location: str) -> tuple[pafs.FileSystem, str]:
    return pafs.FileSystem.from_uri(resolve_location(location))


def write_atomic(fs: pafs.FileSystem, path: str, data: bytes) -> None:
    """Readers see either nothing or the whole file: S3 puts are atomic, elsewhere write
    a temporary name and rename it. On a local disk the data, then the rename, are forced to
    the disk (fsync of the file and of its directory) before this returns: the sink reports
    a file staged, or a log entry written, only once a power loss cannot take it back."""
    parent = path.rsplit("/", 1)[0]
    fs.create_dir(parent, recursive=True)
    if fs.type_name == "s3":
        with fs.open_output_stream(path) as out:
            out.write(data)
        return
    temporary = f"{path}.tmp-{uuid.uuid4().hex}"
    if fs.type_name == "local":
        _write_durably(Path(temporary), Path(path), data)
        return
    with fs.open_output_stream(temporary) as out:
        out.write(data)
    fs.move(temporary, path)


def _write_durably(temporary: Path, path: Path, data: bytes) -> None:
    with open(temporary, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(temporary, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def read_bytes(fs: pafs.FileSystem, path: str) -> bytes:
    with fs.open_input_stream(path) as stream:
        return stream.readall()


def exists(fs: pafs.FileSystem, path: str) -> bool:
    return fs.get_file_info(path).type != pafs.FileType.NotFound


def list_names(fs: pafs.FileSystem, directory: str) -> list[str]:
    if not exists(fs, directory):
        return []
    return [info.base_name for info in fs.get_file_info(pafs.FileSelector(directory))]
