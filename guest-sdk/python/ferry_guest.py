"""Ferry's guest helper for connectors written in Python (built with componentize-py).

It keeps the host's contract (wit/source.wit, wit/sink.wit) so that a connector only
says what it produces or how it writes:

    import ferry_guest

    def poll(settings, cursor):
        start = cursor["next_seq"]
        return [{"seq": n} for n in range(start, start + 10)], {"next_seq": start + 10}

    Source = ferry_guest.source(poll, initial_cursor={"next_seq": 0})

`ferry build` generates the bindings (the `wit_world` package) and packs this module
with the app; componentize-py looks for the class `Source` (or `Sink`) in `app.py`.

The rules a Python guest must keep, and why this module exists:

- **State lives at module level.** componentize-py makes a new object of the
  exported class for each exported function, so whatever `open` keeps on `self` is
  gone by `poll`. The driver here is a module-level object; an author's state is
  what `open` returns (handed to every later call) or module globals.
- **The committed cursor is the only "where am I".** `poll` gets a fresh copy of the
  committed cursor at every call; the cursor a batch carries is staged (kept as the
  JSON bytes the host stores), applied when the host acknowledges that batch id, and
  dropped on a NACK, so the next `poll` produces the same records again.
- **No host call while the module is imported.** componentize-py runs the module's
  top level at build time, where the host's imports do not exist (the build fails).
  `info()` and friends hold lines logged then and send them with the first call.
- **An exception is an error value, not a trap.** An exception in `open` or `poll`
  becomes the contract's `error` (the host logs it, backs off and retries); in a
  sink's `write` it becomes a `retry`, so nothing is acknowledged by accident.
"""

import json
import traceback

from componentize_py_types import Err

__all__ = [
    "Message",
    "source",
    "sink",
    "ACK",
    "retry",
    "reject",
    "unwritable",
    "message_id",
    "message_json",
    "trace",
    "debug",
    "info",
    "warn",
    "error",
]


# ---------------------------------------------------------------------------------
# Logging


class _Log:
    """Log lines to the host, held while the module is being imported (at build time,
    where the host's `logging` import cannot be called) and sent with the first call
    the host makes."""

    #: Lines logged before the first call from the host: (level name, message).
    held = []
    #: At most this many are held; later ones are counted and reported as dropped.
    held_cap = 100
    dropped = 0
    live = False

    @classmethod
    def go_live(cls):
        if cls.live:
            return
        cls.live = True
        for level, message in cls.held:
            cls.send(level, message)
        if cls.dropped:
            cls.send("WARN", f"{cls.dropped} log line(s) written while importing were dropped")
        cls.held = []

    @classmethod
    def send(cls, level, message):
        from wit_world.imports import logging as host_log

        host_log.log(getattr(host_log.Level, level), message)

    @classmethod
    def line(cls, level, message):
        message = str(message)
        if cls.live:
            cls.send(level, message)
        elif len(cls.held) < cls.held_cap:
            cls.held.append((level, message))
        else:
            cls.dropped += 1


def trace(message):
    _Log.line("TRACE", message)


def debug(message):
    _Log.line("DEBUG", message)


def info(message):
    _Log.line("INFO", message)


def warn(message):
    _Log.line("WARN", message)


def error(message):
    _Log.line("ERROR", message)


def _describe(exception):
    """An exception as one line for the host (the error it logs) and the traceback
    for the guest's own debug log."""
    debug("".join(traceback.format_exception(exception)).rstrip())
    text = str(exception)
    name = type(exception).__name__
    return f"{name}: {text}" if text else name


def _host_error(message):
    from wit_world.imports import types

    return Err(types.Error(message))


# ---------------------------------------------------------------------------------
# Sources


