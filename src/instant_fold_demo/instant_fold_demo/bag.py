"""rosbag2 (MCAP) files written and read with the `rosbags` library: no ROS 2 installation needed.

Why `rosbags`: rosbag2_py is not installable from wheels, and `rosbags` writes rosbag2 version 9
directories (metadata.yaml + one .mcap file) that `ros2 bag info/play` and Foxglove read. The
recorder stores the CDR bytes exactly as they arrived over DDS (raw subscriptions), so a bag holds
what was published, byte for byte, whatever the message type.

`QueuedBagWriter` puts a bounded queue (in bytes) and one writer thread between the subscriptions
and the disk: a slow disk drops messages (counted, reported) instead of growing memory without
bound, and `close()` drains what was queued before the bag is finalised, so a stop (Ctrl-C,
SIGTERM) loses nothing that was accepted. Write failures (full disk, size limit, unwritable
folder) become `BagError`s that name the file and what to do.

What `rosbags` writes differently from rosbag2 is corrected here (`_Rosbag2Writer`), so that
`ros2 bag info` and Foxglove read our bags as their own: the metadata names the real ROS 2
distribution, not `rosbags`; each topic carries the QoS profiles its publishers offered (given by
the recorder, which saw them); an empty bag starts at 0 with a zero duration instead of INT64_MAX
(the MCAP spec's value for "no messages", which readers turn into dates); and MCAP chunks can be
zstd-compressed (`compression="zstd"`, chunk-level like rosbag2's `zstd_fast`/`zstd_small`
storage presets, so every MCAP reader decompresses them; off by default: docs/demonstrations.md,
"Chunk compression").
"""

from __future__ import annotations

import errno
import os
import queue
import sys
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import MappingProxyType
from typing import Literal

import yaml
from rosbags.interfaces import Qos
from rosbags.rosbag2 import (
    CompressionFormat,
    CompressionMode,
    Reader,
    ReaderError,
    StoragePlugin,
    Writer,
    WriterError,
)
from rosbags.rosbag2.storage_mcap import McapWriter
from rosbags.typesys import Stores, get_types_from_msg, get_typestore
from rosbags.typesys.store import Typestore

from instant_fold_core.errors import ArtifactError

if sys.version_info >= (3, 14):
    from compression import zstd
else:
    from backports import zstd  # what rosbags compresses with before Python 3.14

#: rosbag2 metadata version written: what ROS 2 Kilted writes (rosbags writes 8 or 9 only; not verified
#: here with a `ros2 bag` of any distribution, none is installed).
ROSBAG2_VERSION: Literal[9] = 9
#: Default bound on queued, not yet written message bytes (about 9 s of 640x480 RGB-D at 30 Hz).
DEFAULT_MAX_QUEUED_BYTES = 512 * 1024 * 1024
_NO_SPACE = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
#: The ROS 2 distribution of the workspace's pinned wheels (`requirements/ros-wheels.lock`: rclpy
#: 9.x, the `ROS2_KILTED` type store below), named in a bag's metadata unless ROS_DISTRO says otherwise.
WHEELS_ROS_DISTRO = "kilted"
#: MCAP chunk compression: none, or zstd per chunk (as `ros2 bag record --storage-preset-profile
#: zstd_fast` writes, at another level; every MCAP reader decompresses it).
COMPRESSIONS = ("none", "zstd")
#: zstd level of compressed chunks: the MCAP C++ writer's default level (1), which
#: benchmarks/bench_bag_compression.py measures against zstd's own default (3): 7 % fewer bytes
#: for nearly twice the CPU at level 3.
ZSTD_LEVEL = 1


class BagError(ArtifactError):
    """A bag cannot be written or read; the message names the file and the cause."""


def _io_error(path: Path, exc: BaseException, doing: str) -> BagError:
    """A clear error for an OS-level failure while `doing` something with the bag at `path`."""
    cause = exc.__cause__ or exc.__context__ or exc
    for candidate in (exc, cause):
        if isinstance(candidate, OSError) and candidate.errno in _NO_SPACE:
            return BagError(
                f"no space left while {doing} {path} ({candidate.strerror}): free disk space or record "
                f"elsewhere; what was written before is in {path} and may be truncated"
            )
        if isinstance(candidate, PermissionError):
            return BagError(f"permission denied while {doing} {path}: choose a folder you can write to")
    return BagError(f"failed while {doing} {path}: {exc}")


