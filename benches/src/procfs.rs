//! What `/proc` says about a set of processes: their CPU time and memory, for the
//! benchmarks that report CPU per request (peer-bench, master-bench).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// The processes a system runs as: whole Unix sessions and process trees, read from
/// `/proc` each time, so that processes the system starts during a run are counted.
#[derive(Debug)]
pub struct ProcessSet {
    /// A Unix session whose every process counts.
    pub session: Option<i32>,
    /// Processes that count, with their descendants.
    pub pids: Vec<i32>,
}

/// The fields of `/proc/PID/stat` used here.
#[derive(Debug, Clone, Copy)]
pub struct Stat {
    pub ppid: i32,
    pub session: i32,
    /// utime + stime, in clock ticks.
    pub cpu_ticks: u64,
}

/// Parses `/proc/PID/stat`; the command name in parentheses may hold spaces and `)`.
pub fn parse_stat(text: &str) -> Option<Stat> {
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state): ppid is field 4, session 6, utime 14, stime 15.
    let field = |n: usize| fields.get(n - 3).copied();
    Some(Stat {
        ppid: field(4)?.parse().ok()?,
        session: field(6)?.parse().ok()?,
        cpu_ticks: field(14)?.parse::<u64>().ok()? + field(15)?.parse::<u64>().ok()?,
    })
}

pub fn all_stats() -> BTreeMap<i32, Stat> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return BTreeMap::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse::<i32>().ok()?;
            let text = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            Some((pid, parse_stat(&text)?))
        })
        .collect()
}

/// The members of `session`, `roots`, and every descendant of either.
pub fn members(stats: &BTreeMap<i32, Stat>, session: Option<i32>, roots: &[i32]) -> BTreeSet<i32> {
    let mut chosen: BTreeSet<i32> = roots
        .iter()
        .copied()
        .filter(|p| stats.contains_key(p))
        .collect();
    if let Some(session) = session {
        chosen.extend(
            stats
                .iter()
                .filter(|(_, s)| s.session == session)
                .map(|(&p, _)| p),
        );
    }
    let mut children: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
    for (&pid, stat) in stats {
        children.entry(stat.ppid).or_default().push(pid);
    }
    let mut stack: Vec<i32> = chosen.iter().copied().collect();
    while let Some(pid) = stack.pop() {
        for &child in children.get(&pid).map_or(&[][..], Vec::as_slice) {
            if chosen.insert(child) {
                stack.push(child);
            }
        }
    }
    chosen
}

/// Summed memory of a process set.
#[derive(Debug, Default)]
pub struct Memory {
    pub processes: usize,
    pub pss_kib: u64,
    pub rss_kib: u64,
}

/// The `kB` value of the line starting with `key` in a `/proc` status-like file.
pub fn kib(text: &str, key: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(key))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

impl ProcessSet {
    pub fn current(&self, stats: &BTreeMap<i32, Stat>) -> BTreeSet<i32> {
        members(stats, self.session, &self.pids)
    }

    /// utime + stime of each current member, in clock ticks.
    pub fn cpu_ticks(&self) -> BTreeMap<i32, u64> {
        let stats = all_stats();
        self.current(&stats)
            .into_iter()
            .filter_map(|pid| Some((pid, stats.get(&pid)?.cpu_ticks)))
            .collect()
    }

    /// PSS (`smaps_rollup`, shared pages divided among their users) and RSS (`status`)
    /// summed over the current members.
    pub fn memory(&self) -> Memory {
        let mut memory = Memory::default();
        for pid in self.current(&all_stats()) {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
            let rss = kib(&status, "VmRSS:").unwrap_or(0);
            let rollup =
                std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
            memory.processes += 1;
            memory.rss_kib += rss;
            // Without smaps_rollup (older kernels, no permission) RSS stands in for PSS.
            memory.pss_kib += kib(&rollup, "Pss:").unwrap_or(rss);
        }
        memory
    }
}

/// `getconf CLK_TCK`: the unit of utime and stime (USER_HZ, 100 on Linux).
pub fn clock_ticks_per_second() -> u64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|text| text.trim().parse().ok())
        .filter(|&ticks| ticks > 0)
        .unwrap_or(100)
}

/// CPU time used between two readings of [`ProcessSet::cpu_ticks`], by the processes in
/// the second (one that ended in between is not counted).
pub fn cpu_between(before: &BTreeMap<i32, u64>, after: &BTreeMap<i32, u64>) -> Duration {
    let ticks: u64 = after
        .iter()
        .map(|(pid, t)| t.saturating_sub(before.get(pid).copied().unwrap_or(0)))
        .sum();
    Duration::from_secs_f64(ticks as f64 / clock_ticks_per_second() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_after_a_command_name_with_spaces_and_parentheses() {
        let line =
            "42 (ray::Serve (x) y) S 7 42 40 0 -1 4194560 100 0 0 0 250 31 0 0 20 0 9 0 1 2 3";
        let stat = parse_stat(line).unwrap();
        assert_eq!((stat.ppid, stat.session, stat.cpu_ticks), (7, 40, 281));
        assert!(parse_stat("42 (broken").is_none());
    }

    #[test]
    fn members_are_the_session_the_roots_and_their_descendants() {
        let stat = |ppid, session| Stat {
            ppid,
            session,
            cpu_ticks: 0,
        };
        // 10 leads session 10 and has a child 11 that opened session 11 with child 12;
        // 20 is a root with child 21; 30 is unrelated.
        let stats = BTreeMap::from([
            (10, stat(1, 10)),
            (11, stat(10, 11)),
            (12, stat(11, 11)),
            (20, stat(1, 20)),
            (21, stat(20, 20)),
            (30, stat(1, 30)),
        ]);
        assert_eq!(
            members(&stats, Some(10), &[20, 99]),
            BTreeSet::from([10, 11, 12, 20, 21])
        );
        assert_eq!(members(&stats, None, &[]), BTreeSet::new());
    }

    #[test]
    fn kib_reads_the_value_of_a_key() {
        let text = "Rss:  10 kB\nPss:  7 kB\n";
        assert_eq!((kib(text, "Pss:"), kib(text, "Swap:")), (Some(7), None));
    }
}
