//! What `/proc` says about a process on this machine: its CPU time and resident memory.

/// Microseconds per clock tick of `/proc/*/stat`: Linux reports CPU time in USER_HZ, which is
/// 100 on every architecture it exports to user space as a fixed value.
pub const TICK_US: f64 = 10_000.0;

/// The user + system CPU ticks of process `pid` (`self` for this one) so far, from
/// `/proc/<pid>/stat` (fields 14 and 15); `None` where there is no such file (not Linux, or
/// a server on another machine).
pub fn cpu_ticks(pid: &str) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count from after it.
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// The CPU time of process `pid`'s live threads so far, in nanoseconds: the sum of the first
/// field (time spent on the CPU) of `/proc/<pid>/task/*/schedstat`. Far finer than
/// [`cpu_ticks`], but a thread that has exited takes its time with it, so it is only read
/// beside [`cpu_ticks`] over windows where the process's threads live on (a tokio runtime's
/// workers do); `None` where there is no such folder.
pub fn cpu_ns(pid: &str) -> Option<u64> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut total = 0u64;
    for task in tasks.flatten() {
        let Ok(stat) = std::fs::read_to_string(task.path().join("schedstat")) else {
            continue;
        };
        let ns: u64 = stat.split_whitespace().next()?.parse().ok()?;
        total = total.saturating_add(ns);
    }
    Some(total)
}

/// How many threads process `pid` has now (the entries of `/proc/<pid>/task`).
pub fn threads(pid: &str) -> Option<usize> {
    Some(std::fs::read_dir(format!("/proc/{pid}/task")).ok()?.count())
}

/// The resident set of process `pid` in kB (`VmRSS` of `/proc/<pid>/status`); `None` where
/// there is no such file or line.
pub fn rss_kb(pid: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_cpu_time_and_memory_on_linux() {
        if std::path::Path::new("/proc/self/stat").exists() {
            assert!(cpu_ticks("self").is_some());
            assert!(cpu_ns("self").is_some_and(|ns| ns > 0));
            assert!(threads("self").is_some_and(|n| n > 0));
            assert!(rss_kb("self").is_some_and(|kb| kb > 0));
        }
    }
}
