//! The shape every capability has: Spin's factors, trimmed to what one host with a
//! fixed set of capabilities needs. A capability lives at three lifetimes, each with
//! its own step:
//!
//! * once per engine, [`Capability::link`] adds the imports it serves to the linker;
//! * once per connector (and per reload), [`Capability::prepare`] turns the
//!   connector's grant into what all its instances share: pools, say;
//! * once per instance, [`Capability::instantiate`] makes what the instance keeps in
//!   its store, and grants WASI interfaces in the instance's WASI context.
//!
//! Around those, what the operator and the other layers need of it: its grant in the
//! config and how that is validated, its host-wide section if it has one
//! (`[postgres.NAME]`), what each import gets under a grant ([`Verdict`], for `ferry
//! inspect`), the secrets it reaches (redacted wherever guest text is shown) and what
//! it reaches on the host (part of a connector's fingerprint, so that a reload
//! restarts a connector whose server changed), and the host files it opens to the
//! guest (which may never be a place ferry keeps for itself: `ferry-config`'s
//! `host_paths`).

use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::de::DeserializeOwned;
use wasmtime::component::{Linker, ResourceTable};
use wasmtime_wasi::{WasiCtxBuilder, WasiView};
use wasmtime_wasi_http::WasiHttpView;

use crate::States;
use crate::logging::GuestLog;

/// One thing the host can grant a guest. See the module documentation for the steps.
pub trait Capability: 'static {
    /// Its name: the key of its grant in `[*.grants]` and of its host-wide section.
    const NAME: &'static str;

    /// What a connector's `grants.<NAME>` says. `Default` grants nothing: deny by
    /// default. `()` for a capability every guest has.
    type Grant: DeserializeOwned + Default + Clone + PartialEq + Eq + Debug + Send + Sync + 'static;

    /// Its host-wide section, `[<NAME>.*]` (PostgreSQL servers by name), or
    /// [`NoSection`] when it has none.
    type Section: DeserializeOwned + Default + Clone + PartialEq + Eq + Debug + Send + Sync + 'static;

    /// What every instance of one connector shares.
    type Shared: Clone + Default + Debug + PartialEq + Eq + Send + Sync + 'static;

    /// What one instance keeps in its store.
    type State: Send + 'static;

    /// Check the host-wide section alone; the error names the entry.
    fn validate_section(_section: &Self::Section) -> Result<(), String> {
        Ok(())
    }

    /// Check one connector's grant against the section: the key and the problem.
    fn validate(_grant: &Self::Grant, _section: &Self::Section) -> Result<(), (&'static str, String)> {
        Ok(())
    }

    /// The paths in a grant, resolved against the config file's directory.
    fn grant_paths(_grant: &mut Self::Grant) -> Vec<&mut PathBuf> {
        Vec::new()
    }

    /// The paths in the section, resolved against the config file's directory.
    fn section_paths(_section: &mut Self::Section) -> Vec<&mut PathBuf> {
        Vec::new()
    }

    /// What `import` gets under `grant`, if this capability is what serves it.
    fn verdict(import: &Import<'_>, grant: &Self::Grant) -> Option<Verdict>;

    /// What every instance of one connector shares, made from its grant; the error
    /// names what cannot be had (an undefined server, a password that cannot be read).
    fn prepare(_grant: &Self::Grant, _section: &Self::Section) -> Result<Self::Shared, String> {
        Ok(Self::Shared::default())
    }

    /// What one instance keeps; grants WASI interfaces in `instance.wasi`.
    fn instantiate(
        grant: &Self::Grant,
        shared: &Self::Shared,
        instance: &mut InstanceBuilder<'_>,
    ) -> impl Future<Output = Result<Self::State, String>> + Send;

    /// Add the imports it serves to the linker, once per engine.
    fn link<T: GuestData>(_linker: &mut Linker<T>) -> wasmtime::Result<()> {
        Ok(())
    }

    /// The secret values `grant` reaches: redacted from whatever shows guest text.
    fn secrets(_grant: &Self::Grant, _section: &Self::Section) -> Vec<String> {
        Vec::new()
    }

    /// What `grant` reaches on the host beyond the grant itself (the server a name
    /// stands for, and its secrets' values), as text to fingerprint: a connector is
    /// restarted by a reload when this changes.
    fn reach(_grant: &Self::Grant, _section: &Self::Section) -> String {
        String::new()
    }

    /// The host files and directories `grant` opens to the guest. The config refuses
    /// any that reaches a place ferry keeps for itself or another connector's files.
    fn host_files(_grant: &Self::Grant) -> Vec<HostFile<'_>> {
        Vec::new()
    }
}