def check_writable_target(path: Path) -> None:
    """Refuse a bag path that exists or whose nearest existing parent is not a writable folder."""
    if path.exists() or path.is_symlink():
        raise BagError(f"{path} exists already: a recording is never overwritten, choose a new name")
    parent = path.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise BagError(f"cannot create {path}: {parent} is not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise BagError(f"cannot create {path}: no write permission in {parent}")


def ros_distro() -> str:
    """The distribution a bag names (`ros2 bag info` shows it; tools choose message definitions by
    it): ROS_DISTRO where an installed ROS 2 was sourced, else that of the workspace's wheels."""
    return os.environ.get("ROS_DISTRO") or WHEELS_ROS_DISTRO


def _with_ros_distro(metadata_yaml: str) -> str:
    """rosbags' metadata YAML (metadata.yaml, or the copy it embeds in the MCAP file) naming
    `ros_distro()` instead of `rosbags`, which is no distribution."""
    data = yaml.safe_load(metadata_yaml)
    data.get("rosbag2_bagfile_information", data)["ros_distro"] = ros_distro()
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False)


class _McapStorage(McapWriter):
    """rosbags' MCAP storage with the distribution, an empty bag's start (the MCAP spec: 0 when a
    chunk or the file has no messages) and the zstd level corrected."""

    def __init__(self, path: Path, compression: CompressionMode) -> None:
        super().__init__(path, compression)
        if self.compression == "zstd":
            self.compressor = partial(zstd.compress, level=ZSTD_LEVEL)

    def close_chunk(self) -> None:
        if not self.chunk.msgs:
            self.chunk.message_start_time = 0
        super().close_chunk()

    def close(self, version: int, metadata: str) -> None:
        if not any(self.channel_stats.values()):
            self.message_start_time = 0
        super().close(version, _with_ros_distro(metadata))


class _Rosbag2Writer(Writer):
    """rosbags' writer, writing `_McapStorage` and a metadata.yaml with the corrections above."""

    STORAGE_PLUGINS = MappingProxyType({**Writer.STORAGE_PLUGINS, StoragePlugin.MCAP: _McapStorage})

    def close(self) -> None:
        if not any(self.counts.values()):
            self.min_timestamp = 0  # start 0, duration 0 (rosbags: INT64_MAX)
        super().close()
        tmp = self.metapath.with_suffix(".yaml.tmp")
        tmp.write_text(_with_ros_distro(self.metapath.read_text()))
        tmp.replace(self.metapath)


def _ament_prefixes() -> list[Path]:
    return [Path(p) for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]


def typestore_for(msgtypes: Iterable[str]) -> Typestore:
    """The ROS 2 Kilted type store, plus every message package (from its installed `.msg` files on
    AMENT_PREFIX_PATH) that defines one of `msgtypes` and is not in the store (our interfaces)."""
    store = get_typestore(Stores.ROS2_KILTED)
    for msgtype in msgtypes:
        if msgtype in store.fielddefs:
            continue
        package = msgtype.split("/")[0]
        for prefix in _ament_prefixes():
            folder = prefix / "share" / package / "msg"
            if folder.is_dir():
                types: dict = {}
                for msg_file in sorted(folder.glob("*.msg")):
                    types.update(get_types_from_msg(msg_file.read_text(), f"{package}/msg/{msg_file.stem}"))
                store.register(types)
                break
        if msgtype not in store.fielddefs:
            raise BagError(f"message type {msgtype} is unknown: its package is not on AMENT_PREFIX_PATH")
    return store


