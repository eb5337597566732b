//! What librdkafka says of a refused login, for the call waiting on the cluster.
//!
//! A cluster that refuses the credentials fails no call: librdkafka tells the client's
//! context, keeps the messages queued and tries again, and a produce waits on them until
//! its time is up, to fail as "timed out". The context a connection's clients share
//! keeps the refusal, so that a call fails as soon as one comes during it, naming the
//! user and the mechanism (the password is never in it), and one that failed otherwise
//! (timed out; a consumer's request failed as a transport failure) says it was
//! refused. A call that succeeds forgets it: the login worked.

use std::sync::Arc;

use rdkafka::client::ClientContext;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use tokio::sync::watch;

use super::clusters::Served;

/// The refusals of one connection's logins, shared by its producer and consumer.
#[derive(Clone)]
pub struct Login {
    /// `user `ferry` (SCRAM-SHA-512)`, for the messages.
    who: Arc<str>,
    /// The latest refusal's reason, until a call succeeds.
    refused: Arc<watch::Sender<Option<String>>>,
}

impl Login {
    /// The login `served`'s clients make.
    pub fn of(served: &Served) -> Login {
        let property = |name: &str| served.properties.iter().find(|(n, _)| n == name).map(|(_, value)| value.as_str());
        let who = match (property("sasl.username"), property("sasl.mechanism")) {
            (Some(user), Some(mechanism)) => format!("user `{user}` ({mechanism})"),
            _ => "no user (the cluster asks for none)".into(),
        };
        Login { who: who.into(), refused: Arc::new(watch::Sender::new(None)) }
    }

    /// Wait for a refusal made after this is called (not an earlier one); the error
    /// to fail the call with.
    pub fn refusal(&self) -> impl Future<Output = String> + use<> {
        let mut refused = self.refused.subscribe();
        refused.mark_unchanged();
        let who = self.who.clone();
        async move {
            loop {
                if refused.changed().await.is_err() {
                    // The clients are gone: no refusal can come.
                    std::future::pending::<()>().await;
                }
                if let Some(reason) = refused.borrow_and_update().clone() {
                    return format!("the cluster refused the login of {who}: {reason}");
                }
            }
        }
    }

    /// The latest refusal, if no call succeeded since.
    pub fn last_refusal(&self) -> Option<String> {
        self.refused.borrow().as_ref().map(|reason| format!("the cluster refused the login of {}: {reason}", self.who))
    }

    /// A call succeeded: the login worked.
    pub fn worked(&self) {
        self.refused.send_if_modified(|refused| refused.take().is_some());
    }

    /// librdkafka's report of a global error: a refused login kept, the rest (a
    /// broker gone, which the call's own failure says) only traced.
    pub fn error(&self, error: KafkaError, reason: &str) {
        if error.rdkafka_error_code() == Some(RDKafkaErrorCode::Authentication) {
            self.refused.send_replace(Some(reason.to_string()));
        } else {
            tracing::debug!("librdkafka: {error}: {reason}");
        }
    }
}

impl ClientContext for Login {
    fn error(&self, error: KafkaError, reason: &str) {
        Login::error(self, error, reason);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn login() -> Login {
        let properties = [("sasl.username", "ferry"), ("sasl.mechanism", "SCRAM-SHA-512"), ("sasl.password", "p4ss")];
        let properties = properties.map(|(name, value)| (name.to_string(), value.to_string())).to_vec();
        Login::of(&Served { brokers: "h:1".into(), properties })
    }

    fn refused() -> KafkaError {
        KafkaError::MessageConsumption(RDKafkaErrorCode::Authentication)
    }

    #[tokio::test]
    async fn a_call_fails_on_a_refusal_made_during_it_naming_the_user_not_the_password() {
        let login = login();
        login.error(refused(), "before the call");
        let waiting = login.refusal();
        login.error(KafkaError::MessageConsumption(RDKafkaErrorCode::AllBrokersDown), "all brokers down");
        login.error(refused(), "SASL SCRAM authentication failed");
        let said = tokio::time::timeout(std::time::Duration::from_secs(5), waiting).await.expect("the refusal");
        assert_eq!(said, "the cluster refused the login of user `ferry` (SCRAM-SHA-512): SASL SCRAM authentication failed");
        assert!(!said.contains("p4ss"));
    }

    #[tokio::test]
    async fn a_refusal_from_before_the_call_is_not_waited_for_and_a_success_forgets_it() {
        let login = login();
        login.error(refused(), "earlier");
        let waiting = login.refusal();
        assert!(tokio::time::timeout(std::time::Duration::from_millis(50), waiting).await.is_err(), "not this call's");
        assert!(login.last_refusal().is_some_and(|said| said.ends_with(": earlier")));
        login.worked();
        assert_eq!(login.last_refusal(), None);
    }
}
