"""A streaming reader of memory-snapshot pickles: the events become columns as they are read.

``pickle.load`` of a snapshot builds one dict per allocator event (5x the file in memory: 5 GB
for a 1 GB snapshot). This reader walks the pickle's opcodes itself, from a memory map, and turns
each event dict (a dict whose keys include ``action``) into one row of columns the moment it is
read, so only the columns, the stacks and the small shared objects (frames, key strings) are held.

Most of an event is the list of its stack's frames, which the pickle writes as references to
frame dicts it has already written: such a list is matched in one regular-expression step and its
bytes are the stack's key, so a stack is summarised once however many events share it.

Only the opcodes of plain data are accepted (dicts, lists, tuples, strings, bytes, numbers, None,
booleans, and the memo); a pickle that imports a class is refused, as a snapshot never does.
"""

from __future__ import annotations

import mmap
import re
import struct
import sys
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import Any

_GET_RUN = rb"(?:h.|j....)"
#: a frames list of memo references: "]" MEMOIZE, then nothing, one item + APPEND, or MARK items APPENDS
_FRAMES_RE = re.compile(rb"\]\x94(?:\((" + _GET_RUN + rb"*)e|(" + _GET_RUN + rb")a)?", re.S)
_I4 = struct.Struct("<i")
_U4 = struct.Struct("<I")
_U8 = struct.Struct("<Q")
_F8 = struct.Struct(">d")


class UnsupportedPickle(ValueError):
    """The pickle uses an opcode this reader does not handle (the caller may fall back)."""


class _Mark:
    pass


_MARK = _Mark()


class _Stack:
    """The memo's stand-in for a frames list read on the fast path.

    Events share them: a free event refers to its allocation's list.
    """

    __slots__ = ("code",)

    def __init__(self, code: int) -> None:
        self.code = code


class EventSink:
    """Where event dicts go: columns (``array``) and the stack table."""

    def __init__(self, summarise: Callable[[list[Any]], str]) -> None:
        self.cols = {k: array("q")
                     for k in ("device", "action", "addr", "size", "stream", "time_us", "stack")}
        self.actions: dict[str, int] = {}
        self.stacks: list[str] = []
        self._by_text: dict[str, int] = {}
        self.by_bytes: dict[bytes, int] = {}
        self._summarise = summarise
        self.device = 0

    def stack_of(self, frames: list[Any], key: bytes | None = None) -> int:
        """The stack table's code for ``frames`` (added when new); ``key``: the frames' pickle bytes."""
        if key is not None:
            got = self.by_bytes.get(key)
            if got is not None:
                return got
        text = self._summarise(frames)
        code = self._by_text.setdefault(text, len(self.stacks))
        if code == len(self.stacks):
            self.stacks.append(text)
        if key is not None:
            self.by_bytes[key] = code
        return code

    def add(self, action: Any, addr: Any, size: Any, stream: Any, time_us: Any, stack: int) -> None:
        """Append one event to the columns, on the current device."""
        c = self.cols
        code = self.actions.get(action) if isinstance(action, str) else None
        if code is None:
            code = self.actions.setdefault(str(action), len(self.actions))
        n = len(c["stack"])
        try:
            c["device"].append(self.device)
            c["action"].append(code)
            c["addr"].append(addr or 0)
            c["size"].append(size or 0)
            c["stream"].append(stream or 0)
            c["time_us"].append(time_us or 0)
            c["stack"].append(stack)
        except (TypeError, OverflowError):  # a value that is not a 64-bit integer: the slow way
            for col in c.values():
                del col[n:]
            for name, v in (("device", self.device), ("action", code), ("addr", _int(addr)),
                            ("size", _int(size)), ("stream", _int(stream)), ("time_us", _int(time_us)),
                            ("stack", stack)):
                c[name].append(v)


def _int(v: Any) -> int:
    try:
        x = int(v or 0)
    except (TypeError, ValueError):
        return 0
    return x if -(2**63) <= x < 2**63 else x & 0x7FFFFFFFFFFFFFFF


