//! The machine-wide state of the simulator, per user: a text file of key records in
//! `$ASCEND_SIM_DIR` (default `/dev/shm/ascend-sim2-<uid>/`; the `2` is the record
//! format, so simulators of another format never rewrite these records), read and
//! rewritten under `flock` on `registry.lock`. Records of dead processes are swept on every access
//! (the driver's recycle on exit) and the directory is removed when it empties.

use std::cell::Cell;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::procinfo;

/// A whitelist entry: an importer's bare tgid and when it was set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WlEntry {
    pub(crate) pid: i32,
    pub(crate) set_time: u64,
}

/// A process that holds an import of a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Importer {
    pub(crate) pid: i32,
    pub(crate) start: u64,
    pub(crate) dev: i32,
}

/// One exported key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    pub(crate) key: String,
    pub(crate) creator_tgid: i32,
    pub(crate) creator_pid: i32,
    pub(crate) creator_start: u64,
    pub(crate) dev: i32,
    pub(crate) fd: i32,
    pub(crate) offset: usize,
    pub(crate) size: usize,
    pub(crate) need_wlist: bool,
    /// The memory was allocated with a P2P policy.
    pub(crate) p2p: bool,
    pub(crate) valid: bool,
    pub(crate) revoked: bool,
    pub(crate) wlist: Vec<WlEntry>,
    pub(crate) importers: Vec<Importer>,
}

/// All records and the export counter.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    pub(crate) counter: u64,
    pub(crate) records: Vec<Record>,
}

impl Registry {
    /// The record of `key`, if any.
    pub(crate) fn find(&mut self, key: &str) -> Option<&mut Record> {
        self.records.iter_mut().find(|r| r.key == key)
    }

    /// Applies process deaths: a dead creator destroys its keys and revokes their
    /// pages; dead importers drop their imports; empty destroyed records go.
    fn sweep(&mut self) {
        for r in &mut self.records {
            if r.valid && !procinfo::alive(r.creator_pid, r.creator_start) {
                r.valid = false;
                r.revoked = true;
            }
            r.importers.retain(|i| procinfo::alive(i.pid, i.start));
        }
        self.records.retain(|r| r.valid || !r.importers.is_empty());
    }

    fn parse(text: &str) -> Self {
        let mut reg = Self::default();
        for line in text.lines() {
            let f: Vec<&str> = line.split(' ').collect();
            match f.as_slice() {
                ["C", n] => reg.counter = n.parse().unwrap_or(0),
                ["K", rest @ ..] if rest.len() == 14 => {
                    if let Some(r) = parse_record(rest) {
                        reg.records.push(r);
                    }
                }
                _ => {}
            }
        }
        reg
    }

    fn render(&self) -> String {
        let mut out = format!("C {}\n", self.counter);
        for r in &self.records {
            let wl = join(r.wlist.iter().map(|w| format!("{}:{}", w.pid, w.set_time)));
            let im = join(r.importers.iter().map(|i| format!("{}:{}:{}", i.pid, i.start, i.dev)));
            out += &format!(
                "K {} {} {} {} {} {} {} {} {} {} {} {} {wl} {im}\n",
                r.key,
                r.creator_tgid,
                r.creator_pid,
                r.creator_start,
                r.dev,
                r.fd,
                r.offset,
                r.size,
                u8::from(r.need_wlist),
                u8::from(r.p2p),
                u8::from(r.valid),
                u8::from(r.revoked),
            );
        }
        out
    }
}

fn join(items: impl Iterator<Item = String>) -> String {
    let v: Vec<String> = items.collect();
    if v.is_empty() { "-".into() } else { v.join(",") }
}

fn parse_list<T>(s: &str, f: impl Fn(&[&str]) -> Option<T>) -> Option<Vec<T>> {
    if s == "-" {
        return Some(Vec::new());
    }
    s.split(',').map(|e| f(&e.split(':').collect::<Vec<_>>())).collect()
}

