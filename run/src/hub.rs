//! The hub: the launcher's end of the out-of-band collectives.
//!
//! One thread accepts connections; each connection gets a thread that reads
//! the rank's hello, then its collectives one by one. The `n`-th arrival of
//! collective `k` evaluates it (same kind, same lengths, or every rank gets
//! [`Reason::Mismatch`]) and wakes the others; every connection thread writes
//! its own rank's reply. A rank that leaves (end of stream, also while it
//! waits in a collective, or its process exited) fails the collective in
//! progress and every later one with [`Reason::RankLost`], so no rank waits
//! on a rank that is gone; a rank that has not reached a collective when a
//! waiting rank's timeout (sent in its hello) expires counts as lost too
//! ([`Reason::Timeout`]). Every such failure names the rank, its pid, and how
//! its process ended when the launcher knows it ([`Hub::rank_ended`]).

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{self, Read};
use std::net::Shutdown;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::process::ExitStatus;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::cred;
use kpccl_posix::launch::wire::{Culprit, MAX_DATA, Msg, Reason, VERSION};
use kpccl_posix::launch::{Deadline, addr};

/// How long a fresh connection may take to say hello, in all.
const HELLO_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a refused peer has, in all, to finish writing and read the
/// refusal: a trickle must not hold a thread and two descriptors for long.
const REFUSAL_TIME: Duration = Duration::from_secs(2);
/// Connections not yet welcomed nor refused, at most, beyond one per rank:
/// a flood of strays (another user's) waits in the listen backlog instead
/// of costing a thread and two descriptors each.
const SPARE_GREETINGS: u32 = 64;
/// Stack of a connection thread (it only moves buffers that live on the heap).
const THREAD_STACK: usize = 256 * 1024;
/// How long a rank whose process died may wait for the launcher to reap it,
/// so that the others hear how it ended (the launcher polls every 10 ms).
const REAP_GRACE: Duration = Duration::from_millis(250);
/// How often a rank's thread waiting in a collective looks whether the rank
/// closed its connection meanwhile (it stopped waiting: Ctrl-C).
const HANGUP_CHECK: Duration = Duration::from_millis(50);

/// The launcher's end of the out-of-band collectives of one job of
/// `nranks` ranks, listening on a fresh abstract Unix socket.
///
/// Ranks reach it with [`RunOob`](crate::RunOob). It stops by itself once
/// every rank has disconnected; dropping it stops it at once (closing any
/// connection still open) and joins its threads.
#[derive(Debug)]
pub struct Hub {
    shared: Arc<Shared>,
    socket: String,
    /// Held until [`Hub::serve`] hands it to the acceptor thread.
    listener: Option<UnixListener>,
    acceptor: Option<JoinHandle<()>>,
}

#[derive(Debug)]
struct Shared {
    nranks: u32,
    uid: u32,
    addr: SocketAddr,
    /// The listener, shut down to wake the acceptor when connecting to it
    /// cannot (no descriptor left for the connection).
    waker: UnixListener,
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Debug)]
struct State {
    presence: Vec<Presence>,
    /// Every rank's pid (0: unknown), from its connection's credentials.
    pids: Vec<u32>,
    /// Every rank's wait status, once the launcher reaped it.
    ended: Vec<Option<i32>>,
    /// How long each rank waits for the others in a collective (`None`: for ever).
    timeouts: Vec<Option<Duration>>,
    gone: u32,
    /// The current collective's operations, by rank.
    pending: Vec<Option<Op>>,
    arrived: u32,
    /// Collectives completed so far: the index of the one being gathered.
    seq: u64,
    /// The outcome of collective `seq - 1`.
    last: Option<Arc<Outcome>>,
    /// The first rank the job lost (it left, or did not arrive in time), and how.
    lost: Option<(Reason, Culprit)>,
    /// The first failure the hub reported to ranks, in words.
    failure: Option<String>,
    stopping: bool,
    /// A second handle of every open connection (shut down to stop its
    /// thread), by connection number; a connection's goes when it ends, so
    /// that stray and finished ones hold no descriptor.
    conns: HashMap<u64, UnixStream>,
    /// Connections accepted so far.
    accepted: u64,
    /// Connections accepted whose hello is not yet answered.
    greeting: u32,
    threads: Vec<JoinHandle<()>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Presence {
    NotYet,
    Here,
    Gone,
}

#[derive(Debug)]
enum Op {
    Allgather { recv_len: u64, data: Vec<u8> },
    Barrier,
    Invalid,
}

#[derive(Debug)]
enum Outcome {
    Done(Vec<u8>),
    Fail(Reason, Option<Culprit>),
}

impl Hub {
    /// Starts a hub for `nranks` ranks (1 ..= [`kpccl_core::MAX_RANKS`]).
    pub fn start(nranks: u32) -> io::Result<Hub> {
        let mut hub = Hub::bind(nranks)?;
        hub.serve()?;
        Ok(hub)
    }

