//! The `redis` interface of the contract, served to one instance through its
//! [`RedisView`]: the servers its connector was granted, its table of handles, its
//! log and the time left of the call.
//!
//! Every command runs within what is left of the guest's call (less a margin, so that
//! the guest can still answer): one that would outlive it comes back as `timed-out`
//! and its connection is dropped (its reply may still be on the way). A command the
//! server refuses is a reply (`server-error`), not a failure: the guest decides. Every
//! failure is a value for the guest and a warning in the log under the connector's
//! key.

use std::time::Duration;

use ferry_contract::wit::redis::{self as contract, Connection, Error, Host, HostConnection, ReplyItem};
use ::redis::aio::{ConnectionLike, MultiplexedConnection};
use ::redis::{AsyncConnectionConfig, ErrorKind, RedisError, ServerError, Value};
use wasmtime::component::{HasData, Linker, Resource, ResourceTable};

use super::RedisState;
use super::servers::Served;
use crate::GuestData;
use crate::deadline::Deadline;
use crate::handles::hold;
use crate::logging::GuestLog;

/// A guest's open connection: connected when first used, and again after it broke
/// or timed out. Kept in the instance's table; the guest holds a handle to it.
struct RedisConnection {
    name: String,
    served: Served,
    connection: Option<MultiplexedConnection>,
}

/// What a Redis call sees of the store.
pub struct RedisView<'a> {
    state: &'a mut RedisState,
    table: &'a mut ResourceTable,
    log: &'a GuestLog,
    /// What is left of the guest's call.
    remaining: Duration,
}

struct RedisHost;

impl HasData for RedisHost {
    type Data<'a> = RedisView<'a>;
}

pub(super) fn link<T: GuestData>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    contract::add_to_linker::<T, RedisHost>(linker, |data| {
        let guest = data.guest();
        let states = guest.states;
        RedisView { state: &mut states.redis, table: guest.table, log: &states.logging, remaining: guest.remaining }
    })
}

/// The connection behind a guest's handle (the contract's `Connection` is bindgen's
/// placeholder; the table holds a `RedisConnection` under the handle's number).
fn ours(handle: &Resource<Connection>) -> Resource<RedisConnection> {
    Resource::new_borrow(handle.rep())
}

impl Host for RedisView<'_> {}

impl HostConnection for RedisView<'_> {
    async fn open(&mut self, name: String) -> Result<Resource<Connection>, Error> {
        let Some(served) = self.state.servers.get(&name) else {
            let problem = format!("the server `{name}` is not in this connector's grants.redis");
            self.log.host_warning(&format!("redis: {problem}"));
            return Err(Error::NotGranted(problem));
        };
        let connection = RedisConnection { name, served: served.clone(), connection: None };
        hold(self.table, connection).map_err(|problem| {
            self.log.host_warning(&format!("redis: {problem}"));
            Error::Connection(problem)
        })
    }

    async fn execute(&mut self, this: Resource<Connection>, command: Vec<Vec<u8>>) -> Result<Vec<ReplyItem>, Error> {
        let mut replies = self.pipeline(this, vec![command], false).await?;
        Ok(replies.pop().unwrap_or_default())
    }

    async fn execute_packed(&mut self, this: Resource<Connection>, command: Vec<Vec<u8>>) -> Result<Vec<u8>, Error> {
        let mut replies = self.send(&this, vec![command], false).await?;
        let mut packed = Vec::new();
        pack(replies.pop().unwrap_or(Ok(Value::Nil)), &mut packed);
        self.bounded(&this, packed.len() as u64)?;
        Ok(packed)
    }

    async fn pipeline(
        &mut self,
        this: Resource<Connection>,
        commands: Vec<Vec<Vec<u8>>>,
        atomic: bool,
    ) -> Result<Vec<Vec<ReplyItem>>, Error> {
        let answers = self.send(&this, commands, atomic).await?;
        let mut size = 0u64;
        let mut replies = Vec::with_capacity(answers.len());
        for answer in answers {
            let mut items = Vec::new();
            match answer {
                Ok(value) => flatten(value, &mut items, &mut size),
                Err(refusal) => items.push(ReplyItem::ServerError(refusal)),
            }
            self.bounded(&this, size)?;
            replies.push(items);
        }
        Ok(replies)
    }

    async fn drop(&mut self, this: Resource<Connection>) -> wasmtime::Result<()> {
        self.table.delete(Resource::<RedisConnection>::new_own(this.rep()))?;
        Ok(())
    }
}

