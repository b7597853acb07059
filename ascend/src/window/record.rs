//! The fixed-size record every rank contributes to each out-of-band
//! allgather of device-window creation, its failure encoding, and the verdict.
//!
//! The exchange follows [`kpccl_core::protocol::lockstep`]: a rank whose
//! allgather fails makes exactly one more with its failure. That call either
//! completes the allgather the others are still in, or is their next one;
//! every stage uses this one record size so the two line up.

use bytemuck::{Pod, Zeroable};
use kpccl_core::OobError;
use kpccl_core::protocol::lockstep::{self, LockstepRecord};

use super::error::{Call, Collective, Error, Failure, RecordFlaw, Setting};
use crate::codes::ACL_IPC_KEY_LEN;
use crate::runtime::IpcKey;

/// `"KPAD"`: a record of this protocol.
const MAGIC: u32 = u32::from_le_bytes(*b"KPAD");
/// `about` when a failure concerns no other rank.
const NOBODY: u32 = u32::MAX;

/// The step of creation a record belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum Stage {
    /// Device, bare tgid, size; the segment is allocated.
    Ident = 1,
    /// The export key, after the whitelist is set.
    Export = 2,
    /// Every import's result.
    Import = 3,
}

/// Status codes of [`Record::status`].
const OK: u32 = 0;
const ACL: u32 = 1;
const NO_RUNTIME: u32 = 2;
const ARGUMENT: u32 = 3;
const OOB: u32 = 4;
const NO_PEER_ACCESS: u32 = 5;

/// Option bit: export keys without a PID whitelist.
pub(crate) const NO_VALIDATION: u32 = 1;

/// One rank's contribution. Plain old data without implicit padding, 128 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub(crate) struct Record {
    magic: u32,
    stage: u32,
    pub(crate) rank: u32,
    pub(crate) nranks: u32,
    status: u32,
    call: u32,
    code: i32,
    about: u32,
    pub(crate) device: i32,
    pub(crate) tgid: i32,
    pub(crate) options: u32,
    pad: u32,
    pub(crate) size: u64,
    key: [u8; ACL_IPC_KEY_LEN],
    pad2: [u8; 7],
}

const _: () = assert!(size_of::<Record>() == 128);

impl Default for Record {
    fn default() -> Self {
        Self {
            magic: 0,
            stage: 0,
            rank: 0,
            nranks: 0,
            status: OK,
            call: 0,
            code: 0,
            about: NOBODY,
            device: 0,
            tgid: 0,
            options: 0,
            pad: 0,
            size: 0,
            key: [0; ACL_IPC_KEY_LEN],
            pad2: [0; 7],
        }
    }
}

impl Record {
    pub(crate) fn new(stage: Stage, rank: u32, nranks: u32) -> Self {
        Self { magic: MAGIC, stage: stage as u32, rank, nranks, ..Self::default() }
    }

    pub(crate) fn set_key(&mut self, key: &IpcKey) {
        self.key = *key.as_bytes();
    }

    /// The key carried (Export stage); `None` for an empty segment.
    pub(crate) fn key(&self) -> Option<IpcKey> {
        (self.key[0] != 0).then(|| IpcKey::from_bytes(self.key))
    }
}

impl LockstepRecord for Record {
    type Failure = Failure;

    fn oob_failure(e: OobError) -> Failure {
        Failure::Oob(e.code)
    }

    fn fail(&mut self, f: Failure) {
        if self.status != OK {
            return;
        }
        let (status, call, code, about) = match f {
            Failure::Acl { call, code, peer } => (ACL, call.code(), code, peer.unwrap_or(NOBODY)),
            Failure::NoRuntime => (NO_RUNTIME, 0, 0, NOBODY),
            Failure::Argument | Failure::Unknown => (ARGUMENT, 0, 0, NOBODY),
            Failure::Oob(code) => (OOB, 0, code, NOBODY),
            Failure::NoPeerAccess { peer } => (NO_PEER_ACCESS, 0, 0, peer),
        };
        (self.status, self.call, self.code, self.about) = (status, call, code, about);
    }

