//! The contract between host and guest, and the check that a component keeps it.
//!
//! The WIT package in `wit/` is compiled into the host. Before a component is run, its
//! own world is decoded from the binary and compared, function by function and type
//! by type, with the interface of its kind (`source`, `sink` or `transform`). wasmtime would refuse a mismatch
//! too, but only with a terse link error; this check names the export that is missing
//! or mistyped and says how, which is what an author or operator needs to fix it.

use std::fmt::Write as _;

use wit_parser::decoding::DecodedWasm;
use wit_parser::{Function, InterfaceId, Resolve, Type, TypeDefKind, WorldId, WorldItem, WorldKey};

use crate::VERSION;
use crate::wit::WIT_FILES;

/// The kinds of connector this host runs: each is a world of the contract, whose
/// component exports one interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Source,
    Sink,
}

impl Role {
    /// The interface the component exports, with the version this host speaks.
    pub fn interface(self) -> &'static str {
        Kind::from(self).interface()
    }

    /// The world the component implements.
    pub fn world(self) -> &'static str {
        Kind::from(self).world()
    }

    /// What a connector of this role is called.
    pub fn noun(self) -> &'static str {
        Kind::from(self).noun()
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.noun())
    }
}

/// The kinds of component this host runs: a connector of either role, or a
/// transform that a connector chains (`wit/transform.wit`). Each is a world of the
/// contract, whose component exports one interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Source,
    Sink,
    Transform,
}

impl Kind {
    /// Every kind, in the order a component's exports are looked at.
    pub const ALL: [Kind; 3] = [Kind::Source, Kind::Sink, Kind::Transform];

    /// The interface the component exports, with the version this host speaks.
    pub fn interface(self) -> &'static str {
        match self {
            Kind::Source => concat!("iggy:connector/source@", contract_version!()),
            Kind::Sink => concat!("iggy:connector/sink@", contract_version!()),
            Kind::Transform => concat!("iggy:connector/transform@", contract_version!()),
        }
    }

    /// The world the component implements.
    pub fn world(self) -> &'static str {
        match self {
            Kind::Source => concat!("iggy:connector/source-connector@", contract_version!()),
            Kind::Sink => concat!("iggy:connector/sink-connector@", contract_version!()),
            Kind::Transform => concat!("iggy:connector/transform-component@", contract_version!()),
        }
    }

    /// What a component of this kind is called.
    pub fn noun(self) -> &'static str {
        match self {
            Kind::Source => "source",
            Kind::Sink => "sink",
            Kind::Transform => "transform",
        }
    }

    /// The connector role of this kind; `None` for a transform.
    pub fn role(self) -> Option<Role> {
        match self {
            Kind::Source => Some(Role::Source),
            Kind::Sink => Some(Role::Sink),
            Kind::Transform => None,
        }
    }

    /// The interface's name inside the package.
    fn interface_name(self) -> &'static str {
        self.noun()
    }
}

impl From<Role> for Kind {
    fn from(role: Role) -> Kind {
        match role {
            Role::Source => Kind::Source,
            Role::Sink => Kind::Sink,
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.noun())
    }
}

/// Why a component does not implement the world of its kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContractError {
    #[error("not a WebAssembly file (it starts with {prefix}; a .wasm file starts with `\\0asm`)")]
    NotWasm { prefix: String },
    #[error(
        "a core WebAssembly module, not a component: build its crate with `ferry build` (or \
         for wasm32-wasip2) so that it carries its WIT world"
    )]
    CoreModule,
    #[error("a WIT package encoded as wasm, not a component")]
    WitPackage,
    #[error("cannot decode the component's world: {0}")]
    Undecodable(String),
    #[error(
        "it does not export the interface `{}`, so it is not a Ferry {kind} (it exports: {})",
        kind.interface(), list_or_nothing(.exports)
    )]
    MissingInterface { kind: Kind, exports: Vec<String> },
    #[error(
        "it was built against the contract iggy:connector {} (it exports `{found}`), and this host speaks \
         {VERSION}: {}",
        version_of(.found), rebuild_hint(.found)
    )]
    WrongVersion { kind: Kind, found: String },
    #[error("its `{}` export has no function `{function}`", kind.interface())]
    MissingFunction { kind: Kind, function: String },
    #[error("its function `{function}` of `{}` has the wrong type: {detail}", kind.interface())]
    Mistyped { kind: Kind, function: String, detail: String },
}

