//! Addresses the operator writes as `host:port` (a network grant, the API's
//! `address`), with IPv6 hosts in brackets (`[::1]:9000`).

/// The `host` and `port` of `entry`; the error quotes the entry and says what is wrong.
pub fn split_host_port(entry: &str) -> Result<(&str, u16), String> {
    let (host, port) = entry.rsplit_once(':').ok_or_else(|| format!("{entry:?} is not `host:port`"))?;
    let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    if host.is_empty() {
        return Err(format!("{entry:?} names no host"));
    }
    let port = port.parse().map_err(|_| format!("{entry:?}: {port:?} is not a port number"))?;
    Ok((host, port))
}

#[cfg(test)]
mod tests {
    use super::split_host_port;

    #[test]
    fn hosts_ports_and_brackets() {
        assert_eq!(split_host_port("db.internal:5432"), Ok(("db.internal", 5432)));
        assert_eq!(split_host_port("[::1]:9000"), Ok(("::1", 9000)));
        assert_eq!(split_host_port("db.internal"), Err("\"db.internal\" is not `host:port`".into()));
        assert_eq!(split_host_port(":80"), Err("\":80\" names no host".into()));
        assert_eq!(split_host_port("h:http"), Err("\"h:http\": \"http\" is not a port number".into()));
    }
}