    fn failure(&self) -> Option<Failure> {
        let peer = (self.about != NOBODY).then_some(self.about);
        Some(match self.status {
            OK => return None,
            ACL => match Call::from_code(self.call) {
                Some(call) => Failure::Acl { call, code: self.code, peer },
                None => Failure::Unknown,
            },
            NO_RUNTIME => Failure::NoRuntime,
            ARGUMENT => Failure::Argument,
            OOB => Failure::Oob(self.code),
            NO_PEER_ACCESS => Failure::NoPeerAccess { peer: self.about },
            _ => Failure::Unknown,
        })
    }
}

/// The verdict every rank reaches on a gathered table: `local` (this rank's own
/// error) if it failed, else the lowest failing rank's failure, else the first
/// record that breaks the protocol or disagrees with rank 0 on the options.
pub(crate) fn verdict(table: &[Record], stage: Stage, local: Option<Error>) -> Result<(), Error> {
    if let Some(e) = local {
        return Err(e);
    }
    if let Some((rank, failure)) = lockstep::first_failure(table) {
        return Err(Collective::Peer { rank, failure }.into());
    }
    for (r, rec) in (0u32..).zip(table) {
        let field = if rec.magic != MAGIC || rec.stage != stage as u32 {
            Setting::Stage
        } else if rec.nranks as usize != table.len() {
            Setting::RankCount
        } else if rec.rank != r {
            // As host collectives say it: what the processes said, not table places.
            return Err(Collective::rank_claim(r, rec.rank, table.iter().map(|t| t.rank)).into());
        } else if rec.options != table[0].options {
            Setting::PidValidation
        } else {
            continue;
        };
        return Err(Collective::Mismatch { rank: r, field }.into());
    }
    Ok(())
}

/// The segment sizes of an `Ident` table, each one a size this process can
/// map; else the first rank whose size is not.
pub(crate) fn sizes(table: &[Record]) -> Result<Vec<usize>, Error> {
    (0u32..)
        .zip(table)
        .map(|(rank, rec)| {
            usize::try_from(rec.size)
                .ok()
                .filter(|&s| isize::try_from(s).is_ok())
                .ok_or(Error::BadRecord { rank, flaw: RecordFlaw::SizeTooLarge { size: rec.size } })
        })
        .collect()
}

