//! # ferry-engine: the loops that move data, and what keeps them running
//!
//! * [`source`]: a source instance, batch after batch: poll, deliver, commit, ack /
//!   nack, back off. The heart of Ferry.
//! * [`sink`]: a sink instance, batch after batch: read, write, commit; retry,
//!   dead-letter, bisect, back off.
//! * [`supervisor`]: keeps either running, instance after instance, and [`exit`]: how
//!   a loop ends;
//! * [`batch`]: what a source produced, checked before it is delivered;
//! * the ports the loops speak through, owned here and implemented by the stores
//!   above (`ferry-store`, `ferry-iggy`): [`delivery::Target`] (where a source's
//!   batch goes), [`cursor::CursorStore`] (where its cursor is committed) and
//!   [`sink::Input`] (where a sink's messages come from);
//! * [`transform`]: records' JSON fields changed on the way (Iggy's transforms),
//!   between a source and its target and between a sink's input and the sink;
//! * [`status`]: what operators see, reported by the loops, and [`shutdown`]: how the
//!   host stops them between batches.

pub mod batch;
pub mod cursor;
pub mod delivery;
pub mod exit;
pub mod shutdown;
pub mod sink;
pub mod source;
pub mod status;
pub mod supervisor;
pub mod transform;
