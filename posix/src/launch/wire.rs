//! Framing of the messages between the ranks and the hub.
//!
//! A frame is `len: u32 LE` (the body length, at most [`MAX_BODY`]), then the
//! body: a one-byte tag and the tag's fields, little-endian.
//!
//! | tag | message     | direction    | fields                                  |
//! |-----|-------------|--------------|-----------------------------------------|
//! | 1   | `Hello`     | rank → hub   | magic `KPCR`, version u32, rank u32, nranks u32, timeout_ms u32 (0: none) |
//! | 2   | `Welcome`   | hub → rank   | —                                       |
//! | 3   | `Allgather` | rank → hub   | recv_len u64, the rank's bytes          |
//! | 4   | `Barrier`   | rank → hub   | —                                       |
//! | 5   | `Invalid`   | rank → hub   | — (the rank's own arguments are wrong)  |
//! | 6   | `Done`      | hub → rank   | the concatenation in rank order         |
//! | 7   | `Fail`      | hub → rank   | reason u32 ([`Reason`]), then the rank at fault: rank u32 (`u32::MAX`: none), pid u32 (0: unknown), wait status i32 (-1: unknown), waited_ms u32 |

use std::borrow::Cow;
use std::io::{self, Read, Write};

/// Identifies a hello from this protocol.
const MAGIC: [u8; 4] = *b"KPCR";
/// Protocol version; the hub refuses any other.
pub const VERSION: u32 = 2;
/// Largest frame body: one tag byte, an allgather's 8-byte length field and
/// 1 GiB of data (a one-rank job's largest allgather).
pub const MAX_BODY: usize = 1 + 8 + MAX_DATA;
/// Largest payload of one collective (a rank's send, or the whole result).
pub const MAX_DATA: usize = 1 << 30;

const HELLO: u8 = 1;
const WELCOME: u8 = 2;
const ALLGATHER: u8 = 3;
const BARRIER: u8 = 4;
const INVALID: u8 = 5;
const DONE: u8 = 6;
const FAIL: u8 = 7;

/// Why the hub refused a hello or failed a collective.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// The ranks called different collectives or passed different lengths.
    Mismatch,
    /// A rank left the job (its process exited or crashed).
    RankLost,
    /// A rank did not reach the collective within a waiting rank's timeout
    /// (stopped, or stuck); the job is broken from then on.
    Timeout,
    /// A peer broke the protocol.
    Protocol,
    /// Hello: the rank is out of range or the rank count is not the job's.
    BadRank,
    /// Hello: another connection already is this rank.
    Duplicate,
    /// Hello: another protocol version.
    BadVersion,
    /// Hello: the connecting process belongs to another user.
    Foreign,
    /// The ranks agree, but the allgather's result would exceed [`MAX_DATA`].
    TooLarge,
    /// Hello: the rank already left the job (its connection closed, or its
    /// process exited); a process joins once.
    Left,
    /// A code this version does not know.
    Unknown(u32),
}

kpccl_core::codes!(Reason: u32 {
    Mismatch = 1,
    RankLost = 2,
    Protocol = 3,
    BadRank = 4,
    Duplicate = 5,
    BadVersion = 6,
    Foreign = 7,
    Timeout = 8,
    TooLarge = 9,
    Left = 10,
} else Unknown);

/// The rank a failure is about, and what the hub knows of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Culprit {
    /// The rank.
    pub rank: u32,
    /// Its process id (0: unknown).
    pub pid: u32,
    /// How its process ended, as `waitpid` reports it (-1: unknown, or still running).
    pub status: i32,
    /// For [`Reason::Timeout`]: how long the rank was waited for.
    pub waited_ms: u32,
}