class Message:
    """One message of a source's batch. `payload` is bytes, a str (UTF-8) or anything
    else JSON can encode (written compactly). `id` is an int below 2**128 (None or 0:
    the host derives one, the same for the same batch produced again); `headers` a
    dict of str to str, bytes, bool, int (as int64) or float (as float64);
    `origin_timestamp` microseconds since the Unix epoch."""

    __slots__ = ("payload", "id", "headers", "origin_timestamp")

    def __init__(self, payload, id=None, headers=None, origin_timestamp=None):
        self.payload = payload
        self.id = id
        self.headers = headers or {}
        self.origin_timestamp = origin_timestamp


def _payload_bytes(payload):
    if isinstance(payload, bytes):
        return payload
    if isinstance(payload, (bytearray, memoryview)):
        return bytes(payload)
    if isinstance(payload, str):
        return payload.encode()
    return json.dumps(payload, separators=(",", ":")).encode()


def _header_value(key, value):
    from wit_world.imports import types

    # bool before int: a bool is an int in Python.
    if isinstance(value, bool):
        return types.HeaderValue_Bool(value)
    if isinstance(value, int):
        return types.HeaderValue_Int64(value)
    if isinstance(value, float):
        return types.HeaderValue_Float64(value)
    if isinstance(value, str):
        return types.HeaderValue_String(value)
    if isinstance(value, (bytes, bytearray)):
        return types.HeaderValue_Raw(bytes(value))
    raise TypeError(f"header {key!r}: a {type(value).__name__} is not a header value (str, bytes, bool, int, float)")


def _wire_message(message):
    from wit_world.imports import types

    if not isinstance(message, Message):
        return types.Message(None, [], _payload_bytes(message), None)
    id = None
    if message.id:
        if not 0 < message.id < 1 << 128:
            raise ValueError(f"message id {message.id} is not an unsigned 128-bit integer")
        id = types.Uint128(message.id >> 64, message.id & ((1 << 64) - 1))
    headers = [types.Header(str(k), _header_value(k, v)) for k, v in message.headers.items()]
    return types.Message(id, headers, _payload_bytes(message.payload), message.origin_timestamp)


def _encode_cursor(cursor):
    try:
        return json.dumps(cursor, separators=(",", ":"), sort_keys=True).encode()
    except (TypeError, ValueError) as e:
        raise TypeError(f"the cursor must be JSON (dicts, lists, str, int, float, bool, None): {e}") from None


class _SourceDriver:
    """The contract's machinery for one source: the committed cursor (as the JSON bytes
    the host stores), the one outstanding batch with its staged cursor, batch ids.
    Pure Python, no host calls: the exported class only adds logging around it."""

    def __init__(self, poll, open=None, on_ack=None, on_nack=None, close=None, initial_cursor=None):
        self.poll_fn = poll
        self.open_fn = open
        self.on_ack_fn = on_ack
        self.on_nack_fn = on_nack
        self.close_fn = close
        self.initial = _encode_cursor(initial_cursor)
        self.settings = None
        self.committed = self.initial
        # (id, staged cursor bytes) of the batch the host has not answered for yet.
        self.outstanding = None
        self.next_id = 1

    def open(self, config_json, committed_state):
        try:
            config = json.loads(config_json)
        except ValueError as e:
            raise ValueError(f"invalid plugin_config: {e}") from None
        if committed_state is None:
            self.committed = self.initial
        else:
            try:
                json.loads(committed_state)
            except ValueError as e:
                shown = committed_state.decode(errors="replace")
                raise ValueError(f"the committed state is not a cursor of this connector ({e}): {shown}") from None
            self.committed = bytes(committed_state)
        self.outstanding = None
        cursor = json.loads(self.committed)
        self.settings = self.open_fn(config, cursor) if self.open_fn else config

    def poll(self):
        """The wire batch after the committed cursor, or None."""
        if self.outstanding is not None:
            raise RuntimeError(
                f"poll called while batch {self.outstanding[0]} is outstanding: "
                "the host must report its result first"
            )
        # A fresh copy: whatever poll does to it cannot touch the committed cursor.
        produced = self.poll_fn(self.settings, json.loads(self.committed))
        if produced is None:
            return None
        try:
            messages, next_cursor = produced
        except (TypeError, ValueError):
            raise TypeError(
                f"poll must return None or (messages, next_cursor), not {type(produced).__name__}"
            ) from None
        from wit_world.imports import types

        wire = [_wire_message(m) for m in messages]
        staged = _encode_cursor(next_cursor)
        id = self.next_id
        self.next_id += 1
        self.outstanding = (id, staged)
        # The messages go as a list; `packed` (the other form, see wit/types.wit)
        # stays empty.
        return types.Batch(id, wire, b"", staged)

    def on_batch_result(self, id, result):
        """Apply the host's verdict. Returns ("ack", None), ("nack", nack) or
        ("unexpected", outstanding id or None)."""
        from wit_world.imports import types

        if self.outstanding is None or self.outstanding[0] != id:
            return ("unexpected", self.outstanding[0] if self.outstanding else None)
        _, staged = self.outstanding
        self.outstanding = None
        if isinstance(result, types.BatchResult_Ack):
            self.committed = staged
            if self.on_ack_fn:
                self.on_ack_fn(self.settings, json.loads(self.committed))
            return ("ack", None)
        if self.on_nack_fn:
            self.on_nack_fn(self.settings, result.value)
        return ("nack", result.value)

    def close(self):
        if self.close_fn:
            self.close_fn(self.settings)