/// The version of an interface name (`iggy:connector/source@0.1.0` is `0.1.0`).
fn version_of(interface: &str) -> &str {
    interface.split_once('@').map_or("(unversioned)", |(_, version)| version)
}

/// What to do about a component of another version than [`VERSION`].
fn rebuild_hint(found: &str) -> &'static str {
    if older(version_of(found), VERSION) {
        "rebuild it against this host's contract (`ferry build`, or the guest SDK of this ferry's checkout)"
    } else {
        "run it with a ferry that speaks its version, or rebuild it against this one's"
    }
}

/// Whether version `a` is older than `b` (numerically, part by part).
fn older(a: &str, b: &str) -> bool {
    let parts = |v: &str| v.split('.').map(|p| p.parse::<u64>().unwrap_or(0)).collect::<Vec<_>>();
    parts(a) < parts(b)
}

/// Whether an exported interface of version `found` is one this host serves: the same
/// minor version before 1.0 (a patch release only adds imports a guest may ignore),
/// the same major after. See the README's "Versions of the contract".
fn compatible(found: &str, ours: &str) -> bool {
    let series = |v: &str| {
        let mut parts = v.split('.');
        match (parts.next(), parts.next()) {
            (Some("0"), Some(minor)) => format!("0.{minor}"),
            (Some(major), _) => major.to_string(),
            _ => String::new(),
        }
    };
    series(found) == series(ours)
}

fn list_or_nothing(items: &[String]) -> String {
    if items.is_empty() { "nothing".to_string() } else { items.join(", ") }
}

/// The contract, parsed.
pub struct Contract {
    resolve: Resolve,
    /// The interface of each kind, in the order of [`Kind::ALL`].
    interfaces: [InterfaceId; 3],
}

impl Contract {
    /// Parse the WIT compiled into this host.
    pub fn load() -> Contract {
        // The files form one package: parse them as one source set.
        let mut sources = wit_parser::SourceMap::new();
        for (name, text) in WIT_FILES {
            sources.push_str(name, *text);
        }
        let mut resolve = Resolve::default();
        let group = sources.parse().expect("the contract's WIT parses");
        let package = resolve.push_group(group).expect("the contract's WIT resolves");
        let interfaces = Kind::ALL.map(|kind| resolve.packages[package].interfaces[kind.interface_name()]);
        Contract { resolve, interfaces }
    }

    fn interface(&self, kind: Kind) -> InterfaceId {
        self.interfaces[kind as usize]
    }
}

/// The world a component implements, decoded from its binary.
pub struct ComponentWorld {
    resolve: Resolve,
    world: WorldId,
}

impl ComponentWorld {
    /// Decode the world of the component in `bytes`.
    pub fn decode(bytes: &[u8]) -> Result<ComponentWorld, ContractError> {
        if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
            let prefix: String = bytes.iter().take(8).map(|b| format!("{b:02x} ")).collect();
            let prefix = if prefix.is_empty() {
                "nothing: the file is empty".to_string()
            } else {
                format!("bytes {}", prefix.trim_end())
            };
            return Err(ContractError::NotWasm { prefix });
        }
        if bytes[4..8] == [1, 0, 0, 0] {
            return Err(ContractError::CoreModule);
        }
        match wit_parser::decoding::decode(bytes) {
            Ok(DecodedWasm::Component(resolve, world)) => Ok(ComponentWorld { resolve, world }),
            Ok(DecodedWasm::WitPackage(..)) => Err(ContractError::WitPackage),
            Err(e) => Err(ContractError::Undecodable(format!("{e:#}"))),
        }
    }

    /// The names of what the component imports: interfaces as `ns:pkg/name@version`,
    /// bare functions by name.
    pub fn imports(&self) -> Vec<String> {
        self.items(|w| &w.imports)
    }

    /// The names of what the component exports.
    pub fn exports(&self) -> Vec<String> {
        self.items(|w| &w.exports)
    }

    fn items(&self, pick: impl Fn(&wit_parser::World) -> &wit_parser::IndexMap<WorldKey, WorldItem>) -> Vec<String> {
        pick(&self.resolve.worlds[self.world])
            .iter()
            .filter(|(_, item)| !matches!(item, WorldItem::Type { .. }))
            .map(|(key, _)| self.resolve.name_world_key(key))
            .collect()
    }

    /// The component's world as WIT text, with the packages it uses.
    pub fn wit(&self) -> String {
        let package = self.resolve.worlds[self.world].package.expect("a decoded world belongs to a package");
        let nested: Vec<_> = self.resolve.packages.iter().map(|(id, _)| id).filter(|id| *id != package).collect();
        let mut printer = wit_component::WitPrinter::default();
        match printer.print(&self.resolve, package, &nested) {
            Ok(()) => printer.output.to_string(),
            Err(e) => format!("(cannot print the world: {e:#})"),
        }
    }

    /// The exported interface with this name (`ns:pkg/name`), whatever its version.
    fn exported_interface(&self, unversioned: &str) -> Option<(String, InterfaceId)> {
        self.resolve.worlds[self.world].exports.iter().find_map(|(key, item)| {
            let WorldItem::Interface { id, .. } = item else { return None };
            let name = self.resolve.name_world_key(key);
            let base = name.split('@').next().unwrap_or(&name);
            (base == unversioned).then_some((name, *id))
        })
    }
}

