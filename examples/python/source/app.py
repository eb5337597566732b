"""A Ferry source in Python, like connectors/random-source: JSON records
`{"seq": N, "text": "..."}` with a gap-free `seq`, whose cursor is the next seq.

`plugin_config`: `messages_per_batch` (default 10), `max_count` (stop after this
many records; default none). Built by `ferry build` with the ferry_guest helper,
which stages the cursor, commits it on ACK and drops it on NACK.
"""

import ferry_guest


def open(config, cursor):
    unknown = set(config) - {"messages_per_batch", "max_count"}
    if unknown:
        raise ValueError(f"plugin_config: unknown key(s) {sorted(unknown)}")
    per_batch = config.get("messages_per_batch", 10)
    if not isinstance(per_batch, int) or per_batch < 1:
        raise ValueError(f"plugin_config.messages_per_batch must be a whole number >= 1, not {per_batch!r}")
    max_count = config.get("max_count")
    if max_count is not None and (not isinstance(max_count, int) or max_count < 0):
        raise ValueError(f"plugin_config.max_count must be a whole number >= 0, not {max_count!r}")
    ferry_guest.info(f"python-source: starting at seq {cursor['next_seq']}")
    return {"per_batch": per_batch, "max_count": max_count}


def poll(settings, cursor):
    start = cursor["next_seq"]
    end = start + settings["per_batch"]
    if settings["max_count"] is not None:
        end = min(end, settings["max_count"])
    if end <= start:
        return None
    records = [{"seq": seq, "text": f"record {seq}"} for seq in range(start, end)]
    return records, {"next_seq": end}


Source = ferry_guest.source(poll, open=open, initial_cursor={"next_seq": 0})
