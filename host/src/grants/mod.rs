//! What a guest may reach beyond its own memory: deny by default.
//!
//! Each capability is its own module, composed here into the guest's WASI context:
//!
//! * [`logging`]: the contract's logging import, into the host log under the
//!   connector's key, rate-limited (always granted: it is how a guest talks to the
//!   operator);
//! * [`stdio`]: standard output and error, also into the host log (a panic message
//!   lands there); standard input is closed;
//! * clocks and random: the host's real clocks and a secure RNG (always granted,
//!   harmless and needed by nearly every program);
//! * [`env`]: environment variables named in `grants.env`, none otherwise;
//! * [`dirs`]: directories named in `grants.dirs`, none otherwise;
//! * [`network`]: TCP connections to `grants.network`, none otherwise;
//! * [`http`]: outgoing `wasi:http` requests to the same `grants.network`;
//! * [`postgres`]: the contract's PostgreSQL import, to the servers of `[postgres.NAME]`
//!   named in `grants.postgres`, none otherwise.
//!
//! Every WASI interface is *linked* (a component built for wasm32-wasip1 imports
//! filesystem and sockets whether it uses them or not), but an ungranted one has
//! nothing behind it: no preopened directory to open a file in, no address a
//! socket may connect to. The guest gets an ordinary error it can handle.
//! [`verdict`] says, import by import, which side of that line a component falls on.

pub mod dirs;
pub mod env;
pub mod http;
pub mod logging;
pub mod network;
pub mod postgres;
pub mod stdio;

use std::sync::Arc;

use wasmtime_wasi::{WasiCtx, WasiCtxBuilder};

use self::http::HttpGrant;
use self::logging::GuestLog;
use crate::config::Grants;

/// The WASI context of one guest instance with `grants`, and its `wasi:http` hooks.
pub async fn wasi_context(grants: &Grants, log: &GuestLog) -> Result<(WasiCtx, HttpGrant), String> {
    let mut builder = WasiCtxBuilder::new();
    stdio::grant(&mut builder, log);
    env::grant(&mut builder, &grants.env);
    dirs::grant(&mut builder, &grants.dirs)?;
    let allowed = Arc::new(network::resolve(&grants.network).await);
    network::grant(&mut builder, &grants.network, allowed.clone());
    Ok((builder.build(), HttpGrant::new(allowed)))
}

/// What an import gets under some grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Served for real.
    Granted(&'static str),
    /// Linked, but every use fails (nothing is behind it).
    Denied(&'static str),
    /// This host does not provide it: the component will not link.
    Unavailable,
}

/// Whether `import` (an interface name like `wasi:filesystem/types@0.2.3`) is
/// granted under `grants`.
pub fn verdict(import: &str, grants: &Grants) -> Verdict {
    let interface = import.split('@').next().unwrap_or(import);
    let (package, name) = interface.split_once('/').unwrap_or((interface, ""));
    let by = |granted: bool, yes: &'static str, no: &'static str| {
        if granted { Verdict::Granted(yes) } else { Verdict::Denied(no) }
    };
    match (package, name) {
        ("iggy:connector", "logging") => Verdict::Granted("into the host log, rate-limited"),
        ("iggy:connector", "types") => Verdict::Granted("the contract's types"),
        ("iggy:connector", "postgres") => {
            by(!grants.postgres.is_empty(), "grants.postgres", "no servers: grants.postgres is empty")
        }
        ("iggy:connector", _) => Verdict::Unavailable,
        ("wasi:clocks", _) | ("wasi:random", _) => Verdict::Granted("always"),
        ("wasi:io", _) => Verdict::Granted("always (streams and polling)"),
        ("wasi:cli", "stdout" | "stderr" | "terminal-output" | "terminal-stdout" | "terminal-stderr") => {
            Verdict::Granted("into the host log")
        }
        ("wasi:cli", "stdin" | "terminal-input" | "terminal-stdin") => Verdict::Denied("standard input is closed"),
        ("wasi:cli", "environment") => by(!grants.env.is_empty(), "grants.env", "no variables: grants.env is empty"),
        ("wasi:cli", "exit") => Verdict::Granted("ends the instance (a trap)"),
        ("wasi:filesystem", _) => by(!grants.dirs.is_empty(), "grants.dirs", "no directories: grants.dirs is empty"),
        ("wasi:sockets", "udp" | "udp-create-socket") => Verdict::Denied("UDP is never granted"),
        ("wasi:sockets", _) | ("wasi:http", "outgoing-handler" | "types") => {
            by(!grants.network.is_empty(), "grants.network", "no addresses: grants.network is empty")
        }
        _ => Verdict::Unavailable,
    }
}

#[cfg(test)]
mod tests {
    use super::{Verdict, verdict};
    use crate::config::Grants;

    #[test]
    fn nothing_but_clocks_random_and_logs_without_grants() {
        let none = Grants::default();
        assert!(matches!(verdict("wasi:clocks/monotonic-clock@0.2.3", &none), Verdict::Granted(_)));
        assert!(matches!(verdict("wasi:random/random@0.2.3", &none), Verdict::Granted(_)));
        assert!(matches!(verdict("iggy:connector/logging@0.1.0", &none), Verdict::Granted(_)));
        assert!(matches!(verdict("wasi:filesystem/preopens@0.2.3", &none), Verdict::Denied(_)));
        assert!(matches!(verdict("wasi:sockets/tcp@0.2.3", &none), Verdict::Denied(_)));
        assert!(matches!(verdict("wasi:cli/environment@0.2.3", &none), Verdict::Denied(_)));
        assert!(matches!(verdict("wasi:http/outgoing-handler@0.2.3", &none), Verdict::Denied(_)));
        assert!(matches!(verdict("iggy:connector/postgres@0.1.0", &none), Verdict::Denied(_)));
        assert_eq!(verdict("wasi:http/incoming-handler@0.2.3", &none), Verdict::Unavailable);
        assert_eq!(verdict("wasi:keyvalue/store@0.2.0", &none), Verdict::Unavailable);
    }

    #[test]
    fn grants_open_what_they_name() {
        let grants = Grants {
            env: vec!["TZ".into()],
            dirs: vec![],
            network: vec!["localhost:1".into()],
            postgres: vec!["orders".into()],
        };
        assert!(matches!(verdict("wasi:cli/environment@0.2.3", &grants), Verdict::Granted("grants.env")));
        assert!(matches!(verdict("wasi:sockets/tcp@0.2.0", &grants), Verdict::Granted("grants.network")));
        assert!(matches!(verdict("wasi:filesystem/types@0.2.3", &grants), Verdict::Denied(_)));
        assert!(matches!(verdict("iggy:connector/postgres@0.1.0", &grants), Verdict::Granted("grants.postgres")));
        // A network grant is TCP and HTTP only: the sandbox never lets UDP out.
        assert_eq!(verdict("wasi:sockets/udp@0.2.3", &grants), Verdict::Denied("UDP is never granted"));
        assert_eq!(verdict("wasi:sockets/udp-create-socket@0.2.3", &grants), Verdict::Denied("UDP is never granted"));
    }
}