/// A file or directory on the host a grant opens to the guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostFile<'a> {
    /// The key of the grant, for errors: `grants.dirs`.
    pub key: &'static str,
    /// As the config gives it (resolved against the config's directory).
    pub path: &'a Path,
    /// Whether the guest may write it, not only read it.
    pub writable: bool,
}

/// The section of a capability that has none: writing `[NAME]` at the top of the
/// config is an error that says where its grant goes instead.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NoSection;

impl<'de> serde::Deserialize<'de> for NoSection {
    fn deserialize<D: serde::Deserializer<'de>>(_: D) -> Result<Self, D::Error> {
        Err(serde::de::Error::custom(
            "this capability has no host-wide section: grant it per connector, in its `grants`",
        ))
    }
}

/// An import of a component, by interface: `wasi:filesystem/types@0.2.3` is package
/// `wasi:filesystem`, name `types`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Import<'a> {
    pub package: &'a str,
    pub name: &'a str,
}

impl<'a> Import<'a> {
    /// The interface named by `import`, its version dropped.
    pub fn parse(import: &'a str) -> Import<'a> {
        let interface = import.split('@').next().unwrap_or(import);
        let (package, name) = interface.split_once('/').unwrap_or((interface, ""));
        Import { package, name }
    }

    /// Whether it is interface `name` of package `package`.
    pub fn is(&self, package: &str, name: &str) -> bool {
        self.package == package && self.name == name
    }
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

impl Verdict {
    /// `Granted(yes)` when `granted`, else `Denied(no)`.
    pub fn by(granted: bool, yes: &'static str, no: &'static str) -> Verdict {
        if granted { Verdict::Granted(yes) } else { Verdict::Denied(no) }
    }
}

/// What a capability has to work with when an instance is made.
pub struct InstanceBuilder<'a> {
    /// The instance's WASI context, being built: WASI interfaces are granted here.
    pub wasi: &'a mut WasiCtxBuilder,
    /// Where the instance's log lines go (and a capability's warnings about it).
    pub log: &'a GuestLog,
    /// The connector's limits that bound what a capability hands the guest.
    pub limits: InstanceLimits,
}

/// The limits of a connector a capability bounds what it hands the guest by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InstanceLimits {
    /// The most one result (a query's rows) may take: the connector's
    /// `limits.max_batch_bytes`, which is what its memory is sized for.
    pub max_result_bytes: u64,
}

/// The store's data as capabilities see it: each capability's state, the instance's
/// table of handles, and the clock of the call in progress. The runtime's guest
/// context implements it; capabilities link against it and never name that type.
pub trait GuestData: WasiView + WasiHttpView + Send + 'static {
    /// The parts of the store's data capabilities use.
    fn guest(&mut self) -> Guest<'_>;
}

/// See [`GuestData`].
pub struct Guest<'a> {
    /// Every capability's state of this instance.
    pub states: &'a mut States,
    /// The instance's handles (bounded: a guest cannot grow it without end).
    pub table: &'a mut ResourceTable,
    /// What is left of the call in progress (`limits.call_timeout`): a host call
    /// must return within it, or the guest is interrupted before it can answer.
    pub remaining: Duration,
}
