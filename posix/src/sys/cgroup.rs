//! The CPU quota of this process's control groups: how many CPUs' worth of
//! time their processes may use together, whatever their affinity (a
//! container's `--cpus`, a Kubernetes CPU limit). Ranks pinned each to a
//! CPU of their own still share it.

use std::fs;
use std::path::Path;

/// The lowest quota along this process's groups and their ancestors, in
/// whole CPUs (rounded up, at least 1); `None` without one, or when it
/// cannot be read. Cgroup v2 (`cpu.max`) and v1 (`cpu.cfs_quota_us`,
/// mounted at `/sys/fs/cgroup/cpu`).
pub(crate) fn cpu_quota() -> Option<u32> {
    let groups = fs::read_to_string("/proc/self/cgroup").ok()?;
    groups
        .lines()
        .filter_map(|line| {
            // "hierarchy-id:controllers:path"; cgroup v2's is "0::path".
            let mut fields = line.splitn(3, ':');
            let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
            if controllers.is_empty() {
                lowest_along(Path::new("/sys/fs/cgroup"), path, |dir| v2(&read(dir, "cpu.max")?))
            } else if controllers.split(',').any(|c| c == "cpu") {
                lowest_along(Path::new("/sys/fs/cgroup/cpu"), path, |dir| {
                    v1(&read(dir, "cpu.cfs_quota_us")?, &read(dir, "cpu.cfs_period_us")?)
                })
            } else {
                None
            }
        })
        .min()
}

fn read(dir: &Path, file: &str) -> Option<String> {
    fs::read_to_string(dir.join(file)).ok()
}

/// The lowest of `quota` over the group at `path` below `root` and its
/// ancestors. None for a group outside the namespace's root (`/../x`, which
/// a process moved out of its cgroup namespace sees): what lies below
/// `root` under that name is another group, whose quota is not ours.
fn lowest_along(root: &Path, path: &str, quota: impl Fn(&Path) -> Option<u32>) -> Option<u32> {
    if path.split('/').any(|c| c == "..") {
        return None;
    }
    let mut dir = root.to_path_buf();
    dir.extend(path.split('/').filter(|c| !c.is_empty()));
    let mut lowest = None;
    loop {
        lowest = lowest.into_iter().chain(quota(&dir)).min();
        if dir.as_path() == root || !dir.pop() || !dir.starts_with(root) {
            return lowest;
        }
    }
}

/// Cgroup v2's `cpu.max`: "max 100000" (none) or "150000 100000".
fn v2(text: &str) -> Option<u32> {
    let mut words = text.split_whitespace();
    let (quota, period) = (words.next()?, words.next()?);
    cpus(quota.parse().ok()?, period.parse().ok()?)
}

/// Cgroup v1's quota ("-1": none) and period, in microseconds.
fn v1(quota: &str, period: &str) -> Option<u32> {
    cpus(quota.trim().parse().ok()?, period.trim().parse().ok()?)
}

fn cpus(quota: u64, period: u64) -> Option<u32> {
    (period > 0).then(|| u32::try_from(quota.div_ceil(period)).unwrap_or(u32::MAX).max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotas_are_whole_cpus_rounded_up() {
        assert_eq!(v2("max 100000\n"), None);
        assert_eq!(v2("150000 100000\n"), Some(2));
        assert_eq!(v2("50000 100000"), Some(1));
        assert_eq!(v1("-1\n", "100000\n"), None);
        assert_eq!(v1("400000\n", "100000\n"), Some(4));
        assert_eq!(v1("400000", "0"), None);
    }

    #[test]
    fn the_lowest_quota_along_the_ancestors_wins() {
        let root = Path::new("/r");
        let quota = |dir: &Path| match dir.to_str()? {
            "/r/a" => Some(8),
            "/r/a/b" => Some(3),
            "/r" => Some(5),
            _ => None,
        };
        assert_eq!(lowest_along(root, "/a/b/c", quota), Some(3));
        assert_eq!(lowest_along(root, "/", quota), Some(5));
        assert_eq!(lowest_along(root, "/x", |_| None), None);
        // Outside the namespace: `/r/a` is another group's, and the root no ancestor.
        assert_eq!(lowest_along(root, "/../a/b", quota), None);
    }
}