/// The export keys of an `Export` table, one for each non-empty segment of
/// `sizes` (else `None`), each NUL-terminated; else the first rank whose key
/// breaks that rule.
pub(crate) fn keys(table: &[Record], sizes: &[usize]) -> Result<Vec<Option<IpcKey>>, Error> {
    (0u32..)
        .zip(table.iter().zip(sizes))
        .map(|(rank, (rec, &size))| {
            let flaw = match (rec.key(), size) {
                (None, 0) => return Ok(None),
                (Some(key), 1..) if key.as_bytes().contains(&0) => return Ok(Some(key)),
                (Some(_), 1..) => RecordFlaw::UnterminatedKey,
                (Some(_), 0) => RecordFlaw::KeyWithoutSegment,
                (None, size) => RecordFlaw::NoKey { size: size as u64 },
            };
            Err(Error::BadRecord { rank, flaw })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_round_trip() {
        for f in [
            Failure::Acl { call: Call::ImportByKey, code: 507_899, peer: Some(3) },
            Failure::Acl { call: Call::Malloc, code: 207_001, peer: None },
            Failure::NoRuntime,
            Failure::Argument,
            Failure::Oob(-4),
            Failure::NoPeerAccess { peer: 1 },
        ] {
            let mut r = Record::new(Stage::Ident, 0, 1);
            r.fail(f);
            assert_eq!(r.failure(), Some(f));
        }
        assert_eq!(Record::new(Stage::Ident, 0, 1).failure(), None);
    }

    /// A wrong rank number reads as in host collectives: what the processes
    /// said, not "rank numbering" at a table position.
    #[test]
    fn a_wrong_rank_number_says_what_the_processes_said() {
        let said = |ranks: &[u32], nranks: u32| -> Vec<Record> {
            ranks.iter().map(|&r| Record::new(Stage::Ident, r, nranks)).collect()
        };
        let e = verdict(&said(&[0, 1, 1], 3), Stage::Ident, None).unwrap_err();
        assert!(matches!(e, Error::Collective(Collective::RankClaim { place: 2, says: 1, shared: true })), "{e:?}");
        assert!(e.to_string().starts_with("two processes both say they are rank 1: "), "{e}");
        let e = verdict(&said(&[0, 2, 1], 3), Stage::Ident, None).unwrap_err();
        assert!(matches!(e, Error::Collective(Collective::RankClaim { place: 1, says: 2, shared: false })), "{e:?}");
        assert!(
            e.to_string().starts_with("the process at rank 1's place in the out-of-band exchange says it is rank 2")
        );
        let e = verdict(&said(&[0, 1, 2], 2), Stage::Ident, None).unwrap_err();
        let want = Collective::Mismatch { rank: 0, field: Setting::RankCount };
        assert!(matches!(e, Error::Collective(c) if c == want), "{e:?}");
        assert_eq!(e.to_string(), "rank 0 disagrees with this rank on the rank count");
        assert!(verdict(&said(&[0, 1, 2], 3), Stage::Ident, None).is_ok());
    }

    /// A buggy peer's size or key is refused, naming it: no copy may reach an
    /// address no import backs, and no unterminated key reaches the runtime.
    #[test]
    fn impossible_sizes_and_keys_name_their_rank() {
        let mut table = vec![Record::new(Stage::Ident, 0, 3); 3];
        table[1].size = 4096;
        table[2].size = u64::MAX;
        let e = sizes(&table).unwrap_err();
        assert!(matches!(e, Error::BadRecord { rank: 2, flaw: RecordFlaw::SizeTooLarge { size: u64::MAX } }), "{e:?}");
        table[2].size = 0;
        let sizes = sizes(&table).unwrap();
        let mut key = [b'a'; ACL_IPC_KEY_LEN];
        key[64] = 0;
        let with = |rank: usize, key: [u8; ACL_IPC_KEY_LEN]| {
            let mut t = vec![Record::new(Stage::Export, 0, 3); 3];
            t[rank].set_key(&IpcKey::from_bytes(key));
            keys(&t, &sizes)
        };
        assert_eq!(with(1, key).unwrap(), vec![None, Some(IpcKey::from_bytes(key)), None]);
        let flaw = |r: Result<_, Error>| match r {
            Err(Error::BadRecord { rank, flaw }) => (rank, flaw),
            other => panic!("{other:?}"),
        };
        assert_eq!(flaw(with(0, key)), (0, RecordFlaw::KeyWithoutSegment));
        assert_eq!(flaw(with(2, key)), (1, RecordFlaw::NoKey { size: 4096 }));
        assert_eq!(flaw(with(1, [b'a'; ACL_IPC_KEY_LEN])), (1, RecordFlaw::UnterminatedKey));
        let mut t = vec![Record::new(Stage::Export, 0, 3); 3];
        t[1].set_key(&IpcKey::from_bytes(key));
        t[2].set_key(&IpcKey::from_bytes(key));
        assert_eq!(flaw(keys(&t, &sizes)), (2, RecordFlaw::KeyWithoutSegment));
    }

    #[test]
    fn keys_round_trip() {
        let mut r = Record::default();
        assert_eq!(r.key(), None);
        let mut k = [b'a'; ACL_IPC_KEY_LEN];
        k[64] = 0;
        r.set_key(&IpcKey::from_bytes(k));
        assert_eq!(r.key(), Some(IpcKey::from_bytes(k)));
    }
}