impl RedisView<'_> {
    /// Send `commands` on `this` (with `atomic`, as one transaction) within what is
    /// left of the call: one answer each, the reply or the server's refusal in its
    /// words. A failure is logged, and the connection is not reused.
    async fn send(
        &mut self,
        this: &Resource<Connection>,
        commands: Vec<Vec<Vec<u8>>>,
        atomic: bool,
    ) -> Result<Vec<Answer>, Error> {
        if let Some(index) = commands.iter().position(Vec::is_empty) {
            let problem = format!("command {index} is empty: give its name first");
            self.log.host_warning(&format!("redis: {problem}"));
            return Err(Error::Connection(problem));
        }
        if commands.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipeline = ::redis::pipe();
        for command in &commands {
            let mut cmd = ::redis::Cmd::new();
            for arg in command {
                cmd.arg(arg.as_slice());
            }
            pipeline.add_command(cmd);
        }
        if atomic {
            pipeline.atomic();
        }
        let count = commands.len();
        let connection = self.table.get_mut(&ours(this)).map_err(|e| Error::Connection(e.to_string()))?;
        let what = format!("the {count} command(s)");
        let outcome = Deadline::of_call(self.remaining).run(&what, async {
            if connection.connection.is_none() {
                connection.connection = Some(connect(&connection.served).await?);
            }
            let live = connection.connection.as_mut().expect("connected just now");
            let (offset, replies) = if atomic { (count + 1, 1) } else { (0, count) };
            live.req_packed_commands(&pipeline, offset, replies).await.map_err(|e| (e, false))
        })
        .await;
        let result = match outcome {
            Err(late) => Err(Error::TimedOut(late)),
            Ok(Err((error, connecting))) => match server_errors(&error, count) {
                Some(refusals) if !connecting => Ok(refusals),
                _ => Err(Error::Connection(describe(&error, connecting))),
            },
            Ok(Ok(values)) if atomic => transaction_replies(values, count),
            Ok(Ok(values)) => Ok(values.into_iter().map(Ok).collect()),
        };
        if let Err(error) = &result {
            // Broken or timed out (a late reply would be read as the next one's):
            // start afresh on the next use.
            connection.connection = None;
            self.log.host_warning(&format!("redis `{}`: {}", connection.name, describe_error(error)));
        }
        result
    }

    /// Refuse a reply of `size` bytes on `this` if it is more than the connector may
    /// take.
    fn bounded(&self, this: &Resource<Connection>, size: u64) -> Result<(), Error> {
        let max = self.state.max_result_bytes;
        if size <= max {
            return Ok(());
        }
        let error = Error::TooLarge(format!(
            "the reply is more than {max} bytes, the most this connector may take (limits.max_batch_bytes)"
        ));
        let name = self.table.get(&ours(this)).map_or("?", |c| c.name.as_str());
        self.log.host_warning(&format!("redis `{name}`: {}", describe_error(&error)));
        Err(error)
    }
}

/// A connection to `served`, within its `connect_timeout`; the error says why not
/// (`true`: while connecting).
async fn connect(served: &Served) -> Result<MultiplexedConnection, (RedisError, bool)> {
    // No response timeout of the crate's (500 ms by default): each call is bounded
    // by what is left of the guest's call instead.
    let config =
        AsyncConnectionConfig::new().set_connection_timeout(Some(served.connect_timeout)).set_response_timeout(None);
    served.client.get_multiplexed_async_connection_with_config(&config).await.map_err(|e| (e, true))
}

/// A command's reply, or the server's refusal of it in its words.
type Answer = Result<Value, String>;

/// The replies of a transaction's commands: what `EXEC` answered.
fn transaction_replies(values: Vec<Value>, count: usize) -> Result<Vec<Answer>, Error> {
    match values.into_iter().next() {
        Some(Value::Array(replies)) => Ok(replies.into_iter().map(Ok).collect()),
        // EXEC refused (a command was refused before anything ran): each command's
        // reply is that refusal.
        Some(Value::ServerError(error)) => Ok(vec![Err(server_words(&error)); count]),
        other => Err(Error::Connection(format!("EXEC answered {other:?}, not the replies of the transaction"))),
    }
}