/// The kind a component claims, by the interface it exports (of any version); `None`
/// when it exports none of them.
pub fn kind_of(world: &ComponentWorld) -> Option<Kind> {
    Kind::ALL.into_iter().find(|kind| {
        let unversioned = kind.interface().split('@').next().unwrap_or_default();
        world.exported_interface(unversioned).is_some()
    })
}

/// Check that `world` exports the interface of `kind` (a connector's role, or a
/// transform) with every function typed as
/// the contract says.
pub fn check(world: &ComponentWorld, contract: &Contract, kind: impl Into<Kind>) -> Result<(), ContractError> {
    let kind = kind.into();
    let wanted = kind.interface();
    let unversioned = wanted.split('@').next().unwrap_or(wanted);
    let Some((found, actual)) = world.exported_interface(unversioned) else {
        return Err(ContractError::MissingInterface { kind, exports: world.exports() });
    };
    if !compatible(version_of(&found), VERSION) {
        return Err(ContractError::WrongVersion { kind, found });
    }
    let compare = Compare { expected: &contract.resolve, actual: &world.resolve };
    let expected = &contract.resolve.interfaces[contract.interface(kind)];
    let actual = &world.resolve.interfaces[actual];
    for (name, function) in &expected.functions {
        let Some(found) = actual.functions.get(name) else {
            return Err(ContractError::MissingFunction { kind, function: name.clone() });
        };
        compare.function(function, found).map_err(|detail| ContractError::Mistyped {
            kind,
            function: name.clone(),
            detail,
        })?;
    }
    Ok(())
}

/// Structural comparison of types that live in two different `Resolve`s.
struct Compare<'a> {
    expected: &'a Resolve,
    actual: &'a Resolve,
}

