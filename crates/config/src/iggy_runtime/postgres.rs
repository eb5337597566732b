//! Iggy's PostgreSQL connectors' `connection_string`, as the server the host serves.
//!
//! Iggy's `postgres_sink` and `postgres_source` connect by themselves, with a
//! connection string in their `plugin_config`. Ferry's guests have no sockets: the
//! host serves PostgreSQL to them (`[postgres.NAME]`, granted by name). So the
//! string becomes a server of the host's, `[postgres.<role>-<key>]` with
//! `url` = the string (and Iggy's `max_connections`, 10 by default), granted to the
//! connector alone, and the guest's `plugin_config` names it (`connection`) instead:
//! the guest never sees the address or the password. A source's
//! `plugin_config.poll_interval` (Iggy's, 10 s by default) is the connector's poll
//! interval. The other keys stay in `plugin_config`, for the connector to read as
//! Iggy's connector reads them.
//!
//! A connection string holding a password may not be written in the file (ferry
//! never reads a secret there): Iggy's override
//! `IGGY_CONNECTORS_<SOURCE|SINK>_<KEY>_PLUGIN_CONFIG_CONNECTION_STRING` gives it
//! from the environment (kept as a reference to the variable, never copied into the
//! config), and so does `connection_string = { env = "NAME" }` or `{ file = "PATH" }`.

use ferry_contract::Role;

/// The connectors whose `connection_string` the host serves.
const CONNECTORS: [&str; 2] = ["postgres_sink", "postgres_source"];

/// Iggy's default for `max_connections`.
const DEFAULT_MAX_CONNECTIONS: i64 = 10;

/// Iggy's default for a source's `poll_interval`.
const DEFAULT_POLL_INTERVAL: &str = "10s";

