//! # ferry-capabilities: what a guest may reach beyond its own memory, deny by default
//!
//! Each capability is one folder of one shape (see [`Capability`]): its grant and
//! its host-wide section in the config (`config.rs`), the imports it serves and how
//! (`host.rs` where it serves an interface of the contract), and its tests. This file
//! is the one place that lists them; everything the other layers need of "all the
//! capabilities" (the `[*.grants]` table, what a connector shares, what an instance
//! holds, linking, `ferry inspect`'s verdicts, secrets) is generated from the list.
//!
//! * [`wasi`]: clocks, random, streams and `exit` (always granted: harmless, and
//!   needed by nearly every program); standard input stays closed;
//! * [`stdio`]: standard output and error, into the host log (a panic message lands
//!   there);
//! * [`logging`]: the contract's logging import, into the host log under the
//!   connector's key, rate-limited (always granted: it is how a guest talks to the
//!   operator);
//! * [`env`]: environment variables named in `grants.env`, none otherwise;
//! * [`dirs`]: directories named in `grants.dirs`, none otherwise;
//! * [`network`]: TCP connections and outgoing `wasi:http` requests to
//!   `grants.network`, nothing otherwise;
//! * [`postgres`]: the contract's PostgreSQL import, to the servers of
//!   `[postgres.NAME]` named in `grants.postgres`, none otherwise;
//! * [`redis`]: the contract's Redis import, to the servers of `[redis.NAME]` named
//!   in `grants.redis`, none otherwise;
//! * [`nats`]: the contract's NATS JetStream import, to the servers of `[nats.NAME]`
//!   named in `grants.nats`, none otherwise;
//! * [`mqtt`]: the contract's MQTT import, to the brokers of `[mqtt.NAME]` named in
//!   `grants.mqtt`, none otherwise;
//! * [`mysql`]: the contract's MySQL / MariaDB import, to the servers of
//!   `[mysql.NAME]` named in `grants.mysql`, none otherwise;
//! * [`kafka`]: the contract's Kafka import, to the clusters of `[kafka.NAME]` named
//!   in `grants.kafka`, none otherwise.
//!
//! Every WASI interface is *linked* (a component built for wasm32-wasip1 imports
//! filesystem and sockets whether it uses them or not), but an ungranted one has
//! nothing behind it: no preopened directory to open a file in, no address a socket
//! may connect to. The guest gets an ordinary error it can handle. [`Grants::verdict`]
//! says, import by import, which side of that line a component falls on.
//!
//! Adding a capability: its WIT interface in `wit/` (imported by the worlds), a
//! folder here implementing [`Capability`], one line in the list below, and its
//! module in the guest SDK. CONTRIBUTING.md lists each step.

mod capability;
mod deadline;
mod handles;
mod registry;

pub use capability::{
    Capability, Guest, GuestData, HostFile, Import, InstanceBuilder, InstanceLimits, NoSection, Verdict,
};

// The one list. `name: Type` is the folder `name/` and its `Capability` impl `Type`.
registry::capabilities! {
    // Every guest has these: their grant is `()`.
    always {
        wasi: Wasi,
        stdio: Stdio,
        logging: Logging,
    }
    // Granted per connector, in `[*.grants]`, by the name on the left.
    granted {
        env: Env,
        dirs: Dirs,
        network: Network,
        postgres: Postgres,
        redis: Redis,
        nats: Nats,
        mqtt: Mqtt,
        mysql: Mysql,
        kafka: Kafka,
    }
}

#[cfg(test)]
mod tests;
