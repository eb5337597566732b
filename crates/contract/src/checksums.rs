//! Iggy's checksum of each message of a batch a sink read from Iggy, by offset: what
//! the contract's `stored-checksums` import answers while the guest writes that batch
//! (or any part of it: the transforms may drop records and a bisection splits the
//! batch, but offsets stay what they were). The local log keeps no such checksum.

/// The checksums of one batch's messages, by offset; empty for messages that have
/// none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoredChecksums {
    /// `(offset, checksum)`, in offset order.
    by_offset: Vec<(u64, u64)>,
}

impl StoredChecksums {
    /// From `(offset, checksum)` pairs in offset order (a partition's messages, as
    /// read).
    pub fn new(by_offset: Vec<(u64, u64)>) -> Self {
        debug_assert!(by_offset.is_sorted_by_key(|(offset, _)| *offset), "in offset order");
        StoredChecksums { by_offset }
    }

    /// The checksum of the message at `offset`, if it is one of these.
    pub fn get(&self, offset: u64) -> Option<u64> {
        let at = self.by_offset.binary_search_by_key(&offset, |(offset, _)| *offset).ok()?;
        Some(self.by_offset[at].1)
    }

    /// Keep only the first `count` (a batch trimmed to its budget).
    pub fn truncate(&mut self, count: usize) {
        self.by_offset.truncate(count);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checksum_is_found_by_its_offset_and_nothing_else_is() {
        let mut checksums = StoredChecksums::new(vec![(7, 70), (8, 80), (10, 100)]);
        assert_eq!((checksums.get(7), checksums.get(8), checksums.get(10)), (Some(70), Some(80), Some(100)));
        assert_eq!((checksums.get(6), checksums.get(9), checksums.get(11)), (None, None, None));
        checksums.truncate(1);
        assert_eq!((checksums.get(7), checksums.get(8)), (Some(70), None));
        assert_eq!(StoredChecksums::default().get(7), None, "the local log's: none");
    }
}