class StreamReader:
    """Walks one pickle (see the module docstring).

    :meth:`run` returns the top-level object with every event dict replaced by ``None`` (its values
    are in ``sink``).
    """

    def __init__(self, buf: Any, sink: EventSink, progress: Callable[[float], None] | None = None) -> None:
        self.buf = buf
        self.n = len(buf)
        self.sink = sink
        self.memo: list[Any] = []
        self.marks: list[int] = []  # stack positions of the open MARKs
        self.devices: dict[int, int] = {}  # id of a per-device event list -> device index
        self._stacks: dict[int, _Stack] = {}
        self.progress = progress
        self._next_report = 0

    # -- values --------------------------------------------------------------------------------
    def _get(self, pos: int) -> tuple[Any, int]:
        op = self.buf[pos]
        if op == 0x68:  # BINGET
            return self.memo[self.buf[pos + 1]], pos + 2
        if op == 0x6A:  # LONG_BINGET
            return self.memo[_U4.unpack_from(self.buf, pos + 1)[0]], pos + 5
        raise UnsupportedPickle

    def run(self) -> Any:
        """Read the whole pickle: the top-level object, its events in the sink."""
        stack: list[Any] = []
        buf, pos = self.buf, 0
        memo = self.memo
        while pos < self.n:
            op = buf[pos]
            if self.progress is not None and pos >= self._next_report:
                self.progress(pos / self.n)
                self._next_report = pos + (1 << 24)
            if op == 0x7D and buf[pos + 1:pos + 3] == b"\x94(":  # EMPTY_DICT MEMOIZE MARK: maybe an event
                size = len(memo)
                memo.append(None)  # the dict's slot: the event is never built
                done = self._event(pos + 3, stack)
                if done is not None:
                    stack.append(None)
                    pos = done
                    continue
                del memo[size:]  # not an event (or an unusual one): read it the general way
            pos = self._op(op, pos, stack)
            if pos < 0:
                return stack[-1] if stack else None
        raise UnsupportedPickle  # no STOP: truncated

    def _set_device(self, stack: list[Any]) -> None:
        """The device of the events being read: the list they are appended to, by first appearance."""
        t = self.marks[-1] - 1 if self.marks and self.marks[-1] > 0 else -1
        if stack and isinstance(stack[-1], list) and (not self.marks or self.marks[-1] < len(stack)):
            t = len(stack) - 1
        if t < 0 or not isinstance(stack[t], list):
            return
        key = id(stack[t])
        if key not in self.devices:  # its place in device_traces: items already in, plus those pending
            below = [m for m in self.marks if m < t]
            if below and below[-1] > 0 and isinstance(stack[below[-1] - 1], list):
                index = len(stack[below[-1] - 1]) + (t - below[-1] - 1)
            elif t > 0 and isinstance(stack[t - 1], list):
                index = len(stack[t - 1])
            else:
                index = len(self.devices)
            self.devices[key] = index
        self.sink.device = self.devices[key]

    def _event(self, pos: int, stack: list[Any]) -> int | None:
        """Read an event dict's items (from after its MARK) into the sink; None when it is not one.

        The common items (memo references for keys, integers) are decoded inline: this loop runs
        once per allocator event, millions of times for a big snapshot.
        """
        buf, memo, u4 = self.buf, self.memo, _U4.unpack_from
        try:
            key, p = self._get(pos)
        except (UnsupportedPickle, IndexError):
            return None
        if key != "action":
            return None
        self._set_device(stack)
        vals: dict[str, Any] = {}
        stack_code = -1
        while True:
            op = buf[pos]
            if op == 0x75:  # SETITEMS: the dict is complete
                break
            if op == 0x6A:
                key = memo[u4(buf, pos + 1)[0]]
                pos += 5
            elif op == 0x68:
                key = memo[buf[pos + 1]]
                pos += 2
            else:
                key, pos = self._scalar(pos)
            if not isinstance(key, str):
                return None
            if key == "frames":
                got = self._frames_value(pos)
                if got is None:
                    return None  # frames written out here for the first time: the general path
                stack_code, pos = got
                continue
            op = buf[pos]
            if op == 0x8A:  # LONG1 (addresses, times)
                n = buf[pos + 1]
                value: Any = int.from_bytes(buf[pos + 2:pos + 2 + n], "little", signed=True)
                pos += 2 + n
            elif op == 0x4B:
                value = buf[pos + 1]
                pos += 2
            elif op == 0x6A:
                value = memo[u4(buf, pos + 1)[0]]
                pos += 5
            elif op == 0x68:
                value = memo[buf[pos + 1]]
                pos += 2
            else:
                value, pos = self._scalar(pos)
                if value is _BAIL:
                    return None
            vals[key] = value
        self.sink.add(vals.get("action"), vals.get("addr"), vals.get("size"), vals.get("stream"),
                      vals.get("time_us"), stack_code if stack_code >= 0 else self.sink.stack_of([]))
        return pos + 1

    def _frames_value(self, pos: int) -> tuple[int, int] | None:
        """An event's frames: (its stack's code, the position after it), or None for the general path."""
        buf = self.buf
        if buf[pos] in (0x68, 0x6A):  # a list read before (an allocation's, for its free)
            ref, pos = self._get(pos)
            if isinstance(ref, _Stack):
                return ref.code, pos
            if isinstance(ref, list):
                return self.sink.stack_of(ref), pos
            return None
        m = _FRAMES_RE.match(buf, pos)
        if m is None or (m.group(1) is None and m.group(2) is None and buf[m.end()] == 0x28):
            return None
        run = m.group(1) if m.group(1) is not None else (m.group(2) or b"")
        known = self.sink.by_bytes.get(run)  # the same memo references: the same frames, the same stack
        code = known if known is not None else self.sink.stack_of(self._frames(run), run)
        self.memo.append(self._stack_obj(code))  # the list's MEMOIZE
        return code, m.end()

    def _stack_obj(self, code: int) -> _Stack:
        """One shared stand-in per stack (the memo holds a slot per frames list)."""
        obj = self._stacks.get(code)
        if obj is None:
            obj = self._stacks[code] = _Stack(code)
        return obj

    def _frames(self, run: bytes) -> list[Any]:
        out, i = [], 0
        while i < len(run):
            if run[i] == 0x68:
                out.append(self.memo[run[i + 1]])
                i += 2
            else:
                out.append(self.memo[_U4.unpack_from(run, i + 1)[0]])
                i += 5
        return out

    def _scalar(self, pos: int) -> tuple[Any, int]:
        """One plain value (number, string, memo reference, None, bool), memoized as the pickle says."""
        buf = self.buf
        op = buf[pos]
        if op == 0x4B:  # BININT1
            return buf[pos + 1], pos + 2
        if op == 0x4D:  # BININT2
            return buf[pos + 1] | (buf[pos + 2] << 8), pos + 3
        if op == 0x4A:  # BININT
            return _I4.unpack_from(buf, pos + 1)[0], pos + 5
        if op == 0x8A:  # LONG1
            n = buf[pos + 1]
            return int.from_bytes(buf[pos + 2:pos + 2 + n], "little", signed=True), pos + 2 + n
        if op in (0x68, 0x6A):
            return self._get(pos)
        if op == 0x8C:  # SHORT_BINUNICODE
            n = buf[pos + 1]
            value: Any = bytes(buf[pos + 2:pos + 2 + n]).decode("utf-8", "surrogatepass")
            pos += 2 + n
        elif op == 0x58:  # BINUNICODE
            n = _U4.unpack_from(buf, pos + 1)[0]
            value = bytes(buf[pos + 5:pos + 5 + n]).decode("utf-8", "surrogatepass")
            pos += 5 + n
        elif op == 0x4E:
            return None, pos + 1
        elif op in (0x88, 0x89):
            return op == 0x88, pos + 1
        else:
            return _BAIL, pos
        if buf[pos] == 0x94:  # MEMOIZE (interned: torch writes e.g. "N/A" anew for every event)
            self.memo.append(sys.intern(value) if len(value) <= 64 else value)
            pos += 1
        return value, pos

    # -- the general path ----------------------------------------------------------------------
    def _op(self, op: int, pos: int, stack: list[Any]) -> int:  # noqa: C901, PLR0911, PLR0912 - an opcode table
        buf = self.buf
        if op in _SCALAR_OPS:
            value, p = self._scalar(pos)
            if value is not _BAIL:
                stack.append(value)
                return p
        if op == 0x80:  # PROTO
            return pos + 2
        if op == 0x95:  # FRAME
            return pos + 9
        if op == 0x94:  # MEMOIZE
            self.memo.append(stack[-1])
            return pos + 1
        if op == 0x71:  # BINPUT
            self._put(buf[pos + 1], stack[-1])
            return pos + 2
        if op == 0x72:  # LONG_BINPUT
            self._put(_U4.unpack_from(buf, pos + 1)[0], stack[-1])
            return pos + 5
        if op == 0x28:  # MARK
            self.marks.append(len(stack))
            stack.append(_MARK)
            return pos + 1
        if op in (0x7D, 0x5D, 0x29):  # EMPTY_DICT, EMPTY_LIST, EMPTY_TUPLE
            stack.append({} if op == 0x7D else [] if op == 0x5D else ())
            return pos + 1
        if op in (0x85, 0x86, 0x87):  # TUPLE1..3
            k = op - 0x84
            tup = tuple(stack[-k:])
            del stack[-k:]
            stack.append(tup)
            return pos + 1
        if op in (0x74, 0x65, 0x75):  # TUPLE, APPENDS, SETITEMS: items above the last MARK
            i = self.marks.pop()
            items = stack[i + 1:]
            del stack[i:]
            if op == 0x74:
                stack.append(tuple(items))
            elif op == 0x65:
                self._extend(stack[-1], items)
            else:
                d = stack[-1]
                for k in range(0, len(items), 2):
                    d[items[k]] = items[k + 1]
                self._maybe_event(stack)
            return pos + 1
        if op == 0x61:  # APPEND
            item = stack.pop()
            self._extend(stack[-1], [item])
            return pos + 1
        if op == 0x73:  # SETITEM
            v = stack.pop()
            k = stack.pop()
            stack[-1][k] = v
            self._maybe_event(stack)
            return pos + 1
        if op == 0x47:  # BINFLOAT
            stack.append(_F8.unpack_from(buf, pos + 1)[0])
            return pos + 9
        if op == 0x8B:  # LONG4
            n: int = _I4.unpack_from(buf, pos + 1)[0]
            stack.append(int.from_bytes(buf[pos + 5:pos + 5 + n], "little", signed=True))
            return pos + 5 + n
        if op in (0x43, 0x42, 0x8E):  # SHORT_BINBYTES, BINBYTES, BINBYTES8
            width = {0x43: 1, 0x42: 4, 0x8E: 8}[op]
            n = buf[pos + 1] if width == 1 else (_U4 if width == 4 else _U8).unpack_from(buf, pos + 1)[0]
            stack.append(bytes(buf[pos + 1 + width:pos + 1 + width + n]))
            return pos + 1 + width + n
        if op == 0x8D:  # BINUNICODE8
            n = _U8.unpack_from(buf, pos + 1)[0]
            stack.append(bytes(buf[pos + 9:pos + 9 + n]).decode("utf-8", "surrogatepass"))
            return pos + 9 + n
        if op == 0x2E:  # STOP
            return -1
        raise UnsupportedPickle(f"opcode {op:#04x} at byte {pos}")

    def _put(self, idx: int, value: Any) -> None:
        if idx >= len(self.memo):
            self.memo.extend([None] * (idx + 1 - len(self.memo)))
        self.memo[idx] = value

    def _extend(self, target: Any, items: list[Any]) -> None:
        if not isinstance(target, list):
            raise UnsupportedPickle("APPENDS on a non-list")
        if items and all(x is None for x in items):
            # events already in the sink: keep the per-device list short; count the device
            return
        target.extend(items)

    def _maybe_event(self, stack: list[Any]) -> None:
        """A dict completed on the general path: an event goes to the sink like the fast path's."""
        d = stack[-1]
        if isinstance(d, dict) and "action" in d and "frames" in d:
            self._set_device(stack[:-1])
            frames = d.get("frames") or []
            code = frames.code if isinstance(frames, _Stack) else \
                self.sink.stack_of(frames if isinstance(frames, list) else [])
            self.sink.add(d.get("action"), d.get("addr"), d.get("size"), d.get("stream"), d.get("time_us"),
                          code)
            if isinstance(frames, list):  # a later free refers to this list: keep only its stack
                for i in range(len(self.memo) - 1, -1, -1):
                    if self.memo[i] is frames:
                        self.memo[i] = self._stack_obj(code)
                        break
            for i in range(len(self.memo) - 1, -1, -1):  # its memo slot no longer holds it
                if self.memo[i] is d:
                    self.memo[i] = None
                    break
            stack[-1] = None


_BAIL = object()
_SCALAR_OPS = frozenset({0x4B, 0x4D, 0x4A, 0x8A, 0x68, 0x6A, 0x8C, 0x58, 0x4E, 0x88, 0x89})


def stream_snapshot(path: Path, summarise: Callable[[list[Any]], str],
                    progress: Callable[[float], None] | None = None) -> tuple[Any, EventSink]:
    """Walk the pickle at ``path``: (the document without its events, the events' sink).

    Raises:
        UnsupportedPickle: an opcode outside plain data, or a truncated file.

    """
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        sink = EventSink(summarise)
        reader = StreamReader(buf, sink, progress)
        try:
            doc = reader.run()
        except (IndexError, struct.error) as exc:
            raise UnsupportedPickle(f"truncated ({exc})") from exc
        return doc, sink