def source(poll, open=None, on_ack=None, on_nack=None, close=None, initial_cursor=None):
    """The class to export as `Source` from app.py.

    - `poll(settings, cursor)`: the next batch after `cursor` (the committed one, a
      fresh copy each time) as `(messages, next_cursor)`, or None when there is
      nothing now. `next_cursor` is any JSON value; it is committed once the batch
      is delivered, and the next poll sees it. Never keep "where I am" anywhere else.
    - `open(config, cursor)`: check `config` (the `plugin_config`, parsed) and return
      the settings every other call gets (by default the config itself).
    - `on_ack(settings, committed)`, `on_nack(settings, nack)`: optional, after the
      host's verdict on a batch (the cursor is already committed, or dropped).
    - `close(settings)`: optional, when the connector stops gracefully.
    - `initial_cursor`: the cursor before anything was ever committed.
    """
    from wit_world import exports

    driver = _SourceDriver(poll, open, on_ack, on_nack, close, initial_cursor)

    # componentize-py makes an object of this class per call: every method goes to
    # the module-level driver, nothing is kept on `self`.
    class Source(exports.Source):
        def open(self, config, committed_state):
            _Log.go_live()
            try:
                driver.open(config, committed_state)
            except Exception as e:
                raise _host_error(f"open: {_describe(e)}") from None

        def poll(self):
            _Log.go_live()
            try:
                return driver.poll()
            except Exception as e:
                raise _host_error(f"poll: {_describe(e)}") from None

        def on_batch_result(self, id, result):
            _Log.go_live()
            try:
                outcome, detail = driver.on_batch_result(id, result)
            except Exception as e:
                error(f"after the result of batch {id}: {_describe(e)}")
                return
            if outcome == "nack":
                reason = detail.reason.name.lower().replace("_", " ")
                warn(f"batch {id} not acknowledged ({reason}: {detail.detail}); producing it again from the committed cursor")
            elif outcome == "unexpected":
                error(f"a result for batch {id}, but the outstanding batch is {detail}: ignored")

        def close(self):
            _Log.go_live()
            try:
                driver.close()
            except Exception as e:
                error(f"close: {_describe(e)}")

    Source.driver = driver
    return Source


# ---------------------------------------------------------------------------------
# Sinks


class _Answer:
    """What a sink's `write` returns; see ACK, retry, reject, unwritable."""

    __slots__ = ("kind", "value")

    def __init__(self, kind, value=None):
        self.kind = kind
        self.value = value

    def __repr__(self):
        return f"{self.kind}({self.value!r})" if self.value is not None else self.kind


