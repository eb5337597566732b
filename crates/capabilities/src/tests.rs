//! The list as a whole: what every import gets with no grants and with some.

use super::{Grants, Verdict};

#[test]
fn nothing_but_clocks_random_and_logs_without_grants() {
    let none = Grants::default();
    assert!(matches!(none.verdict("wasi:clocks/monotonic-clock@0.2.3"), Verdict::Granted(_)));
    assert!(matches!(none.verdict("wasi:random/random@0.2.3"), Verdict::Granted(_)));
    assert!(matches!(none.verdict("iggy:connector/logging@0.2.0"), Verdict::Granted(_)));
    assert!(matches!(none.verdict("iggy:connector/types@0.2.0"), Verdict::Granted(_)));
    assert!(matches!(none.verdict("wasi:filesystem/preopens@0.2.3"), Verdict::Denied(_)));
    assert!(matches!(none.verdict("wasi:sockets/tcp@0.2.3"), Verdict::Denied(_)));
    assert!(matches!(none.verdict("wasi:cli/environment@0.2.3"), Verdict::Denied(_)));
    assert!(matches!(none.verdict("wasi:cli/stdin@0.2.3"), Verdict::Denied(_)));
    assert!(matches!(none.verdict("wasi:http/outgoing-handler@0.2.3"), Verdict::Denied(_)));
    assert!(matches!(none.verdict("iggy:connector/postgres@0.2.0"), Verdict::Denied(_)));
    assert_eq!(none.verdict("wasi:http/incoming-handler@0.2.3"), Verdict::Unavailable);
    assert_eq!(none.verdict("wasi:keyvalue/store@0.2.0"), Verdict::Unavailable);
    assert!(matches!(none.verdict("iggy:connector/redis@0.2.1"), Verdict::Denied(_)));
    assert!(matches!(none.verdict("iggy:connector/stored-checksums@0.2.1"), Verdict::Granted(_)));
    assert!(matches!(none.verdict("iggy:connector/nats@0.2.1"), Verdict::Denied(_)));
    assert!(matches!(none.verdict("iggy:connector/mqtt@0.2.1"), Verdict::Denied(_)));
    assert!(matches!(none.verdict("iggy:connector/mysql@0.2.1"), Verdict::Denied(_)));
    assert!(matches!(none.verdict("iggy:connector/kafka@0.2.1"), Verdict::Denied(_)));
    assert_eq!(none.verdict("iggy:connector/amqp@0.2.1"), Verdict::Unavailable);
}

#[test]
fn grants_open_what_they_name() {
    let grants = Grants {
        env: vec!["TZ".into()],
        dirs: vec![],
        network: vec!["localhost:1".into()],
        postgres: vec!["orders".into()],
        redis: vec!["cache".into()],
        nats: vec![],
        mqtt: vec!["sensors".into()],
        mysql: vec![],
        kafka: vec!["events".into()],
    };
    assert!(matches!(grants.verdict("wasi:cli/environment@0.2.3"), Verdict::Granted("grants.env")));
    assert!(matches!(grants.verdict("wasi:sockets/tcp@0.2.0"), Verdict::Granted("grants.network")));
    assert!(matches!(grants.verdict("wasi:http/outgoing-handler@0.2.3"), Verdict::Granted("grants.network")));
    assert!(matches!(grants.verdict("wasi:filesystem/types@0.2.3"), Verdict::Denied(_)));
    assert!(matches!(grants.verdict("iggy:connector/postgres@0.2.0"), Verdict::Granted("grants.postgres")));
    assert!(matches!(grants.verdict("iggy:connector/redis@0.2.1"), Verdict::Granted("grants.redis")));
    assert!(matches!(grants.verdict("iggy:connector/mqtt@0.2.1"), Verdict::Granted("grants.mqtt")));
    assert!(matches!(grants.verdict("iggy:connector/nats@0.2.1"), Verdict::Denied(_)));
    assert!(matches!(grants.verdict("iggy:connector/kafka@0.2.1"), Verdict::Granted("grants.kafka")));
    // A network grant is TCP and HTTP only: the sandbox never lets UDP out.
    assert_eq!(grants.verdict("wasi:sockets/udp@0.2.3"), Verdict::Denied("UDP is never granted"));
    assert_eq!(grants.verdict("wasi:sockets/udp-create-socket@0.2.3"), Verdict::Denied("UDP is never granted"));
}

#[test]
fn an_unknown_grant_is_refused_by_name() {
    let error = toml::from_str::<Grants>("netwrk = []").unwrap_err().to_string();
    assert!(error.contains("unknown field `netwrk`"), "{error}");
    assert!(
        error.contains("`env`, `dirs`, `network`, `postgres`, `redis`, `nats`, `mqtt`, `mysql`, `kafka`"),
        "{error}"
    );
}
