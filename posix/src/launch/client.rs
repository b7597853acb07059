//! The rank's end: [`RunOob`], the [`Oob`] of a process started by the launcher.

use std::borrow::Cow;
use std::io::{self, Read as _};
use std::num::NonZeroU64;
use std::os::unix::net::UnixStream;
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Duration;

use kpccl_core::{Oob, OobError, RankOutOfRange};

use super::deadline::{self, Deadline};
use super::departure::{self, Departure};
use super::wire::{self, MAX_DATA, Msg, Reason, VERSION};
use super::{NRANKS_ENV, RANK_ENV, SOCKET_ENV, TIMEOUT_ENV, addr, code};
use crate::config;
use crate::sys::NoSigpipe;

/// Whether this process connected to a launcher: its out-of-band error codes are then [`code`]s.
static IN_USE: OnceLock<()> = OnceLock::new();

/// Whether a [`RunOob`] of this process ever connected (so failed
/// out-of-band calls return the launcher's codes).
pub(crate) fn in_use() -> bool {
    IN_USE.get().is_some()
}

/// Default of `KPCCL_OOB_TIMEOUT_MS`: one minute.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// How much longer than its timeout a rank waits for the launcher's reply:
/// the hub answers at the timeout (naming the late rank), this only catches
/// a launcher that is itself stuck.
const BACKSTOP: Duration = Duration::from_secs(1);

/// How long, per rank of the job, a rank also waits for the launcher's
/// welcome: the launcher welcomes no rank before it has started them all,
/// one after another (a fork and an exec each, a few milliseconds; more
/// under an emulator), so the first rank waits for the others' start too.
const START_PER_RANK: Duration = Duration::from_millis(50);

/// Out-of-band collectives through the hub of the launcher that started
/// this process (`kpccl-run`, or its library's `Launch`).
///
/// A collective that some rank has not reached within this rank's timeout
/// fails on every rank, naming the late rank ([`code::UNRESPONSIVE`]); one
/// whose rank left the job fails naming it ([`code::RANK_LOST`]); what the
/// launcher said of that rank is [`last_departure`](super::last_departure).
/// Every read and write on the connection gives up shortly after the timeout,
/// at one deadline that signals interrupting it do not restart, so no rank
/// waits forever even for a stuck launcher. A failed collective
/// returns an [`OobError`] whose code is one of [`code`](super::code).
#[derive(Debug)]
pub struct RunOob {
    rank: u32,
    nranks: u32,
    timeout: Duration,
    /// `None` once an error left the stream in an unknown state.
    conn: Mutex<Option<UnixStream>>,
    /// What the hub last said about a lost rank.
    departure: Mutex<Option<Departure>>,
    /// The process that connected: a forked child shares its socket.
    pid: u32,
}

impl RunOob {
    /// Connects to the launcher named by the environment it set:
    /// `KPCCL_RANK`, `KPCCL_NRANKS` and `KPCCL_RUN_SOCKET`, with the timeout
    /// `KPCCL_OOB_TIMEOUT_MS` (milliseconds, default 60000), or
    /// `KPCCL_TIMEOUT_MS` when that is set and shorter.
    ///
    /// `Ok(None)` when `KPCCL_RUN_SOCKET` is not set or empty (not under
    /// the launcher); an error when a variable is malformed or the launcher
    /// cannot be reached or refuses this rank.
    pub fn from_env() -> io::Result<Option<RunOob>> {
        // Empty is unset, as the library reads every `KPCCL_*` variable.
        let Some(socket) = std::env::var_os(SOCKET_ENV).filter(|s| !s.is_empty()) else { return Ok(None) };
        let socket = socket.into_string().map_err(|_| bad_env(SOCKET_ENV, "is not UTF-8"))?;
        let rank = env_rank(RANK_ENV, "a rank (a whole number from 0)")?;
        let nranks = env_rank(NRANKS_ENV, "a rank count (a whole number)")?;
        let oob = config::env_parsed::<NonZeroU64>(TIMEOUT_ENV, "milliseconds (a whole number from 1)")
            .map_err(refused)?
            .map_or(DEFAULT_TIMEOUT, |ms| Duration::from_millis(ms.get()));
        // KPCCL_TIMEOUT_MS bounds every wait of the library; 0 means "no
        // timeout". Read as the library's configuration reads it.
        let overall = config::millis("KPCCL_TIMEOUT_MS").map_err(refused)?.filter(|&ms| ms > 0);
        let overall = overall.map(Duration::from_millis);
        let timeout = overall.map_or(oob, |t| t.min(oob));
        Self::connect(&socket, rank, nranks, timeout).map(Some)
    }