    /// Binds a hub for `nranks` ranks without serving it yet: ranks that
    /// connect wait in the listen backlog until [`Hub::serve`].
    ///
    /// A launcher starts its ranks in between, so that it never forks while
    /// one of its threads is being created: qemu-user (7.2, over glib 2.74's
    /// slice allocator) can deadlock a child forked at that moment, before
    /// it reaches `exec` (`cargo xtask test-aarch64` also sets
    /// `G_SLICE=always-malloc`).
    pub fn bind(nranks: u32) -> io::Result<Hub> {
        if nranks == 0 || nranks > kpccl_core::MAX_RANKS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("rank count {nranks} is not in 1..={}", kpccl_core::MAX_RANKS),
            ));
        }
        let socket = addr::unique();
        let addr = addr::parse(&socket)?;
        let listener = UnixListener::bind_addr(&addr)?;
        // Two descriptors per connected rank, one per rank for the
        // launcher's look at its exec, plus a few.
        raise_open_file_limit(3 * u64::from(nranks) + 64);
        let waker = listener.try_clone()?;
        let n = nranks as usize;
        let shared = Arc::new(Shared {
            nranks,
            uid: cred::my_uid(),
            addr,
            waker,
            state: Mutex::new(State {
                presence: vec![Presence::NotYet; n],
                pids: vec![0; n],
                ended: vec![None; n],
                timeouts: vec![None; n],
                gone: 0,
                pending: (0..n).map(|_| None).collect(),
                arrived: 0,
                seq: 0,
                last: None,
                lost: None,
                failure: None,
                stopping: false,
                conns: HashMap::new(),
                accepted: 0,
                greeting: 0,
                threads: Vec::new(),
            }),
            changed: Condvar::new(),
        });
        Ok(Hub { shared, socket, listener: Some(listener), acceptor: None })
    }

    /// Starts accepting the ranks' connections (later calls do nothing).
    pub fn serve(&mut self) -> io::Result<()> {
        let Some(listener) = self.listener.take() else { return Ok(()) };
        let shared = Arc::clone(&self.shared);
        let acceptor = thread::Builder::new().name("kpccl-hub".into()).spawn(move || accept(&shared, &listener))?;
        self.acceptor = Some(acceptor);
        Ok(())
    }

    /// The value for `KPCCL_RUN_SOCKET`: `@` and the abstract name.
    pub fn socket(&self) -> &str {
        &self.socket
    }

    /// The number of ranks of the job.
    pub fn nranks(&self) -> u32 {
        self.shared.nranks
    }

    /// Tells the hub that rank `rank`'s process has exited, so that it counts
    /// as gone even if it never connected (or a child of it holds its socket).
    pub fn rank_exited(&self, rank: u32) {
        if rank < self.shared.nranks {
            self.shared.leave(rank);
        }
    }

    /// As [`Hub::rank_exited`], with how the process ended and its pid, so
    /// that the other ranks' errors can say ("rank 2 … pid 1234, signal 9").
    pub fn rank_ended(&self, rank: u32, pid: u32, status: ExitStatus) {
        use std::os::unix::process::ExitStatusExt;
        if rank < self.shared.nranks {
            {
                let mut st = self.shared.lock();
                st.ended[rank as usize] = Some(status.into_raw());
                if st.pids[rank as usize] == 0 {
                    st.pids[rank as usize] = pid;
                }
            }
            self.shared.changed.notify_all();
            self.shared.leave(rank);
        }
    }

    /// The first failure the hub reported to the ranks (ranks that disagreed
    /// on a collective, or a rank that left while others needed it), if any.
    pub fn failure(&self) -> Option<String> {
        self.shared.lock().failure.clone()
    }

    /// The ranks that have neither connected nor exited yet.
    pub fn never_connected(&self) -> Vec<u32> {
        let st = self.shared.lock();
        (0..).zip(&st.presence).filter(|(_, p)| **p == Presence::NotYet).map(|(r, _)| r).collect()
    }

    /// Connections accepted so far, and those of them open now (for tests).
    #[cfg(test)]
    pub(crate) fn connections(&self) -> (u64, usize) {
        let st = self.shared.lock();
        (st.accepted, st.conns.len())
    }

    /// Whether every rank has disconnected or exited.
    pub fn finished(&self) -> bool {
        self.shared.lock().gone == self.shared.nranks
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        let (conns, threads) = {
            let mut st = self.shared.lock();
            st.stopping = true;
            (std::mem::take(&mut st.conns), std::mem::take(&mut st.threads))
        };
        self.shared.changed.notify_all();
        self.shared.wake_acceptor();
        for c in conns.values() {
            let _ = c.shutdown(Shutdown::Both);
        }
        if let Some(a) = self.acceptor.take() {
            let _ = a.join();
        }
        // The acceptor registers threads under the lock and stops once it sees
        // `stopping`, so `threads` holds every connection thread.
        for t in threads {
            let _ = t.join();
        }
    }
}