/// `value` as reply items, in pre-order, counting their bytes into `size`.
fn flatten(value: Value, items: &mut Vec<ReplyItem>, size: &mut u64) {
    *size += 8;
    match value {
        Value::Nil => items.push(ReplyItem::Nil),
        Value::Int(n) => items.push(ReplyItem::Int(n)),
        Value::Boolean(b) => items.push(ReplyItem::Int(i64::from(b))),
        Value::BulkString(bytes) => {
            *size += bytes.len() as u64;
            items.push(ReplyItem::Bulk(bytes));
        }
        Value::SimpleString(text) => {
            *size += text.len() as u64;
            items.push(ReplyItem::Status(text));
        }
        Value::Okay => items.push(ReplyItem::Status("OK".into())),
        Value::Double(x) => items.push(ReplyItem::Status(x.to_string())),
        Value::VerbatimString { text, .. } => {
            *size += text.len() as u64;
            items.push(ReplyItem::Bulk(text.into_bytes()));
        }
        // Its decimal digits (the crate keeps them as bytes without `num-bigint`).
        Value::BigNumber(digits) => items.push(ReplyItem::Status(String::from_utf8_lossy(&digits).into_owned())),
        Value::Array(elements) | Value::Set(elements) | Value::Push { data: elements, .. } => {
            items.push(ReplyItem::Array(elements.len() as u32));
            for element in elements {
                flatten(element, items, size);
            }
        }
        Value::Map(pairs) => {
            items.push(ReplyItem::Array(2 * pairs.len() as u32));
            for (key, value) in pairs {
                flatten(key, items, size);
                flatten(value, items, size);
            }
        }
        Value::Attribute { data, .. } => flatten(*data, items, size),
        Value::ServerError(error) => {
            let text = server_words(&error);
            *size += text.len() as u64;
            items.push(ReplyItem::ServerError(text));
        }
        // A kind of value added after this was written: said, not dropped.
        other => items.push(ReplyItem::ServerError(format!("a reply ferry cannot pass on: {other:?}"))),
    }
}

/// `answer` packed as `execute-packed` returns it (see `wit/redis.wit`): the same
/// items as [`flatten`]'s, each a tag byte and its bytes.
fn pack(answer: Answer, out: &mut Vec<u8>) {
    fn bytes(out: &mut Vec<u8>, tag: u8, data: &[u8]) {
        out.push(tag);
        out.extend_from_slice(&(data.len() as u32).to_le_bytes());
        out.extend_from_slice(data);
    }
    fn value(out: &mut Vec<u8>, v: Value) {
        match v {
            Value::Nil => out.push(0),
            Value::SimpleString(text) => bytes(out, 1, text.as_bytes()),
            Value::Okay => bytes(out, 1, b"OK"),
            Value::Double(x) => bytes(out, 1, x.to_string().as_bytes()),
            Value::BigNumber(digits) => bytes(out, 1, &digits),
            Value::Int(n) => {
                out.push(2);
                out.extend_from_slice(&n.to_le_bytes());
            }
            Value::Boolean(b) => {
                out.push(2);
                out.extend_from_slice(&i64::from(b).to_le_bytes());
            }
            Value::BulkString(data) => bytes(out, 3, &data),
            Value::VerbatimString { text, .. } => bytes(out, 3, text.as_bytes()),
            Value::Array(elements) | Value::Set(elements) | Value::Push { data: elements, .. } => {
                out.push(4);
                out.extend_from_slice(&(elements.len() as u32).to_le_bytes());
                elements.into_iter().for_each(|element| value(out, element));
            }
            Value::Map(pairs) => {
                out.push(4);
                out.extend_from_slice(&(2 * pairs.len() as u32).to_le_bytes());
                for (key, item) in pairs {
                    value(out, key);
                    value(out, item);
                }
            }
            Value::Attribute { data, .. } => value(out, *data),
            Value::ServerError(error) => bytes(out, 5, server_words(&error).as_bytes()),
            other => bytes(out, 5, format!("a reply ferry cannot pass on: {other:?}").as_bytes()),
        }
    }
    match answer {
        Ok(v) => value(out, v),
        Err(refusal) => bytes(out, 5, refusal.as_bytes()),
    }
}

