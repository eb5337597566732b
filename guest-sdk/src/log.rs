//! Logging to the host. Lines appear in the host's log under the connector's key.
//!
//! Outside WebAssembly (a connector's native unit tests) there is no host to call,
//! so lines go to standard error instead: code that logs stays testable.

pub use crate::bindings::iggy::connector::logging::Level;

/// Send one line to the host log.
pub fn log(level: Level, message: &str) {
    #[cfg(target_arch = "wasm32")]
    crate::bindings::iggy::connector::logging::log(level, message);
    #[cfg(not(target_arch = "wasm32"))]
    eprintln!("{level:?}: {message}");
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

#[cfg(test)]
mod tests {
    #[test]
    fn logging_works_in_native_tests() {
        // The host's import only exists in WebAssembly; calling it here would panic.
        super::log(super::Level::Warn, "a line of a native test");
        crate::info!("and through the macro: {}", 1);
    }
}