@dataclass
class RecordingStats:
    """What a recording holds so far (shown while recording, printed at the end)."""

    messages: int = 0
    bytes: int = 0
    dropped: int = 0
    first_ns: int | None = None
    last_ns: int | None = None
    per_topic: dict[str, int] = field(default_factory=dict)

    @property
    def duration_s(self) -> float:
        if self.first_ns is None or self.last_ns is None:
            return 0.0
        return (self.last_ns - self.first_ns) / 1e9

    def line(self) -> str:
        return f"{self.duration_s:.1f} s, {self.bytes / 1e6:.1f} MB, {self.messages} messages ({self.dropped} dropped)"


class BagWriter:
    """A rosbag2 MCAP bag being written: topics are added as they appear, messages are raw CDR."""

    def __init__(self, path: str | Path, compression: str = "none") -> None:
        self.path = Path(path)
        if compression not in COMPRESSIONS:
            raise BagError(f"unknown bag compression {compression!r}: choose one of {', '.join(COMPRESSIONS)}")
        check_writable_target(self.path)
        self._writer = _Rosbag2Writer(self.path, version=ROSBAG2_VERSION, storage_plugin=StoragePlugin.MCAP)
        if compression == "zstd":
            self._writer.set_compression(CompressionMode.STORAGE, CompressionFormat.ZSTD)
        self._connections: dict[str, object] = {}
        self.stats = RecordingStats()
        try:
            self._writer.open()
        except (OSError, WriterError) as exc:
            raise _io_error(self.path, exc, "creating") from exc

    def add_topic(
        self, topic: str, msgtype: str, typestore: Typestore | None = None, offered_qos: Sequence[Qos] = ()
    ) -> None:
        """Register `topic` (type like 'sensor_msgs/msg/Image') with the QoS profiles its
        publishers offered (`ros2 bag play` publishes with them); a no-op when it is already there."""
        if topic in self._connections:
            return
        store = typestore or typestore_for([msgtype])
        try:
            self._connections[topic] = self._writer.add_connection(
                topic, msgtype, typestore=store, offered_qos_profiles=offered_qos
            )
        except (OSError, WriterError) as exc:
            raise _io_error(self.path, exc, "writing") from exc
        self.stats.per_topic[topic] = 0

    @property
    def topics(self) -> list[str]:
        return list(self._connections)

    def write(self, topic: str, stamp_ns: int, data: bytes | memoryview) -> None:
        """Append one serialized message received at `stamp_ns` (ns since the epoch)."""
        connection = self._connections.get(topic)
        if connection is None:
            raise BagError(f"{self.path}: topic {topic} was never added")
        try:
            self._writer.write(connection, stamp_ns, data)  # type: ignore[arg-type]
        except (OSError, WriterError) as exc:
            raise _io_error(self.path, exc, "writing") from exc
        stats = self.stats
        stats.messages += 1
        stats.bytes += len(data)
        stats.per_topic[topic] += 1
        stats.first_ns = stamp_ns if stats.first_ns is None else min(stats.first_ns, stamp_ns)
        stats.last_ns = stamp_ns if stats.last_ns is None else max(stats.last_ns, stamp_ns)

    def close(self) -> None:
        """Finalise the MCAP summary and metadata.yaml (the bag is readable only after this)."""
        try:
            self._writer.close()
        except (OSError, WriterError) as exc:
            raise _io_error(self.path, exc, "closing") from exc


