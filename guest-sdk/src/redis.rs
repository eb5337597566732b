//! A connector's side of the host's `redis` import: replies as a tree ([`Reply`],
//! rebuilt from the import's flat `reply-item`s), commands from plain arguments, and
//! the import's errors in words for an operator.

use crate::Error;
use crate::bindings::iggy::connector::redis::{Connection, Error as RedisError, ReplyItem};

/// A reply, as the server structured it.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Nil,
    /// A simple string (`OK`).
    Status(String),
    Int(i64),
    /// A bulk string.
    Bulk(Vec<u8>),
    /// An array (a map's items alternate key, value).
    Array(Vec<Reply>),
    /// The server refused the command: its message.
    ServerError(String),
}

impl Reply {
    /// The tree the pre-order `items` of one reply describe.
    pub fn from_items(items: Vec<ReplyItem>) -> Result<Reply, Error> {
        let mut items = items.into_iter();
        let reply = next(&mut items)?;
        match items.next() {
            None => Ok(reply),
            Some(extra) => Err(Error::msg(format!("a reply with items left over after it: {extra:?}"))),
        }
    }

    /// The bytes of a bulk string (or a status's text).
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Reply::Bulk(bytes) => Some(bytes),
            Reply::Status(text) => Some(text.as_bytes()),
            _ => None,
        }
    }

    /// The elements of an array; nil is none.
    pub fn as_array(&self) -> Option<&[Reply]> {
        match self {
            Reply::Array(elements) => Some(elements),
            Reply::Nil => Some(&[]),
            _ => None,
        }
    }

    /// The server's refusal, if it is one.
    pub fn server_error(&self) -> Option<&str> {
        match self {
            Reply::ServerError(message) => Some(message),
            _ => None,
        }
    }
}

fn next(items: &mut impl Iterator<Item = ReplyItem>) -> Result<Reply, Error> {
    Ok(match items.next().ok_or_else(|| Error::msg("a reply that ends inside an array"))? {
        ReplyItem::Nil => Reply::Nil,
        ReplyItem::Status(text) => Reply::Status(text),
        ReplyItem::Int(n) => Reply::Int(n),
        ReplyItem::Bulk(bytes) => Reply::Bulk(bytes),
        ReplyItem::ServerError(message) => Reply::ServerError(message),
        ReplyItem::Array(count) => Reply::Array((0..count).map(|_| next(items)).collect::<Result<_, _>>()?),
    })
}

/// One item of a packed reply (`execute-packed`), borrowed from its buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Item<'a> {
    Nil,
    Status(&'a [u8]),
    Int(i64),
    Bulk(&'a [u8]),
    /// The next `n` items are its elements.
    Array(u32),
    ServerError(&'a [u8]),
}

/// A packed reply, read item by item in pre-order, nothing copied: what a connector
/// that reads big replies walks instead of building a [`Reply`].
#[derive(Debug, Clone)]
pub struct Items<'a> {
    data: &'a [u8],
}

impl<'a> Items<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Items { data }
    }

    /// Whether every item was read.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The next item; an error if the buffer ends inside one or holds an unknown tag.
    pub fn next_item(&mut self) -> Result<Item<'a>, Error> {
        let (&tag, rest) = self.data.split_first().ok_or_else(|| Error::msg("a packed reply that ends early"))?;
        self.data = rest;
        Ok(match tag {
            0 => Item::Nil,
            2 => Item::Int(i64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes"))),
            4 => Item::Array(self.length()?),
            1 | 3 | 5 => {
                let length = self.length()? as usize;
                let bytes = self.take(length)?;
                match tag {
                    1 => Item::Status(bytes),
                    3 => Item::Bulk(bytes),
                    _ => Item::ServerError(bytes),
                }
            }
            other => return Err(Error::msg(format!("a packed reply with the unknown tag {other}"))),
        })
    }

    fn length(&mut self) -> Result<u32, Error> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes")))
    }

    fn take(&mut self, count: usize) -> Result<&'a [u8], Error> {
        if self.data.len() < count {
            return Err(Error::msg("a packed reply that ends inside an item"));
        }
        let (taken, rest) = self.data.split_at(count);
        self.data = rest;
        Ok(taken)
    }
}

