//! What a failed request to the Iggy server says about the connection (retire it?)
//! and about the data (is the batch itself the problem?).

use iggy::prelude::IggyError;

/// Why a request failed, and what that says about the connection.
#[derive(Debug)]
pub struct RequestError {
    pub(super) message: String,
    /// The connection is not to be trusted any more: reconnect.
    pub(super) breaks_connection: bool,
    /// The batch itself is the problem: NACK `rejected`.
    pub(super) rejected: bool,
}

impl RequestError {
    pub(super) fn failed(message: String) -> Self {
        RequestError { message, breaks_connection: false, rejected: false }
    }

    pub(super) fn rejected(message: String) -> Self {
        RequestError { message, breaks_connection: false, rejected: true }
    }

    pub(super) fn from_iggy(error: IggyError) -> Self {
        let breaks_connection = matches!(
            error,
            IggyError::Disconnected
                | IggyError::NotConnected
                | IggyError::CannotEstablishConnection
                | IggyError::ConnectionClosed
                | IggyError::TcpError
                | IggyError::IoError(_)
                | IggyError::EmptyResponse
                | IggyError::Unauthenticated
                | IggyError::HttpError(_)
        );
        RequestError { message: error.to_string(), breaks_connection, rejected: false }
    }

    pub(super) fn context(mut self, what: String) -> Self {
        self.message = format!("{what}: {}", self.message);
        self
    }
}