class QueuedBagWriter:
    """`BagWriter` behind a bounded queue and a writer thread (callbacks never wait on the disk)."""

    def __init__(
        self, path: str | Path, max_queued_bytes: int = DEFAULT_MAX_QUEUED_BYTES, compression: str = "none"
    ) -> None:
        self._bag = BagWriter(path, compression)
        self.path = self._bag.path
        self.max_queued_bytes = int(max_queued_bytes)
        self._queue: queue.SimpleQueue[tuple[str, int, bytes] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._queued_bytes = 0
        self._dropped = 0
        self.error: BagError | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._drain, name="bag-writer", daemon=True)
        self._thread.start()

    def add_topic(
        self, topic: str, msgtype: str, typestore: Typestore | None = None, offered_qos: Sequence[Qos] = ()
    ) -> None:
        with self._lock:
            self._bag.add_topic(topic, msgtype, typestore, offered_qos)

    @property
    def topics(self) -> list[str]:
        with self._lock:
            return self._bag.topics

    def put(self, topic: str, stamp_ns: int, data: bytes) -> bool:
        """Queue one message; False (and counted as dropped) when the queue is full.

        Raises the writer thread's `BagError` once the bag can no longer be written.
        """
        if self.error is not None:
            raise self.error
        size = len(data)
        with self._lock:
            if self._closed:
                raise BagError(f"{self.path} is closed")
            if self._queued_bytes + size > self.max_queued_bytes:
                self._dropped += 1
                return False
            self._queued_bytes += size
        self._queue.put((topic, stamp_ns, data))
        return True

    def _drain(self) -> None:
        while (item := self._queue.get()) is not None:
            topic, stamp_ns, data = item
            with self._lock:
                self._queued_bytes -= len(data)
                if self.error is None:
                    try:
                        self._bag.write(topic, stamp_ns, data)
                    except BagError as exc:
                        self.error = exc

    def stats(self) -> RecordingStats:
        """Written so far, with the drop count (a copy: safe to read from any thread)."""
        with self._lock:
            s = self._bag.stats
            return RecordingStats(s.messages, s.bytes, self._dropped, s.first_ns, s.last_ns, dict(s.per_topic))

    @property
    def queued_bytes(self) -> int:
        with self._lock:
            return self._queued_bytes

    def close(self) -> RecordingStats:
        """Write everything queued, finalise the bag, return the final statistics.

        Raises the first write error (after closing what can be closed)."""
        with self._lock:
            if self._closed:
                return self.stats()
            self._closed = True
        self._queue.put(None)
        self._thread.join()
        with self._lock:
            try:
                self._bag.close()
            except BagError as exc:
                self.error = self.error or exc
        if self.error is not None:
            raise self.error
        return self.stats()


@dataclass(frozen=True)
class BagMessage:
    """One stored message: topic, its ROS type name, receive time (ns) and CDR bytes."""

    topic: str
    msgtype: str
    stamp_ns: int
    data: bytes


def _open_reader(path: Path) -> Reader:
    if not path.exists():
        raise BagError(f"bag {path} does not exist")
    try:
        reader = Reader(path)
        reader.open()
    except (ReaderError, OSError, ValueError, KeyError) as exc:
        hint = (
            " (no metadata.yaml: the recording was not closed; it may be truncated)"
            if (path.is_dir() and not (path / "metadata.yaml").exists())
            else ""
        )
        raise BagError(f"{path} is not a readable rosbag2 bag{hint}: {exc}") from exc
    return reader


def bag_topics(path: str | Path) -> dict[str, tuple[str, int]]:
    """topic -> (message type, message count) of a bag."""
    reader = _open_reader(Path(path))
    try:
        return {c.topic: (c.msgtype, c.msgcount) for c in reader.connections}
    finally:
        reader.close()


def read_messages(path: str | Path, topics: Iterable[str] | None = None) -> Iterator[BagMessage]:
    """The messages of a bag in time order (only `topics` when given), with clear errors for
    missing, unfinished or damaged bags."""
    path = Path(path)
    reader = _open_reader(path)
    try:
        wanted = set(topics) if topics is not None else None
        connections = [c for c in reader.connections if wanted is None or c.topic in wanted]
        try:
            for connection, stamp_ns, data in reader.messages(connections=connections):
                yield BagMessage(connection.topic, connection.msgtype, int(stamp_ns), bytes(data))
        except (ReaderError, OSError, ValueError, KeyError, EOFError) as exc:
            raise BagError(f"{path} is damaged or truncated: {exc}") from exc
    finally:
        reader.close()


def write_messages(path: str | Path, topics: Mapping[str, str], messages: Iterable[tuple[str, int, bytes]]) -> Path:
    """Write a whole bag at once (for tools and tests): topics -> type, (topic, stamp_ns, cdr)."""
    bag = BagWriter(path)
    store = typestore_for(topics.values())
    try:
        for topic, msgtype in topics.items():
            bag.add_topic(topic, msgtype, store)
        for topic, stamp_ns, data in messages:
            bag.write(topic, stamp_ns, data)
    finally:
        bag.close()
    return bag.path
