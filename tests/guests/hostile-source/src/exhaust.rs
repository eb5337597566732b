//! Attacks on the host's shared resources: CPU time, memory, the call stack, and a
//! worker blocked in a host call. None of them returns; the host must end each one.

use std::hint::black_box;
use std::time::Duration;

/// Burn CPU forever without calling the host: only the host's interruption of the
/// call (epoch deadline or fuel) ends it.
pub fn spin() -> ! {
    ferry_guest::info!("hostile source: spinning");
    let mut turns = 0u64;
    loop {
        // `black_box` keeps the compiler from proving the loop useless.
        turns = black_box(turns.wrapping_add(1));
    }
}

/// Take memory 1 MiB at a time, keep it, and write to every page so it is really
/// used. When the host refuses to grow memory the allocator fails and Rust aborts:
/// a trap.
pub fn allocate() -> ! {
    const BLOCK: usize = 1 << 20;
    ferry_guest::info!("hostile source: allocating until refused");
    let mut kept: Vec<Vec<u8>> = Vec::new();
    loop {
        let mut block = vec![0u8; BLOCK];
        for page in (0..BLOCK).step_by(4096) {
            block[page] = 1;
        }
        kept.push(black_box(block));
    }
}

/// Recurse until the wasm call stack is exhausted. Only scalars cross each call, so
/// the frames live on wasm's own stack (not on the shadow stack in linear memory):
/// the host's stack limit is what stops it, not a stray memory access.
pub fn overflow_stack() -> ! {
    ferry_guest::info!("hostile source: recursing without end");
    let depth = recurse(0);
    panic!("hostile source: recursion returned at depth {depth}");
}

fn recurse(depth: u64) -> u64 {
    // An exit the compiler cannot rule out, so the recursion is not "unconditional";
    // `black_box` on the result keeps it from being turned into a loop.
    if black_box(depth) == u64::MAX {
        return depth;
    }
    black_box(recurse(black_box(depth + 1))).wrapping_add(depth)
}

/// Block in a WASI clock call for an hour: the guest is not running wasm code, so
/// only a deadline on the whole call (not one on wasm execution) can end it.
pub fn sleep() -> ! {
    ferry_guest::info!("hostile source: sleeping for an hour");
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}