    /// Connects to the hub at `socket` (`@name` for an abstract name, else a
    /// path) as `rank` of `nranks`; `timeout` bounds how long a collective
    /// waits for the other ranks (at most `u32::MAX` milliseconds), and with
    /// a second more, and 50 ms per rank for the launcher to start them all,
    /// how long this waits for the launcher to welcome it.
    pub fn connect(socket: &str, rank: u32, nranks: u32, timeout: Duration) -> io::Result<RunOob> {
        if rank >= nranks {
            let why = RankOutOfRange { what: "rank", value: rank, whose: "the launcher", nranks };
            return Err(io::Error::new(io::ErrorKind::InvalidInput, why.to_string()));
        }
        if timeout.is_zero() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "the timeout must not be zero"));
        }
        let context = |e: io::Error| io::Error::new(e.kind(), format!("launcher at {socket}: {e}"));
        let timeout_ms = u32::try_from(timeout.as_millis()).unwrap_or(u32::MAX).max(1);
        let stream = UnixStream::connect_addr(&addr::parse(socket)?).map_err(context)?;
        // A few bytes into a new connection's empty buffer: the send does not block.
        Msg::Hello { version: VERSION, rank, nranks, timeout_ms }.write_to(NoSigpipe(&stream)).map_err(context)?;
        let refused = |why: &str| {
            let kind = io::ErrorKind::ConnectionRefused;
            io::Error::new(kind, format!("launcher at {socket} refused rank {rank} of {nranks}: {why}"))
        };
        // The answer within the timeout and a second, as a collective's reply,
        // however often signals interrupt the wait (a stopped launcher), and
        // the time the launcher may take to start the other ranks: before, a
        // rank started early in a job of 512 with a timeout of 1 s gave up.
        let start_all = START_PER_RANK.saturating_mul(nranks);
        let within = timeout.saturating_add(BACKSTOP).saturating_add(start_all);
        match Msg::read_from(Deadline::new(&stream, within)).map_err(context)? {
            Some(Msg::Welcome) => {}
            Some(Msg::Fail { reason: Reason::BadRank, .. }) => return Err(refused("not a rank of its job")),
            Some(Msg::Fail { reason: Reason::Duplicate, .. }) => return Err(refused("another process is that rank")),
            Some(Msg::Fail { reason: Reason::Left, .. }) => {
                return Err(refused("that rank already left the job (a process joins once)"));
            }
            Some(Msg::Fail { reason: Reason::BadVersion, .. }) => return Err(refused("another protocol version")),
            Some(Msg::Fail { reason: Reason::Foreign, .. }) => {
                return Err(refused("this process belongs to another user"));
            }
            Some(_) => return Err(refused("unexpected reply")),
            None => return Err(refused("connection closed")),
        }
        let _ = IN_USE.set(());
        let (conn, departure) = (Mutex::new(Some(stream)), Mutex::new(None));
        Ok(RunOob { rank, nranks, timeout, conn, departure, pid: std::process::id() })
    }

    /// This process's rank.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// The number of ranks of the job.
    pub fn nranks(&self) -> u32 {
        self.nranks
    }

    /// How long a collective waits for the other ranks.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The rank the hub last reported lost to this rank, and how.
    pub fn departure(&self) -> Option<Departure> {
        *self.departure.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sends `op` and reads the reply: a `Done` of exactly `recv.len()` bytes
    /// (written into `recv`) or a `Fail`.
    fn exchange(&self, op: &Msg<'_>, recv: &mut [u8]) -> Result<(), i32> {
        // Before the lock, which a thread of the parent may have held at the fork.
        if std::process::id() != self.pid {
            return Err(code::FORKED);
        }
        let mut conn = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
        let stream = conn.as_ref().ok_or(code::BROKEN)?;
        let within = self.timeout.saturating_add(BACKSTOP);
        let result = op
            .write_to(Deadline::new(stream, within))
            .map_err(io_code)
            .and_then(|()| read_reply(stream, within, recv, self));
        if let Err(c) = result
            && matches!(c, code::IO | code::TIMEOUT | code::DISCONNECTED | code::PROTOCOL | code::INTERRUPTED)
        {
            // The reply may still arrive: never read it as the next one's.
            *conn = None;
        }
        result
    }
}

