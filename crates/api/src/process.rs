//! The process's own CPU time and resident memory, read from `/proc/self`, for
//! `/stats` and `/metrics`.

use std::sync::Mutex;
use std::time::Instant;

/// What the process has used so far.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Usage {
    /// User and system CPU time, in seconds.
    pub cpu_seconds: f64,
    /// Resident set size, in bytes.
    pub rss_bytes: u64,
}

/// The usage now; zeros where `/proc` cannot be read (not Linux, or hidden).
pub(super) fn usage() -> Usage {
    Usage { cpu_seconds: cpu_seconds().unwrap_or(0.0), rss_bytes: rss_bytes().unwrap_or(0) }
}

/// `utime` and `stime`, fields 14 and 15 of `/proc/self/stat`, in clock ticks. The
/// fields are counted after the command name's closing parenthesis, since the name
/// itself may hold spaces.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    // After the name come field 3 (state) onwards: utime is the 12th of these.
    let mut fields = after_name.split_whitespace().skip(11);
    let user: u64 = fields.next()?.parse().ok()?;
    let system: u64 = fields.next()?.parse().ok()?;
    // SAFETY: sysconf only reads a configuration value.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (ticks > 0).then(|| (user + system) as f64 / ticks as f64)
}

/// The second field of `/proc/self/statm` (resident pages), in bytes.
fn rss_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf only reads a configuration value.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(page).ok().map(|page| pages * page)
}

/// CPU use as a percentage of one core, between two looks.
pub(super) struct CpuMeter {
    last: Mutex<(Instant, f64)>,
}

impl CpuMeter {
    pub fn new() -> CpuMeter {
        CpuMeter { last: Mutex::new((Instant::now(), usage().cpu_seconds)) }
    }

    /// The percentage of one core used since the last call (since the meter was
    /// made, at the first).
    pub fn percent_since_last(&self, now: &Usage) -> f64 {
        let at = Instant::now();
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let (since, cpu_then) = std::mem::replace(&mut *last, (at, now.cpu_seconds));
        let wall = at.duration_since(since).as_secs_f64();
        if wall <= 0.0 { 0.0 } else { ((now.cpu_seconds - cpu_then).max(0.0) / wall) * 100.0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_uses_some_memory_and_cpu() {
        // Burn a little CPU so that the clock has ticked.
        let mut x = 0u64;
        let started = Instant::now();
        while started.elapsed().as_millis() < 30 {
            x = x.wrapping_mul(31).wrapping_add(7);
        }
        std::hint::black_box(x);
        let usage = usage();
        assert!(usage.rss_bytes > 1024 * 1024, "a test process has more than 1 MiB resident: {usage:?}");
        assert!(usage.cpu_seconds > 0.0, "{usage:?}");
    }
}
