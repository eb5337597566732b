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

use super::{LoadError, SourceComponent};

type Outcome = Result<Arc<SourceComponent>, Arc<LoadError>>;

/// A handle on one component's compile; clones share it.
#[derive(Clone)]
pub struct PendingComponent(Shared<BoxFuture<'static, Outcome>>);

impl PendingComponent {
    /// The compile `compiling` does, started now (on the current tokio runtime), not
    /// when someone first waits for it.
    pub fn spawn(
        path: PathBuf,
        compiling: impl Future<Output = Result<Arc<SourceComponent>, LoadError>> + Send + 'static,
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
    pub fn ready(component: Arc<SourceComponent>) -> Self {
        PendingComponent(futures::future::ready(Ok(component)).boxed().shared())
    }

    /// The component, once compiled, or why it cannot be.
    pub async fn get(&self) -> Outcome {
        self.0.clone().await
    }
}

impl From<Arc<SourceComponent>> for PendingComponent {
    fn from(component: Arc<SourceComponent>) -> Self {
        PendingComponent::ready(component)
    }
}
