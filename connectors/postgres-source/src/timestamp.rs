//! Timestamps as RFC 3339 text in UTC, to the microsecond: what a reader of the
//! messages parses with any date library, and what sorts as text in time order.

/// Append `micros` since the Unix epoch to `out` as `2024-02-29T12:34:56.789012Z`.
/// Years outside 0000–9999 (PostgreSQL has 4713 BC to 294276 AD) are written with a
/// sign and six digits, as ISO 8601's expanded years: `+294276-12-31T...`.
///
/// The digits are put into a template by hand: a timestamp is formatted for every
/// row, and `format!` with padded fields made it the costliest part of a message.
pub fn write_rfc3339(out: &mut Vec<u8>, micros: i64) {
    const MICROS_PER_DAY: i64 = 86_400_000_000;
    let of_day = micros.rem_euclid(MICROS_PER_DAY) as u64;
    let (year, month, day) = civil_from_days(micros.div_euclid(MICROS_PER_DAY));
    let seconds = of_day / 1_000_000;
    if (0..=9999).contains(&year) {
        let mut text = *b"0000";
        put(&mut text, year as u64);
        out.extend_from_slice(&text);
    } else {
        // Six digits hold every year an i64 of microseconds reaches (±292,277).
        let mut text = *b"+000000";
        if year < 0 {
            text[0] = b'-';
        }
        put(&mut text[1..], year.unsigned_abs());
        out.extend_from_slice(&text);
    }
    let mut text = *b"-00-00T00:00:00.000000Z";
    put(&mut text[1..3], u64::from(month));
    put(&mut text[4..6], u64::from(day));
    put(&mut text[7..9], seconds / 3600);
    put(&mut text[10..12], seconds / 60 % 60);
    put(&mut text[13..15], seconds % 60);
    put(&mut text[16..22], of_day % 1_000_000);
    out.extend_from_slice(&text);
}

/// The last `slot.len()` decimal digits of `value` into `slot`, zero-padded.
fn put(slot: &mut [u8], mut value: u64) {
    for byte in slot.iter_mut().rev() {
        *byte = b'0' + (value % 10) as u8;
        value /= 10;
    }
}

/// The proleptic Gregorian date `days` after 1970-01-01, by Howard Hinnant's
/// `civil_from_days` (eras of 400 years, years starting in March).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * month_from_march + 2) / 5 + 1) as u32;
    let month = if month_from_march < 10 { month_from_march + 3 } else { month_from_march - 9 } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rfc3339(micros: i64) -> String {
        let mut out = Vec::new();
        write_rfc3339(&mut out, micros);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn known_instants() {
        // Checked against `date -u -d @SECONDS`.
        let cases = [
            (0, "1970-01-01T00:00:00.000000Z"),
            (-1, "1969-12-31T23:59:59.999999Z"),
            (946_684_800_000_000, "2000-01-01T00:00:00.000000Z"),
            (951_827_696_789_012, "2000-02-29T12:34:56.789012Z"),
            (1_709_210_096_000_001, "2024-02-29T12:34:56.000001Z"),
            (4_107_542_399_999_999, "2100-02-28T23:59:59.999999Z"),
            (4_107_542_400_000_000, "2100-03-01T00:00:00.000000Z"),
            (-2_208_988_800_000_000, "1900-01-01T00:00:00.000000Z"),
            (253_402_300_799_999_999, "9999-12-31T23:59:59.999999Z"),
            (253_402_300_800_000_000, "+010000-01-01T00:00:00.000000Z"),
            (-62_167_219_200_000_000, "0000-01-01T00:00:00.000000Z"),
            (-62_167_219_200_000_001, "-000001-12-31T23:59:59.999999Z"),
        ];
        for (micros, text) in cases {
            assert_eq!(rfc3339(micros), text, "{micros}");
        }
    }

    #[test]
    fn consecutive_days_follow_the_calendar() {
        // Walk 1,000 years of days: each date is the day after the one before.
        let mut previous = civil_from_days(-200_000);
        for days in -199_999..165_000 {
            let (year, month, day) = civil_from_days(days);
            let (py, pm, pd) = previous;
            let next_day = (year, month, day) == (py, pm, pd + 1);
            let next_month = day == 1 && ((year, month) == (py, pm + 1) || (year, month, pm) == (py + 1, 1, 12));
            assert!(next_day || next_month, "{previous:?} then {:?}", (year, month, day));
            let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
            let length = match month {
                2 if leap => 29,
                2 => 28,
                4 | 6 | 9 | 11 => 30,
                _ => 31,
            };
            assert!(day <= length, "{year}-{month}-{day}");
            previous = (year, month, day);
        }
    }

    #[test]
    fn the_digits_are_those_format_would_write() {
        // A walk over the whole range with a stride that lands on every kind of
        // field value, plus the instants around the ends of the four-digit years.
        let stride = i64::MAX / 99_991 + 12_345_679;
        let walk = (i64::MIN / stride..i64::MAX / stride).map(|n| n * stride);
        let edges =
            [-62_167_219_200_000_001, -62_167_219_200_000_000, 253_402_300_799_999_999, 253_402_300_800_000_000];
        for micros in walk.chain(edges) {
            let of_day = micros.rem_euclid(86_400_000_000);
            let (year, month, day) = civil_from_days(micros.div_euclid(86_400_000_000));
            let seconds = of_day / 1_000_000;
            let year = if (0..=9999).contains(&year) { format!("{year:04}") } else { format!("{year:+07}") };
            let expected = format!(
                "{year}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
                seconds / 3600,
                seconds / 60 % 60,
                seconds % 60,
                of_day % 1_000_000
            );
            assert_eq!(rfc3339(micros), expected, "{micros}");
        }
    }

    #[test]
    fn the_ends_of_the_range_do_not_overflow() {
        assert!(rfc3339(i64::MAX).starts_with("+294247-01-10T04:00:54.775807Z"));
        assert!(rfc3339(i64::MIN).starts_with("-290308-12-21T19:59:05.224192Z"));
    }
}
