// A Ferry source in JavaScript: every record is `{"seq":N}`, N counting 0, 1, 2, ...
// with no gap across batches, NACKs and restarts, because N comes from the cursor.
// The ferry-guest helper stages the cursor a batch carries, applies it when the host
// acknowledges the batch and drops it when it does not: after a NACK or a crash,
// `poll` sees the committed cursor again and produces the same records.
//
// plugin_config:
//
//   messages_per_batch  records per batch (default 10)
//   max_count           stop (return nothing) after this many records (default: never)
//   interval_ms         at most one batch per this many milliseconds (default 0)

import * as ferry from "../../../guest-sdk/js/ferry-guest.js";

// Settings, set by `open`. Module-level: the module is the instance.
let perBatch = 10;
let maxCount = Infinity;
let intervalMs = 0;
// When the last batch was made: pacing only, not part of the cursor.
let lastBatchAt = 0;

export const source = ferry.source({
    initialCursor: { next_seq: 0 },

    open(config, cursor) {
        perBatch = config.messages_per_batch ?? 10;
        maxCount = config.max_count ?? Infinity;
        intervalMs = config.interval_ms ?? 0;
        if (!Number.isInteger(perBatch) || perBatch < 1) {
            throw new Error("plugin_config.messages_per_batch must be a whole number, at least 1");
        }
        ferry.log.info(`js source: starting at seq ${cursor.next_seq}`);
    },

    poll(cursor) {
        const end = Math.min(cursor.next_seq + perBatch, maxCount);
        if (end <= cursor.next_seq) return null;
        if (intervalMs > 0) {
            const now = Date.now();
            if (now - lastBatchAt < intervalMs) return null;
            lastBatchAt = now;
        }
        const records = [];
        for (let seq = cursor.next_seq; seq < end; seq++) {
            records.push(JSON.stringify({ seq }));
        }
        return { records, next: { next_seq: end } };
    },

    onNack(nack, cursor) {
        ferry.log.info(`js source: will produce again from seq ${cursor.next_seq}`);
    },
});
