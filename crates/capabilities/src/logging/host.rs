//! The `logging` interface of the contract, served from the instance's [`GuestLog`].

use ferry_contract::wit::logging::{self, Host, Level};
use wasmtime::component::{HasData, Linker};

use super::GuestLog;
use crate::GuestData;

/// What a logging call sees of the store: the instance's log.
pub struct LoggingView<'a>(&'a GuestLog);

impl Host for LoggingView<'_> {
    async fn log(&mut self, level: Level, message: String) {
        self.0.line(level, &message);
    }
}

struct LoggingHost;

impl HasData for LoggingHost {
    type Data<'a> = LoggingView<'a>;
}

pub(super) fn link<T: GuestData>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    logging::add_to_linker::<T, LoggingHost>(linker, |data| LoggingView(&data.guest().states.logging))
}