impl Compare<'_> {
    fn function(&self, expected: &Function, actual: &Function) -> Result<(), String> {
        if expected.params.len() != actual.params.len() {
            return Err(format!(
                "expected {} parameter(s) ({}), found {}",
                expected.params.len(),
                self.signature(self.expected, expected),
                actual.params.len()
            ));
        }
        for (e, a) in expected.params.iter().zip(&actual.params) {
            self.ty(&e.ty, &a.ty).map_err(|m| format!("parameter `{}`: {m}", e.name))?;
        }
        match (&expected.result, &actual.result) {
            (None, None) => Ok(()),
            (Some(e), Some(a)) => self.ty(e, a).map_err(|m| format!("return value: {m}")),
            (Some(e), None) => Err(format!("expected it to return `{}`, it returns nothing", show(self.expected, e))),
            (None, Some(a)) => Err(format!("expected it to return nothing, it returns `{}`", show(self.actual, a))),
        }
    }

    fn signature(&self, resolve: &Resolve, function: &Function) -> String {
        let params: Vec<_> = function.params.iter().map(|p| format!("{}: {}", p.name, show(resolve, &p.ty))).collect();
        params.join(", ")
    }

    fn ty(&self, expected: &Type, actual: &Type) -> Result<(), String> {
        let expected = dealias(self.expected, *expected);
        let actual = dealias(self.actual, *actual);
        let mismatch =
            || Err(format!("expected `{}`, found `{}`", show(self.expected, &expected), show(self.actual, &actual)));
        let (Type::Id(e), Type::Id(a)) = (expected, actual) else {
            return if expected == actual && !matches!(expected, Type::Id(_)) { Ok(()) } else { mismatch() };
        };
        let (e_def, a_def) = (&self.expected.types[e], &self.actual.types[a]);
        let within = |what: String, r: Result<(), String>| r.map_err(|m| format!("{what}: {m}"));
        let named = |def: &wit_parser::TypeDef, kind: &str| match &def.name {
            Some(name) => format!("{kind} `{name}`"),
            None => kind.to_string(),
        };
        match (&e_def.kind, &a_def.kind) {
            (TypeDefKind::Record(e), TypeDefKind::Record(a)) => {
                let names = |r: &wit_parser::Record| r.fields.iter().map(|f| f.name.clone()).collect::<Vec<_>>();
                if names(e) != names(a) {
                    return within(
                        named(e_def, "record"),
                        Err(format!("expected fields {:?}, found {:?}", names(e), names(a))),
                    );
                }
                for (ef, af) in e.fields.iter().zip(&a.fields) {
                    within(format!("{} field `{}`", named(e_def, "record"), ef.name), self.ty(&ef.ty, &af.ty))?;
                }
                Ok(())
            }
            (TypeDefKind::Variant(e), TypeDefKind::Variant(a)) => {
                let names = |v: &wit_parser::Variant| v.cases.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
                if names(e) != names(a) {
                    return within(
                        named(e_def, "variant"),
                        Err(format!("expected cases {:?}, found {:?}", names(e), names(a))),
                    );
                }
                for (ec, ac) in e.cases.iter().zip(&a.cases) {
                    let what = format!("{} case `{}`", named(e_def, "variant"), ec.name);
                    match (&ec.ty, &ac.ty) {
                        (None, None) => {}
                        (Some(et), Some(at)) => within(what, self.ty(et, at))?,
                        _ => return within(what, Err("payload present on one side only".into())),
                    }
                }
                Ok(())
            }
            (TypeDefKind::Enum(e), TypeDefKind::Enum(a)) => {
                let names = |v: &wit_parser::Enum| v.cases.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
                if names(e) != names(a) {
                    return within(
                        named(e_def, "enum"),
                        Err(format!("expected cases {:?}, found {:?}", names(e), names(a))),
                    );
                }
                Ok(())
            }
            (TypeDefKind::Flags(e), TypeDefKind::Flags(a)) => {
                let names = |v: &wit_parser::Flags| v.flags.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
                if names(e) != names(a) {
                    return within(
                        named(e_def, "flags"),
                        Err(format!("expected {:?}, found {:?}", names(e), names(a))),
                    );
                }
                Ok(())
            }
            (TypeDefKind::Tuple(e), TypeDefKind::Tuple(a)) if e.types.len() == a.types.len() => {
                for (i, (et, at)) in e.types.iter().zip(&a.types).enumerate() {
                    within(format!("tuple element {i}"), self.ty(et, at))?;
                }
                Ok(())
            }
            (TypeDefKind::Option(e), TypeDefKind::Option(a)) => within("option".into(), self.ty(e, a)),
            (TypeDefKind::List(e), TypeDefKind::List(a)) => within("list".into(), self.ty(e, a)),
            (TypeDefKind::FixedLengthList(e, n), TypeDefKind::FixedLengthList(a, m)) if n == m => {
                within("list".into(), self.ty(e, a))
            }
            (TypeDefKind::Map(ek, ev), TypeDefKind::Map(ak, av)) => {
                within("map key".into(), self.ty(ek, ak))?;
                within("map value".into(), self.ty(ev, av))
            }
            (TypeDefKind::Result(e), TypeDefKind::Result(a)) => {
                let side = |what: &str, e: &Option<Type>, a: &Option<Type>| match (e, a) {
                    (None, None) => Ok(()),
                    (Some(et), Some(at)) => within(what.to_string(), self.ty(et, at)),
                    _ => mismatch(),
                };
                side("ok", &e.ok, &a.ok)?;
                side("error", &e.err, &a.err)
            }
            _ => mismatch(),
        }
    }
}

/// Follow `type a = b;` aliases to the type they name.
fn dealias(resolve: &Resolve, mut ty: Type) -> Type {
    while let Type::Id(id) = ty {
        match &resolve.types[id].kind {
            TypeDefKind::Type(inner) => ty = *inner,
            _ => break,
        }
    }
    ty
}

