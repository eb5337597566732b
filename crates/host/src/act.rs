//! Orders about one connector: pause, resume, restart, reset its state.
//!
//! A pause is a graceful stop of that connector alone (its outstanding batch
//! settles, its guest is closed), remembered until resumed; ferry's next start
//! runs it again, since a pause is not written anywhere. Resetting a state is
//! refused under a running connector: a guest producing from a cursor that is being
//! moved aside could commit it back.

use std::sync::Arc;
use std::time::Duration;

use super::Host;
use super::control::{Action, Applied, Refusal, RefusalKind};
use ferry_contract::Role;
use ferry_engine::shutdown::Shutdown;
use ferry_engine::status::Phase;

impl Host {
    pub(super) async fn act(
        &mut self,
        role: Role,
        key: &str,
        action: Action,
        shutdown: &Shutdown,
    ) -> Result<Applied, Refusal> {
        let grace = self.grace_period;
        // Found first: the key comes from a request, and only a connector's own key is logged.
        let slot = self.fleet.find(role, key)?;
        let (key, paused, running) = (slot.key.clone(), slot.paused, slot.is_running());
        tracing::info!(key = %key, "{} requested", action.as_str());
        let message = match action {
            Action::Pause if paused => "already paused".to_string(),
            Action::Pause => {
                if !running {
                    return Err(self.not_running(&key, "restart it"));
                }
                let unsettled = self.fleet.stop(std::slice::from_ref(&key), grace, shutdown).await?;
                let slot = self.fleet.get_mut(&key).expect("the slot stays while it is stopped");
                slot.paused = true;
                if let Some(reporter) = &slot.reporter {
                    reporter.paused();
                }
                format!("paused{}", cut_off(&unsettled, grace))
            }
            Action::Resume if running => "already running".to_string(),
            Action::Resume if !paused => return Err(self.not_running(&key, "restart it to start it again")),
            Action::Resume => {
                self.start(&key)?;
                "resumed: starting from its committed state".to_string()
            }
            Action::Restart => self.restart(&key, shutdown).await?,
            Action::ResetState => self.reset_state(&key)?,
        };
        let phase = match action {
            // Started just now: the board may not have heard from the new instance yet,
            // and the answer says the state after the action, not before it.
            Action::Resume | Action::Restart => match self.phase_of(&key) {
                Phase::Stopped | Phase::Paused | Phase::Failed | Phase::Refused => Phase::Starting,
                phase => phase,
            },
            _ => self.phase_of(&key),
        };
        tracing::info!(key = %key, "{}: {message}", action.as_str());
        Ok(Applied { key: key.to_string(), phase, message })
    }

    /// Stop `key` and start a fresh instance from its committed state, with its
    /// component file and secrets read again as a reload reads them (the same
    /// fingerprint): a changed file is checked and compiled before anything stops, and
    /// runs; one that fails its checks leaves the loaded one running, and the answer
    /// says so. The config itself is read again only by a reload.
    async fn restart(&mut self, key: &str, shutdown: &Shutdown) -> Result<String, Refusal> {
        let grace = self.grace_period;
        let config = self.reloadable.as_ref().map(|reloadable| reloadable.config.clone());
        let mut changed = None;
        let mut note = String::new();
        if let (Some(reloadable), Some(config)) = (&mut self.reloadable, &config) {
            let connector = config.connector(key).expect("a connector the host runs is in its config");
            let loaded = self.fleet.get(key).and_then(|slot| slot.fingerprint);
            reloadable.wiring.begin_pass();
            let checked = match reloadable.wiring.check(config, connector) {
                Ok(checked) if Some(checked.fingerprint) == loaded => Ok(None),
                Ok(checked) => checked.compiled().await.map(|()| Some(checked)),
                Err(error) => Err(error),
            };
            match checked {
                Ok(checked) => changed = checked,
                Err(error) => {
                    tracing::warn!(key = %key, "restart: the component as it is now cannot run: {error}");
                    note = format!(
                        "; its component or secrets as they are now fail their checks ({error}), so the ones \
                         loaded before run"
                    );
                }
            }
        }

        let unsettled = self.fleet.stop(&[Arc::from(key)], grace, shutdown).await?;
        if let (Some(checked), Some(reloadable), Some(config)) = (changed, &mut self.reloadable, &config) {
            let fingerprint = checked.fingerprint;
            let slot = self.fleet.get_mut(key).expect("the slot stays while it is stopped");
            // Its old self lets go of its state before the new one takes it.
            slot.wired = None;
            let rewired = reloadable.wiring.wire(config, checked).and_then(|wired| {
                reloadable.wiring.sync_states()?;
                Ok(wired)
            });
            match rewired {
                Ok(wired) => {
                    self.fleet.put(wired, Some(fingerprint));
                    note = "; its component or secrets changed since it was started, and run as they are now".into();
                }
                Err(error) => {
                    let error = format!("cannot start after the restart: {error}");
                    if let Some(reporter) = &slot.reporter {
                        reporter.refused(&error);
                    }
                    return Err(Refusal::new(RefusalKind::Conflict, format!("`{key}` {error}")));
                }
            }
        }
        self.start(key)?;
        Ok(format!("restarted: a fresh instance starts from its committed state{note}{}", cut_off(&unsettled, grace)))
    }