/// One message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Msg<'a> {
    /// Rank to hub, first: who it is and how long it waits for the others.
    #[allow(missing_docs)] // the fields are named for what they hold
    Hello { version: u32, rank: u32, nranks: u32, timeout_ms: u32 },
    /// Hub to rank: the hello is accepted.
    Welcome,
    /// Rank to hub: its part of an allgather whose result is `recv_len` bytes.
    #[allow(missing_docs)] // the fields are named for what they hold
    Allgather { recv_len: u64, data: Cow<'a, [u8]> },
    /// Rank to hub: a barrier.
    Barrier,
    /// Rank to hub: a collective the rank's caller got wrong; fails it on every rank.
    Invalid,
    /// Hub to rank: the collective is complete, with its result (empty for a barrier).
    #[allow(missing_docs)] // the field is named for what it holds
    Done { data: Cow<'a, [u8]> },
    /// Hub to rank: the collective failed, and why.
    #[allow(missing_docs)] // the fields are named for what they hold
    Fail { reason: Reason, culprit: Option<Culprit> },
}

impl Msg<'_> {
    /// A failure that is about no rank in particular.
    pub fn fail(reason: Reason) -> Self {
        Self::Fail { reason, culprit: None }
    }
}

impl Msg<'_> {
    /// Writes the message as one frame.
    pub fn write_to(&self, mut w: impl Write) -> io::Result<()> {
        let mut head = [0u8; 32];
        let (tag, fields, data): (u8, usize, &[u8]) = match self {
            Self::Hello { version, rank, nranks, timeout_ms } => {
                head[5..9].copy_from_slice(&MAGIC);
                head[9..13].copy_from_slice(&version.to_le_bytes());
                head[13..17].copy_from_slice(&rank.to_le_bytes());
                head[17..21].copy_from_slice(&nranks.to_le_bytes());
                head[21..25].copy_from_slice(&timeout_ms.to_le_bytes());
                (HELLO, 20, &[])
            }
            Self::Welcome => (WELCOME, 0, &[]),
            Self::Allgather { recv_len, data } => {
                head[5..13].copy_from_slice(&recv_len.to_le_bytes());
                (ALLGATHER, 8, data)
            }
            Self::Barrier => (BARRIER, 0, &[]),
            Self::Invalid => (INVALID, 0, &[]),
            Self::Done { data } => (DONE, 0, data),
            Self::Fail { reason, culprit } => {
                let c = culprit.unwrap_or(Culprit { rank: u32::MAX, pid: 0, status: -1, waited_ms: 0 });
                head[5..9].copy_from_slice(&reason.code().to_le_bytes());
                head[9..13].copy_from_slice(&c.rank.to_le_bytes());
                head[13..17].copy_from_slice(&c.pid.to_le_bytes());
                head[17..21].copy_from_slice(&c.status.to_le_bytes());
                head[21..25].copy_from_slice(&c.waited_ms.to_le_bytes());
                (FAIL, 20, &[])
            }
        };
        let body = 1 + fields + data.len();
        if body > MAX_BODY {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "message larger than the frame limit"));
        }
        let len = u32::try_from(body).map_err(|_| io::ErrorKind::InvalidInput)?;
        head[..4].copy_from_slice(&len.to_le_bytes());
        head[4] = tag;
        w.write_all(&head[..5 + fields])?;
        if !data.is_empty() {
            w.write_all(data)?;
        }
        w.flush()
    }

    /// Reads one frame: `Ok(None)` on a clean end of stream before a frame.
    pub fn read_from(mut r: impl Read) -> io::Result<Option<Msg<'static>>> {
        let Some((tag, len)) = read_header(&mut r)? else { return Ok(None) };
        let body = read_body(&mut r, len)?;
        decode(tag, body).map(Some)
    }

    /// Reads the first frame of a connection, which must be a hello: one
    /// that announces another message, or more than a hello's bytes, is
    /// refused at its header, its body neither awaited nor read (a peer
    /// cannot make the hub buffer a gigabyte before it knows who is there).
    /// `Ok(None)` on a clean end of stream before a frame.
    pub fn read_hello(mut r: impl Read) -> io::Result<Option<Msg<'static>>> {
        // This version's hello fields are 20 bytes, an older one's fewer;
        // the room above lets a later version's longer hello be refused by
        // its version, not dropped.
        const MOST: usize = 64;
        let Some((tag, len)) = read_header(&mut r)? else { return Ok(None) };
        if tag != HELLO || len > MOST {
            return Err(invalid("not a kpccl-run hello"));
        }
        let body = read_body(&mut r, len)?;
        decode(tag, body).map(Some)
    }
}

