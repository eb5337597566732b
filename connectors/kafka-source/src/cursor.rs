//! The source's cursor: for each partition read, the offset of the next message to
//! deliver. It is what the host commits after each delivery, so it is never behind
//! what was delivered; the group's offsets in Kafka are committed after it, so they
//! are never ahead of it.

use std::collections::BTreeMap;

use ferry_guest::bindings::iggy::connector::kafka::Position;
use serde::{Deserialize, Serialize};

#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    /// `"topic/partition"` → the offset of the next message to deliver there.
    #[serde(default)]
    pub next: BTreeMap<String, i64>,
}

fn place(topic: &str, partition: i32) -> String {
    format!("{topic}/{partition}")
}

impl Cursor {
    /// The offset of the next message to deliver from `topic`'s `partition`; none
    /// before the first.
    pub fn next(&self, topic: &str, partition: i32) -> Option<i64> {
        self.next.get(&place(topic, partition)).copied()
    }

    /// The next message to deliver from `topic`'s `partition` is at `offset`.
    pub fn set(&mut self, topic: &str, partition: i32, offset: i64) {
        self.next.insert(place(topic, partition), offset);
    }

    /// Every partition's next offset, as the interface's positions (of the `topics`
    /// read now: a topic no longer read is not committed, nor assigned).
    pub fn positions(&self, topics: &[String]) -> Vec<Position> {
        self.next
            .iter()
            .filter_map(|(place, &offset)| {
                let (topic, partition) = place.rsplit_once('/')?;
                let partition = partition.parse().ok()?;
                topics.iter().any(|t| t == topic).then(|| Position { topic: topic.to_string(), partition, offset })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_keeps_the_next_offset_of_each_partition_read() {
        let mut cursor = Cursor::default();
        assert_eq!(cursor.next("orders", 0), None);
        cursor.set("orders", 0, 42);
        cursor.set("orders", 0, 43);
        cursor.set("orders.v2", 1, 8);
        cursor.set("old", 0, 4);
        assert_eq!((cursor.next("orders", 0), cursor.next("orders.v2", 1)), (Some(43), Some(8)));
        let topics = ["orders".to_string(), "orders.v2".to_string()];
        let positions: Vec<(String, i32, i64)> =
            cursor.positions(&topics).into_iter().map(|p| (p.topic, p.partition, p.offset)).collect();
        // In the order of the places' text ('.' before '/').
        assert_eq!(positions, [("orders.v2".into(), 1, 8), ("orders".into(), 0, 43)]);
        let text = serde_json::to_string(&cursor).unwrap();
        assert_eq!(serde_json::from_str::<Cursor>(&text).unwrap(), cursor);
    }
}
