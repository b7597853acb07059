//! The kpccl segments of this node, as `kpccl-run --list` shows them (like
//! `ipcs`): live windows and stale names, with the creator's pid and
//! liveness, the size, the rank count and the age.
//!
//! A window's segment has no name in the directory (made nameless, or
//! unlinked a few system calls after it was made: see `way_in.rs`): a live
//! window is found in the memory maps of the processes that map it
//! (`/proc/PID/maps`: `… /dev/shm/#<inode> (deleted)` for a nameless one,
//! `… /dev/shm/kpccl-… (deleted)` for an unlinked one), and read through
//! `/proc/PID/map_files`; its creator is the first entry of its rank table.
//! A name still in the directory is a window being created (its creator
//! alive) or a stale one (its creator dead), which [`crate::sweep`] removes.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{self, Read};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use kpccl_core::ProcessIdentity;
use kpccl_core::layout::shared::{Header, MAGIC, RankEntry};

use crate::{liveness, sweep};

/// What a segment is now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Unlinked and mapped by running processes: a window in use.
    Live,
    /// Named, its creator running: a window being created.
    Creating,
    /// Named, its creator gone: nobody will unlink it (`kpccl-run --sweep`).
    Stale,
}

impl State {
    fn name(self) -> &'static str {
        match self {
            Self::Live => "live",
            Self::Creating => "creating",
            Self::Stale => "stale",
        }
    }
}

/// One segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentInfo {
    /// Its path (a live one's former path).
    pub path: PathBuf,
    /// What it is now.
    pub state: State,
    /// The process that created it, from its name.
    pub creator: Option<ProcessIdentity>,
    /// Whether that process still runs.
    pub creator_alive: bool,
    /// The processes that map it (live segments).
    pub attached: Vec<u32>,
    /// Its size in bytes.
    pub size: u64,
    /// The window's rank count, from its header (`None`: unreadable, or not a window yet).
    pub nranks: Option<u32>,
    /// Time since it was last changed (created, for a window).
    pub age: Option<Duration>,
}

/// The segments of `dir` (and of its simulated nodes' directories), named
/// or mapped by a process this user may inspect, sorted by path.
pub fn list(dir: &Path) -> io::Result<Vec<SegmentInfo>> {
    // Spelled as the memory maps spell it (absolute, no link, no trailing
    // slash): else a live window, found only there, is not seen as in `dir`.
    let dir = &fs::canonicalize(dir)?;
    let mut found: BTreeMap<PathBuf, SegmentInfo> = BTreeMap::new();
    for path in named(dir)? {
        // Opened without following a link and without blocking (a FIFO put
        // in its place), then judged by what was opened: a regular file of
        // this user's. One that vanished or changed meanwhile is skipped.
        let Ok(mut file) = open_plain(&path) else { continue };
        let Ok(meta) = file.metadata() else { continue };
        if !meta.is_file() || meta.uid() != crate::sys::euid() {
            continue;
        }
        let creator = path.file_name().and_then(|n| sweep::creator(&n.to_string_lossy()));
        let alive = creator.as_ref().is_some_and(liveness::is_alive);
        let info = SegmentInfo {
            state: if alive { State::Creating } else { State::Stale },
            creator,
            creator_alive: alive,
            attached: Vec::new(),
            size: meta.len(),
            nranks: head(&mut file).map(|h| h.nranks),
            age: age(&meta),
            path: path.clone(),
        };
        found.insert(path, info);
    }
    let mut by_path: BTreeMap<PathBuf, Vec<Mapping>> = BTreeMap::new();
    for m in mapped(dir) {
        by_path.entry(m.path.clone()).or_default().push(m);
    }
    for (path, maps) in by_path {
        if !found.contains_key(&path) {
            let Some(info) = live(&path, &maps) else { continue };
            found.insert(path.clone(), info);
        }
        let entry = found.get_mut(&path).expect("inserted above");
        for m in &maps {
            if !entry.attached.contains(&m.pid) {
                entry.attached.push(m.pid);
            }
        }
    }
    Ok(found.into_values().collect())
}

/// `path` opened for reading, never following a link nor blocking.
fn open_plain(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(path)
}

/// A live window at `path`, read through one of the processes that map it;
/// `None` for a nameless file that is not a window (or that none of them
/// lets this process read).
fn live(path: &Path, maps: &[Mapping]) -> Option<SegmentInfo> {
    let mut file = maps.iter().find_map(Mapping::open);
    let meta = file.as_ref().and_then(|f| f.metadata().ok());
    let head = file.as_mut().and_then(head);
    let named = path.file_name().and_then(|n| sweep::creator(&n.to_string_lossy()));
    if named.is_none() && head.is_none() {
        return None;
    }
    let creator = named.or(head.and_then(|h| h.creator));
    Some(SegmentInfo {
        path: path.to_owned(),
        state: State::Live,
        creator_alive: creator.as_ref().is_some_and(liveness::is_alive),
        creator,
        attached: Vec::new(),
        size: meta.as_ref().map_or_else(|| maps.first().map_or(0, |m| range_len(&m.range)), fs::Metadata::len),
        nranks: head.map(|h| h.nranks),
        age: meta.as_ref().and_then(age),
    })
}

