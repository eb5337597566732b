"""A Ferry sink in Python: appends every message, as the JSON line `ferry log read`
prints (with its stream, topic and partition), to one file in a granted directory,
fsynced before it answers ACK, and writes each message once however often it is
handed: on open it reads the highest offset written per partition back from the
file, and skips what a retry, a restart or a crash hands it again.

`plugin_config`:

| key          | default      | meaning                                                    |
|--------------|--------------|------------------------------------------------------------|
| `directory`  | (required)   | the guest path of a `grants.dirs` entry with writable = true |
| `file`       | `sink.jsonl` | the file's name in it                                      |
| `fail_every` | 0 (never)    | every Nth batch, write only its first half and answer retry (for tests) |
"""

import json
import os

import ferry_guest

# The builtin, since this module's `open` is the connector's.
_open = __import__("builtins").open

# Module-level state (componentize-py makes a new object per call): the highest offset
# in the file per (stream, topic, partition), and how many batches came.
written = {}
batches = 0


def open(config):
    unknown = set(config) - {"directory", "file", "fail_every"}
    if unknown:
        raise ValueError(f"plugin_config: unknown key(s) {sorted(unknown)}")
    if "directory" not in config:
        raise ValueError("plugin_config.directory is required: the guest path of a writable grants.dirs entry")
    fail_every = config.get("fail_every", 0)
    if not isinstance(fail_every, int) or fail_every < 0:
        raise ValueError(f"plugin_config.fail_every must be a whole number >= 0, not {fail_every!r}")
    path = os.path.join(config["directory"], config.get("file", "sink.jsonl"))
    written.clear()
    recover(path)
    ferry_guest.info(f"python-sink: writing to {path}; recovered {len(written)} partition(s)")
    return {"path": path, "fail_every": fail_every}


def recover(path):
    """Read back what the file holds; cut a last line a crash left unfinished."""
    try:
        with _open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return
    end = data.rfind(b"\n") + 1
    if end < len(data):
        ferry_guest.warn(f"python-sink: {path}: cutting {len(data) - end} byte(s) of an unfinished line")
        with _open(path, "r+b") as f:
            f.truncate(end)
            os.fsync(f.fileno())
    for line in data[:end].splitlines():
        record = json.loads(line)
        key = (record["stream"], record["topic"], record["partition"])
        written[key] = max(written.get(key, -1), record["offset"])


def write(settings, batch):
    global batches
    batches += 1
    key = (batch.stream, batch.topic, batch.partition)
    done = written.get(key, -1)
    fresh = [m for m in batch.messages if m.offset > done]
    failing = settings["fail_every"] and batches % settings["fail_every"] == 0
    if failing:
        # Half the batch reaches the file, then the sink fails: the replay must skip it.
        fresh = fresh[: len(fresh) // 2]
    if fresh:
        lines = "".join(ferry_guest.message_json(batch, m) + "\n" for m in fresh)
        with _open(settings["path"], "ab") as f:
            f.write(lines.encode())
            f.flush()
            os.fsync(f.fileno())
        written[key] = fresh[-1].offset
    if failing:
        return ferry_guest.retry(f"fail_every = {settings['fail_every']}: batch {batches} written in part")
    return ferry_guest.ACK


Sink = ferry_guest.sink(write, open=open)