fn parse_record(f: &[&str]) -> Option<Record> {
    Some(Record {
        key: f[0].to_owned(),
        creator_tgid: f[1].parse().ok()?,
        creator_pid: f[2].parse().ok()?,
        creator_start: f[3].parse().ok()?,
        dev: f[4].parse().ok()?,
        fd: f[5].parse().ok()?,
        offset: f[6].parse().ok()?,
        size: f[7].parse().ok()?,
        need_wlist: f[8] == "1",
        p2p: f[9] == "1",
        valid: f[10] == "1",
        revoked: f[11] == "1",
        wlist: parse_list(f[12], |p| {
            Some(WlEntry { pid: p.first()?.parse().ok()?, set_time: p.get(1)?.parse().ok()? })
        })?,
        importers: parse_list(f[13], |p| {
            Some(Importer {
                pid: p.first()?.parse().ok()?,
                start: p.get(1)?.parse().ok()?,
                dev: p.get(2)?.parse().ok()?,
            })
        })?,
    })
}

/// Why the registry could not be used: what decides the ACL code a call
/// returns, so it is kept apart here rather than read back out of an
/// [`io::Error`]'s payload.
#[derive(Debug)]
pub(crate) enum RegistryError {
    /// A variable that sets how it is used (the lock's timeout) was refused.
    Refused(kpccl_posix::Error),
    /// Reading or writing it, or its lock, failed.
    Io(io::Error),
}

impl From<io::Error> for RegistryError {
    fn from(e: io::Error) -> Self {
        Self::Io(e)
    }
}

/// For [`sweep`], whose callers read an [`io::Error`]: a refused variable is
/// invalid input, carrying the refusal.
impl From<RegistryError> for io::Error {
    fn from(e: RegistryError) -> Self {
        match e {
            RegistryError::Refused(e) => Self::new(io::ErrorKind::InvalidInput, e),
            RegistryError::Io(e) => e,
        }
    }
}

/// The registry directory: `$ASCEND_SIM_DIR`, else `/dev/shm/ascend-sim2-<uid>`.
pub(crate) fn dir() -> PathBuf {
    if let Some(d) = std::env::var_os("ASCEND_SIM_DIR") {
        return PathBuf::from(d);
    }
    let uid = fs::metadata("/proc/self").map(|m| m.uid()).unwrap_or(0);
    PathBuf::from(format!("/dev/shm/ascend-sim2-{uid}"))
}

fn flock(file: &File, op: i32) -> io::Result<()> {
    // SAFETY: flock on a descriptor we own; no memory is passed.
    let rc = unsafe { libc::flock(file.as_raw_fd(), op) };
    if rc == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

/// The variable that sets how long a call waits for the registry lock, in
/// milliseconds (default 10 000).
pub const LOCK_TIMEOUT_ENV: &str = "ASCEND_SIM_LOCK_TIMEOUT_MS";

/// `ASCEND_SIM_LOCK_TIMEOUT_MS`, 10 000 if unset; a value that is not a
/// whole number of milliseconds fails the call (the error carries the
/// refusal, for the caller to report) rather than wait 10 s unasked.
fn lock_timeout_ms() -> Result<u64, RegistryError> {
    kpccl_posix::env_parsed(LOCK_TIMEOUT_ENV, "milliseconds (a whole number from 0)")
        .map(|ms| ms.unwrap_or(10_000))
        .map_err(RegistryError::Refused)
}

/// Takes the registry lock on `file` (`path`), waiting at most `ms`. A rewrite holds it for
/// microseconds, so a hold longer than the timeout is a process stopped or
/// stuck while holding it: the call fails, naming that process, rather than
/// hang every simulator call of the user.
fn lock_exclusive(file: &File, path: &Path, ms: u64) -> io::Result<()> {
    let deadline = Instant::now() + Duration::from_millis(ms);
    let mut pause = Duration::from_micros(50);
    loop {
        match flock(file, libc::LOCK_EX | libc::LOCK_NB) {
            Ok(()) => return Ok(()),
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => {}
            Err(e) => return Err(e),
        }
        if Instant::now() >= deadline {
            let holder = file.metadata().ok().and_then(|m| procinfo::flock_holder(m.ino()));
            let by = holder.map_or_else(|| "another process".to_owned(), |pid| format!("process {pid}"));
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "{by} has held the registry lock {} for more than {ms} ms (stopped or stuck while holding it; {LOCK_TIMEOUT_ENV} sets the wait)",
                    path.display()
                ),
            ));
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(5));
    }
}