/// A deleted segment a process maps: its former path, the process, the
/// mapping's address range, and the descriptor by which the process holds
/// it open (every rank of a window does).
struct Mapping {
    path: PathBuf,
    pid: u32,
    range: String,
    fd: Option<PathBuf>,
}

impl Mapping {
    /// The segment, read-only: through the process's descriptor, which this
    /// user may open, else through the mapping's `map_files` link, which
    /// takes `CAP_SYS_ADMIN`.
    fn open(&self) -> Option<File> {
        let by_fd = self.fd.as_deref().and_then(open_link);
        by_fd.or_else(|| open_link(Path::new(&format!("/proc/{}/map_files/{}", self.pid, self.range))))
    }
}

/// The regular file a `/proc` link leads to, opened for reading. The
/// number (or range) may name something else by now, found under the same
/// name: what is not a regular file is not opened (a FIFO would block the
/// listing, a device act on the open), and the open neither blocks nor
/// takes a terminal should that change in between.
fn open_link(link: &Path) -> Option<File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    if !fs::metadata(link).ok()?.is_file() {
        return None;
    }
    let file = fs::OpenOptions::new().read(true).custom_flags(libc::O_NOCTTY | libc::O_NONBLOCK).open(link).ok()?;
    file.metadata().ok()?.is_file().then_some(file)
}

/// The kpccl segment names in `dir` and in its node directories.
fn named(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut paths = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let Ok(meta) = entry.path().symlink_metadata() else { continue };
        if name.starts_with("kpccl-node-") && meta.is_dir() {
            paths.extend(named(&entry.path()).unwrap_or_default());
        } else if meta.is_file() && sweep::creator(&name).is_some() {
            paths.push(entry.path());
        }
    }
    Ok(paths)
}

/// Every deleted kpccl segment under `dir` that a process maps, and every
/// nameless file there (a tmpfs `O_TMPFILE` file shows as `#<inode>`;
/// [`list`] keeps those with a window header): one per mapping; the
/// processes this user cannot inspect are left out. `dir` is canonical, as
/// the maps spell paths.
fn mapped(dir: &Path) -> Vec<Mapping> {
    let Ok(procs) = fs::read_dir("/proc") else { return Vec::new() };
    let mut found = Vec::new();
    for entry in procs.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
        let Ok(maps) = fs::read_to_string(entry.path().join("maps")) else { continue };
        let mut fds: Option<Vec<(PathBuf, String)>> = None;
        for line in maps.lines() {
            // The path is the line's last field, the first to hold a '/'.
            let Some(path) = line.strip_suffix(" (deleted)").and_then(|l| l.find('/').map(|at| &l[at..])) else {
                continue;
            };
            if !Path::new(path).starts_with(dir) {
                continue;
            }
            let name = Path::new(path).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            if sweep::creator(&name).is_some() || name.starts_with('#') {
                let range = line.split_whitespace().next().unwrap_or_default().to_owned();
                let target = format!("{path} (deleted)");
                let fds = fds.get_or_insert_with(|| descriptors(&entry.path()));
                let fd = fds.iter().find(|(_, t)| *t == target).map(|(fd, _)| fd.clone());
                found.push(Mapping { path: PathBuf::from(path), pid, range, fd });
            }
        }
    }
    found
}

/// A process's open descriptors (`/proc/PID/fd/N`) and what each links to.
fn descriptors(proc_dir: &Path) -> Vec<(PathBuf, String)> {
    let Ok(fds) = fs::read_dir(proc_dir.join("fd")) else { return Vec::new() };
    fds.flatten()
        .filter_map(|fd| Some((fd.path(), fs::read_link(fd.path()).ok()?.to_string_lossy().into_owned())))
        .collect()
}

/// The length of a `start-end` address range (hex).
fn range_len(range: &str) -> u64 {
    let parse = |s: &str| u64::from_str_radix(s, 16).ok();
    range.split_once('-').and_then(|(a, b)| Some(parse(b)?.saturating_sub(parse(a)?))).unwrap_or(0)
}

/// What the start of a window tells: its rank count and its creator (the
/// first entry of its rank table, local rank 0 of the node).
#[derive(Clone, Copy, Debug)]
struct Head {
    nranks: u32,
    creator: Option<ProcessIdentity>,
}

