//! Reloading the config (`kill -HUP`, `POST /reload`) without losing a cursor.
//!
//! The config file is read again and checked as a whole, as `ferry run` checks it,
//! and every connector that is to start is compiled, before anything is touched: a
//! new config or component that fails is refused with the reason, and everything
//! keeps running as before. Then, by connector key:
//!
//! * added: wired and started;
//! * removed (or disabled): stopped gracefully and taken off the host;
//! * changed (its fingerprint: config, secrets' values, grants, tenant or the
//!   component's bytes): stopped gracefully (the outstanding batch settles and is
//!   committed), then started with the new config and code **from the same committed
//!   state**, which the store holds;
//! * unchanged: not touched; it keeps delivering throughout.
//!
//! What the engine and the shared connections were built from (`[runtime]`,
//! `[state]`, `[local_log]`, `[iggy]` and the tenants' Iggy credentials, `[http]`,
//! fuel metering, the pooling allocator's reservation) cannot change under running
//! connectors; a reload that changes it is refused, naming it, and needs a restart.

use std::sync::Arc;

use super::Host;
use super::control::{Refusal, RefusalKind, Reloaded};
use super::wiring::{Checked, engine_options};
use ferry_config::{Allocator, Config};
use ferry_engine::shutdown::Shutdown;
use ferry_runtime::EngineOptions;
use ferry_store::state::StateDir;

impl Host {
    pub(super) async fn reload(&mut self, shutdown: &Shutdown) -> Result<Reloaded, Refusal> {
        let Some(reloadable) = &mut self.reloadable else {
            return Err(Refusal::new(RefusalKind::Unavailable, "this host was not started from a config file"));
        };
        let file = reloadable.config.file.clone();
        tracing::info!(config = %file.display(), "reloading the config");
        let refused = |problem: String| {
            tracing::error!("reload refused: {problem}; everything runs as before");
            Refusal::new(RefusalKind::Invalid, format!("{problem}; nothing was reloaded, everything runs as before"))
        };

        // 1. Everything checked, before anything is touched.
        let config = Arc::new(Config::load(&file).map_err(|e| refused(e.to_string()))?);
        needs_restart(&reloadable.config, &config, &reloadable.wiring.engine)
            .map_err(|problem| refused(format!("{}: {problem}, which needs a restart of ferry", file.display())))?;
        let enabled: Vec<_> = config.connectors().filter(|c| c.enabled()).collect();
        let mut plan = Reloaded::default();
        let mut starting: Vec<Checked> = Vec::new();
        reloadable.wiring.begin_pass();
        for connector in enabled.iter().copied() {
            let checked = reloadable.wiring.check(&config, connector).map_err(|e| refused(e.to_string()))?;
            let key = checked.key.to_string();
            match self.fleet.get(&key) {
                Some(slot)
                    if slot.role == connector.role()
                        && slot.fingerprint == Some(checked.fingerprint)
                        && slot.wired.is_some() =>
                {
                    plan.unchanged.push(key)
                }
                Some(_) => {
                    plan.changed.push(key);
                    starting.push(checked);
                }
                None => {
                    plan.added.push(key);
                    starting.push(checked);
                }
            }
        }
        plan.removed = self
            .fleet
            .keys()
            .filter(|key| !enabled.iter().any(|c| c.key() == &***key))
            .map(|k| k.to_string())
            .collect();
        for checked in &starting {
            checked.compiled().await.map_err(|e| refused(e.to_string()))?;
            let connector = config.connector(checked.key).expect("a connector checked is in the config");
            StateDir::new(config.state_dir_of(connector))
                .read(checked.key)
                .map_err(|e| refused(format!("connector `{}`: {e}", checked.key)))?;
        }

        // The new config's secrets are taken out of guest text from now on (the old
        // ones too, until the connectors that had them are stopped).
        let mut secrets = reloadable.config.secret_values();
        secrets.extend(config.secret_values());
        ferry_contract::secrets::set(ferry_contract::secrets::Secrets::new(secrets));

        // 2. Stop what goes away or changes, all at once.
        let stopping: Vec<Arc<str>> = plan.removed.iter().chain(&plan.changed).map(|k| Arc::from(k.as_str())).collect();
        plan.unsettled = self.fleet.stop(&stopping, self.grace_period, shutdown).await?;
        for key in &plan.removed {
            self.fleet.remove(key);
            tracing::info!(key = %key, "removed from the config: stopped");
        }

        // 3. Start what is new or changed, from its committed state.
        for checked in starting {
            let key = checked.key.to_string();
            let fingerprint = checked.fingerprint;
            if let Some(slot) = self.fleet.get_mut(&key) {
                // Its old self lets go of its state before the new one takes it.
                slot.wired = None;
            }
            match reloadable.wiring.wire(&config, checked).and_then(|wired| {
                reloadable.wiring.sync_states()?;
                Ok(wired)
            }) {
                Ok(wired) => {
                    if !self.fleet.put(wired, Some(fingerprint)).paused {
                        self.fleet.start(&key);
                    }
                }
                Err(error) => {
                    let error = format!("cannot start after the reload: {error}");
                    match self.fleet.get(&key).and_then(|slot| slot.reporter.as_ref()) {
                        Some(reporter) => reporter.refused(&error),
                        None => tracing::error!(key = %key, "{error}"),
                    }
                    plan.failed.push((key, error));
                }
            }
        }
        reloadable.config = config.clone();
        if let Some(in_force) = &self.config_in_force {
            in_force.send_replace(config);
        }
        tracing::info!(
            added = plan.added.len(),
            removed = plan.removed.len(),
            changed = plan.changed.len(),
            unchanged = plan.unchanged.len(),
            "config reloaded; added: {:?}, removed: {:?}, changed: {:?}",
            plan.added,
            plan.removed,
            plan.changed,
        );
        Ok(plan)
    }
}