/// Reads the reply: it must begin within `within` (the hub answers at the
/// timeout, naming a late rank: this only catches a launcher that is itself
/// stuck), and the rest of it must come within `within` again.
fn read_reply(stream: &UnixStream, within: Duration, recv: &mut [u8], oob: &RunOob) -> Result<(), i32> {
    let (tag, len) = wire::read_header(Deadline::new(stream, within)).map_err(io_code)?.ok_or(code::DISCONNECTED)?;
    let mut rest = Deadline::new(stream, within);
    if wire::is_done(tag) && len == recv.len() {
        return rest.read_exact(recv).map_err(io_code);
    }
    let body = wire::read_body(rest, len).map_err(io_code)?;
    match wire::decode(tag, body).map_err(io_code)? {
        Msg::Fail { reason: Reason::Mismatch, .. } => Err(code::MISMATCH),
        Msg::Fail { reason: Reason::TooLarge, .. } => Err(code::TOO_LARGE),
        Msg::Fail { reason: reason @ (Reason::RankLost | Reason::Timeout), culprit } => {
            if let Some(c) = culprit {
                let d = Departure::from_wire(reason, c);
                *oob.departure.lock().unwrap_or_else(PoisonError::into_inner) = Some(d);
                departure::record(d);
            }
            Err(if reason == Reason::Timeout { code::UNRESPONSIVE } else { code::RANK_LOST })
        }
        _ => Err(code::PROTOCOL),
    }
}

fn io_code(e: io::Error) -> i32 {
    if deadline::ended(&e) {
        return code::INTERRUPTED;
    }
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => code::TIMEOUT,
        io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe => code::DISCONNECTED,
        io::ErrorKind::InvalidData => code::PROTOCOL,
        _ => code::IO,
    }
}

impl Oob for RunOob {
    fn allgather(&self, send: &[u8], recv: &mut [u8]) -> Result<(), OobError> {
        let local = match send.len().checked_mul(self.nranks as usize) {
            Some(total) if total == recv.len() && total <= MAX_DATA => None,
            Some(total) if total == recv.len() => Some(code::TOO_LARGE),
            _ => Some(code::BUFFER),
        };
        if let Some(code) = local {
            // Still take part, so that every other rank fails now instead of waiting.
            let _ = self.exchange(&Msg::Invalid, &mut []);
            return Err(OobError { code });
        }
        let recv_len = recv.len() as u64;
        self.exchange(&Msg::Allgather { recv_len, data: Cow::Borrowed(send) }, recv).map_err(|code| OobError { code })
    }

    fn barrier(&self) -> Result<(), OobError> {
        self.exchange(&Msg::Barrier, &mut []).map_err(|code| OobError { code })
    }
}

/// `name`'s rank or rank count, which the launcher sets: read as the
/// library reads every `KPCCL_*` number (an empty value is unset).
fn env_rank(name: &'static str, expected: &'static str) -> io::Result<u32> {
    config::env_parsed(name, expected).map_err(refused)?.ok_or_else(|| bad_env(name, "is not set"))
}

/// A refused `KPCCL_*` value, worded as the library's configuration words it.
fn refused(e: crate::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, e.to_string())
}

fn bad_env(name: &str, why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, format!("{name} {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Set in the re-executed test process, whose environment is its own.
    const CHILD: &str = "KPCCL_TEST_EMPTY_SOCKET_CHILD";

    /// An empty `KPCCL_RUN_SOCKET` (`export KPCCL_RUN_SOCKET=$S` with `S`
    /// unset) is not being under the launcher, as every empty `KPCCL_*` value
    /// is unset. Before, it was taken for a launcher's, and failed to parse.
    #[test]
    fn an_empty_socket_is_not_a_launcher() {
        if std::env::var_os(CHILD).is_some() {
            assert_eq!(std::env::var_os(SOCKET_ENV).as_deref(), Some(std::ffi::OsStr::new("")));
            assert!(matches!(RunOob::from_env(), Ok(None)), "{:?}", RunOob::from_env());
            return;
        }
        // This test again, alone, with the variable set empty: the
        // environment is process-wide, and the other tests run meanwhile.
        let status = crate::launch::runner::test_alone("launch::client::tests::an_empty_socket_is_not_a_launcher")
            .env(CHILD, "1")
            .env(SOCKET_ENV, "")
            .env(RANK_ENV, "0")
            .env(NRANKS_ENV, "1")
            .status()
            .unwrap();
        assert!(status.success(), "the child failed: {status}");
    }
}
