//! A name made per batch from where the batch came from: text with `{stream}`,
//! `{topic}` and `{partition}` filled in (a NATS subject, an MQTT topic). Each sink
//! checks the result against its own target's rules.

use crate::SinkBatch;

/// The places a template may name.
pub const PLACES: [&str; 3] = ["{stream}", "{topic}", "{partition}"];

/// A template of [`PLACES`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchTemplate(String);

impl BatchTemplate {
    /// `text`, refused if it has a `{...}` that is none of the places.
    pub fn parse(text: &str) -> Result<BatchTemplate, String> {
        let template = BatchTemplate(text.to_string());
        let sample = template.sample();
        if sample.contains('{') || sample.contains('}') {
            return Err(format!("{text:?} has a {{...}} that is none of {}", PLACES.join(", ")));
        }
        Ok(template)
    }

    /// The template with every place filled in with `x`: what a check of the fixed
    /// text looks at.
    pub fn sample(&self) -> String {
        self.fill("x", "x", "x")
    }

    /// The name for `batch`.
    pub fn render(&self, batch: &SinkBatch) -> String {
        self.fill(&batch.stream, &batch.topic, &batch.partition.to_string())
    }

    fn fill(&self, stream: &str, topic: &str, partition: &str) -> String {
        self.0.replace(PLACES[0], stream).replace(PLACES[1], topic).replace(PLACES[2], partition)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_are_filled_per_batch_and_an_unknown_one_is_refused() {
        let template = BatchTemplate::parse("iggy/{stream}/{topic}/{partition}").unwrap();
        let batch = SinkBatch { stream: "app".into(), topic: "orders".into(), partition: 2, messages: Vec::new() };
        assert_eq!(template.render(&batch), "iggy/app/orders/2");
        assert_eq!(template.sample(), "iggy/x/x/x");
        let refused = BatchTemplate::parse("a/{nope}").unwrap_err();
        assert!(refused.contains("{nope}") && refused.contains("{partition}"), "{refused}");
    }
}
