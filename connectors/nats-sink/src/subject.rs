//! The subject template: text with `{stream}`, `{topic}` and `{partition}` filled in
//! per batch. NATS subjects are tokens separated by dots; a token may not be empty nor
//! hold a space or a wildcard, which a filled-in name is checked for.

use ferry_guest::{BatchTemplate, SinkBatch};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subject(BatchTemplate);

impl Subject {
    pub fn parse(text: &str) -> Result<Subject, String> {
        let template = BatchTemplate::parse(text)?;
        check(&template.sample()).map_err(|p| format!("{text:?} {p}"))?;
        Ok(Subject(template))
    }

    /// The subject of `batch`'s messages; an error says why it is no subject.
    pub fn render(&self, batch: &SinkBatch) -> Result<String, String> {
        let subject = self.0.render(batch);
        check(&subject).map_err(|p| format!("the subject {subject:?} {p}"))?;
        Ok(subject)
    }
}

fn check(subject: &str) -> Result<(), String> {
    if subject.split('.').any(|token| token.is_empty()) {
        return Err("has an empty token (two dots in a row, or one at an end)".into());
    }
    if subject.chars().any(|c| c.is_whitespace() || c == '*' || c == '>') {
        return Err("holds a space or a wildcard (* or >), which a published subject cannot".into());
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
    fn a_subject_is_filled_in_per_batch_and_what_is_no_subject_is_said() {
        let subject = Subject::parse("iggy.{stream}.{topic}.{partition}").unwrap();
        assert_eq!(subject.render(&batch("app")).unwrap(), "iggy.app.orders.2");
        assert!(subject.render(&batch("my app")).unwrap_err().contains("space"));
        assert!(subject.render(&batch("")).unwrap_err().contains("empty token"));
        for bad in ["", "a..b", "a.*", "events.>", "{nope}", "a b"] {
            assert!(Subject::parse(bad).is_err(), "{bad}");
        }
    }
}