/// A refusal in the server's own words (`WRONGTYPE Operation against a key ...`), as
/// `redis-cli` shows it and as a guest matches on it.
fn server_words(error: &ServerError) -> String {
    match error.details() {
        Some(details) => format!("{} {details}", error.code()),
        None => error.code().to_string(),
    }
}

/// A failure that is the server refusing the commands (not the connection failing):
/// each command's reply is the refusal.
fn server_errors(error: &RedisError, count: usize) -> Option<Vec<Answer>> {
    if error.is_io_error() || error.is_connection_dropped() || error.is_connection_refusal() || error.is_timeout() {
        return None;
    }
    match error.kind() {
        ErrorKind::Server(_) | ErrorKind::Extension => {
            let words = match (error.code(), error.detail()) {
                (Some(code), Some(detail)) => format!("{code} {detail}"),
                _ => error.to_string(),
            };
            Some(vec![Err(words); count])
        }
        _ => None,
    }
}

fn describe(error: &RedisError, connecting: bool) -> String {
    let doing = if connecting { "cannot connect" } else { "the connection failed" };
    match error.kind() {
        ErrorKind::AuthenticationFailed => format!("{doing}: the server refused the credentials ({error})"),
        _ => format!("{doing}: {error}"),
    }
}

fn describe_error(error: &Error) -> String {
    match error {
        Error::NotGranted(p) => format!("not granted: {p}"),
        Error::Connection(p) => p.clone(),
        Error::TimedOut(p) => format!("timed out: {p}"),
        Error::TooLarge(p) => format!("too large: {p}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nested_reply_is_flattened_and_packed_in_the_same_pre_order() {
        let entry = Value::Array(vec![
            Value::BulkString(b"1-1".to_vec()),
            Value::Array(vec![Value::BulkString(b"payload".to_vec()), Value::BulkString(b"{}".to_vec())]),
        ]);
        let reply = Value::Array(vec![entry]);
        let (mut items, mut size) = (Vec::new(), 0);
        flatten(reply.clone(), &mut items, &mut size);
        assert_eq!(
            items,
            [
                ReplyItem::Array(1),
                ReplyItem::Array(2),
                ReplyItem::Bulk(b"1-1".to_vec()),
                ReplyItem::Array(2),
                ReplyItem::Bulk(b"payload".to_vec()),
                ReplyItem::Bulk(b"{}".to_vec()),
            ]
        );
        assert_eq!(size, 6 * 8 + 3 + 7 + 2);
        let mut packed = Vec::new();
        pack(Ok(reply), &mut packed);
        let mut expected = vec![4, 1, 0, 0, 0, 4, 2, 0, 0, 0, 3, 3, 0, 0, 0];
        expected.extend_from_slice(b"1-1");
        expected.extend_from_slice(&[4, 2, 0, 0, 0, 3, 7, 0, 0, 0]);
        expected.extend_from_slice(b"payload");
        expected.extend_from_slice(&[3, 2, 0, 0, 0]);
        expected.extend_from_slice(b"{}");
        assert_eq!(packed, expected);
        let (mut refused, mut int) = (Vec::new(), Vec::new());
        pack(Err("WRONGTYPE no".into()), &mut refused);
        assert_eq!(refused, [&[5, 12, 0, 0, 0][..], b"WRONGTYPE no"].concat());
        pack(Ok(Value::Int(-2)), &mut int);
        assert_eq!(int, [&[2][..], &(-2i64).to_le_bytes()].concat());
    }

    #[test]
    fn a_transaction_refused_whole_is_each_commands_refusal() {
        let replies = transaction_replies(vec![Value::Array(vec![Value::Int(1), Value::Okay])], 2).unwrap();
        assert_eq!(replies, [Ok(Value::Int(1)), Ok(Value::Okay)]);
        assert!(transaction_replies(vec![Value::Nil], 2).is_err(), "a WATCH abort is not a reply");
    }
}
