//! A component on its way: being compiled in the background, or compiled already.
//!
//! Compiling can take seconds (a Python guest) or be refused after a minute (a
//! compile bomb), so `ferry run` starts every compile at once and lets each
//! connector wait for its own component: a slow or failing component delays and
//! fails only the connectors that use it. Connectors sharing a file share one compile.

use std::path::PathBuf;
use std::sync::Arc;

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};

use super::{ConnectorComponent, LoadError, World};

type Outcome<W> = Result<Arc<ConnectorComponent<W>>, Arc<LoadError>>;

/// A handle on one component's compile; clones share it.
pub struct PendingComponent<W: World>(Shared<BoxFuture<'static, Outcome<W>>>);

impl<W: World> Clone for PendingComponent<W> {
    fn clone(&self) -> Self {
        PendingComponent(self.0.clone())
    }
}

impl<W: World> PendingComponent<W> {
    /// The compile `compiling` does, started now (on the current tokio runtime), not
    /// when someone first waits for it.
    pub fn spawn(
        path: PathBuf,
        compiling: impl Future<Output = Result<Arc<ConnectorComponent<W>>, LoadError>> + Send + 'static,
    ) -> Self {
        let task = tokio::spawn(compiling);
        let outcome = async move {
            match task.await {
                Ok(result) => result.map_err(Arc::new),
                Err(e) => Err(Arc::new(LoadError::Compile { path, message: format!("the compile task failed: {e}") })),
            }
        };
        PendingComponent(outcome.boxed().shared())
    }

    /// A component compiled already.
    pub fn ready(component: Arc<ConnectorComponent<W>>) -> Self {
        PendingComponent(futures::future::ready(Ok(component)).boxed().shared())
    }

    /// The component, once compiled, or why it cannot be.
    pub async fn get(&self) -> Outcome<W> {
        self.0.clone().await
    }
}

impl<W: World> From<Arc<ConnectorComponent<W>>> for PendingComponent<W> {
    fn from(component: Arc<ConnectorComponent<W>>) -> Self {
        PendingComponent::ready(component)
    }
}