fn accept(shared: &Arc<Shared>, listener: &UnixListener) {
    let most_greeting = shared.nranks.saturating_add(SPARE_GREETINGS);
    for conn in listener.incoming() {
        let st = shared.lock();
        let too_many = |st: &mut State| st.greeting >= most_greeting && !st.stopping;
        let mut st = shared.changed.wait_while(st, too_many).unwrap_or_else(PoisonError::into_inner);
        if st.stopping || st.gone == shared.nranks {
            // Refuses what comes later at once, and closes what queued
            // before (the wake-up's connection may have overtaken one): the
            // waker keeps the listener open, and a connection left in its
            // backlog would wait for a welcome until its timeout, then blame
            // a stuck launcher.
            let _ = rustix::net::shutdown(listener, rustix::net::Shutdown::Both);
            if listener.set_nonblocking(true).is_ok() {
                while let Ok((queued, _)) = listener.accept() {
                    drop(queued);
                }
            }
            return;
        }
        // A failed accept (EMFILE, ECONNABORTED) is the connecting rank's
        // problem only; pause so that a lasting one does not spin.
        let Ok(stream) = conn else {
            drop(st);
            thread::sleep(Duration::from_millis(10));
            continue;
        };
        let Ok(clone) = stream.try_clone() else { continue };
        let id = st.accepted;
        st.accepted += 1;
        let worker = Arc::clone(shared);
        let spawned = thread::Builder::new().name("kpccl-hub-conn".into()).stack_size(THREAD_STACK).spawn(move || {
            serve(&worker, &stream);
            // Registered before the thread could get here: the acceptor holds the lock.
            worker.lock().conns.remove(&id);
        });
        if let Ok(t) = spawned {
            st.conns.insert(id, clone);
            st.threads.push(t);
            st.greeting += 1;
        }
    }
}

