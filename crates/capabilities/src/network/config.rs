//! `grants.network = ["db.internal:5432", "api.example.com:443"]`: where a guest may
//! connect, `host:port` each. Names are resolved when an instance starts.

pub(super) use ferry_contract::settings::split_host_port;

/// Each entry must be `host:port`.
pub(super) fn validate(entries: &[String]) -> Result<(), String> {
    entries.iter().try_for_each(|entry| split_host_port(entry).map(drop))
}