/// The head of the window at the start of `f`, if it is one (a window being
/// created may not have its rank table yet: then no creator).
fn head(f: &mut impl Read) -> Option<Head> {
    let mut head = [0u8; size_of::<Header>() + size_of::<RankEntry>()];
    let mut got = 0;
    while got < head.len() {
        match f.read(&mut head[got..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    let head = &head[..got];
    let u64_at = |at: usize| Some(u64::from_ne_bytes(head.get(at..at + 8)?.try_into().ok()?));
    let u32_at = |at: usize| Some(u32::from_ne_bytes(head.get(at..at + 4)?.try_into().ok()?));
    if u64_at(core::mem::offset_of!(Header, magic))? != MAGIC {
        return None;
    }
    let nranks = u32_at(core::mem::offset_of!(Header, nranks))?;
    let entry = size_of::<Header>();
    let creator = (|| {
        let pid = u64_at(entry + core::mem::offset_of!(RankEntry, pid))?;
        let start_time = u64_at(entry + core::mem::offset_of!(RankEntry, start_time))?;
        let uid = u32_at(entry + core::mem::offset_of!(RankEntry, uid))?;
        (pid != 0).then_some(ProcessIdentity { pid, start_time, uid })
    })();
    Some(Head { nranks, creator })
}

fn age(meta: &fs::Metadata) -> Option<Duration> {
    let changed = SystemTime::UNIX_EPOCH + Duration::from_secs(u64::try_from(meta.ctime()).ok()?);
    SystemTime::now().duration_since(changed).ok()
}

/// `list`'s result as a table, one segment a line, under a heading.
pub fn table(segments: &[SegmentInfo]) -> String {
    let mut out = format!(
        "{:<9} {:>8} {:<6} {:>5} {:>10} {:>8}  {:<16} {}\n",
        "STATE", "CREATOR", "ALIVE", "RANKS", "SIZE", "AGE", "ATTACHED", "SEGMENT"
    );
    for s in segments {
        let creator = s.creator.map_or_else(|| "?".to_owned(), |c| c.pid.to_string());
        let ranks = s.nranks.map_or_else(|| "?".to_owned(), |n| n.to_string());
        let attached = attached(&s.attached);
        out.push_str(&format!(
            "{:<9} {creator:>8} {:<6} {ranks:>5} {:>10} {:>8}  {attached:<16} {}\n",
            s.state.name(),
            if s.creator_alive { "yes" } else { "no" },
            bytes(s.size),
            s.age.map_or_else(|| "?".to_owned(), duration),
            s.path.display()
        ));
    }
    out
}

/// The pids that map a segment, in order: a few listed, more as their range
/// and count, `5011…6034(1024)` (a window of 1024 ranks printed a line of
/// 6000 characters); one word either way, so that columns split on spaces.
fn attached(pids: &[u32]) -> String {
    const LISTED: usize = 4;
    let mut pids = pids.to_vec();
    pids.sort_unstable();
    match pids[..] {
        [] => "-".to_owned(),
        [first, .., last] if pids.len() > LISTED => format!("{first}…{last}({})", pids.len()),
        _ => pids.iter().map(u32::to_string).collect::<Vec<_>>().join(","),
    }
}

fn bytes(n: u64) -> String {
    match n {
        n if n >= 1 << 30 => format!("{:.1} GiB", n as f64 / f64::from(1u32 << 30)),
        n if n >= 1 << 20 => format!("{:.1} MiB", n as f64 / f64::from(1u32 << 20)),
        n if n >= 1 << 10 => format!("{:.1} KiB", n as f64 / 1024.0),
        n => format!("{n} B"),
    }
}

fn duration(d: Duration) -> String {
    match d.as_secs() {
        s if s >= 86_400 => format!("{}d", s / 86_400),
        s if s >= 3_600 => format!("{}h", s / 3_600),
        s if s >= 60 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn many_attached_pids_are_counted_not_listed() {
        assert_eq!(attached(&[]), "-");
        assert_eq!(attached(&[30, 10, 20, 40]), "10,20,30,40");
        let job: Vec<u32> = (5011..5011 + 1024).rev().collect();
        assert_eq!(attached(&job), "5011…6034(1024)");
    }

    #[test]
    fn reads_the_rank_count_and_creator_of_a_window_header_only() {
        let mut bytes = vec![0u8; size_of::<Header>() + size_of::<RankEntry>()];
        bytes[..8].copy_from_slice(&MAGIC.to_ne_bytes());
        let at = core::mem::offset_of!(Header, nranks);
        bytes[at..at + 4].copy_from_slice(&6u32.to_ne_bytes());
        // The header alone: a window whose rank table is not written yet.
        let read = |b: &[u8]| head(&mut &b[..]).map(|h| (h.nranks, h.creator.map(|c| (c.pid, c.start_time, c.uid))));
        assert_eq!(read(&bytes[..size_of::<Header>()]), Some((6, None)));
        let entry = size_of::<Header>();
        bytes[entry + core::mem::offset_of!(RankEntry, pid)..][..8].copy_from_slice(&42u64.to_ne_bytes());
        bytes[entry + core::mem::offset_of!(RankEntry, start_time)..][..8].copy_from_slice(&7u64.to_ne_bytes());
        bytes[entry + core::mem::offset_of!(RankEntry, uid)..][..4].copy_from_slice(&1000u32.to_ne_bytes());
        assert_eq!(read(&bytes), Some((6, Some((42, 7, 1000)))));
        bytes[0] ^= 1;
        assert_eq!(read(&bytes), None);
        assert_eq!(read(&bytes[..10]), None);
    }

    #[test]
    fn formats_sizes_ranges_and_ages() {
        assert_eq!(range_len("7f0000000000-7f0000010000"), 0x10000);
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(3 << 20), "3.0 MiB");
        assert_eq!(duration(Duration::from_secs(7_300)), "2h");
    }
}
