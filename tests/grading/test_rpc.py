"""containment.rpc: what crosses the pipe, and what the driver's end refuses to serve.

A thread plays the learner's process: it holds the learner's objects and serves the driver's
requests; the learner's code is run by calling through the driver's proxies, so it sees the
driver's objects only as proxies.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from pagedlab.containment.rpc import Channel, ChannelClosed, Proxy, is_a, type_name
from pagedlab.core.block_pool import KVCacheBlock
from pagedlab.grading import registry
from pagedlab.grading.recorder import to_plain


class Yes(list):  # type: ignore[type-arg]
    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = None  # type: ignore[assignment]


class Tricks:
    """The learner's side: each method tries something on the objects the driver hands it."""

    def read(self, obj: Any, name: str) -> Any:
        return getattr(obj, name)

    def raw_read(self, obj: Any, name: str) -> Any:
        """Ask the driver's end directly (what a proxy would never send)."""
        chan, h = object.__getattribute__(obj, "_pl_chan"), object.__getattribute__(obj, "_pl_h")
        return chan.request("getattr", h, name=name)

    def write(self, obj: Any, name: str, value: Any) -> None:
        setattr(obj, name, value)

    def mutate(self, items: Any) -> Any:
        items.append(99)
        items[0] = -1
        return [len(items), 99 in items, list(items)]

    def echo(self, v: Any) -> Any:
        return v

    def same(self, a: Any, b: Any) -> bool:
        return a is b

    def always_equal(self) -> Any:
        return Yes([1])


@pytest.fixture()
def pair() -> Iterator[tuple[Channel, Any]]:
    r1, w1 = os.pipe()
    r2, w2 = os.pipe()
    learner = Channel(r1, w2, trusted=False)
    handle = learner.export(Tricks())
    thread = threading.Thread(target=learner.serve_forever, daemon=True)
    thread.start()
    driver = Channel(r2, w1, trusted=True)
    yield driver, driver.decode({"t": "ref", "h": handle, "cls": "tests.Tricks"})
    os.close(w1)  # the learner's side sees end of file and stops
    thread.join(5)
    for fd in (r1, w2, r2):
        os.close(fd)


def test_values_cross_with_their_exact_types(pair: tuple[Channel, Any]) -> None:
    _driver, tricks = pair
    for v in (
        None,
        True,
        3,
        -2.5,
        "s",
        b"\x00\xff",
        (1, (2, "x")),
        frozenset({1, 2}),
        range(1, 9, 2),
        slice(1, None, 2),
        float("inf"),
    ):
        got = tricks.echo(v)
        assert got == v and type(got) is type(v)
    assert tricks.echo(float("nan")) != tricks.echo(float("nan"))
    theirs = tricks.always_equal()  # the learner's list subclass with a permissive __eq__ stays over there
    assert isinstance(theirs, Proxy) and type_name(theirs) == "Yes" and to_plain(theirs) == {"__unplain__": "Yes"}


def test_the_driver_s_objects_are_shared_not_copied(pair: tuple[Channel, Any]) -> None:
    _driver, tricks = pair
    items = [1, 2, 3]
    assert tricks.mutate(items) == [4, True, [-1, 2, 3, 99]]
    assert items == [-1, 2, 3, 99]  # the learner's code changed the test's own list
    block = KVCacheBlock(7)
    assert tricks.same(block, block) is True and tricks.echo(block) is block
    assert tricks.read(block, "block_id") == 7
    tricks.write(block, "ref_cnt", 2)  # a data attribute: allowed, as the learner's API would
    assert block.ref_cnt == 2


@pytest.mark.parametrize("name", ["__class__", "__dict__", "__init__", "__reduce__"])
def test_dunder_attributes_of_the_driver_s_objects_are_refused(pair: tuple[Channel, Any], name: str) -> None:
    _driver, tricks = pair
    with pytest.raises(PermissionError, match="not allowed"):
        tricks.raw_read(KVCacheBlock(0), name)


def test_no_module_class_or_grader_object_is_handed_out(pair: tuple[Channel, Any]) -> None:
    _driver, tricks = pair
    holder = type("Holder", (), {})()
    holder.module, holder.cls, holder.exercise = os, KVCacheBlock, registry.get("02.slot_mapping")
    for name in ("module", "cls", "exercise"):
        with pytest.raises(PermissionError, match="not available to your code"):
            tricks.read(holder, name)