/// The held registry lock, released on drop by an explicit unlock: a process
/// forked meanwhile shares the lock's open file description, so closing this
/// descriptor alone would leave the lock held for as long as that child lives.
struct Locked(File);

impl Drop for Locked {
    fn drop(&mut self) {
        let _ = flock(&self.0, libc::LOCK_UN);
    }
}

/// Locks the registry in `dir` (creating the directory if needed); the lock
/// file is re-checked after locking so a concurrent removal is never missed.
fn lock(dir: &Path) -> Result<Locked, RegistryError> {
    // Before the directory is made: a refused value leaves nothing behind.
    let ms = lock_timeout_ms()?;
    let path = dir.join("registry.lock");
    let mut last = io::Error::other("registry lock: no attempt");
    for _ in 0..10_000 {
        if let Err(e) = fs::DirBuilder::new().recursive(true).mode(0o700).create(dir) {
            last = e;
            continue;
        }
        let file = match OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path) {
            Ok(f) => f,
            Err(e) => {
                last = e;
                continue;
            }
        };
        lock_exclusive(&file, &path, ms)?;
        let locked = Locked(file);
        match fs::metadata(&path) {
            Ok(m) if m.ino() == locked.0.metadata()?.ino() => return Ok(locked),
            _ => continue,
        }
    }
    Err(last.into())
}

/// Held by a thread for the whole of its registry access, from opening the lock
/// file to closing it, and by a thread that forks across the `fork` (see
/// [`hold_for_fork`]): a child forked in between would share the lock's open
/// file description, and if this process were then killed before it unlocks,
/// the lock would stay held for as long as the child lives.
static ACCESS: Mutex<()> = Mutex::new(());

thread_local! {
    /// Whether this thread is inside a registry access (holds [`ACCESS`]).
    static INSIDE: Cell<bool> = const { Cell::new(false) };
}

/// [`ACCESS`] held by this thread, marked as such until dropped.
struct Access {
    _guard: MutexGuard<'static, ()>,
}

impl Access {
    fn take() -> Self {
        let guard = ACCESS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        INSIDE.with(|i| i.set(true));
        Self { _guard: guard }
    }
}

impl Drop for Access {
    fn drop(&mut self) {
        INSIDE.with(|i| i.set(false));
    }
}

/// For the `pthread_atfork` prepare handler: waits until no other thread is
/// inside a registry access and keeps them out until the guard is dropped.
/// `None` when the forking thread is itself inside one (a fork from a signal
/// handler): it holds [`ACCESS`] already, and its own unlock still releases
/// the lock for the child.
pub(crate) fn hold_for_fork() -> Option<MutexGuard<'static, ()>> {
    if INSIDE.with(Cell::get) {
        return None;
    }
    Some(ACCESS.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
}

/// Runs `f` on the swept registry under the lock and writes the result back;
/// removes the registry directory when no record is left.
pub(crate) fn with<R>(f: impl FnOnce(&mut Registry) -> R) -> Result<R, RegistryError> {
    with_in(&dir(), f)
}

