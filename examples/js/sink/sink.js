// A Ferry sink in JavaScript: it appends every message, as one JSON line
// (`stream`, `topic`, `partition`, `offset`, `id`, `payload`), to a file in a
// directory the operator granted, and writes each message once however often the
// host hands it again: it answers `ack` only after the batch's lines are synced, and
// skips every message at or below the highest offset it wrote in its partition,
// which it recovers from the file when it starts (cutting off a torn last line, one
// a crash interrupted and which was never acknowledged).
//
// The file is reached through WASI directly: the JavaScript engine has no
// filesystem API, and `ferry build` builds the connector as a world that imports
// WASI's preopens (guest-sdk/js/wit/js-worlds.wit).
//
// plugin_config:
//
//   directory   the directory, as the guest sees it (grants.dirs, writable); required
//   file        the file's name in it (default "sink.jsonl")
//   fail_every  answer `retry` for every Nth batch, after writing it (default: never),
//               to show a replay is written once

import { getDirectories } from "wasi:filesystem/preopens@0.2.12";
import * as ferry from "../../../guest-sdk/js/ferry-guest.js";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

// Module-level: one instance, one file, one memory of what was written.
let file = null;
let size = 0n;
// "stream/topic/partition" -> the highest offset written (a BigInt).
const written = new Map();
let failEvery = 0;
let batches = 0;

export const sink = ferry.sink({
    open(config) {
        if (typeof config.directory !== "string") {
            throw new Error("plugin_config.directory is required: the granted directory, as the guest sees it");
        }
        failEvery = config.fail_every ?? 0;
        const granted = getDirectories().find(([, path]) => path === config.directory);
        if (!granted) {
            throw new Error(`${config.directory} is not a granted directory (grants.dirs)`);
        }
        const name = config.file ?? "sink.jsonl";
        file = granted[0].openAt({}, name, { create: true }, { read: true, write: true });
        const lines = recover();
        ferry.log.info(`js file sink: appending to ${name} in ${config.directory}; recovered ${lines} line(s)`);
    },

    write(batch) {
        batches += 1;
        const partition = `${batch.stream}/${batch.topic}/${batch.partition}`;
        const high = written.get(partition) ?? -1n;
        let text = "";
        let last = high;
        let skipped = 0;
        for (const message of batch.messages) {
            if (message.offset <= high) {
                skipped += 1;
                continue;
            }
            const line = {
                stream: batch.stream,
                topic: batch.topic,
                partition: batch.partition,
                offset: Number(message.offset),
                id: String(message.id),
                payload: message.text(),
            };
            text += JSON.stringify(line) + "\n";
            last = message.offset;
        }
        if (text.length > 0) {
            append(encoder.encode(text));
            written.set(partition, last);
        }
        if (skipped > 0) {
            ferry.log.info(`js file sink: skipped ${skipped} message(s) of ${partition} already written (a replay)`);
        }
        if (failEvery > 0 && batches % failEvery === 0) {
            return ferry.retry(`fail_every = ${failEvery}: batch ${batches} written, answering retry`);
        }
        return ferry.ack;
    },
});

/** Write `bytes` at the end of the file and sync it: only then may `write` answer. */
function append(bytes) {
    let done = 0;
    while (done < bytes.length) {
        done += Number(file.write(bytes.subarray(done), size + BigInt(done)));
    }
    file.syncData();
    size += BigInt(bytes.length);
}

/** Read the file: the highest offset of each partition, a torn last line cut off. */
function recover() {
    size = file.stat().size;
    const chunks = [];
    let at = 0n;
    while (at < size) {
        const [bytes, end] = file.read(1n << 20n, at);
        chunks.push(bytes);
        at += BigInt(bytes.length);
        if (end || bytes.length === 0) break;
    }
    const text = decoder.decode(concat(chunks));
    const whole = text.lastIndexOf("\n") + 1;
    if (whole < text.length) {
        // Not acknowledged, so the host hands it again.
        size = BigInt(encoder.encode(text.slice(0, whole)).length);
        file.setSize(size);
        file.syncData();
    }
    let lines = 0;
    for (const line of text.slice(0, whole).split("\n")) {
        if (line === "") continue;
        const { stream, topic, partition, offset } = JSON.parse(line);
        const key = `${stream}/${topic}/${partition}`;
        const high = written.get(key) ?? -1n;
        if (BigInt(offset) > high) written.set(key, BigInt(offset));
        lines += 1;
    }
    return lines;
}

function concat(chunks) {
    const all = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
    let at = 0;
    for (const chunk of chunks) {
        all.set(chunk, at);
        at += chunk.length;
    }
    return all;
}
