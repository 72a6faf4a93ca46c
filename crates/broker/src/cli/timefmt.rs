//! Times on the command line, as Kafka's tools take them: datetimes
//! `YYYY-MM-DDTHH:mm:SS[.sss][Z|±hh:mm]` (UTC when no zone is given — Kafka's
//! tool uses the local zone, which a script cannot rely on), ISO-8601
//! durations `PnDTnHnMn.nS`, and epoch milliseconds for display.

/// Days from 1970-01-01 to the civil date (proleptic Gregorian).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date of a day count from 1970-01-01.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn number(text: &str, what: &str) -> Result<i64, String> {
    text.parse()
        .map_err(|_| format!("{what}: {text:?} is not a number"))
}

/// Parses a datetime to epoch milliseconds. A bare number is taken as epoch
/// milliseconds already.
///
/// # Errors
///
/// A message naming what does not parse.
pub fn parse_datetime(text: &str) -> Result<i64, String> {
    let text = text.trim();
    if let Ok(ms) = text.parse::<i64>() {
        return Ok(ms);
    }
    let bad = || {
        format!(
            "{text:?} is not a datetime like 2024-05-01T12:30:00.000 (UTC unless it ends in Z or ±hh:mm)"
        )
    };
    let (date, rest) = text.split_once(['T', ' ']).ok_or_else(bad)?;
    let mut d = date.split('-');
    let (Some(y), Some(mo), Some(da), None) = (d.next(), d.next(), d.next(), d.next()) else {
        return Err(bad());
    };
    let (year, month, day) = (number(y, "year")?, number(mo, "month")?, number(da, "day")?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return Err(bad());
    }
    // Split off the zone: Z, +hh:mm or -hh:mm after the time.
    let (time, offset_minutes) = if let Some(t) = rest.strip_suffix(['Z', 'z']) {
        (t, 0)
    } else if let Some(i) = rest.rfind(['+', '-']) {
        let (t, zone) = rest.split_at(i);
        let sign = if zone.starts_with('-') { -1 } else { 1 };
        let zone = zone.get(1..).unwrap_or_default().replace(':', "");
        if zone.len() != 4 {
            return Err(bad());
        }
        let hours = number(zone.get(..2).unwrap_or_default(), "zone hours")?;
        let minutes = number(zone.get(2..).unwrap_or_default(), "zone minutes")?;
        (t, sign * (hours * 60 + minutes))
    } else {
        (rest, 0)
    };
    let (hms, fraction) = time.split_once('.').unwrap_or((time, ""));
    let mut parts = hms.split(':');
    let hour = number(parts.next().unwrap_or("0"), "hour")?;
    let minute = number(parts.next().unwrap_or("0"), "minute")?;
    let second = number(parts.next().unwrap_or("0"), "second")?;
    if parts.next().is_some() || hour > 23 || minute > 59 || second > 60 {
        return Err(bad());
    }
    let millis = if fraction.is_empty() {
        0
    } else {
        let digits: String = fraction.chars().chain("000".chars()).take(3).collect();
        number(&digits, "milliseconds")?
    };
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset_minutes * 60;
    Ok(seconds * 1000 + millis)
}

/// Parses an ISO-8601 duration (`PT1H30M`, `P1DT2H`, `-PT10M`, `PT0.5S`)
/// to milliseconds.
///
/// # Errors
///
/// A message when the text is not such a duration.
pub fn parse_duration(text: &str) -> Result<i64, String> {
    let bad = || format!("{text:?} is not an ISO-8601 duration like PT1H30M or P1DT12H");
    let trimmed = text.trim();
    let (sign, body) = match trimmed.strip_prefix('-') {
        Some(b) => (-1, b),
        None => (1, trimmed.strip_prefix('+').unwrap_or(trimmed)),
    };
    let body = body
        .strip_prefix(['P', 'p'])
        .ok_or_else(bad)?
        .to_ascii_uppercase();
    let (days_part, time_part) = match body.split_once('T') {
        Some((d, t)) => (d.to_owned(), t.to_owned()),
        None => (body.clone(), String::new()),
    };
    let mut total_ms: f64 = 0.0;
    let mut any = false;
    let mut take = |part: &str, units: &[(char, f64)]| -> Result<(), String> {
        let mut digits = String::new();
        for c in part.chars() {
            if c.is_ascii_digit() || c == '.' {
                digits.push(c);
                continue;
            }
            let factor = units
                .iter()
                .find(|(u, _)| *u == c)
                .map(|(_, f)| *f)
                .ok_or_else(bad)?;
            let value: f64 = digits.parse().map_err(|_| bad())?;
            total_ms += value * factor;
            any = true;
            digits.clear();
        }
        if digits.is_empty() {
            Ok(())
        } else {
            Err(bad())
        }
    };
    take(&days_part, &[('D', 86_400_000.0)])?;
    take(
        &time_part,
        &[('H', 3_600_000.0), ('M', 60_000.0), ('S', 1000.0)],
    )?;
    if !any {
        return Err(bad());
    }
    #[allow(clippy::cast_possible_truncation)] // bounded by the text's digits
    Ok(sign * total_ms.round() as i64)
}

/// Epoch milliseconds as `YYYY-MM-DDTHH:MM:SS.sssZ`.
#[must_use]
pub fn format_millis(ms: i64) -> String {
    if ms < 0 {
        return "-".to_owned();
    }
    let days = ms.div_euclid(86_400_000);
    let rest = ms.rem_euclid(86_400_000);
    let (y, mo, d) = civil_from_days(days);
    format!(
        "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3_600_000,
        rest / 60_000 % 60,
        rest / 1000 % 60,
        rest % 1000
    )
}

/// Now, in epoch milliseconds.
#[must_use]
pub fn now_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    #[test]
    fn datetimes() {
        check!(parse_datetime("1970-01-01T00:00:00").unwrap() == 0);
        check!(parse_datetime("2024-02-29T12:30:15.250Z").unwrap() == 1_709_209_815_250);
        check!(parse_datetime("2024-02-29T14:30:15.25+02:00").unwrap() == 1_709_209_815_250);
        check!(parse_datetime("2024-02-29T07:30:15.250-0500").unwrap() == 1_709_209_815_250);
        check!(parse_datetime("1709209815250").unwrap() == 1_709_209_815_250);
        check!(parse_datetime("2024-13-01T00:00:00").is_err());
        check!(parse_datetime("yesterday").is_err());
        check!(format_millis(1_709_209_815_250) == "2024-02-29T12:30:15.250Z");
        check!(parse_datetime(&format_millis(86_399_999)).unwrap() == 86_399_999);
    }

    #[test]
    fn durations() {
        check!(parse_duration("PT1H30M").unwrap() == 5_400_000);
        check!(parse_duration("P1DT2H").unwrap() == 93_600_000);
        check!(parse_duration("-PT10M").unwrap() == -600_000);
        check!(parse_duration("PT0.5S").unwrap() == 500);
        check!(parse_duration("P2D").unwrap() == 172_800_000);
        check!(parse_duration("1h").is_err());
        check!(parse_duration("P").is_err());
        check!(parse_duration("PT5X").is_err());
    }
}