def test_methods_of_the_driver_s_objects_cannot_be_replaced(pair: tuple[Channel, Any]) -> None:
    _driver, tricks = pair
    items: list[int] = []
    with pytest.raises(PermissionError, match="replacing the method 'append'"):
        tricks.write(items, "append", 0)
    holder = type("Holder", (), {})()
    holder.callback = print  # a function stored on the instance counts as a method too
    with pytest.raises(PermissionError, match="replacing the method 'callback'"):
        tricks.write(holder, "callback", None)
    assert holder.callback is print


def test_kit_classes_are_recognised_across_the_pipe(pair: tuple[Channel, Any]) -> None:
    driver, _tricks = pair
    from pagedlab.grading.kit import Seq  # re-exported: the class lives in pagedlab.analysis.kit

    seq = driver.decode({"t": "ref", "h": 10**6, "cls": f"{Seq.__module__}.{Seq.__qualname__}"})
    assert is_a(seq, Seq) and not is_a(seq, KVCacheBlock) and type_name(seq) == "Seq"


def test_a_broken_or_vanished_peer_closes_the_channel() -> None:
    r, w = os.pipe()
    chan = Channel(r, w, trusted=True)
    os.write(w, b"{not json\n")
    with pytest.raises(ChannelClosed, match="malformed"):
        chan.recv()
    assert chan.closed
    r2, w2 = os.pipe()
    os.close(w2)
    with pytest.raises(ChannelClosed, match="ended"):
        Channel(r2, w, trusted=True).recv()
    for fd in (r, w, r2):
        os.close(fd)


# --- framing: O(N) reads, the size cap enforced as it reads (issue 26) ----------------------------------
def _writer(fd: int, data: bytes) -> threading.Thread:
    def run() -> None:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        except OSError:  # the reader closed its end
            pass

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_a_message_over_the_cap_is_refused_as_it_is_read_even_if_the_sender_goes_quiet():
    """64 MiB + 1 bytes without a newline, and the sender keeps its end open: recv() must not wait
    for more data to notice (the old loop checked the size only when the next read returned)."""
    from pagedlab.containment.rpc import MAX_MESSAGE_BYTES

    r, w = os.pipe()
    writer = _writer(w, b"x" * (MAX_MESSAGE_BYTES + 1))
    chan = Channel(r, os.open(os.devnull, os.O_WRONLY), trusted=True)
    done: list[BaseException] = []

    def read() -> None:
        try:
            chan.recv()
        except BaseException as e:  # noqa: BLE001 - recorded for the assertion
            done.append(e)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(30)
    os.close(r)  # unblocks the writer, whatever happened
    writer.join(5)
    os.close(w)
    assert done and isinstance(done[0], ChannelClosed) and "too large" in str(done[0]), done
    assert len(chan.buf) <= MAX_MESSAGE_BYTES + 1


def test_a_large_message_is_read_in_linear_time(monkeypatch):
    """40 MB of one JSON string through a pipe that hands the reader 4 KiB a read (a sender writing in
    small pieces): 10,240 reads. Concatenating bytes and searching the whole buffer after each read
    copies and scans ~400 GB (minutes); a bytearray searched chunk by chunk reads it in about a second.
    (With the pipe's own 64 KiB reads the old loop took only seconds on a fast machine.)"""
    import json
    import time
    import types

    from pagedlab.containment import rpc

    reads: list[int] = []

    def small_read(fd: int, n: int) -> bytes:
        chunk = os.read(fd, min(n, 4096))
        reads.append(len(chunk))
        return chunk

    monkeypatch.setattr(rpc, "os", types.SimpleNamespace(read=small_read, write=os.write))
    payload = {"v": "y" * (40 * 1024 * 1024)}
    data = (json.dumps(payload) + "\n" + json.dumps({"next": 1}) + "\n").encode()
    r, w = os.pipe()
    writer = _writer(w, data)
    chan = Channel(r, os.open(os.devnull, os.O_WRONLY), trusted=True)
    got: list[Any] = []
    t0 = time.monotonic()
    reader = threading.Thread(target=lambda: got.extend([chan.recv(), chan.recv()]), daemon=True)
    reader.start()
    reader.join(60)  # the quadratic loop would still be reading: never wait for it
    took = time.monotonic() - t0
    os.close(r)  # unblocks a reader or writer still running
    writer.join(5)
    os.close(w)
    assert got == [payload, {"next": 1}], f"not read in {took:.0f} s ({sum(reads) / 2**20:.1f} MB read)"
    assert len(reads) >= len(data) // 4096 and took < 20.0, (len(reads), took)
