//! Source components written by hand, in WebAssembly text, without the SDK: what an
//! attacker hands an operator. The canonical ABI is spelled out here directly, so a
//! test can make a component that honours the contract's signatures (it passes every
//! check ferry makes before compiling) while carrying whatever else it likes: a
//! function built to exhaust the compiler, say.
//!
//! The module implements `iggy:connector/source` (at the contract's version) with the least that is
//! valid: `open` succeeds, `poll` has nothing to deliver, `on-batch-result` and
//! `close` do nothing. `extra` is spliced in as more module fields, and `close`
//! calls `$extra` if `extra` defines it, so that it is reachable.

use std::path::Path;

use wit_component::{ComponentEncoder, StringEncoding, embed_component_metadata};
use wit_parser::Resolve;

/// A source component whose core module also holds the fields in `extra` (WAT).
pub fn source_with(extra: &str) -> Vec<u8> {
    let calls_extra = if extra.contains("(func $extra") { "i64.const 1 call $extra drop" } else { "" };
    let version = ferry::contract::VERSION;
    let wat = format!(
        r#"(module
  (memory (export "memory") 16)
  ;; A bump allocator: enough for the host to hand over a config and a cursor.
  (global $heap (mut i32) (i32.const 65536))
  (func (export "cabi_realloc") (param i32 i32 i32 i32) (result i32)
    (local $at i32)
    global.get $heap
    local.get 2 i32.const 1 i32.sub i32.add
    local.get 2 i32.const 1 i32.sub i32.const -1 i32.xor i32.and
    local.tee $at
    local.get 3 i32.add
    global.set $heap
    local.get $at)
  ;; Results live at 1024, all zeroes: `ok` for open, `ok(none)` for poll.
  (func (export "iggy:connector/source@{version}#open") (param i32 i32 i32 i32 i32) (result i32)
    i32.const 1024)
  (func (export "iggy:connector/source@{version}#poll") (result i32)
    i32.const 1024)
  (func (export "iggy:connector/source@{version}#on-batch-result") (param i64 i32 i32 i32 i32))
  (func (export "iggy:connector/source@{version}#close") {calls_extra})
  {extra}
)"#
    );
    let mut module = wat::parse_str(&wat).unwrap_or_else(|e| panic!("the raw source does not parse: {e}"));
    let mut resolve = Resolve::default();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ is inside the workspace");
    let (package, _) = resolve.push_dir(root.join("wit")).expect("the contract's WIT parses");
    let world = resolve.select_world(&[package], Some("source-connector")).expect("the contract has the world");
    embed_component_metadata(&mut module, &resolve, world, StringEncoding::UTF8).expect("the metadata embeds");
    ComponentEncoder::default()
        .module(&module)
        .and_then(|encoder| encoder.validate(true).encode())
        .unwrap_or_else(|e| panic!("the raw source does not encode: {e:#}"))
}

/// One function `$extra` with `locals` i64 locals, all alive across `blocks` small
/// branches: each local is set at the start and read at the end, and between them
/// come the branches. The register allocator tracks every live value in every
/// block, so its work grows with `locals × blocks` while the function grows only
/// with their sum: 20,000 locals and 5,000 branches are a few hundred kilobytes.
pub fn many_locals(locals: usize, blocks: usize) -> String {
    let mut body = String::with_capacity((locals + blocks) * 48);
    for i in 1..=locals {
        body.push_str(&format!("local.get 0 i64.const {i} i64.add local.set {i}\n"));
    }
    for k in 0..blocks {
        body.push_str(&format!("local.get 0 i64.const {k} i64.eq (if (then i64.const {k} global.set $sink))\n"));
    }
    body.push_str("local.get 1\n");
    for i in 2..=locals {
        body.push_str(&format!("local.get {i} i64.add\n"));
    }
    format!(
        "(global $sink (mut i64) (i64.const 0))\n(func $extra (param i64) (result i64) (local{}) {body})",
        " i64".repeat(locals)
    )
}

/// `count` small functions, and `$extra` calling each of them once.
pub fn many_functions(count: usize) -> String {
    let mut fields = String::with_capacity(count * 96);
    let mut calls = String::with_capacity(count * 24);
    for i in 0..count {
        fields.push_str(&format!("(func $f{i} (param i64) (result i64) local.get 0 i64.const {i} i64.xor)\n"));
        calls.push_str(&format!("call $f{i}\n"));
    }
    format!("{fields}(func $extra (param i64) (result i64) local.get 0 {calls})")
}
