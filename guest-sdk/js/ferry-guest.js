// ferry-guest: the JavaScript side of Ferry's connector contract (wit/source.wit,
// wit/sink.wit), so that a connector written in JavaScript cannot get it wrong.
//
// A source author writes `poll(cursor)`, returning the records after `cursor` and the
// cursor after them; this module keeps the committed cursor, stages the next one with
// the batch, applies it only when the host acknowledges the batch and drops it when
// the host does not, so the next poll starts from the committed cursor again and
// produces the same records (rule 3 of source.wit). A sink author writes
// `write(batch)` and answers `ack`, `retry(reason)`, `reject(...)` or
// `unwritable(reason)`; an exception is a `retry`, never a silent loss.
//
// The connector's module exports what `source(...)` or `sink(...)` returns under the
// name its WIT world wants, `source` or `sink`:
//
//     import * as ferry from "/path/to/ferry/guest-sdk/js/ferry-guest.js";
//     export const source = ferry.source({ initialCursor: { next_seq: 0 }, poll(cursor) { ... } });
//
// The state of the contract lives in the closure `source(...)` returns, which the
// module holds at its top level: one instance of the component, one module, one
// driver. The host makes a new instance (and so a new module) after a trap or a
// restart, and opens it with the committed cursor.
//
// `ferry build` bundles the connector's modules with this one (rolldown), then
// compiles the bundle with componentize-js: see scripts/setup-js-guest.

import { log as hostLog } from "iggy:connector/logging@0.2.1";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

// ---- logging ---------------------------------------------------------------------

// Lines logged before the host first called the component (at module evaluation,
// which componentize-js runs at build time, where there is no host to call) wait
// here and go out at the first call. A bounded queue: a module that logs in a loop at
// its top level does not grow without end.
const early = [];
const EARLY_MAX = 100;
let hostReady = false;

function emit(level, message) {
    if (!hostReady) {
        if (early.length < EARLY_MAX) early.push([level, message]);
        return;
    }
    try {
        hostLog(level, message);
    } catch (_) {
        // Logging must never fail a call: the host may rate-limit or refuse a line.
    }
}

/** Called on entry to every export: the host is there from now on. */
function enter() {
    if (hostReady) return;
    hostReady = true;
    for (const [level, message] of early.splice(0)) emit(level, message);
}

/** Log lines, under the connector's key in the host's log. Safe at any time. */
export const log = {
    trace: (message) => emit("trace", String(message)),
    debug: (message) => emit("debug", String(message)),
    info: (message) => emit("info", String(message)),
    warn: (message) => emit("warn", String(message)),
    error: (message) => emit("error", String(message)),
};

// ---- errors ----------------------------------------------------------------------

/**
 * An error the host sees as the WIT `error` of a `result`: componentize-js makes a
 * thrown value with a `payload` the `err` case, and the payload the WIT value.
 */
class GuestError extends Error {
    constructor(message) {
        super(message);
        this.payload = { message };
    }
}

function describe(error) {
    if (error instanceof Error) return error.message;
    return String(error);
}

/** Run `body`, turning anything it throws into the WIT error `what: reason`. */
function guarded(what, body) {
    try {
        return body();
    } catch (error) {
        if (error instanceof GuestError) throw error;
        throw new GuestError(`${what}: ${describe(error)}`);
    }
}

function parseConfig(config) {
    try {
        return JSON.parse(config);
    } catch (error) {
        throw new GuestError(`invalid plugin_config: ${describe(error)}`);
    }
}

// ---- messages --------------------------------------------------------------------

/**
 * A message of a batch, from what `poll` returned: a string (its UTF-8 bytes are the
 * payload), a Uint8Array (the payload), or an object `{ payload, id, headers,
 * originTimestamp }` whose payload is a string or a Uint8Array, `id` a BigInt (or
 * absent: the host derives one that is the same when the batch is produced again),
 * `headers` WIT headers, `originTimestamp` microseconds since the epoch (a BigInt or
 * a Number).
 */
function toMessage(record, index) {
    if (typeof record === "string" || record instanceof Uint8Array) {
        return { id: undefined, headers: [], payload: toBytes(record), originTimestamp: undefined };
    }
    if (record === null || typeof record !== "object" || !("payload" in record)) {
        throw new Error(
            `record ${index} of the batch is not a string, a Uint8Array or an object with a payload: ${String(record)}`,
        );
    }
    if (typeof record.payload !== "string" && !(record.payload instanceof Uint8Array)) {
        throw new Error(`record ${index} of the batch: its payload is neither a string nor a Uint8Array`);
    }
    return {
        id: record.id === undefined ? undefined : toUint128(record.id, index),
        headers: record.headers ?? [],
        payload: toBytes(record.payload),
        originTimestamp: record.originTimestamp === undefined ? undefined : BigInt(record.originTimestamp),
    };
}

