//! # ferry-store: the stores Ferry keeps itself
//!
//! * [`state`]: committed cursors (a source's) and positions (a sink's on the local
//!   log), in one SQLite database per state directory, written by one thread that
//!   commits what arrives together;
//! * [`local_log`]: the embedded log sources deliver to when no Iggy server is
//!   configured, and sinks read from; it keeps a source's cursor in the same
//!   transaction as its batch, which makes delivery into it exactly-once;
//! * [`sqlite`]: how both open their databases (checked formats, migrations, files
//!   that are not what they should be refused).
//!
//! Each implements a port of `ferry-engine` (`CursorStore`, `Target`, `Input`), so
//! the loops never know which store they speak to.

pub mod local_log;
pub mod sqlite;
pub mod state;
