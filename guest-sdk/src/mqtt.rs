//! A connector's side of the host's `mqtt` import: the import's errors in words for
//! an operator, and QoS levels by their numbers. (`Session::open`, `publish`,
//! `subscribe`, `receive` and `acknowledge` are the import's own, in
//! [`crate::bindings::iggy::connector::mqtt`].)

use crate::bindings::iggy::connector::mqtt::{Error as MqttError, Qos};

/// The import's error, for people.
pub fn describe(error: &MqttError) -> String {
    match error {
        MqttError::NotGranted(detail) => format!("not granted ({detail})"),
        MqttError::Connection(detail) => format!("no connection ({detail})"),
        MqttError::TimedOut(detail) => format!("timed out ({detail})"),
    }
}

/// The QoS of MQTT's number for it (0, 1 or 2), as configs write it.
pub fn qos(level: u8) -> Option<Qos> {
    match level {
        0 => Some(Qos::AtMostOnce),
        1 => Some(Qos::AtLeastOnce),
        2 => Some(Qos::ExactlyOnce),
        _ => None,
    }
}

/// MQTT's number for `qos`.
pub fn level(qos: Qos) -> u8 {
    match qos {
        Qos::AtMostOnce => 0,
        Qos::AtLeastOnce => 1,
        Qos::ExactlyOnce => 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qos_levels_round_trip_and_others_are_none() {
        for n in 0..=2 {
            assert_eq!(qos(n).map(level), Some(n));
        }
        assert_eq!(qos(3), None);
    }
}
