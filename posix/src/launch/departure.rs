//! What the launcher tells the ranks about a rank that left the job or
//! stopped answering, so that every survivor's error names it.

use std::fmt;
use std::sync::Mutex;
use std::time::Duration;

use super::wire::{Culprit, Reason};

/// A rank the job lost, as the launcher's hub saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Departure {
    /// The rank.
    pub rank: u32,
    /// Its process, if known.
    pub pid: Option<u32>,
    /// How it was lost.
    pub ending: Ending,
}

/// How a rank was lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Ending {
    /// Its process was killed by this signal.
    Signal(i32),
    /// Its process exited with this code.
    Exit(i32),
    /// It closed its connection to the launcher (how its process ended is unknown).
    Left,
    /// Its process is gone (found by liveness, not told by a launcher: how it ended is unknown).
    Gone,
    /// It did not reach a collective that others had waited in this long:
    /// stopped (`SIGSTOP`), stuck, or computing for longer than the timeout.
    Unresponsive(Duration),
}

impl Departure {
    pub(crate) fn from_wire(reason: Reason, c: Culprit) -> Self {
        let ending = if reason == Reason::Timeout {
            Ending::Unresponsive(Duration::from_millis(u64::from(c.waited_ms)))
        } else if c.status < 0 {
            Ending::Left
        } else if libc::WIFSIGNALED(c.status) {
            Ending::Signal(libc::WTERMSIG(c.status))
        } else {
            Ending::Exit(libc::WEXITSTATUS(c.status))
        };
        Self { rank: c.rank, pid: (c.pid != 0).then_some(c.pid), ending }
    }

    /// One sentence: "rank 2 died during window creation (pid 1234, signal 9)".
    pub fn during<'a>(&'a self, what: &'a str) -> impl fmt::Display + 'a {
        During { d: self, what }
    }
}

struct During<'a> {
    d: &'a Departure,
    what: &'a str,
}

impl fmt::Display for During<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Departure { rank, pid, ending } = *self.d;
        let (verb, how) = match ending {
            Ending::Signal(sig) => ("died", format!("signal {sig}")),
            Ending::Exit(code) => ("exited", format!("exit code {code}")),
            Ending::Gone => ("died", String::new()),
            Ending::Left => ("left the job", "its connection to the launcher closed".to_owned()),
            Ending::Unresponsive(t) => {
                ("did not answer", format!("not in the collective after {} ms: stopped or stuck?", t.as_millis()))
            }
        };
        let details: Vec<String> =
            pid.map(|p| format!("pid {p}")).into_iter().chain(Some(how).filter(|h| !h.is_empty())).collect();
        write!(f, "rank {rank} {verb} during {}", self.what)?;
        if !details.is_empty() {
            write!(f, " ({})", details.join(", "))?;
        }
        Ok(())
    }
}

impl fmt::Display for Departure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.during("the job").fmt(f)
    }
}

static LAST: Mutex<Option<Departure>> = Mutex::new(None);

/// Remembers what a hub said about a lost rank.
pub(crate) fn record(d: Departure) {
    *LAST.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(d);
}

/// The rank a launcher last reported lost to this process, if any: what a
/// failed out-of-band collective of a [`RunOob`](super::RunOob) was about
/// (for code that sees only the collective's error code, such as the C
/// callbacks of `kpccl_run_oob`; see also [`RunOob::departure`](super::RunOob::departure)).
pub fn last_departure() -> Option<Departure> {
    *LAST.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_like_a_sentence() {
        let c = |status| Culprit { rank: 2, pid: 1234, status, waited_ms: 2000 };
        let killed = Departure::from_wire(Reason::RankLost, c(9));
        assert_eq!(
            killed.during("window creation").to_string(),
            "rank 2 died during window creation (pid 1234, signal 9)"
        );
        let exited = Departure::from_wire(Reason::RankLost, c(3 << 8));
        assert_eq!(exited.ending, Ending::Exit(3));
        let stopped = Departure::from_wire(Reason::Timeout, c(-1));
        assert!(
            stopped
                .to_string()
                .contains("rank 2 did not answer during the job (pid 1234, not in the collective after 2000 ms")
        );
        let left = Departure::from_wire(Reason::RankLost, Culprit { pid: 0, ..c(-1) });
        assert_eq!(left.to_string(), "rank 2 left the job during the job (its connection to the launcher closed)");
    }
}
