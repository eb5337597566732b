//! Handing a guest a connection it opened (PostgreSQL, Redis): the host's value goes
//! into the instance's table of handles, and the guest gets the handle's number. The
//! table is bounded (see `InstanceLimits`): a guest that keeps opening and never drops
//! is told so, not given more.

use wasmtime::component::{Resource, ResourceTable, ResourceTableError};

/// Put `connection` into `table` and hand out a handle to it, as the resource type
/// `R` the contract names; the error (a full table, most likely) is in words.
pub(crate) fn hold<T: Send + 'static, R: 'static>(
    table: &mut ResourceTable,
    connection: T,
) -> Result<Resource<R>, String> {
    match table.push(connection) {
        Ok(pushed) => Ok(Resource::new_own(pushed.rep())),
        Err(ResourceTableError::Full) => Err(format!(
            "this instance already holds {} handles, the most it may: drop the connections it no longer uses",
            table.max_capacity()
        )),
        Err(other) => Err(format!("cannot hold another connection: {other}")),
    }
}
