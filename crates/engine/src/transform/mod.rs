//! Transforms: each record's JSON fields changed on the way, as Iggy's runtime
//! changes them (`add_fields`, `delete_fields`, `update_fields`, `filter_fields`,
//! `unwrap_envelope`; the config is `ferry_config::transforms`).
//!
//! A [`Pipeline`] runs a connector's transforms, in the order written, on one
//! record: a record that is a JSON object is parsed, changed and written again as
//! compact JSON; any other record (not JSON, an array, a scalar) passes unchanged,
//! as in Iggy. No transform drops a record, so a batch keeps its records, their ids
//! and their offsets, and the loops need not know: a source's batches pass through a
//! [`TransformedTarget`] on their way to delivery, a sink's through a
//! [`TransformedInput`] on their way to the guest.
//!
//! * `fields.rs`: setting and removing fields, and the values a field is computed as;
//! * `filter.rs`: which fields `filter_fields` keeps;
//! * `target.rs`, `input.rs`: where the pipeline sits for a source and for a sink.

mod fields;
mod filter;
mod input;
mod target;

use ferry_config::transforms::{Transform, Transforms};
use serde_json::Value;

pub use input::TransformedInput;
pub use target::TransformedTarget;

/// A connector's transforms, ready to run.
#[derive(Debug)]
pub struct Pipeline {
    steps: Vec<Step>,
}

#[derive(Debug)]
enum Step {
    /// `add_fields` and `update_fields` (whose fields carry their conditions).
    Set(Vec<ferry_config::transforms::SetField>),
    Delete(Vec<String>),
    Filter(ferry_config::transforms::FilterFields),
    Unwrap(String),
}

impl Pipeline {
    /// The pipeline of `transforms`; none when there are none.
    pub fn new(transforms: &Transforms) -> Option<Pipeline> {
        if transforms.is_empty() {
            return None;
        }
        let steps = transforms
            .0
            .iter()
            .map(|transform| match transform {
                Transform::AddFields(fields) | Transform::UpdateFields(fields) => Step::Set(fields.clone()),
                Transform::DeleteFields(names) => Step::Delete(names.clone()),
                Transform::FilterFields(filter) => Step::Filter(filter.clone()),
                Transform::UnwrapEnvelope(field) => Step::Unwrap(field.clone()),
            })
            .collect();
        Some(Pipeline { steps })
    }

    /// `payload` after the transforms, or `None` when it passes unchanged (it is not
    /// a JSON object).
    pub fn apply(&self, payload: &[u8]) -> Option<Vec<u8>> {
        let Ok(mut record @ Value::Object(_)) = serde_json::from_slice::<Value>(payload) else {
            return None;
        };
        for step in &self.steps {
            // `unwrap_envelope` may leave something else: the field steps after it
            // then leave that as it is.
            if let Step::Unwrap(field) = step {
                if let Value::Object(fields) = &mut record
                    && let Some(inner) = fields.remove(field)
                {
                    record = inner;
                }
                continue;
            }
            let Value::Object(fields) = &mut record else { continue };
            match step {
                Step::Set(set) => fields::set(fields, set),
                // `shift_remove` keeps the other fields in their order.
                Step::Delete(names) => names.iter().for_each(|name| drop(fields.shift_remove(name))),
                Step::Filter(filter) => filter::apply(filter, fields),
                Step::Unwrap(_) => unreachable!("handled above"),
            }
        }
        Some(serde_json::to_vec(&record).expect("a JSON value serializes"))
    }
}

#[cfg(test)]
mod tests;