/// One connection, from hello to end of stream.
fn serve(shared: &Shared, stream: &UnixStream) {
    let rank = welcome(shared, stream);
    shared.lock().greeting -= 1;
    // The acceptor may wait for a greeting to end.
    shared.changed.notify_all();
    let Some(rank) = rank else { return };
    loop {
        let op = match Msg::read_from(stream) {
            Ok(Some(Msg::Allgather { recv_len, data })) => Op::Allgather { recv_len, data: data.into_owned() },
            Ok(Some(Msg::Barrier)) => Op::Barrier,
            Ok(Some(Msg::Invalid)) => Op::Invalid,
            Ok(Some(_)) => {
                let _ = Msg::fail(Reason::Protocol).write_to(stream);
                break;
            }
            Ok(None) | Err(_) => break,
        };
        let Some(outcome) = shared.collective(rank, op, stream) else { break };
        let reply = match &*outcome {
            Outcome::Done(data) => Msg::Done { data: Cow::Borrowed(data) },
            Outcome::Fail(reason, culprit) => Msg::Fail { reason: *reason, culprit: *culprit },
        };
        if reply.write_to(stream).is_err() {
            break;
        }
    }
    shared.await_reaping(rank);
    shared.leave(rank);
}

/// Whether the rank closed its end of `stream`: read without waiting, the
/// stream is at its end (a rank waiting for a reply sends nothing).
fn hung_up(stream: &UnixStream) -> bool {
    let mut byte = [0u8; 1];
    let flags = rustix::net::RecvFlags::PEEK | rustix::net::RecvFlags::DONTWAIT;
    matches!(rustix::net::recv(stream, &mut byte[..], flags), Ok((0, _)))
}

/// Reads and checks the hello; claims and returns the rank.
/// What a refused peer may still send before its connection closes, at most.
const LINGER_BYTES: u64 = 64 << 10;

