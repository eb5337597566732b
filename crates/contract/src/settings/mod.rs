//! The plain values the configuration is made of, shared by every layer that owns a
//! part of it (capabilities their grants, the config the file, the runtime its
//! limits): sizes and durations written the way people say them, the range each must
//! lie in, secrets read from where the operator keeps them, and safe names.

mod address;
mod backoff;
mod bounds;
mod bytesize;
pub mod duration;
mod names;
mod secret;

pub use address::split_host_port;
pub use backoff::{Backoff, BackoffConfig};
pub use bounds::*;
pub use bytesize::ByteSize;
pub use names::{valid_key, valid_name};
pub use secret::{MAX_SECRET_BYTES, SecretSource, read_secret_file};
