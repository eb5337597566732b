//! What the kit found: one verdict per check, with the rule it is about and what
//! was observed, and the summary `ferry test` ends with.

use std::fmt;

/// The outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The component keeps the rule, as far as the kit can see.
    Ok,
    /// The component breaks the rule.
    Fail,
    /// The check could not be made (the component produced nothing to check), or the
    /// component did something the contract allows but that deserves a look.
    Warn,
}

impl Verdict {
    fn label(self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::Fail => "FAIL",
            Verdict::Warn => "warn",
        }
    }
}

/// One check: what was checked, under which rule of the contract, and what was seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub verdict: Verdict,
    /// What was checked, e.g. `nack(timed-out)`.
    pub name: String,
    /// The rule of the contract's world (`wit/source.wit`, `wit/sink.wit`), e.g. `3`
    /// or `4/1`.
    pub rule: &'static str,
    pub observed: String,
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:<4}  {} (rule {}): {}", self.verdict.label(), self.name, self.rule, self.observed)
    }
}

/// Every check made, in order.
#[derive(Debug, Default)]
pub struct Report {
    checks: Vec<Check>,
}

impl Report {
    pub fn checks(&self) -> &[Check] {
        &self.checks
    }

    pub fn ok(&mut self, name: impl Into<String>, rule: &'static str, observed: impl Into<String>) {
        self.push(Verdict::Ok, name, rule, observed);
    }

    pub fn fail(&mut self, name: impl Into<String>, rule: &'static str, observed: impl Into<String>) {
        self.push(Verdict::Fail, name, rule, observed);
    }

    pub fn warn(&mut self, name: impl Into<String>, rule: &'static str, observed: impl Into<String>) {
        self.push(Verdict::Warn, name, rule, observed);
    }

    fn push(&mut self, verdict: Verdict, name: impl Into<String>, rule: &'static str, observed: impl Into<String>) {
        self.checks.push(Check { verdict, name: name.into(), rule, observed: observed.into() });
    }

    fn count(&self, verdict: Verdict) -> usize {
        self.checks.iter().filter(|c| c.verdict == verdict).count()
    }

    /// Whether no check failed (warnings do not fail a component).
    pub fn passed(&self) -> bool {
        self.count(Verdict::Fail) == 0
    }

    /// `9 checks: 8 ok, 1 FAIL, 0 warn`.
    pub fn summary(&self) -> String {
        format!(
            "{} checks: {} ok, {} FAIL, {} warn",
            self.checks.len(),
            self.count(Verdict::Ok),
            self.count(Verdict::Fail),
            self.count(Verdict::Warn)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_check_prints_its_verdict_name_rule_and_observation_on_one_line() {
        let mut report = Report::default();
        report.ok("ack", "3", "3 batches");
        report.fail("nack(timed-out)", "3", "record 0 differs");
        report.warn("batch ids", "2", "ids repeat");
        let lines: Vec<String> = report.checks().iter().map(ToString::to_string).collect();
        assert_eq!(
            lines,
            [
                "ok    ack (rule 3): 3 batches",
                "FAIL  nack(timed-out) (rule 3): record 0 differs",
                "warn  batch ids (rule 2): ids repeat"
            ]
        );
        assert_eq!(report.summary(), "3 checks: 1 ok, 1 FAIL, 1 warn");
        assert!(!report.passed());
    }

    #[test]
    fn warnings_alone_pass() {
        let mut report = Report::default();
        report.ok("open", "1", "opened");
        report.warn("ack", "3", "produced nothing");
        assert!(report.passed());
    }
}
