//! What a source's first instance produced, batch by batch: what the replay and
//! restart checks compare the next instances against.

use super::records::Record;

/// What the first instance produced: the batches it was ACKed for, in order.
#[derive(Debug, Default)]
pub struct History {
    pub(super) batches: Vec<Produced>,
}

/// One batch of it: its id, its records, and the cursor it staged.
#[derive(Debug)]
pub(super) struct Produced {
    pub(super) id: u64,
    pub(super) records: Vec<Record>,
    pub(super) staged: Option<Vec<u8>>,
}

impl History {
    pub fn len(&self) -> usize {
        self.batches.len()
    }

    pub fn is_empty(&self) -> bool {
        self.batches.is_empty()
    }

    /// The records a source must produce again once its first `acked` batches are
    /// ACKed: those after the last of them that staged a cursor (a batch that
    /// staged none left the committed cursor where it was).
    pub fn after(&self, acked: usize) -> Vec<Record> {
        let covered = self.batches[..acked].iter().rposition(|b| b.staged.is_some()).map_or(0, |last| last + 1);
        self.batches[covered..].iter().flat_map(|b| b.records.iter().cloned()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn produced(seqs: std::ops::Range<u8>, staged: bool) -> Produced {
        let records = seqs.map(|seq| Record { id: None, payload: vec![seq] }).collect();
        Produced { id: 0, records, staged: staged.then(Vec::new) }
    }

    #[test]
    fn the_records_after_a_prefix_start_after_its_last_staged_cursor() {
        let history = History { batches: vec![produced(0..2, true), produced(2..4, false), produced(4..6, true)] };
        let payloads = |acked| history.after(acked).into_iter().map(|r| r.payload[0]).collect::<Vec<_>>();
        assert_eq!(payloads(0), [0, 1, 2, 3, 4, 5]);
        assert_eq!(payloads(1), [2, 3, 4, 5]);
        // The second batch staged no cursor: after it, the committed one is still the first's.
        assert_eq!(payloads(2), [2, 3, 4, 5]);
    }
}
