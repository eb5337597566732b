//! A transform component in a connector's chain: its instance, made when first
//! needed (and again after a trap), and the call that hands it a batch's records.
//!
//! It runs in a sandbox of its own under its connector's limits and is granted
//! nothing: it may log, read clocks and draw random numbers, and that is all.

use std::sync::Arc;

use ferry_capabilities::logging::GuestLog;
use ferry_contract::wit::transform_export::{Incoming, Outgoing};
use ferry_runtime::{InstanceMeters, PendingComponent, Runtime, Sandbox, TransformInstance, TransformWorld};
use tokio::sync::Mutex;

pub struct ComponentLink {
    /// The name the config gives it.
    pub name: String,
    pub runtime: Arc<Runtime>,
    pub component: PendingComponent<TransformWorld>,
    pub sandbox: Sandbox,
    /// Its `plugin_config`, as the JSON its `open` receives.
    pub plugin_config: String,
    pub log: GuestLog,
    pub meters: InstanceMeters,
    /// The open instance, if any. A connector hands it one batch at a time; the lock
    /// is never contended.
    pub instance: Mutex<Option<TransformInstance>>,
}

impl ComponentLink {
    /// One entry per record of `records`: the record as it goes on, or `None` where
    /// the transform drops it. An error says what went wrong, without the name.
    pub async fn apply(&self, records: &[Incoming]) -> Result<Vec<Option<Outgoing>>, String> {
        let mut slot = self.instance.lock().await;
        if slot.is_none() {
            *slot = Some(self.open().await?);
        }
        let instance = slot.as_mut().expect("opened above");
        match instance.transform(records).await {
            Ok(outgoing) if outgoing.len() == records.len() => Ok(outgoing),
            Ok(outgoing) => Err(format!(
                "it answered {} entries for {} records (one per record, `none` to drop it)",
                outgoing.len(),
                records.len()
            )),
            Err(error) => {
                // A trapped instance is done: the next batch gets a fresh one.
                if error.is_trap() {
                    *slot = None;
                }
                Err(error.to_string())
            }
        }
    }

    async fn open(&self) -> Result<TransformInstance, String> {
        let component = self.component.get().await.map_err(|e| e.to_string())?;
        let mut instance = self
            .runtime
            .instantiate(&component, &self.sandbox, self.log.clone(), &self.meters)
            .await
            .map_err(|e| e.to_string())?;
        instance.open(&self.plugin_config).await.map_err(|e| e.to_string())?;
        Ok(instance)
    }
}

impl std::fmt::Debug for ComponentLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ComponentLink").field("name", &self.name).finish_non_exhaustive()
    }
}