fn welcome(shared: &Shared, stream: &UnixStream) -> Option<u32> {
    let refuse = |reason| {
        // One deadline for all of it, however the peer trickles.
        let mut until = Deadline::new(stream, REFUSAL_TIME);
        let _ = Msg::fail(reason).write_to(&mut until);
        // Closed with the peer's hello unread, the connection would be reset
        // under it (its write fails, the refusal unread): let it finish
        // writing and read to its end, within the refusal's time.
        let _ = stream.shutdown(Shutdown::Write);
        let _ = io::copy(&mut Read::take(until, LINGER_BYTES), &mut io::sink());
        None
    };
    let (uid, pid) = cred::peer(stream).ok()?;
    if uid != shared.uid {
        return refuse(Reason::Foreign);
    }
    // Refused at its header if it announces more than a hello: never a body of up to 1 GiB.
    let hello = Msg::read_hello(Deadline::new(stream, HELLO_TIMEOUT));
    let Ok(Some(Msg::Hello { version, rank, nranks, timeout_ms })) = hello else { return None };
    if version != VERSION {
        return refuse(Reason::BadVersion);
    }
    if nranks != shared.nranks || rank >= nranks {
        return refuse(Reason::BadRank);
    }
    {
        let mut st = shared.lock();
        if st.stopping {
            return None;
        }
        match st.presence[rank as usize] {
            Presence::NotYet => {}
            // Not "another process": none is that rank any more.
            Presence::Gone => {
                drop(st);
                return refuse(Reason::Left);
            }
            Presence::Here => {
                drop(st);
                return refuse(Reason::Duplicate);
            }
        }
        st.presence[rank as usize] = Presence::Here;
        st.pids[rank as usize] = pid;
        st.timeouts[rank as usize] = (timeout_ms > 0).then(|| Duration::from_millis(u64::from(timeout_ms)));
    }
    // Between collectives a rank may compute for as long as it likes: the
    // hello's deadline was its reader's, not the socket's.
    if Msg::Welcome.write_to(stream).is_err() {
        shared.leave(rank);
        return None;
    }
    Some(rank)
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds `rank`'s operation to the collective being gathered and waits for
    /// its outcome; a rank that closes its connection (`stream`) meanwhile
    /// leaves the job. `None` when the hub is stopping.
    fn collective(&self, rank: u32, op: Op, stream: &UnixStream) -> Option<Arc<Outcome>> {
        let mut st = self.lock();
        if let Some((reason, culprit)) = st.lost {
            let seq = st.seq;
            let what = if reason == Reason::Timeout { "did not answer in time" } else { "left the job" };
            st.record(|| format!("rank {} {what}; rank {rank} called collective #{seq} after that", culprit.rank));
            return Some(Arc::new(Outcome::Fail(reason, Some(culprit))));
        }
        let mine = st.seq;
        if st.pending[rank as usize].is_some() {
            // Only a client that does not wait for its replies can get here.
            return Some(Arc::new(Outcome::Fail(Reason::Protocol, None)));
        }
        st.pending[rank as usize] = Some(op);
        st.arrived += 1;
        if st.arrived == self.nranks {
            let ops: Vec<Op> = st.pending.iter_mut().map(|p| p.take().unwrap_or(Op::Invalid)).collect();
            let outcome = evaluate(&ops, self.nranks);
            match outcome {
                Outcome::Fail(Reason::TooLarge, _) => st.record(|| {
                    format!("collective #{mine}: {}: the result is over the {MAX_DATA}-byte limit", describe(&ops))
                }),
                Outcome::Fail(..) => {
                    st.record(|| format!("collective #{mine}: the ranks disagree: {}", describe(&ops)))
                }
                Outcome::Done(_) => {}
            }
            st.arrived = 0;
            st.seq += 1;
            st.last = Some(Arc::new(outcome));
            self.changed.notify_all();
        }
        let waiting = |st: &mut State| st.seq == mine && st.lost.is_none() && !st.stopping;
        let deadline = st.timeouts[rank as usize].and_then(|t| Instant::now().checked_add(t));
        loop {
            let left = deadline.map_or(HANGUP_CHECK, |d| d.saturating_duration_since(Instant::now()));
            st = self
                .changed
                .wait_timeout_while(st, left.min(HANGUP_CHECK), waiting)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
            if !waiting(&mut st) {
                break;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                self.late(&mut st, rank, mine);
            } else if hung_up(stream) {
                // It gave up waiting (interrupted), or its process died: the
                // others must not wait for it (and hear how it ended, if it did).
                drop(st);
                self.await_reaping(rank);
                self.leave(rank);
                st = self.lock();
            }
        }
        if st.seq > mine {
            // Collective `mine + 1` cannot complete before this rank joins it,
            // so `last` is still the outcome of `mine`.
            st.last.clone()
        } else if let Some((reason, culprit)) = st.lost {
            Some(Arc::new(Outcome::Fail(reason, Some(culprit))))
        } else {
            None
        }
    }

    /// `waiter`'s timeout expired in collective `seq`: the first rank that
    /// has not arrived is lost, and the collective fails on every rank.
    fn late(&self, st: &mut State, waiter: u32, seq: u64) {
        let Some(late) = (0..self.nranks).find(|&r| st.pending[r as usize].is_none()) else { return };
        let waited = st.timeouts[waiter as usize].unwrap_or_default();
        let waited_ms = u32::try_from(waited.as_millis()).unwrap_or(u32::MAX);
        let culprit = Culprit { rank: late, pid: st.pids[late as usize], status: -1, waited_ms };
        st.lost = Some((Reason::Timeout, culprit));
        st.record(|| {
            format!("rank {late} did not reach collective #{seq} within {waited_ms} ms (rank {waiter}'s timeout)")
        });
        self.changed.notify_all();
    }

    /// Before `rank` counts as gone: waits (briefly) for the launcher to reap
    /// its process, so that the others hear how it ended. (A dying process
    /// closes its sockets before it becomes a zombie, so liveness cannot
    /// tell yet; ranks that are threads of the hub's own process are not waited for.)
    fn await_reaping(&self, rank: u32) {
        let st = self.lock();
        let pid = st.pids[rank as usize];
        if pid == 0 || pid == std::process::id() {
            return;
        }
        let _ = self
            .changed
            .wait_timeout_while(st, REAP_GRACE, |st| st.ended[rank as usize].is_none() && !st.stopping)
            .unwrap_or_else(PoisonError::into_inner);
    }

    /// `rank` left the job (end of stream, or its process exited).
    fn leave(&self, rank: u32) {
        let all_gone = {
            let mut st = self.lock();
            let p = &mut st.presence[rank as usize];
            if *p == Presence::Gone {
                return;
            }
            *p = Presence::Gone;
            st.gone += 1;
            if st.lost.is_none() {
                let culprit = Culprit {
                    rank,
                    pid: st.pids[rank as usize],
                    status: st.ended[rank as usize].unwrap_or(-1),
                    waited_ms: 0,
                };
                st.lost = Some((Reason::RankLost, culprit));
            }
            if st.arrived > 0 {
                let seq = st.seq;
                let waiting: Vec<usize> = (0..st.pending.len()).filter(|&r| st.pending[r].is_some()).collect();
                st.record(|| format!("rank {rank} left the job while ranks {waiting:?} waited in collective #{seq}"));
            }
            st.gone == self.nranks
        };
        self.changed.notify_all();
        if all_gone {
            self.wake_acceptor();
        }
    }

    /// Makes the acceptor look at the state (it sits in `accept`): with a
    /// connection, else (no descriptor for one) by shutting the listener
    /// down, which ends the acceptor's `accept` with an error.
    fn wake_acceptor(&self) {
        if UnixStream::connect_addr(&self.addr).is_err() {
            let _ = rustix::net::shutdown(&self.waker, rustix::net::Shutdown::Both);
        }
    }
}