function toBytes(payload) {
    return typeof payload === "string" ? encoder.encode(payload) : payload;
}

const U64 = (1n << 64n) - 1n;

function toUint128(id, index) {
    const value = BigInt(id);
    if (value < 0n || value > (1n << 128n) - 1n) {
        throw new Error(`record ${index} of the batch: id ${value} is not an unsigned 128-bit integer`);
    }
    return { high: value >> 64n, low: value & U64 };
}

function fromUint128(id) {
    return (id.high << 64n) | id.low;
}

// ---- sources ---------------------------------------------------------------------

/**
 * The `source` export of a source connector, from the author's functions:
 *
 * - `initialCursor`: the cursor of the very first start (before anything was
 *   committed). Any JSON value.
 * - `open(config, cursor)` (optional): `config` is the parsed `plugin_config`,
 *   `cursor` the committed cursor (or `initialCursor`). Throw to refuse to start.
 * - `poll(cursor)`: the records after `cursor`, as `{ records, next }`, `next` being
 *   the cursor after the last of them; or `null` when there is nothing right now.
 *   It must depend only on `cursor` (and the outside world), never on what earlier
 *   polls returned: after a NACK or a crash it is called again with the same cursor
 *   and must give the same records.
 * - `onAck(cursor)`, `onNack(nack, cursor)` (optional): told what became of a batch,
 *   with the committed cursor. The helper has already applied or dropped the staged
 *   one.
 * - `close()` (optional).
 *
 * A cursor crosses to the host as JSON (it is what the host stores and hands back
 * after a restart), so it must survive `JSON.stringify`: no BigInt, no Map.
 */
export function source(author) {
    if (typeof author?.poll !== "function") {
        throw new Error("ferry source: `poll(cursor)` is required");
    }
    let committed = author.initialCursor ?? null;
    // The batch the host has and has not reported on yet.
    let outstanding = null;
    let nextBatchId = 1n;

    return {
        open(config, committedState) {
            enter();
            const settings = parseConfig(config);
            if (committedState !== undefined) {
                const text = decoder.decode(committedState);
                try {
                    committed = JSON.parse(text);
                } catch (error) {
                    throw new GuestError(
                        `the committed state is not a cursor of this connector (${describe(error)}): ${text}`,
                    );
                }
            }
            if (author.open) guarded("open", () => author.open(settings, committed));
        },

        poll() {
            enter();
            if (outstanding !== null) {
                throw new GuestError(
                    `poll called while batch ${outstanding.id} is outstanding: the host must report its result first`,
                );
            }
            const batch = guarded("poll", () => author.poll(committed));
            if (batch === null || batch === undefined) return undefined;
            const { messages, staged, next } = guarded("poll", () => {
                if (!Array.isArray(batch.records)) {
                    throw new Error("poll must return { records: [...], next } or null");
                }
                if (batch.next === undefined) {
                    throw new Error("poll returned no `next` cursor: the cursor after the records");
                }
                const staged = JSON.stringify(batch.next);
                return { messages: batch.records.map(toMessage), staged, next: JSON.parse(staged) };
            });
            const id = nextBatchId;
            nextBatchId += 1n;
            outstanding = { id, next };
            // The messages go as a list; `packed` (the other form, see wit/types.wit)
            // stays empty.
            return { id, messages, packed: new Uint8Array(0), stagedState: encoder.encode(staged) };
        },

        onBatchResult(id, result) {
            enter();
            if (outstanding === null || outstanding.id !== id) {
                const waiting = outstanding === null ? "none" : String(outstanding.id);
                emit("warn", `a result for batch ${id}, but the outstanding batch is ${waiting}: ignored`);
                return;
            }
            const { next } = outstanding;
            outstanding = null;
            if (result.tag === "ack") {
                committed = next;
                if (author.onAck) guardedCallback("onAck", () => author.onAck(committed));
            } else {
                const nack = result.val;
                emit("warn", `batch ${id} not acknowledged (${nack.reason}: ${nack.detail}); polling again from the committed cursor`);
                if (author.onNack) guardedCallback("onNack", () => author.onNack(nack, committed));
            }
        },

        close() {
            enter();
            if (author.close) guardedCallback("close", () => author.close());
        },
    };
}

/** A callback whose failure the host cannot be told of (its export returns nothing). */
function guardedCallback(what, body) {
    try {
        body();
    } catch (error) {
        emit("error", `${what} failed: ${describe(error)}`);
    }
}

// ---- sinks -----------------------------------------------------------------------

/** Every message of the batch is durably written. */
export const ack = Object.freeze({ tag: "ack" });

/** Not every message was written: the host hands the same batch again later. */
export function retry(reason) {
    return { tag: "retry", val: String(reason) };
}