/// What of `new` cannot be applied to a host built from `old` with `engine`: the
/// parts the engine and the shared connections were made from.
fn needs_restart(old: &Config, new: &Config, engine: &EngineOptions) -> Result<(), String> {
    let same = |a: &dyn std::fmt::Debug, b: &dyn std::fmt::Debug| format!("{a:?}") == format!("{b:?}");
    let sections: [(&str, &dyn std::fmt::Debug, &dyn std::fmt::Debug); 5] = [
        ("[runtime]", &old.runtime, &new.runtime),
        ("[state]", &old.state, &new.state),
        ("[local_log]", &old.local_log, &new.local_log),
        ("[iggy]", &old.iggy, &new.iggy),
        ("[http]", &old.http, &new.http),
    ];
    for (section, before, after) in sections {
        if !same(before, after) {
            return Err(format!("{section} changed"));
        }
    }
    for tenant in &new.tenants {
        let before = old.tenant(&tenant.key).and_then(|t| t.iggy.as_ref());
        if !same(&before, &tenant.iggy.as_ref()) {
            return Err(format!("the Iggy credentials of tenant `{}` changed", tenant.key));
        }
    }
    let wanted = engine_options(new);
    if wanted.fuel != engine.fuel {
        return Err(match wanted.fuel {
            true => "a connector now sets limits.fuel, and this engine does not meter fuel".to_string(),
            false => "no connector sets limits.fuel any more, and this engine meters fuel".to_string(),
        });
    }
    if engine.allocator == Allocator::Pooling
        && (wanted.pool.instances > engine.pool.instances
            || wanted.pool.max_memory_bytes > engine.pool.max_memory_bytes)
    {
        return Err(format!(
            "the pooling allocator reserved {} instance slots of up to {} bytes at start, and the new config needs {} \
             of up to {}",
            engine.pool.instances, engine.pool.max_memory_bytes, wanted.pool.instances, wanted.pool.max_memory_bytes
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use ferry_runtime::PoolSize;

    const SOURCE: &str = r#"
[[sources]]
key = "a"
path = "a.wasm"
streams = [{ stream = "s", topic = "t" }]
"#;

    fn config(text: &str) -> Config {
        Config::parse(Path::new("conf/ferry.toml"), text, Vec::new()).unwrap_or_else(|e| panic!("{e}"))
    }

    fn check(old: &str, new: &str) -> Result<(), String> {
        let old = config(old);
        needs_restart(&old, &config(new), &engine_options(&old))
    }

    #[test]
    fn connectors_may_change_what_the_engine_and_connections_were_built_from_may_not() {
        let more = format!("{SOURCE}{}", SOURCE.replace("\"a\"", "\"b\""));
        assert_eq!(check(SOURCE, &more), Ok(()), "a connector added");
        assert_eq!(check(&more, SOURCE), Ok(()), "a connector removed");
        for (section, changed) in [
            ("[state]", "[state]\npath = \"elsewhere\"\n"),
            ("[local_log]", "[local_log]\npath = \"elsewhere\"\n"),
            ("[runtime]", "[runtime]\nshutdown_grace_period = \"1s\"\n"),
            ("[http]", "[http]\naddress = \"127.0.0.1:9\"\n"),
        ] {
            let problem = check(SOURCE, &format!("{changed}{SOURCE}")).expect_err(section);
            assert_eq!(problem, format!("{section} changed"));
        }
    }

    #[test]
    fn fuel_metering_turned_on_or_off_needs_a_restart() {
        let fueled = format!("{SOURCE}limits = {{ fuel = 1000000 }}\n");
        let on = check(SOURCE, &fueled).expect_err("fuel on");
        assert!(on.contains("now sets limits.fuel"), "{on}");
        let off = check(&fueled, SOURCE).expect_err("fuel off");
        assert!(off.contains("no connector sets limits.fuel any more"), "{off}");
    }

    #[test]
    fn a_pool_reserved_at_start_cannot_grow() {
        let old = config(SOURCE);
        let mut engine = engine_options(&old);
        engine.allocator = Allocator::Pooling;
        engine.pool = PoolSize { instances: 1, max_memory_bytes: 1 << 20 };
        let problem = needs_restart(&old, &old, &engine).expect_err("the default memory is over 1 MiB");
        assert!(problem.contains("the pooling allocator reserved 1 instance slots"), "{problem}");
        engine.pool = PoolSize { instances: 1 << 20, max_memory_bytes: 1 << 40 };
        assert_eq!(needs_restart(&old, &old, &engine), Ok(()));
    }
}