/// [`with`] on the registry in `dir`.
fn with_in<R>(dir: &Path, f: impl FnOnce(&mut Registry) -> R) -> Result<R, RegistryError> {
    super::state::guard_forks();
    // Dropped last: the lock file is unlocked and closed before a fork may run.
    let _access = Access::take();
    let lock = lock(dir)?;
    let data = dir.join("registry");
    let mut reg = Registry::parse(&read_registry(&data)?);
    if reg.counter == 0 {
        // A fresh registry: start the counter from the clock so keys of a removed
        // registry are never handed out again.
        reg.counter = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| u64::try_from(d.as_micros()).unwrap_or(1));
    }
    reg.sweep();
    let out = f(&mut reg);
    reg.sweep();
    let tmp = dir.join("registry.tmp");
    if reg.records.is_empty() {
        let _ = fs::remove_file(&data);
        // Left by a rewrite cut short (a crash, a full file system); no one
        // else writes it while we hold the lock.
        let _ = fs::remove_file(&tmp);
        let _ = fs::remove_file(dir.join("registry.lock"));
        let _ = fs::remove_dir(dir);
    } else {
        let mut file = File::create(&tmp)?;
        file.write_all(reg.render().as_bytes())?;
        fs::rename(&tmp, &data)?;
    }
    drop(lock);
    Ok(out)
}

/// The registry's text; empty if there is none yet. A read that fails
/// otherwise (no descriptor left, say) fails the call: taken for an empty
/// registry, it would be rewritten without the other processes' records.
fn read_registry(data: &Path) -> io::Result<String> {
    match fs::read_to_string(data) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(String::new()),
        read => read,
    }
}

/// Sweeps dead processes' records now (and removes the directory if empty).
pub fn sweep() -> io::Result<()> {
    with(|_| ()).map_err(io::Error::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process forked while this one held the registry lock shares the
    /// lock's open file description: closing this process's descriptor alone
    /// would leave the lock held for as long as the child lives, and every
    /// simulator call of the user would wait for it, then fail.
    #[test]
    fn the_lock_is_released_even_if_a_forked_child_holds_its_descriptor() {
        let scratch = kpccl_testkit::ScratchDir::new("sim-fork", "lock");
        let dir = scratch.path().join("sim");
        let me = procinfo::own_pid();
        let key = "fork-holds-the-lock".to_owned();
        let record = Record {
            key: key.clone(),
            creator_tgid: me,
            creator_pid: me,
            creator_start: procinfo::start_ticks(me).unwrap(),
            dev: 0,
            fd: 0,
            offset: 0,
            size: 0,
            need_wlist: false,
            p2p: false,
            valid: true,
            revoked: false,
            wlist: Vec::new(),
            importers: Vec::new(),
        };
        // A record keeps the lock file (and its inode) in place.
        with_in(&dir, |reg| reg.records.push(record)).unwrap();
        let child = with_in(&dir, |_| {
            // SAFETY: the child only sleeps and exits (async-signal-safe calls).
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                // SAFETY: a plain sleep in the forked child.
                unsafe { libc::sleep(30) };
                // SAFETY: ends the child without running the parent's handlers.
                unsafe { libc::_exit(0) };
            }
            pid
        })
        .unwrap();
        assert!(child > 0, "fork failed");
        let file = File::open(dir.join("registry.lock")).unwrap();
        let free = flock(&file, libc::LOCK_EX | libc::LOCK_NB).is_ok();
        drop(file);
        // SAFETY: signals our own child.
        unsafe { libc::kill(child, libc::SIGKILL) };
        // SAFETY: reaps our own child; a NULL status is allowed.
        unsafe { libc::waitpid(child, core::ptr::null_mut(), 0) };
        with_in(&dir, |reg| reg.records.retain(|r| r.key != key)).unwrap();
        assert!(!dir.exists(), "registry left in {}", dir.display());
        assert!(free, "the registry lock stayed held by a child forked while it was held");
    }

    #[test]
    fn round_trip() {
        let r = Record {
            key: "ab".into(),
            creator_tgid: 1,
            creator_pid: 2,
            creator_start: 3,
            dev: 4,
            fd: 5,
            offset: 6,
            size: 7,
            need_wlist: true,
            p2p: true,
            valid: true,
            revoked: false,
            wlist: vec![WlEntry { pid: 9, set_time: 10 }, WlEntry { pid: 11, set_time: 12 }],
            importers: vec![Importer { pid: 13, start: 14, dev: 15 }],
        };
        let reg = Registry { counter: 42, records: vec![r.clone()] };
        let back = Registry::parse(&reg.render());
        assert_eq!(back.counter, 42);
        assert_eq!(back.records, vec![r]);
    }
}