/// A type as WIT would write it: named types by name, others by structure.
pub fn show(resolve: &Resolve, ty: &Type) -> String {
    let id = match ty {
        Type::Bool => return "bool".into(),
        Type::U8 => return "u8".into(),
        Type::U16 => return "u16".into(),
        Type::U32 => return "u32".into(),
        Type::U64 => return "u64".into(),
        Type::S8 => return "s8".into(),
        Type::S16 => return "s16".into(),
        Type::S32 => return "s32".into(),
        Type::S64 => return "s64".into(),
        Type::F32 => return "f32".into(),
        Type::F64 => return "f64".into(),
        Type::Char => return "char".into(),
        Type::String => return "string".into(),
        Type::ErrorContext => return "error-context".into(),
        Type::Id(id) => *id,
    };
    let def = &resolve.types[id];
    if let Some(name) = &def.name {
        return name.clone();
    }
    let opt = |t: &Option<Type>| t.as_ref().map(|t| show(resolve, t)).unwrap_or_else(|| "_".into());
    let mut out = String::new();
    let _ = match &def.kind {
        TypeDefKind::Option(t) => write!(out, "option<{}>", show(resolve, t)),
        TypeDefKind::List(t) => write!(out, "list<{}>", show(resolve, t)),
        TypeDefKind::FixedLengthList(t, n) => write!(out, "list<{}, {n}>", show(resolve, t)),
        TypeDefKind::Map(k, v) => write!(out, "map<{}, {}>", show(resolve, k), show(resolve, v)),
        TypeDefKind::Result(r) => write!(out, "result<{}, {}>", opt(&r.ok), opt(&r.err)),
        TypeDefKind::Tuple(t) => {
            let items: Vec<_> = t.types.iter().map(|t| show(resolve, t)).collect();
            write!(out, "tuple<{}>", items.join(", "))
        }
        TypeDefKind::Type(t) => write!(out, "{}", show(resolve, t)),
        other => write!(out, "{}", other.as_str()),
    };
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_wit_file_is_of_the_version_this_host_speaks() {
        assert_eq!(VERSION, "0.2.1");
        for (name, text) in WIT_FILES {
            if let Some(package) = text.lines().find(|l| l.starts_with("package ")) {
                assert_eq!(package, format!("package iggy:connector@{VERSION};"), "{name}");
            }
        }
        assert_eq!(Role::Source.interface(), "iggy:connector/source@0.2.1");
        assert_eq!(Role::Sink.world(), "iggy:connector/sink-connector@0.2.1");
    }

    #[test]
    fn a_patch_release_is_served_and_another_minor_or_major_is_refused_naming_both_versions() {
        assert!(compatible("0.2.0", "0.2.0") && compatible("0.2.3", "0.2.0") && compatible("0.2.0", "0.2.1"));
        assert!(!compatible("0.1.0", "0.2.0") && !compatible("0.3.0", "0.2.0") && !compatible("1.0.0", "0.2.0"));
        assert!(compatible("1.4.0", "1.0.0") && !compatible("2.0.0", "1.0.0"));
        let old = ContractError::WrongVersion { kind: Kind::Source, found: "iggy:connector/source@0.1.0".into() };
        assert_eq!(
            old.to_string(),
            "it was built against the contract iggy:connector 0.1.0 (it exports `iggy:connector/source@0.1.0`), and \
             this host speaks 0.2.1: rebuild it against this host's contract (`ferry build`, or the guest SDK of this \
             ferry's checkout)"
        );
        let new = ContractError::WrongVersion { kind: Kind::Sink, found: "iggy:connector/sink@0.10.0".into() };
        assert!(new.to_string().contains("0.10.0") && new.to_string().contains("run it with a ferry that speaks"));
    }

    #[test]
    fn the_contract_parses_and_has_the_functions_of_each_kind() {
        let contract = Contract::load();
        let wanted: [(Kind, &[&str]); 3] = [
            (Kind::Source, &["close", "on-batch-result", "open", "poll"]),
            (Kind::Sink, &["close", "open", "write"]),
            (Kind::Transform, &["open", "transform"]),
        ];
        for (kind, functions) in wanted {
            let interface = contract.interface(kind);
            let mut names: Vec<_> = contract.resolve.interfaces[interface].functions.keys().cloned().collect();
            names.sort();
            assert_eq!(names, functions, "{kind}");
            assert_eq!(contract.resolve.id_of(interface).as_deref(), Some(kind.interface()));
        }
    }

    #[test]
    fn non_wasm_and_core_modules_are_named_as_such() {
        assert!(matches!(ComponentWorld::decode(b"hello, world").err(), Some(ContractError::NotWasm { .. })));
        assert!(matches!(ComponentWorld::decode(b"").err(), Some(ContractError::NotWasm { .. })));
        let core = b"\0asm\x01\0\0\0";
        assert_eq!(ComponentWorld::decode(core).err(), Some(ContractError::CoreModule));
    }
}