/// When the connector `connector` (its name, from its native library's path) is one
/// of Iggy's PostgreSQL connectors and its `plugin_config` has a
/// `connection_string`: that string made a server of `ferry` (the config being
/// built) and granted to `entry`. `origin` names the file in errors.
pub(super) fn serve_connection_string(
    origin: &str,
    connector: &str,
    role: Role,
    entry: &mut toml::Table,
    ferry: &mut toml::Table,
) -> Result<(), String> {
    if !CONNECTORS.contains(&connector) {
        return Ok(());
    }
    let key = entry.get("key").and_then(toml::Value::as_str).unwrap_or_default().to_string();
    let Some(plugin_config) = entry.get_mut("plugin_config").and_then(toml::Value::as_table_mut) else {
        return Ok(());
    };
    let Some(connection_string) = plugin_config.remove("connection_string") else { return Ok(()) };
    let at = |what: &str| format!("{origin}: [plugin_config] {what}");
    let url = match connection_string {
        toml::Value::String(text) => toml::Value::String(text),
        toml::Value::Table(source)
            if source.len() == 1 && (source.contains_key("env") || source.contains_key("file")) =>
        {
            toml::Value::Table(source)
        }
        other => {
            return Err(format!(
                "{}: expected a string, or {{ env = \"NAME\" }} or {{ file = \"PATH\" }}, found {}",
                at("connection_string"),
                other.type_str()
            ));
        }
    };
    let max_connections = match plugin_config.remove("max_connections") {
        None => DEFAULT_MAX_CONNECTIONS,
        Some(toml::Value::Integer(n)) => n,
        Some(other) => return Err(format!("{}: expected a number, found {}", at("max_connections"), other.type_str())),
    };
    let name = format!("{}-{key}", role.noun());
    let mut server = toml::Table::new();
    server.insert("url".into(), url);
    server.insert("max_connections".into(), max_connections.into());
    plugin_config.insert("connection".into(), name.clone().into());
    if role == Role::Source {
        let poll_interval = plugin_config.remove("poll_interval").unwrap_or_else(|| DEFAULT_POLL_INTERVAL.into());
        if entry.contains_key("poll_interval") {
            return Err(format!(
                "{origin}: poll_interval and [plugin_config] poll_interval: both say how often the source polls; keep \
                 one"
            ));
        }
        entry.insert("poll_interval".into(), poll_interval);
    }

    let servers = ferry.entry("postgres").or_insert_with(|| toml::Table::new().into());
    let servers = servers.as_table_mut().ok_or("`postgres` must be a table of servers")?;
    if servers.contains_key(&name) {
        return Err(format!(
            "{}: would be served as [postgres.{name}], which the runtime's file defines already; rename that one",
            at("connection_string")
        ));
    }
    servers.insert(name.clone(), server.into());
    let grants = entry.entry("grants").or_insert_with(|| toml::Table::new().into());
    let grants = grants.as_table_mut().ok_or_else(|| format!("{origin}: grants: must be a table"))?;
    let granted = grants.entry("postgres").or_insert_with(|| toml::Value::Array(Vec::new()));
    let granted =
        granted.as_array_mut().ok_or_else(|| format!("{origin}: grants.postgres: must be a list of names"))?;
    granted.push(name.into());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(text: &str) -> toml::Table {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn a_connection_string_becomes_a_server_granted_to_the_connector_alone() {
        let mut sink = entry(
            "key = \"pg\"\n[plugin_config]\nconnection_string = \"postgresql://app@db/shop\"\ntarget_table = \"t\"",
        );
        let mut ferry = toml::Table::new();
        serve_connection_string("f.toml", "postgres_sink", Role::Sink, &mut sink, &mut ferry).unwrap();
        assert_eq!(
            ferry["postgres"]["sink-pg"],
            entry("url = \"postgresql://app@db/shop\"\nmax_connections = 10").into()
        );
        assert_eq!(sink["grants"]["postgres"], toml::Value::Array(vec!["sink-pg".into()]));
        assert_eq!(
            sink["plugin_config"],
            entry("target_table = \"t\"\nconnection = \"sink-pg\"").into(),
            "the guest never sees the string"
        );
        assert!(!sink.contains_key("poll_interval"), "a sink's poll_interval is Iggy's stream setting");

        let mut source = entry(
            "key = \"pg\"\n[plugin_config]\nconnection_string = { env = \"PG_URL\" }\nmax_connections = 3\npoll_interval = \"1s\"",
        );
        serve_connection_string("f.toml", "postgres_source", Role::Source, &mut source, &mut ferry).unwrap();
        assert_eq!(ferry["postgres"]["source-pg"], entry("url = { env = \"PG_URL\" }\nmax_connections = 3").into());
        assert_eq!(source["poll_interval"], "1s".into());
        let mut quiet = entry("key = \"q\"\n[plugin_config]\nconnection_string = \"postgresql://app@db/shop\"");
        serve_connection_string("f.toml", "postgres_source", Role::Source, &mut quiet, &mut ferry).unwrap();
        assert_eq!(quiet["poll_interval"], "10s".into(), "Iggy's default");
    }

    #[test]
    fn other_connectors_and_ferrys_own_keys_are_left_alone() {
        let text = "key = \"pg\"\n[plugin_config]\nconnection_string = \"x\"";
        let mut other = entry(text);
        let mut ferry = toml::Table::new();
        serve_connection_string("f.toml", "mongodb_sink", Role::Sink, &mut other, &mut ferry).unwrap();
        assert_eq!(other, entry(text));
        let own = "key = \"pg\"\n[plugin_config]\nconnection = \"app\"\ntable = \"t\"";
        let mut own_keys = entry(own);
        serve_connection_string("f.toml", "postgres_sink", Role::Sink, &mut own_keys, &mut ferry).unwrap();
        assert_eq!(own_keys, entry(own));
        assert!(ferry.is_empty());
    }

    #[test]
    fn mistakes_name_the_file_and_the_key() {
        let cases = [
            ("connection_string = 5", "connection_string: expected a string"),
            ("connection_string = { value = \"x\" }", "connection_string: expected a string"),
            ("connection_string = \"x\"\nmax_connections = \"10\"", "max_connections: expected a number"),
        ];
        for (plugin_config, needle) in cases {
            let mut sink = entry(&format!("key = \"pg\"\n[plugin_config]\n{plugin_config}"));
            let problem =
                serve_connection_string("f.toml", "postgres_sink", Role::Sink, &mut sink, &mut toml::Table::new())
                    .unwrap_err();
            assert!(problem.starts_with("f.toml: ") && problem.contains(needle), "{plugin_config}: {problem}");
        }
        let mut taken = entry("key = \"pg\"\n[plugin_config]\nconnection_string = \"x\"");
        let mut ferry = entry("[postgres.sink-pg]\nhost = \"h\"");
        let problem =
            serve_connection_string("f.toml", "postgres_sink", Role::Sink, &mut taken, &mut ferry).unwrap_err();
        assert!(problem.contains("[postgres.sink-pg]"), "{problem}");
        let mut twice = entry("key = \"pg\"\npoll_interval = \"1s\"\n[plugin_config]\nconnection_string = \"x\"");
        let problem =
            serve_connection_string("f.toml", "postgres_source", Role::Source, &mut twice, &mut toml::Table::new())
                .unwrap_err();
        assert!(problem.contains("keep one"), "{problem}");
    }
}
