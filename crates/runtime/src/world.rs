//! The worlds a component can implement (a source, a sink, a transform), and what
//! differs between them for the runtime: which interface the contract check looks
//! for, how a linked component is prepared for instantiation, and what an instance
//! offers. Everything else (reading, checking, compiling, linking, the store and its
//! limits) is the same for every kind, and written once in [`super::Runtime`].

use ferry_contract::Kind;
use ferry_contract::wit::{SinkConnectorPre, SourceConnectorPre, TransformComponentPre};
use wasmtime::component::InstancePre;

use super::context::GuestContext;
use super::instance::{CallError, GuestStore};
use super::sink_instance::SinkInstance;
use super::source_instance::SourceInstance;
use super::transform_instance::TransformInstance;

pub trait World: Send + Sync + 'static {
    const KIND: Kind;
    /// A linked component, ready to be instantiated any number of times.
    type Pre: Send + Sync;
    /// A live instance and its calls.
    type Instance: Send;

    fn prepare(instance_pre: InstancePre<GuestContext>) -> wasmtime::Result<Self::Pre>;

    fn instantiate(
        pre: &Self::Pre,
        guest: GuestStore,
    ) -> impl Future<Output = Result<Self::Instance, CallError>> + Send;
}

/// `source-connector`: a component that produces batches.
pub enum SourceWorld {}

/// `sink-connector`: a component that writes batches.
pub enum SinkWorld {}

/// `transform-component`: a component that changes (or drops) the records of a
/// connector's batches.
pub enum TransformWorld {}

fn trapped(error: wasmtime::Error) -> CallError {
    CallError::Trapped { call: "instantiate", error }
}

impl World for SourceWorld {
    const KIND: Kind = Kind::Source;
    type Pre = SourceConnectorPre<GuestContext>;
    type Instance = SourceInstance;

    fn prepare(instance_pre: InstancePre<GuestContext>) -> wasmtime::Result<Self::Pre> {
        SourceConnectorPre::new(instance_pre)
    }

    async fn instantiate(pre: &Self::Pre, mut guest: GuestStore) -> Result<SourceInstance, CallError> {
        let exports = pre.instantiate_async(guest.store()).await.map_err(trapped)?;
        Ok(SourceInstance::new(guest, exports))
    }
}

impl World for SinkWorld {
    const KIND: Kind = Kind::Sink;
    type Pre = SinkConnectorPre<GuestContext>;
    type Instance = SinkInstance;

    fn prepare(instance_pre: InstancePre<GuestContext>) -> wasmtime::Result<Self::Pre> {
        SinkConnectorPre::new(instance_pre)
    }

    async fn instantiate(pre: &Self::Pre, mut guest: GuestStore) -> Result<SinkInstance, CallError> {
        let exports = pre.instantiate_async(guest.store()).await.map_err(trapped)?;
        Ok(SinkInstance::new(guest, exports))
    }
}

impl World for TransformWorld {
    const KIND: Kind = Kind::Transform;
    type Pre = TransformComponentPre<GuestContext>;
    type Instance = TransformInstance;

    fn prepare(instance_pre: InstancePre<GuestContext>) -> wasmtime::Result<Self::Pre> {
        TransformComponentPre::new(instance_pre)
    }

    async fn instantiate(pre: &Self::Pre, mut guest: GuestStore) -> Result<TransformInstance, CallError> {
        let exports = pre.instantiate_async(guest.store()).await.map_err(trapped)?;
        Ok(TransformInstance::new(guest, exports))
    }
}