/// Send one command on `connection`; its reply packed (read it with [`Items`]).
pub fn execute_packed(connection: &Connection, command: Vec<Vec<u8>>) -> Result<Vec<u8>, Error> {
    connection.execute_packed(&command).map_err(|e| Error::msg(describe(&e)))
}

/// A command: its name, then its arguments, each as bytes.
pub fn command<I, A>(args: I) -> Vec<Vec<u8>>
where
    I: IntoIterator<Item = A>,
    A: AsRef<[u8]>,
{
    args.into_iter().map(|arg| arg.as_ref().to_vec()).collect()
}

/// Send one command on `connection`; its reply.
pub fn execute(connection: &Connection, command: Vec<Vec<u8>>) -> Result<Reply, Error> {
    let items = connection.execute(&command).map_err(|e| Error::msg(describe(&e)))?;
    Reply::from_items(items)
}

/// Send `commands` at once (with `atomic`, as one transaction); their replies.
pub fn pipeline(connection: &Connection, commands: &[Vec<Vec<u8>>], atomic: bool) -> Result<Vec<Reply>, Error> {
    let replies = connection.pipeline(commands, atomic).map_err(|e| Error::msg(describe(&e)))?;
    replies.into_iter().map(Reply::from_items).collect()
}

/// The import's error, for people.
pub fn describe(error: &RedisError) -> String {
    match error {
        RedisError::NotGranted(detail) => format!("not granted ({detail})"),
        RedisError::Connection(detail) => format!("no connection ({detail})"),
        RedisError::TimedOut(detail) => format!("timed out ({detail})"),
        RedisError::TooLarge(detail) => format!("too large ({detail})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flat_reply_is_rebuilt_into_its_tree_and_a_malformed_one_is_said() {
        let items = vec![
            ReplyItem::Array(2),
            ReplyItem::Bulk(b"1-1".to_vec()),
            ReplyItem::Array(2),
            ReplyItem::Bulk(b"k".to_vec()),
            ReplyItem::Int(7),
        ];
        let tree = Reply::from_items(items).unwrap();
        assert_eq!(
            tree,
            Reply::Array(vec![
                Reply::Bulk(b"1-1".to_vec()),
                Reply::Array(vec![Reply::Bulk(b"k".to_vec()), Reply::Int(7)])
            ])
        );
        assert_eq!(tree.as_array().unwrap()[0].as_bytes(), Some(&b"1-1"[..]));
        assert!(Reply::from_items(vec![ReplyItem::Array(2), ReplyItem::Nil]).is_err());
        assert!(Reply::from_items(vec![ReplyItem::Nil, ReplyItem::Nil]).is_err());
        assert_eq!(Reply::ServerError("ERR x".into()).server_error(), Some("ERR x"));
        assert_eq!(command(["XADD", "s"]), vec![b"XADD".to_vec(), b"s".to_vec()]);
    }

    #[test]
    fn a_packed_reply_is_read_item_by_item_and_a_truncated_one_is_said() {
        let mut data = vec![4, 2, 0, 0, 0, 3, 2, 0, 0, 0, b'o', b'k', 2];
        data.extend_from_slice(&(-7i64).to_le_bytes());
        data.extend_from_slice(&[0, 5, 1, 0, 0, 0, b'E', 1, 2, 0, 0, 0, b'O', b'K']);
        let mut items = Items::new(&data);
        let mut read = Vec::new();
        while !items.is_empty() {
            read.push(items.next_item().unwrap());
        }
        assert_eq!(
            read,
            [Item::Array(2), Item::Bulk(b"ok"), Item::Int(-7), Item::Nil, Item::ServerError(b"E"), Item::Status(b"OK")]
        );
        assert!(Items::new(&[3, 9, 0, 0, 0, b'x']).next_item().is_err(), "shorter than its length");
        assert!(Items::new(&[9]).next_item().is_err(), "an unknown tag");
        assert!(Items::new(&[]).next_item().is_err());
    }
}