impl State {
    fn record(&mut self, what: impl FnOnce() -> String) {
        if self.failure.is_none() {
            self.failure = Some(what());
        }
    }
}

/// The outcome of one collective from every rank's operation.
fn evaluate(ops: &[Op], nranks: u32) -> Outcome {
    match &ops[0] {
        Op::Barrier if ops.iter().all(|o| matches!(o, Op::Barrier)) => Outcome::Done(Vec::new()),
        Op::Allgather { data, .. } => {
            let len = data.len();
            let total = len.checked_mul(nranks as usize).and_then(|t| u64::try_from(t).ok());
            let agree = ops.iter().all(|o| match o {
                Op::Allgather { recv_len, data } => data.len() == len && Some(*recv_len) == total,
                _ => false,
            });
            if !agree {
                return Outcome::Fail(Reason::Mismatch, None);
            }
            // A reply that cannot be framed would break every connection.
            if total.is_none_or(|t| t > MAX_DATA as u64) {
                return Outcome::Fail(Reason::TooLarge, None);
            }
            let mut out = Vec::with_capacity(len * ops.len());
            for o in ops {
                if let Op::Allgather { data, .. } = o {
                    out.extend_from_slice(data);
                }
            }
            Outcome::Done(out)
        }
        _ => Outcome::Fail(Reason::Mismatch, None),
    }
}

/// "rank 0 allgather 8 of 32 bytes, rank 5 barrier, …": rank 0's operation
/// and those of the first 7 ranks whose operation differs from it, so that
/// the odd rank is named in a job of any size (the first 8 ranks if none
/// differs: they then all disagree with the rank count).
fn describe(ops: &[Op]) -> String {
    let shape = |op: &Op| match op {
        Op::Allgather { recv_len, data } => (0, *recv_len, data.len()),
        Op::Barrier => (1, 0, 0),
        Op::Invalid => (2, 0, 0),
    };
    let first = ops.first().map(shape);
    let odd: Vec<usize> = (1..ops.len()).filter(|&r| Some(shape(&ops[r])) != first).collect();
    let shown: Vec<usize> =
        if odd.is_empty() { (0..ops.len()).take(8).collect() } else { [0].into_iter().chain(odd).take(8).collect() };
    let mut s = String::new();
    for (i, &r) in shown.iter().enumerate() {
        let sep = if i == 0 { "" } else { ", " };
        let _ = match &ops[r] {
            Op::Allgather { recv_len, data } => write!(s, "{sep}rank {r} allgather {} of {recv_len} bytes", data.len()),
            Op::Barrier => write!(s, "{sep}rank {r} barrier"),
            Op::Invalid => write!(s, "{sep}rank {r} invalid arguments"),
        };
    }
    let others = ops.len().saturating_sub(shown.len());
    if others > 0 {
        let _ = write!(s, " (and {others} more ranks)");
    }
    s
}