/// Reads a frame header: the tag and the length of the rest of the body.
/// `Ok(None)` on a clean end of stream.
pub fn read_header(mut r: impl Read) -> io::Result<Option<(u8, usize)>> {
    let mut head = [0u8; 5];
    let mut got = 0;
    while got < head.len() {
        match r.read(&mut head[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let body = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
    if body == 0 || body > MAX_BODY {
        return Err(invalid("frame length out of range"));
    }
    Ok(Some((head[4], body - 1)))
}

/// Whether a header announces a `Done` frame.
pub fn is_done(tag: u8) -> bool {
    tag == DONE
}

/// Reads `len` body bytes; the buffer grows with the data actually received.
pub fn read_body(r: impl Read, len: usize) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    r.take(len as u64).read_to_end(&mut body)?;
    if body.len() == len { Ok(body) } else { Err(io::ErrorKind::UnexpectedEof.into()) }
}

/// Decodes the rest of a body (after the tag).
pub fn decode(tag: u8, body: Vec<u8>) -> io::Result<Msg<'static>> {
    let fixed = |n: usize| if body.len() == n { Ok(()) } else { Err(invalid("bad message length")) };
    let u32_at = |i: usize| u32::from_le_bytes([body[i], body[i + 1], body[i + 2], body[i + 3]]);
    Ok(match tag {
        HELLO => {
            // An older version's hello is shorter: read its version, so that the hub refuses it by name.
            if body.len() < 16 || body[..4] != MAGIC {
                return Err(invalid("not a kpccl-run hello"));
            }
            if u32_at(4) != VERSION {
                return Ok(Msg::Hello { version: u32_at(4), rank: u32_at(8), nranks: u32_at(12), timeout_ms: 0 });
            }
            fixed(20)?;
            Msg::Hello { version: u32_at(4), rank: u32_at(8), nranks: u32_at(12), timeout_ms: u32_at(16) }
        }
        WELCOME => fixed(0).map(|()| Msg::Welcome)?,
        ALLGATHER => {
            if body.len() < 8 {
                return Err(invalid("short allgather"));
            }
            let mut len = [0u8; 8];
            len.copy_from_slice(&body[..8]);
            Msg::Allgather { recv_len: u64::from_le_bytes(len), data: Cow::Owned(body[8..].to_vec()) }
        }
        BARRIER => fixed(0).map(|()| Msg::Barrier)?,
        INVALID => fixed(0).map(|()| Msg::Invalid)?,
        DONE => Msg::Done { data: Cow::Owned(body) },
        FAIL => {
            fixed(20)?;
            let rank = u32_at(4);
            let culprit = (rank != u32::MAX).then(|| Culprit {
                rank,
                pid: u32_at(8),
                status: i32::from_le_bytes([body[12], body[13], body[14], body[15]]),
                waited_ms: u32_at(16),
            });
            Msg::Fail { reason: Reason::from_code(u32_at(0)), culprit }
        }
        _ => return Err(invalid("unknown message tag")),
    })
}

fn invalid(what: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(m: &Msg<'_>) -> Msg<'static> {
        let mut buf = Vec::new();
        m.write_to(&mut buf).unwrap();
        let mut r = &buf[..];
        let got = Msg::read_from(&mut r).unwrap().unwrap();
        assert!(r.is_empty(), "{m:?} left {} bytes", r.len());
        got
    }

    /// The largest allgather fits a frame (a one-rank job sends what it
    /// gathers): before, its 8-byte field pushed it past the limit, and
    /// the rank's connection broke instead of the collective succeeding.
    #[test]
    fn the_largest_allgather_fits_a_frame() {
        // Zeroed pages are mapped lazily: this costs address space, not memory.
        let data = vec![0u8; MAX_DATA];
        let largest = Msg::Allgather { recv_len: MAX_DATA as u64, data: Cow::Borrowed(&data) };
        largest.write_to(io::sink()).expect("within the frame limit");
        let over = Msg::Allgather { recv_len: 0, data: Cow::Borrowed(&vec![0u8; MAX_DATA + 1]) };
        assert_eq!(over.write_to(io::sink()).unwrap_err().kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn every_message_round_trips() {
        let data: Vec<u8> = (0..=255).collect();
        let msgs = [
            Msg::Hello { version: VERSION, rank: 3, nranks: 1024, timeout_ms: 2000 },
            Msg::Welcome,
            Msg::Allgather { recv_len: 2048, data: Cow::Borrowed(&data) },
            Msg::Allgather { recv_len: 0, data: Cow::Borrowed(&[]) },
            Msg::Barrier,
            Msg::Invalid,
            Msg::Done { data: Cow::Borrowed(&data) },
            Msg::Done { data: Cow::Borrowed(&[]) },
            Msg::fail(Reason::Mismatch),
            Msg::Fail {
                reason: Reason::RankLost,
                culprit: Some(Culprit { rank: 2, pid: 1234, status: 9, waited_ms: 0 }),
            },
            Msg::Fail {
                reason: Reason::Timeout,
                culprit: Some(Culprit { rank: 0, pid: 0, status: -1, waited_ms: 2000 }),
            },
            Msg::fail(Reason::Protocol),
            Msg::fail(Reason::BadRank),
            Msg::fail(Reason::Duplicate),
            Msg::fail(Reason::BadVersion),
            Msg::fail(Reason::Foreign),
            Msg::fail(Reason::TooLarge),
            Msg::fail(Reason::Left),
            Msg::fail(Reason::Unknown(99)),
        ];
        for m in &msgs {
            assert_eq!(&round_trip(m), m);
        }
    }

    #[test]
    fn reason_codes_are_stable_and_unknown_ones_survive() {
        assert_eq!((Reason::Mismatch.code(), Reason::Timeout.code()), (1, 8));
        for code in 0..=12 {
            assert_eq!(Reason::from_code(code).code(), code);
        }
        assert_eq!(Reason::from_code(0), Reason::Unknown(0));
        assert_eq!(Reason::from_code(9), Reason::TooLarge);
        assert_eq!(Reason::from_code(10), Reason::Left);
        assert_eq!(Reason::from_code(11), Reason::Unknown(11));
        assert_eq!(Reason::from_code(6), Reason::BadVersion);
    }

    #[test]
    fn frames_follow_each_other() {
        let mut buf = Vec::new();
        Msg::Barrier.write_to(&mut buf).unwrap();
        Msg::Done { data: Cow::Borrowed(b"abc") }.write_to(&mut buf).unwrap();
        let mut r = &buf[..];
        assert_eq!(Msg::read_from(&mut r).unwrap(), Some(Msg::Barrier));
        assert_eq!(Msg::read_from(&mut r).unwrap(), Some(Msg::Done { data: Cow::Borrowed(b"abc") }));
        assert_eq!(Msg::read_from(&mut r).unwrap(), None);
    }

    #[test]
    fn layout_is_little_endian() {
        let mut buf = Vec::new();
        Msg::Allgather { recv_len: 0x0102, data: Cow::Borrowed(b"xy") }.write_to(&mut buf).unwrap();
        assert_eq!(buf, [11, 0, 0, 0, ALLGATHER, 2, 1, 0, 0, 0, 0, 0, 0, b'x', b'y']);
    }

    #[test]
    fn truncated_frames_are_errors() {
        let mut buf = Vec::new();
        Msg::Hello { version: VERSION, rank: 1, nranks: 2, timeout_ms: 0 }.write_to(&mut buf).unwrap();
        for cut in 1..buf.len() {
            let err = Msg::read_from(&buf[..cut]).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof, "cut at {cut}");
        }
    }

    #[test]
    fn garbage_is_rejected() {
        // Zero length, oversized length, unknown tag, wrong fixed length, wrong magic.
        let cases: [&[u8]; 5] = [
            &[0, 0, 0, 0, 1],
            &[0xff, 0xff, 0xff, 0xff, 1],
            &[1, 0, 0, 0, 99],
            &[2, 0, 0, 0, BARRIER, 0],
            &[17, 0, 0, 0, HELLO, b'X', b'P', b'C', b'R', 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0],
        ];
        for c in cases {
            let err = Msg::read_from(c).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{c:?}");
        }
    }
}
