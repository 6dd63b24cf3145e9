"""Files under the checkpoint through `pyarrow.fs`, so local paths, HDFS and S3 all work."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from typing import BinaryIO

from pyarrow import fs as pafs


def resolve_location(location: str) -> str:
    """A URI for `location`; a bare path becomes an absolute local one (on a cluster, use a
    shared URI such as s3://bucket/path or hdfs://: every executor must see the same files)."""
    if "://" in location:
        return location
    return "file://" + os.path.abspath(location)


def filesystem(location: str) -> tuple[pafs.FileSystem, str]:
    """The filesystem and path of `location`; `s3a://` (Hadoop's name, which Spark's checkpoint
    uses) is pyarrow's `s3://`, configured from the AWS variables (object_store.py)."""
    uri = resolve_location(location)
    if uri.startswith("s3a://"):
        uri = "s3://" + uri.removeprefix("s3a://")
    return pafs.FileSystem.from_uri(uri)


def write_atomic(fs: pafs.FileSystem, path: str, data: bytes) -> None:
    """Readers see either nothing or the whole file (see open_atomic)."""
    with open_atomic(fs, path) as out:
        out.write(data)


@contextlib.contextmanager
def open_atomic(fs: pafs.FileSystem, path: str) -> Iterator[BinaryIO]:
    """A file to write `path` through: readers see either nothing or the whole file. S3 puts
    are atomic; elsewhere the data goes to a temporary name that is renamed at the end. On a
    local disk the data, then the rename, are forced to the disk (fsync of the file and of its
    directory) before this returns: a log entry or a pinned setting counts as written
    only once a power loss cannot take it back. Nothing is left behind if writing fails."""
    parent = path.rsplit("/", 1)[0]
    fs.create_dir(parent, recursive=True)
    if fs.type_name == "s3":
        with fs.open_output_stream(path) as out:
            yield out
        return
    temporary = f"{path}.tmp-{uuid.uuid4().hex}"
    try:
        if fs.type_name == "local":
            with open(temporary, "wb") as out:
                yield out
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, path)
            _fsync_directory(parent)
        else:
            with fs.open_output_stream(temporary) as out:
                yield out
            fs.move(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError, FileNotFoundError):
            fs.delete_file(temporary)
        raise


def _fsync_directory(directory: str) -> None:
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def read_bytes(fs: pafs.FileSystem, path: str) -> bytes:
    with fs.open_input_stream(path) as stream:
        return stream.readall()


def exists(fs: pafs.FileSystem, path: str) -> bool:
    return fs.get_file_info(path).type != pafs.FileType.NotFound


def list_names(fs: pafs.FileSystem, directory: str) -> list[str]:
    if not exists(fs, directory):
        return []
    return [info.base_name for info in fs.get_file_info(pafs.FileSelector(directory))]
