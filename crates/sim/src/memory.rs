//! Resident memory of this process, for the memory budget and the scale report.

/// Current resident set size in bytes; 0 where /proc is not available.
pub fn resident_bytes() -> u64 {
    read_status_kib("VmRSS:") * 1024
}

/// Peak resident set size in bytes; 0 where /proc is not available.
pub fn peak_resident_bytes() -> u64 {
    read_status_kib("VmHWM:") * 1024
}

fn read_status_kib(key: &str) -> u64 {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return 0;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}