#: Every message of the batch is durably written.
ACK = _Answer("ack")


def retry(reason):
    """Not every message was written: hand me the same batch again later."""
    return _Answer("retry", str(reason))


def reject(rejected):
    """These messages can never be written (the others are): a dict {index: reason}
    or pairs (index, reason), indexes into the batch's messages."""
    pairs = rejected.items() if isinstance(rejected, dict) else rejected
    return _Answer("reject", [(int(index), str(reason)) for index, reason in pairs])


def unwritable(reason):
    """Some message of the batch can never be written, which one is unknown, and
    nothing was written: the host splits the batch to find it."""
    return _Answer("unwritable", str(reason))


def message_id(message):
    """A stored message's id as an int (0: it has none)."""
    return (message.id.high << 64) | message.id.low


def _header_json(value):
    name = type(value).__name__.split("_", 1)[1].lower()
    inner = value.value
    if name in ("int128", "uint128"):
        inner = (inner.high << 64) | inner.low
        if name == "int128" and inner >= 1 << 127:
            inner -= 1 << 128
    elif name == "raw":
        inner = list(inner)
    return {name: inner}


def message_json(batch, message):
    """A stored message as one JSON line, in the shape `ferry log read` prints."""
    record = {
        "stream": batch.stream,
        "topic": batch.topic,
        "partition": batch.partition,
        "offset": message.offset,
        "id": str(message_id(message)),
        "timestamp": message.timestamp,
        "origin_timestamp": message.origin_timestamp,
        "headers": {h.key: _header_json(h.value) for h in message.headers},
    }
    try:
        record["payload"] = message.payload.decode()
    except UnicodeDecodeError:
        import base64

        record["payload_base64"] = base64.b64encode(message.payload).decode()
    return json.dumps(record, separators=(",", ":"))


class _SinkDriver:
    """The sink's side of the contract: one batch in, one answer out, and the checks
    that keep an answer the host would refuse from reaching it. Pure Python."""

    def __init__(self, write, open=None, close=None):
        self.write_fn = write
        self.open_fn = open
        self.close_fn = close
        self.settings = None

    def open(self, config_json):
        try:
            config = json.loads(config_json)
        except ValueError as e:
            raise ValueError(f"invalid plugin_config: {e}") from None
        self.settings = self.open_fn(config) if self.open_fn else config

    def write(self, batch):
        """(wire write-result, or None for ack; why it was overruled, or None)."""
        from wit_world.exports import sink as wire

        if not batch.messages:
            return wire.WriteResult_Ack(), None
        try:
            answer = self.write_fn(self.settings, batch)
        except Exception as e:
            return wire.WriteResult_Retry(f"write: {_describe(e)}"), None
        if not isinstance(answer, _Answer):
            why = (
                f"write returned {answer!r}, not ferry_guest.ACK, retry(...), reject(...) or unwritable(...): "
                "retrying the batch; this is a bug in the connector"
            )
            return wire.WriteResult_Retry(why), why
        if answer.kind == "ack":
            return wire.WriteResult_Ack(), None
        if answer.kind == "retry":
            return wire.WriteResult_Retry(answer.value), None
        if answer.kind == "unwritable":
            return wire.WriteResult_Unwritable(answer.value), None
        return self._reject(batch, answer.value)

    @staticmethod
    def _reject(batch, pairs):
        from wit_world.exports import sink as wire

        if not pairs:
            return wire.WriteResult_Ack(), None
        count = len(batch.messages)
        for index, reason in pairs:
            if not 0 <= index < count:
                first, last = batch.messages[0].offset, batch.messages[-1].offset
                why = (
                    f"the sink rejected the message at index {index} ({reason!r}), but the batch has {count} "
                    f"message(s) (offsets {first} to {last}): retrying the batch; this is a bug in the connector"
                )
                return wire.WriteResult_Retry(why), why
        reasons = {}
        for index, reason in pairs:
            reasons[index] = f"{reasons[index]}; {reason}" if index in reasons else reason
        return wire.WriteResult_Reject([wire.Rejected(i, r) for i, r in sorted(reasons.items())]), None

    def close(self):
        if self.close_fn:
            self.close_fn(self.settings)