/** These messages (`[{ index, reason }]`) can never be written; every other one is. */
export function reject(rejected) {
    return { tag: "reject", val: rejected.map(({ index, reason }) => ({ index, reason: String(reason) })) };
}

/** Some message can never be written, which one is unknown, and nothing was written. */
export function unwritable(reason) {
    return { tag: "unwritable", val: String(reason) };
}

const ANSWERS = new Set(["ack", "retry", "reject", "unwritable"]);

/**
 * The `sink` export of a sink connector, from the author's functions:
 *
 * - `open(config)` (optional): `config` is the parsed `plugin_config`. Throw to
 *   refuse to start.
 * - `write(batch)`: write the batch, and answer `ack` only once every message is
 *   durably written (or `retry(reason)`, `reject([...])`, `unwritable(reason)`).
 *   `batch` is `{ stream, topic, partition, messages }`, each message `{ offset, id,
 *   timestamp, originTimestamp, headers, payload, text() }`: `offset`, `timestamp`
 *   and `id` (0n when none) are BigInts, `payload` a Uint8Array, `text()` the
 *   payload as UTF-8. An exception is a `retry` with its message: the host hands
 *   the batch again, nothing is lost.
 * - `close()` (optional).
 */
export function sink(author) {
    if (typeof author?.write !== "function") {
        throw new Error("ferry sink: `write(batch)` is required");
    }
    return {
        open(config) {
            enter();
            const settings = parseConfig(config);
            if (author.open) guarded("open", () => author.open(settings));
        },

        write(batch) {
            enter();
            const messages = batch.messages.map((message) => ({
                offset: message.offset,
                id: fromUint128(message.id),
                timestamp: message.timestamp,
                originTimestamp: message.originTimestamp,
                headers: message.headers,
                payload: message.payload,
                text: () => decoder.decode(message.payload),
            }));
            let answer;
            try {
                answer = author.write({ stream: batch.stream, topic: batch.topic, partition: batch.partition, messages });
            } catch (error) {
                return retry(`write failed: ${describe(error)}`);
            }
            // No answer is not an `ack`: a `write` that forgot to say so would lose
            // the batch if it were.
            if (answer === undefined || answer === null || !ANSWERS.has(answer.tag)) {
                return retry(`write returned ${JSON.stringify(answer)}, not ack, retry(...), reject(...) or unwritable(...)`);
            }
            return answer;
        },

        close() {
            enter();
            if (author.close) guardedCallback("close", () => author.close());
        },
    };
}

// ---- transforms ------------------------------------------------------------------

/**
 * The `transform` export of a transform, from the author's functions:
 *
 * - `open(config)` (optional): `config` is the parsed `plugin_config`. Throw to
 *   refuse (the batch it was opened for fails, and comes again).
 * - `transform(record)`: `record` is `{ id, headers, payload, originTimestamp,
 *   text(), json() }` (`id` a BigInt the host keeps, `payload` a Uint8Array). Return
 *   the record as it goes on (the same object changed, or `{ payload, headers,
 *   originTimestamp }`), a new payload (a string, a Uint8Array, or any other value
 *   written as JSON, the headers kept), or `null`/`undefined` to drop the record.
 *   An exception fails the whole batch (a source's is produced again, a sink's
 *   transformed again later): keep it deterministic.
 *
 * The helper answers the host with exactly one entry per record, in order.
 */
export function transform(author) {
    if (typeof author?.transform !== "function") {
        throw new Error("ferry transform: `transform(record)` is required");
    }
    return {
        open(config) {
            enter();
            const settings = parseConfig(config);
            if (author.open) guarded("open", () => author.open(settings));
        },

        transform(records) {
            enter();
            return records.map((incoming) => {
                const id = fromUint128(incoming.id);
                const record = {
                    id,
                    headers: incoming.headers,
                    payload: incoming.payload,
                    originTimestamp: incoming.originTimestamp,
                    text: () => decoder.decode(incoming.payload),
                    json: () => JSON.parse(decoder.decode(incoming.payload)),
                };
                const result = guarded(`record ${id.toString(16).padStart(32, "0")}`, () => author.transform(record));
                if (result === null || result === undefined) return undefined;
                const out = { headers: incoming.headers, payload: undefined, originTimestamp: incoming.originTimestamp };
                if (typeof result === "string" || result instanceof Uint8Array) {
                    out.payload = toBytes(result);
                } else if (typeof result === "object" && "payload" in result) {
                    out.payload = typeof result.payload === "string" || result.payload instanceof Uint8Array
                        ? toBytes(result.payload)
                        : encoder.encode(JSON.stringify(result.payload));
                    if (result.headers !== undefined) out.headers = result.headers;
                    if (result.originTimestamp !== undefined) out.originTimestamp = BigInt(result.originTimestamp);
                } else {
                    out.payload = encoder.encode(JSON.stringify(result));
                }
                return out;
            });
        },
    };
}
