//! The guest's allocator: small blocks recycled by size class, on top of the
//! standard one.
//!
//! A batch crosses the sandbox boundary as many small allocations: the host asks
//! the guest's allocator (`cabi_realloc`) for every string and list it copies in,
//! the connector builds a payload, an id and headers per message, and after the call
//! every one of them is freed again. With the standard allocator (wasi-libc's
//! dlmalloc) that was close to half of a PostgreSQL source's time in the guest.
//! Here a block of up to [`LARGEST`] bytes comes from a free list of its size class
//! (powers of two from 16 bytes) and goes back to it: a pop and a push. The lists
//! keep what they hold, so a guest's memory is its high-water mark of small blocks
//! (rounded up to their class) and never less; larger blocks go to the standard
//! allocator as before.
//!
//! Only in wasm guests, which run one thread: the lists need no lock.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::UnsafeCell;
use std::ptr;

/// The smallest class: 16 bytes, room for the link and the alignment of anything
/// that is not over-aligned.
const SMALLEST_SHIFT: u32 = 4;
/// How many classes: 16 bytes to 2 KiB.
const CLASSES: usize = 8;
/// The largest block a class holds.
const LARGEST: usize = 1 << (SMALLEST_SHIFT as usize + CLASSES - 1);
/// The alignment every class block has.
const ALIGN: usize = 1 << SMALLEST_SHIFT;

/// The allocator: one free list per size class, linked through the free blocks.
pub struct Recycling {
    free: UnsafeCell<[*mut u8; CLASSES]>,
}

// SAFETY: it is only the global allocator of single-threaded wasm guests (see the
// `cfg` where it is installed), so the lists are never touched by two threads.
unsafe impl Sync for Recycling {}

impl Recycling {
    pub const fn new() -> Recycling {
        Recycling { free: UnsafeCell::new([ptr::null_mut(); CLASSES]) }
    }
}

impl Default for Recycling {
    fn default() -> Self {
        Recycling::new()
    }
}

/// The size class of a block of `layout`, if it is small enough to have one.
fn class(layout: Layout) -> Option<usize> {
    if layout.size() > LARGEST || layout.align() > ALIGN {
        return None;
    }
    let rounded = layout.size().max(ALIGN).next_power_of_two();
    Some((rounded.trailing_zeros() - SMALLEST_SHIFT) as usize)
}

/// The layout of every block of `class`.
fn class_layout(class: usize) -> Layout {
    // SAFETY: a power of two no larger than LARGEST, aligned to a power of two.
    unsafe { Layout::from_size_align_unchecked(1 << (class + SMALLEST_SHIFT as usize), ALIGN) }
}

unsafe impl GlobalAlloc for Recycling {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let Some(class) = class(layout) else {
            // SAFETY: forwarded as given.
            return unsafe { System.alloc(layout) };
        };
        // SAFETY: single-threaded (see `Sync`); a list holds only free blocks of its
        // class, each starting with the link to the next.
        unsafe {
            let lists = &mut *self.free.get();
            let head = lists[class];
            if head.is_null() {
                return System.alloc(class_layout(class));
            }
            lists[class] = head.cast::<*mut u8>().read();
            head
        }
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        let Some(class) = class(layout) else {
            // SAFETY: it came from `System` with this layout.
            return unsafe { System.dealloc(block, layout) };
        };
        // SAFETY: the block is free now, at least 16 bytes and aligned for the link.
        unsafe {
            let lists = &mut *self.free.get();
            block.cast::<*mut u8>().write(lists[class]);
            lists[class] = block;
        }
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `new_size` is valid for the alignment (GlobalAlloc's contract).
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        match (class(layout), class(new_layout)) {
            // The block already has room.
            (Some(old), Some(new)) if old == new => block,
            // Both large: the standard allocator may grow in place.
            // SAFETY: it came from `System` with `layout`.
            (None, None) => unsafe { System.realloc(block, layout, new_size) },
            _ => {
                // SAFETY: a fresh block for the new layout, the old one's bytes copied
                // (as many as both hold), then the old one freed.
                unsafe {
                    let moved = self.alloc(new_layout);
                    if !moved.is_null() {
                        ptr::copy_nonoverlapping(block, moved, layout.size().min(new_size));
                        self.dealloc(block, layout);
                    }
                    moved
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_fall_into_the_class_that_holds_them() {
        let layout = |size, align| Layout::from_size_align(size, align).unwrap();
        assert_eq!(class(layout(1, 1)), Some(0));
        assert_eq!(class(layout(16, 8)), Some(0));
        assert_eq!(class(layout(17, 1)), Some(1));
        assert_eq!(class(layout(2048, 16)), Some(7));
        assert_eq!(class(layout(2049, 1)), None, "too large: the standard allocator's");
        assert_eq!(class(layout(64, 32)), None, "over-aligned: the standard allocator's");
        for size in [1, 15, 16, 17, 100, 1000, 2048] {
            let class = class(layout(size, 8)).unwrap();
            assert!(class_layout(class).size() >= size);
        }
    }

    #[test]
    fn freed_blocks_are_reused_and_keep_what_they_hold_when_grown() {
        let a = Recycling::new();
        let small = Layout::from_size_align(24, 8).unwrap();
        unsafe {
            let first = a.alloc(small);
            first.write_bytes(7, 24);
            a.dealloc(first, small);
            let second = a.alloc(small);
            assert_eq!(second, first, "a freed block of the class is handed out again");
            second.write_bytes(9, 24);
            // Within the class: the same block; past it: a new one with the bytes.
            assert_eq!(a.realloc(second, small, 30), second);
            let grown = a.realloc(second, small, 5000);
            assert_ne!(grown, second);
            assert!(std::slice::from_raw_parts(grown, 24).iter().all(|&b| b == 9));
            a.dealloc(grown, Layout::from_size_align(5000, 8).unwrap());
            // Two live blocks of a class are distinct.
            let (x, y) = (a.alloc(small), a.alloc(small));
            assert_ne!(x, y);
            a.dealloc(x, small);
            a.dealloc(y, small);
        }
    }
}