def sink(write, open=None, close=None):
    """The class to export as `Sink` from app.py.

    - `write(settings, batch)`: write `batch.messages` (each has `offset`, `id` (see
      `message_id`), `timestamp`, `origin_timestamp`, `headers`, `payload` bytes) and
      answer ACK (only once every message is durably written), retry(reason),
      reject({index: reason}) or unwritable(reason). An exception is a retry.
    - `open(config)`: check `config` (the `plugin_config`, parsed) and return the
      settings every other call gets (by default the config itself).
    - `close(settings)`: optional, when the connector stops gracefully.
    """
    from wit_world import exports

    driver = _SinkDriver(write, open, close)

    class Sink(exports.Sink):
        def open(self, config):
            _Log.go_live()
            try:
                driver.open(config)
            except Exception as e:
                raise _host_error(f"open: {_describe(e)}") from None

        def write(self, batch):
            _Log.go_live()
            result, overruled = driver.write(batch)
            if overruled:
                error(overruled)
            return result

        def close(self):
            _Log.go_live()
            try:
                driver.close()
            except Exception as e:
                error(f"close: {_describe(e)}")

    Sink.driver = driver
    return Sink


class _TransformDriver:
    """The transform's side of the contract: a batch's records in, exactly one entry
    per record out (the record as it goes on, or None to drop it). Pure Python."""

    def __init__(self, transform, open=None):
        self.transform_fn = transform
        self.open_fn = open
        self.settings = None

    def open(self, config_json):
        try:
            config = json.loads(config_json)
        except ValueError as e:
            raise ValueError(f"invalid plugin_config: {e}") from None
        self.settings = self.open_fn(config) if self.open_fn else config

    def transform(self, records):
        """The wire answer for `records`; an exception names the record it came from."""
        from wit_world.exports import transform as wire

        out = []
        for record in records:
            try:
                result = self.transform_fn(self.settings, record)
            except Exception as e:
                raise ValueError(f"record {message_id(record):032x}: {_describe(e)}") from None
            if result is None:
                out.append(None)
                continue
            headers, origin = record.headers, record.origin_timestamp
            if isinstance(result, (bytes, bytearray, str, dict, list)):
                payload = _payload_bytes(result)
            elif hasattr(result, "payload"):
                payload = _payload_bytes(result.payload)
                headers = getattr(result, "headers", headers)
                origin = getattr(result, "origin_timestamp", origin)
            else:
                raise ValueError(
                    f"record {message_id(record):032x}: transform returned {result!r}, not a record, a payload "
                    "(bytes, str, dict or list) or None"
                )
            out.append(wire.Outgoing(headers, payload, origin))
        return out


def transform(fn, open=None):
    """The class to export as `Transform` from app.py.

    - `fn(settings, record)`: `record` has `id` (see `message_id`), `headers`,
      `payload` (bytes) and `origin_timestamp`. Return the record (changed in place),
      a new payload (bytes, str, or a dict or list written as JSON; the headers kept),
      or None to drop the record. The host keeps each record's id. An exception
      fails the whole batch (a source's is produced again, a sink's transformed again
      later), so keep `fn` deterministic.
    - `open(config)`: check `config` (the transform's `plugin_config`, parsed) and
      return the settings every call gets (by default the config itself).
    """
    from wit_world import exports

    driver = _TransformDriver(fn, open)

    class Transform(exports.Transform):
        def open(self, config):
            _Log.go_live()
            try:
                driver.open(config)
            except Exception as e:
                raise _host_error(f"open: {_describe(e)}") from None

        def transform(self, records):
            _Log.go_live()
            try:
                return driver.transform(records)
            except Exception as e:
                raise _host_error(f"transform: {_describe(e)}") from None

    Transform.driver = driver
    return Transform
