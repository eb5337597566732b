//! A key template: text with `{stream}`, `{topic}`, `{partition}`, `{offset}`, `{id}`
//! and `{payload.FIELD}` (a top-level field of the JSON payload) filled in per message.

use ferry_guest::{SinkBatch, StoredMessage};
use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template(Vec<Part>);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    Stream,
    Topic,
    Partition,
    Offset,
    Id,
    Field(String),
}

impl Template {
    pub fn parse(text: &str) -> Result<Template, String> {
        if text.is_empty() {
            return Err("is empty".into());
        }
        let mut parts = Vec::new();
        let mut rest = text;
        while let Some(open) = rest.find('{') {
            if open > 0 {
                parts.push(Part::Text(rest[..open].to_string()));
            }
            let close = rest[open..].find('}').ok_or_else(|| format!("{text:?} has a {{ that is not closed"))?;
            let name = &rest[open + 1..open + close];
            parts.push(match name {
                "stream" => Part::Stream,
                "topic" => Part::Topic,
                "partition" => Part::Partition,
                "offset" => Part::Offset,
                "id" => Part::Id,
                _ => match name.strip_prefix("payload.") {
                    Some(field) if !field.is_empty() => Part::Field(field.to_string()),
                    _ => {
                        return Err(format!(
                            "{{{name}}} is none of {{stream}}, {{topic}}, {{partition}}, {{offset}}, {{id}} and \
                             {{payload.FIELD}}"
                        ));
                    }
                },
            });
            rest = &rest[open + close + 1..];
        }
        if !rest.is_empty() {
            parts.push(Part::Text(rest.to_string()));
        }
        Ok(Template(parts))
    }

    /// Whether the key is read from the payload (which must then be a JSON object).
    pub fn reads_payload(&self) -> bool {
        self.0.iter().any(|part| matches!(part, Part::Field(_)))
    }

    /// The key of `message` of `batch`; `payload` is its payload parsed, when the
    /// template reads it. An error says why the message has no key.
    pub fn render(
        &self,
        batch: &SinkBatch,
        message: &StoredMessage,
        payload: Option<&Value>,
    ) -> Result<String, String> {
        let mut key = String::new();
        for part in &self.0 {
            match part {
                Part::Text(text) => key.push_str(text),
                Part::Stream => key.push_str(&batch.stream),
                Part::Topic => key.push_str(&batch.topic),
                Part::Partition => key.push_str(&batch.partition.to_string()),
                Part::Offset => key.push_str(&message.offset.to_string()),
                Part::Id => key.push_str(&message.id.to_string()),
                Part::Field(field) => match payload.and_then(|p| p.get(field)) {
                    Some(Value::String(text)) => key.push_str(text),
                    Some(value @ (Value::Number(_) | Value::Bool(_))) => key.push_str(&value.to_string()),
                    Some(other) => {
                        return Err(format!("its payload field {field:?} is {other}, not a string or number"));
                    }
                    None => return Err(format!("its payload has no field {field:?} for the key")),
                },
            }
        }
        Ok(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn message() -> (SinkBatch, StoredMessage) {
        let message = StoredMessage {
            offset: 41,
            id: 7,
            timestamp: 0,
            origin_timestamp: None,
            headers: Vec::new(),
            payload: b"{}".to_vec(),
        };
        let batch = SinkBatch { stream: "app".into(), topic: "users".into(), partition: 2, messages: Vec::new() };
        (batch, message)
    }

    #[test]
    fn a_key_is_filled_in_from_the_message_and_its_payload() {
        let (batch, message) = message();
        let all = Template::parse("{stream}/{topic}/{partition}/{offset}/{id}").unwrap();
        assert_eq!(all.render(&batch, &message, None).unwrap(), "app/users/2/41/7");
        let user = Template::parse("user:{payload.user_id}").unwrap();
        assert!(user.reads_payload() && !all.reads_payload());
        assert_eq!(user.render(&batch, &message, Some(&json!({"user_id": 12}))).unwrap(), "user:12");
        assert!(user.render(&batch, &message, Some(&json!({}))).unwrap_err().contains("no field \"user_id\""));
        assert!(user.render(&batch, &message, Some(&json!({"user_id": [1]}))).unwrap_err().contains("not a string"));
        for bad in ["", "{nope}", "{payload.}", "open{"] {
            assert!(Template::parse(bad).is_err(), "{bad}");
        }
    }
}
