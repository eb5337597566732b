//! Transforms: each record changed (or dropped) on its way, as a connector's
//! config lists them: Iggy's field transforms (`add_fields`, `delete_fields`,
//! `update_fields`, `filter_fields`, `unwrap_envelope`; the config is
//! `ferry_config::transforms`) and transform components (`wit/transform.wit`).
//!
//! A [`Chain`] runs a connector's transforms, in the order written, on one batch: a
//! source's after the guest produced it and before it is delivered, so that what is
//! delivered, and what the cursor commits to, is what was transformed; a sink's
//! after it is read and before the guest gets it. Ids (and a sink's offsets) stay
//! with their records; a record a component drops is settled like a delivered one
//! and counted (`messages_filtered`).
//!
//! * [`Pipeline`] (here): consecutive field transforms on one record: a record that
//!   is a JSON object is parsed, changed and written again as compact JSON; any
//!   other record (not JSON, an array, a scalar) passes unchanged, as in Iggy;
//! * `fields.rs`: setting and removing fields, and the values a field is computed as;
//! * `filter.rs`: which fields `filter_fields` keeps;
//! * `component.rs`: a transform component's instance and call;
//! * `chain.rs`: the links in order, on a batch.

mod chain;
pub mod codec;
mod component;
mod convert;
mod fields;
mod filter;

use ferry_config::transforms::Transform;
use serde_json::Value;

pub use chain::{Chain, Link, Schemas, TransformError, Transformed};
pub use component::ComponentLink;

/// Consecutive field transforms, ready to run.
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
    /// The pipeline of the field transforms `transforms`; none when there are none.
    ///
    /// # Panics
    /// On a component among them: a [`Chain`] hands those to a link of their own.
    pub fn new(transforms: &[Transform]) -> Option<Pipeline> {
        if transforms.is_empty() {
            return None;
        }
        let steps = transforms
            .iter()
            .map(|transform| match transform {
                Transform::AddFields(fields) | Transform::UpdateFields(fields) => Step::Set(fields.clone()),
                Transform::DeleteFields(names) => Step::Delete(names.clone()),
                Transform::FilterFields(filter) => Step::Filter(filter.clone()),
                Transform::UnwrapEnvelope(field) => Step::Unwrap(field.clone()),
                Transform::Component(component) => panic!("component `{}` in a field pipeline", component.name),
                Transform::Convert(convert) => panic!("`{}` in a field pipeline", convert.name),
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
