//! `add_fields` and `update_fields`: fields set to a value written in the config or
//! computed for each record (the time it was transformed, a new UUID), where their
//! condition holds; Iggy's value kinds and conditions.

use std::time::{SystemTime, UNIX_EPOCH};

use ferry_config::transforms::{Computed, Condition, FieldValue, SetField};
use serde_json::{Map, Value};

/// Set each of `set` in `fields`, in order (a later one sees what an earlier one did).
pub(super) fn set(fields: &mut Map<String, Value>, set: &[SetField]) {
    for SetField { key, value, condition } in set {
        let present = fields.contains_key(key);
        let holds = match condition {
            Condition::Always => true,
            Condition::KeyExists => present,
            Condition::KeyNotExists => !present,
        };
        if holds {
            fields.insert(key.clone(), value_of(value));
        }
    }
}

fn value_of(value: &FieldValue) -> Value {
    match value {
        FieldValue::Static(value) => value.clone(),
        FieldValue::Computed(computed) => computed_now(*computed),
    }
}

/// A computed value, now.
fn computed_now(computed: Computed) -> Value {
    let now = SystemTime::now();
    let since_epoch = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    match computed {
        // humantime writes UTC as `Z`; Iggy's runtime writes `+00:00`.
        Computed::DateTime => {
            let text = humantime::format_rfc3339_nanos(now).to_string();
            Value::String(format!("{}+00:00", text.trim_end_matches('Z')))
        }
        Computed::TimestampNanos => Value::from(since_epoch.as_nanos() as u64),
        Computed::TimestampMicros => Value::from(since_epoch.as_micros() as u64),
        Computed::TimestampMillis => Value::from(since_epoch.as_millis() as u64),
        Computed::TimestampSeconds => Value::from(since_epoch.as_secs()),
        Computed::UuidV4 => Value::String(uuid::Uuid::new_v4().to_string()),
        Computed::UuidV7 => Value::String(uuid::Uuid::now_v7().to_string()),
    }
}
