//! The topic template: text with `{stream}`, `{topic}` and `{partition}` filled in per
//! batch, checked to be a Kafka topic name (1 to 249 ASCII letters, digits, `.`, `_`
//! and `-`).

use ferry_guest::{BatchTemplate, SinkBatch};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topic(BatchTemplate);

impl Topic {
    pub fn parse(text: &str) -> Result<Topic, String> {
        let template = BatchTemplate::parse(text)?;
        check(&template.sample()).map_err(|p| format!("{text:?} {p}"))?;
        Ok(Topic(template))
    }

    /// The topic of `batch`'s messages; an error says why it is no topic name.
    pub fn render(&self, batch: &SinkBatch) -> Result<String, String> {
        let topic = self.0.render(batch);
        check(&topic).map_err(|p| format!("the topic {topic:?} {p}"))?;
        Ok(topic)
    }
}

fn check(topic: &str) -> Result<(), String> {
    if topic.is_empty() || topic.len() > 249 {
        return Err("is not 1 to 249 characters long".into());
    }
    if let Some(bad) = topic.chars().find(|&c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))) {
        return Err(format!("holds {bad:?}: a Kafka topic name has only ASCII letters, digits, '.', '_' and '-'"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(stream: &str) -> SinkBatch {
        SinkBatch { stream: stream.into(), topic: "orders".into(), partition: 2, messages: Vec::new() }
    }

    #[test]
    fn a_topic_is_filled_in_per_batch_and_what_is_no_topic_is_said() {
        let topic = Topic::parse("iggy.{stream}.{topic}-{partition}").unwrap();
        assert_eq!(topic.render(&batch("app")).unwrap(), "iggy.app.orders-2");
        assert!(topic.render(&batch("my app")).unwrap_err().contains("holds ' '"));
        assert!(topic.render(&batch(&"x".repeat(250))).unwrap_err().contains("249"));
        for bad in ["", "a b", "a/b", "{nope}"] {
            assert!(Topic::parse(bad).is_err(), "{bad}");
        }
    }
}
