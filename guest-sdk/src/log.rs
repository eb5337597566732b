//! Logging to the host. Lines appear in the host's log under the connector's key.

pub use crate::bindings::iggy::connector::logging::Level;

/// Send one line to the host log.
pub fn log(level: Level, message: &str) {
    crate::bindings::iggy::connector::logging::log(level, message);
}

/// `ferry_guest::info!("x = {}", x)` and friends: `format!` and send to the host log.
#[macro_export]
macro_rules! info {
    ($($arg:tt)*) => { $crate::log::log($crate::log::Level::Info, &::std::format!($($arg)*)) };
}

/// Like [`info!`](crate::info), at debug level.
#[macro_export]
macro_rules! debug {
    ($($arg:tt)*) => { $crate::log::log($crate::log::Level::Debug, &::std::format!($($arg)*)) };
}

/// Like [`info!`](crate::info), at warn level.
#[macro_export]
macro_rules! warn {
    ($($arg:tt)*) => { $crate::log::log($crate::log::Level::Warn, &::std::format!($($arg)*)) };
}

/// Like [`info!`](crate::info), at error level.
#[macro_export]
macro_rules! error {
    ($($arg:tt)*) => { $crate::log::log($crate::log::Level::Error, &::std::format!($($arg)*)) };
}