/// Raises this process's soft limit of open files to `wanted` (at most the
/// hard limit), if it is lower: a hub holds two descriptors per connected
/// rank, and 1 024 ranks would pass the usual soft limit of 1 024.
fn raise_open_file_limit(wanted: u64) {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    let soft = limit.current.unwrap_or(u64::MAX);
    if soft < wanted {
        limit.current = Some(limit.maximum.map_or(wanted, |hard| hard.min(wanted)));
        let _ = setrlimit(Resource::Nofile, limit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ag(data: &[u8], recv_len: u64) -> Op {
        Op::Allgather { recv_len, data: data.to_vec() }
    }

    #[test]
    fn allgather_concatenates_in_rank_order() {
        let ops = [ag(b"ab", 6), ag(b"cd", 6), ag(b"ef", 6)];
        match evaluate(&ops, 3) {
            Outcome::Done(d) => assert_eq!(d, b"abcdef"),
            o => panic!("{o:?}"),
        }
    }

    #[test]
    fn disagreements_fail() {
        let cases: [(Vec<Op>, &str); 4] = [
            (vec![ag(b"ab", 4), ag(b"c", 4)], "lengths"),
            (vec![ag(b"ab", 4), ag(b"cd", 6)], "receive lengths"),
            (vec![Op::Barrier, ag(b"", 0)], "kinds"),
            (vec![Op::Barrier, Op::Invalid], "invalid"),
        ];
        for (ops, what) in cases {
            assert!(matches!(evaluate(&ops, 2), Outcome::Fail(Reason::Mismatch, None)), "{what}");
        }
        assert!(describe(&[Op::Barrier, ag(b"x", 2)]).contains("rank 1 allgather 1 of 2 bytes"));
    }

    /// In a job of 12 ranks, rank 10's odd length is named, not hidden
    /// behind the first 8 ranks, which agree (before: "rank 0 … rank 7, …").
    #[test]
    fn a_disagreement_names_the_odd_rank_in_a_large_job() {
        let mut ops: Vec<Op> = (0..12).map(|_| ag(b"abcd", 48)).collect();
        ops[10] = ag(b"abc", 48);
        assert!(matches!(evaluate(&ops, 12), Outcome::Fail(Reason::Mismatch, None)));
        assert_eq!(
            describe(&ops),
            "rank 0 allgather 4 of 48 bytes, rank 10 allgather 3 of 48 bytes (and 10 more ranks)"
        );
        // Every rank wrong alike (a receive length for another rank count): the first 8.
        let same: Vec<Op> = (0..12).map(|_| ag(b"ab", 4)).collect();
        assert!(describe(&same).starts_with("rank 0 allgather 2 of 4 bytes, rank 1 allgather"));
        assert!(describe(&same).ends_with("rank 7 allgather 2 of 4 bytes (and 4 more ranks)"));
    }

    /// Ranks that agree on an allgather whose result is over the 1 GiB
    /// frame limit (a hand-written client's) all get `TooLarge`. Before,
    /// the hub built the reply, failed to write it and dropped every rank.
    #[test]
    fn an_allgather_over_the_frame_limit_fails_as_too_large() {
        // 8 bytes from each of 2^28 ranks (one op stands for all: `evaluate`
        // takes the rank count apart), 2 GiB in all.
        let ranks = 1 << 28;
        assert!(matches!(evaluate(&[ag(b"12345678", 8 << 28)], ranks), Outcome::Fail(Reason::TooLarge, None)));
        let exact = MAX_DATA as u64;
        assert!(matches!(evaluate(&[ag(b"1234", exact)], ranks), Outcome::Done(d) if d == b"1234"));
    }

    #[test]
    fn barriers_and_empty_allgathers_succeed() {
        assert!(matches!(evaluate(&[Op::Barrier, Op::Barrier], 2), Outcome::Done(d) if d.is_empty()));
        assert!(matches!(evaluate(&[ag(b"", 0), ag(b"", 0)], 2), Outcome::Done(d) if d.is_empty()));
    }

    #[test]
    fn rank_counts_out_of_range_are_refused() {
        assert_eq!(Hub::start(0).unwrap_err().kind(), io::ErrorKind::InvalidInput);
        let too_many = kpccl_core::MAX_RANKS + 1;
        assert_eq!(Hub::start(too_many).unwrap_err().kind(), io::ErrorKind::InvalidInput);
    }
}
