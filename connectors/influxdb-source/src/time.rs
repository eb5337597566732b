//! RFC 3339 times (`initial_offset`, `2024-01-01T00:00:00Z`) as nanoseconds since the
//! epoch, the unit the source asks the server for (`epoch=ns`).

/// `text` (`YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`) in nanoseconds since the epoch.
pub fn parse_rfc3339(text: &str) -> Result<i64, String> {
    let bad = || "not an RFC 3339 time such as 2024-01-01T00:00:00Z".to_string();
    let number = |part: &str| part.parse::<i64>().map_err(|_| bad());
    let (date, rest) = text.split_once(['T', 't', ' ']).ok_or_else(bad)?;
    let mut date_parts = date.split('-');
    let (year, month, day) = match (date_parts.next(), date_parts.next(), date_parts.next(), date_parts.next()) {
        (Some(y), Some(m), Some(d), None) => (number(y)?, number(m)?, number(d)?),
        _ => return Err(bad()),
    };
    let (clock, offset) = if let Some(clock) = rest.strip_suffix(['Z', 'z']) {
        (clock, 0)
    } else {
        let at = rest.rfind(['+', '-']).ok_or_else(bad)?;
        let (clock, zone) = rest.split_at(at);
        let sign = if zone.starts_with('-') { -1 } else { 1 };
        let (hours, minutes) = zone[1..].split_once(':').ok_or_else(bad)?;
        (clock, sign * (number(hours)? * 3600 + number(minutes)? * 60))
    };
    let (clock, fraction) = clock.split_once('.').unwrap_or((clock, ""));
    let mut clock_parts = clock.split(':');
    let (hour, minute, second) = match (clock_parts.next(), clock_parts.next(), clock_parts.next(), clock_parts.next())
    {
        (Some(h), Some(m), Some(s), None) => (number(h)?, number(m)?, number(s)?),
        _ => return Err(bad()),
    };
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60 {
        return Err(bad());
    }
    if fraction.len() > 9 || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let nanos = if fraction.is_empty() { 0 } else { number(&format!("{fraction:0<9}"))? };
    let seconds = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offset;
    seconds.checked_mul(1_000_000_000).and_then(|n| n.checked_add(nanos)).ok_or_else(|| "out of range".to_string())
}

/// Days from 1970-01-01 to `year-month-day` (proleptic Gregorian; Howard Hinnant's).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}
