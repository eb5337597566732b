//! The cursor the host commits after delivery: for every file being read, which
//! file it is (its identity, which a rename keeps), the name it last had, and the
//! byte offset after its last delivered line.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    pub files: Vec<Tracked>,
}

/// One file being read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tracked {
    /// Which file it is (`identity.rs`), as hex.
    pub identity: String,
    /// Its name when last seen.
    pub name: String,
    /// The offset after the last line delivered from it.
    pub offset: u64,
}

impl Cursor {
    /// The file `identity`, if it is being read.
    pub fn get(&self, identity: &str) -> Option<&Tracked> {
        self.files.iter().find(|tracked| tracked.identity == identity)
    }
}
