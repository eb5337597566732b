-- The tables of the PostgreSQL walk-through (examples/postgres.toml), created by
-- `scripts/postgres-demo start`.

-- Table A: what the postgres-source reads, in order of `id`.
CREATE TABLE IF NOT EXISTS orders (
    id          bigserial PRIMARY KEY,
    customer    text NOT NULL,
    -- numeric is not carried (yet): the source would ask for a cast in its `query`.
    total_cents bigint NOT NULL,
    paid        boolean NOT NULL DEFAULT false,
    placed      timestamptz NOT NULL DEFAULT now(),
    details     jsonb
);

-- Table B: what the postgres-sink writes, one row per message, in the sink's default
-- layout (the sink creates it itself with `create_table = true`; it is here so that
-- it can be queried before the first row arrives).
CREATE TABLE IF NOT EXISTS orders_copy (
    "id"               text PRIMARY KEY,
    "payload"          jsonb,
    "payload_bytes"    bytea,
    "headers"          jsonb NOT NULL,
    "stream"           text NOT NULL,
    "topic"            text NOT NULL,
    "partition"        int8 NOT NULL,
    "offset"           int8 NOT NULL,
    "origin_timestamp" timestamptz
);
