//! The command each message becomes, by mode. A stream entry goes through a script
//! that adds it only if its id's marker is new (`SET ... NX` with the dedupe window as
//! its expiry, then `XADD`, atomically), so a batch written again after a crash adds
//! nothing it already added; a key or hash is set to the message's value, which a
//! replay sets again to the same.

use ferry_guest::{SinkBatch, StoredMessage};
use serde_json::Value;

use crate::config::{Config, Mode};

/// KEYS[1] the stream, KEYS[2] the id's marker; ARGV[1] the window (ms), ARGV[2]
/// `MAXLEN ~` or "", then the entry's fields and values. The entry id, or nil when
/// the marker was there (written before).
const ADD_ONCE: &str = "if redis.call('SET', KEYS[2], '1', 'NX', 'PX', ARGV[1]) then \
     if ARGV[2] == '' then return redis.call('XADD', KEYS[1], '*', unpack(ARGV, 3)) end \
     return redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*', unpack(ARGV, 3)) \
     end return false";

/// The command for `message` of `batch`, or why it can never be written.
pub fn for_message(config: &Config, batch: &SinkBatch, message: &StoredMessage) -> Result<Vec<Vec<u8>>, String> {
    let payload = match (&config.mode, config.key.reads_payload()) {
        (Mode::Hash { .. }, _) | (_, true) => Some(
            serde_json::from_slice::<Value>(&message.payload).map_err(|e| format!("its payload is not JSON: {e}"))?,
        ),
        _ => None,
    };
    let key = config.key.render(batch, message, payload.as_ref())?;
    let text = |s: &str| s.as_bytes().to_vec();
    Ok(match &config.mode {
        Mode::Stream { max_len, dedupe_window_ms } => {
            // A message without an id (0) is known by where it is stored.
            let marker = if message.id == 0 {
                format!("{key}:ferry-written:p{}-o{}", batch.partition, message.offset)
            } else {
                format!("{key}:ferry-written:{}", message.id)
            };
            let mut command = vec![text("EVAL"), text(ADD_ONCE), text("2"), text(&key), text(&marker)];
            command.push(dedupe_window_ms.to_string().into_bytes());
            command.push(max_len.map(|n| n.to_string()).unwrap_or_default().into_bytes());
            for (field, value) in [
                ("id", message.id.to_string()),
                ("stream", batch.stream.clone()),
                ("topic", batch.topic.clone()),
                ("partition", batch.partition.to_string()),
                ("offset", message.offset.to_string()),
            ] {
                command.push(text(field));
                command.push(value.into_bytes());
            }
            command.push(text("payload"));
            command.push(message.payload.clone());
            command
        }
        Mode::Set { ttl_ms } => {
            let mut command = vec![text("SET"), text(&key), message.payload.clone()];
            if let Some(ttl) = ttl_ms {
                command.extend([text("PX"), ttl.to_string().into_bytes()]);
            }
            command
        }
        Mode::Hash { ttl_ms } => {
            let Some(Value::Object(fields)) = payload else {
                return Err("its payload is not a JSON object, whose fields a hash takes".into());
            };
            if fields.is_empty() {
                return Err("its payload is an empty object: a hash needs a field".into());
            }
            // HSET, and the expiry, in one script: a key never stays without its TTL.
            let mut command = match ttl_ms {
                Some(ttl) => vec![
                    text("EVAL"),
                    text("redis.call('HSET', KEYS[1], unpack(ARGV, 2)) return redis.call('PEXPIRE', KEYS[1], ARGV[1])"),
                    text("1"),
                    text(&key),
                    ttl.to_string().into_bytes(),
                ],
                None => vec![text("HSET"), text(&key)],
            };
            for (field, value) in fields {
                command.push(field.into_bytes());
                command.push(match value {
                    Value::String(text) => text.into_bytes(),
                    other => other.to_string().into_bytes(),
                });
            }
            command
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::template::Template;

    fn batch(payload: &str) -> SinkBatch {
        let message = StoredMessage {
            offset: 3,
            id: 99,
            timestamp: 0,
            origin_timestamp: None,
            headers: Vec::new(),
            payload: payload.as_bytes().to_vec(),
        };
        SinkBatch { stream: "app".into(), topic: "users".into(), partition: 1, messages: vec![message] }
    }

    fn config(mode: Mode, key: &str) -> Config {
        Config { connection: "c".into(), key: Template::parse(key).unwrap(), mode }
    }

    fn words(command: &[Vec<u8>]) -> Vec<String> {
        command.iter().map(|arg| String::from_utf8_lossy(arg).into_owned()).collect()
    }

    #[test]
    fn a_stream_entry_is_added_once_by_its_ids_marker() {
        let b = batch("{\"a\":1}");
        let stream = config(Mode::Stream { max_len: Some(1000), dedupe_window_ms: 60_000 }, "{stream}:{topic}");
        let command = words(&for_message(&stream, &b, &b.messages[0]).unwrap());
        assert_eq!(command[0], "EVAL");
        assert_eq!(command[2..7], ["2", "app:users", "app:users:ferry-written:99", "60000", "1000"]);
        assert_eq!(
            command[7..],
            ["id", "99", "stream", "app", "topic", "users", "partition", "1", "offset", "3", "payload", "{\"a\":1}"]
        );
    }

    #[test]
    fn a_key_or_hash_is_set_to_the_message_and_what_cannot_be_is_said() {
        let b = batch("{\"name\":\"ada\",\"age\":36}");
        let set = config(Mode::Set { ttl_ms: Some(5000) }, "user:{payload.name}");
        assert_eq!(
            words(&for_message(&set, &b, &b.messages[0]).unwrap()),
            ["SET", "user:ada", "{\"name\":\"ada\",\"age\":36}", "PX", "5000"]
        );
        let hash = config(Mode::Hash { ttl_ms: None }, "user:{id}");
        assert_eq!(
            words(&for_message(&hash, &b, &b.messages[0]).unwrap()),
            ["HSET", "user:99", "name", "ada", "age", "36"]
        );
        let not_json = batch("hello");
        assert!(for_message(&hash, &not_json, &not_json.messages[0]).unwrap_err().contains("not JSON"));
        let list = batch("[1]");
        assert!(for_message(&hash, &list, &list.messages[0]).unwrap_err().contains("not a JSON object"));
    }
}
