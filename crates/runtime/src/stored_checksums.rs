//! The contract's `stored-checksums` import: a sink's guest asks for Iggy's checksum
//! of a message it is writing, by offset. The sink loop hands the instance the
//! checksums of each batch it reads ([`crate::SinkInstance::hand_checksums`]); they
//! are kept in the store until the next batch's replace them.

use ferry_contract::wit::stored_checksums::{self, Host};
use wasmtime::component::{HasData, Linker};

use super::context::GuestContext;

impl Host for GuestContext {
    fn checksum(&mut self, offset: u64) -> Option<u64> {
        self.checksums.get(offset)
    }
}

struct StoredChecksumsHost;

impl HasData for StoredChecksumsHost {
    type Data<'a> = &'a mut GuestContext;
}

pub(super) fn link(linker: &mut Linker<GuestContext>) -> wasmtime::Result<()> {
    stored_checksums::add_to_linker::<GuestContext, StoredChecksumsHost>(linker, |context| context)
}