    /// Start `key` again, if it can be.
    fn start(&mut self, key: &str) -> Result<(), Refusal> {
        let slot = self.fleet.get_mut(key).expect("the slot was found");
        if slot.wired.is_none() {
            return Err(Refusal::new(
                RefusalKind::Conflict,
                format!("`{key}` cannot start: its state could not be taken again (see its last error)"),
            ));
        }
        self.fleet.start(key);
        Ok(())
    }

    /// Move `key`'s state aside and take a fresh one; the connector must not run.
    fn reset_state(&mut self, key: &str) -> Result<String, Refusal> {
        let slot = self.fleet.get_mut(key).expect("the slot was found");
        if slot.is_running() {
            let role = slot.role.noun();
            return Err(Refusal::new(
                RefusalKind::Conflict,
                format!(
                    "`{key}` is running: its state can only be reset while it is paused or stopped \
                     (POST /{role}s/{key}/pause first)"
                ),
            ));
        }
        let Some(reloadable) = &mut self.reloadable else {
            return Err(Refusal::new(RefusalKind::Unavailable, "this host was not started from a config file"));
        };
        let config = reloadable.config.clone();
        let connector = config.connector(key).expect("a connector the host runs is in its config");
        if slot.role == Role::Sink && reloadable.wiring.reads_from_iggy(connector) {
            return Err(Refusal::new(
                RefusalKind::Conflict,
                format!(
                    "`{key}` reads from Iggy, whose server stores its offsets (not ferry's state store): \
                     reset them on the server"
                ),
            ));
        }
        let Some(wired) = slot.wired.take() else {
            return Err(Refusal::new(RefusalKind::Conflict, format!("`{key}` holds no state to reset")));
        };
        let (reset, rewired) = reloadable.wiring.reset_state(&config, wired);
        match rewired {
            Ok(wired) => slot.wired = Some(wired),
            Err(error) => {
                if let Some(reporter) = &slot.reporter {
                    reporter.refused(&format!("its state could not be taken again after the reset: {error}"));
                }
            }
        }
        let kept = reset.map_err(|problem| {
            Refusal::new(RefusalKind::Conflict, format!("cannot reset the state of `{key}`: {problem}"))
        })?;
        Ok(match kept.is_empty() {
            true => "had no state; it starts from scratch when started".to_string(),
            false => {
                format!("state reset; it starts from scratch when started; the old state is kept {}", kept.join(", "))
            }
        })
    }

    /// The phase the board shows for `key`.
    fn phase_of(&self, key: &str) -> Phase {
        self.status.get(key).map_or(Phase::Starting, |status| status.phase)
    }

    /// Why `key` cannot be paused or resumed: it is not running (refused, or its
    /// task ended), and what to do instead.
    fn not_running(&self, key: &str, instead: &str) -> Refusal {
        let phase = self.phase_of(key).as_str();
        Refusal::new(RefusalKind::Conflict, format!("`{key}` is not running (it is {phase}): {instead}"))
    }
}

/// What to add to an answer when a connector had to be cut off.
fn cut_off(unsettled: &[String], grace: Duration) -> String {
    match unsettled.is_empty() {
        true => String::new(),
        false => format!(
            "; its outstanding batch did not settle within the grace period ({grace:?}) and will be produced again"
        ),
    }
}
