//! The out-of-band rule of every creation protocol (this crate's communicators
//! and windows, `kpccl-ascend`'s device windows), written once over any
//! record type; each protocol keeps its own record layout and failure
//! encoding.
//!
//! Every stage allgathers one fixed-size record per rank. A rank whose
//! allgather fails makes exactly one more, the "flush", carrying its
//! failure: that call either completes the allgather the others are still
//! in (the callback failed before taking part) or is their next one (it
//! failed after), so every rank learns of the failure and the counts of
//! collective calls still match. For the two to line up, every stage of a
//! protocol uses one record type, so one size. Every rank then judges the
//! gathered table alike, starting with [`first_failure`].

pub use bytemuck::Pod;
use bytemuck::{bytes_of, cast_slice_mut};

use crate::error::OobError;
use crate::oob::Oob;

/// A protocol's record: plain old data that can carry its rank's failure.
pub trait LockstepRecord: Pod {
    /// What a record tells the other ranks went wrong.
    type Failure: Copy;
    /// The failure a rank reports when its own allgather failed with `e`.
    fn oob_failure(e: OobError) -> Self::Failure;
    /// Marks the record failed; the first failure sticks.
    fn fail(&mut self, failure: Self::Failure);
    /// The failure the record carries, if any.
    fn failure(&self) -> Option<Self::Failure>;
}

/// Allgathers `mine` into `table` (one record per rank), without a flush.
pub(crate) fn allgather<O: Oob + ?Sized, R: Pod>(oob: &O, mine: &R, table: &mut [R]) -> Result<(), OobError> {
    // A part the callback leaves unwritten then reads as nothing sent (all
    // zero), not as that rank's record of the stage before.
    table.fill(R::zeroed());
    oob.allgather(bytes_of(mine), cast_slice_mut(table))
}

/// Allgathers `mine` into `table`. If that fails, calls `before_flush` (e.g. to
/// poison a window the others may wait in), flushes, and returns the failure
/// this rank reports.
pub fn exchange<O, R>(oob: &O, mine: &R, table: &mut [R], before_flush: impl FnOnce()) -> Result<(), R::Failure>
where
    O: Oob + ?Sized,
    R: LockstepRecord,
{
    allgather(oob, mine, table).map_err(|e| {
        let failure = R::oob_failure(e);
        before_flush();
        flush(oob, mine, failure, table);
        failure
    })
}

/// The one extra allgather that tells every rank about `failure`: `mine`,
/// marked failed (unless it already carries a failure, which sticks).
pub fn flush<O, R>(oob: &O, mine: &R, failure: R::Failure, table: &mut [R])
where
    O: Oob + ?Sized,
    R: LockstepRecord,
{
    let mut failed = *mine;
    failed.fail(failure);
    // This rank reports its own failure; the flush is a courtesy to the others.
    let _ = allgather(oob, &failed, table);
}

/// The lowest failing rank of a gathered table, and its failure.
pub fn first_failure<R: LockstepRecord>(table: &[R]) -> Option<(u32, R::Failure)> {
    (0u32..).zip(table).find_map(|(r, rec)| rec.failure().map(|f| (r, f)))
}

#[cfg(test)]
mod tests {
    use core::cell::Cell;

    use super::*;
    use crate::error::Failure;
    use crate::protocol::Record;

    /// One rank whose first `fails` allgathers fail; counts the calls.
    struct Flaky {
        fails: Cell<u32>,
        calls: Cell<u32>,
    }

    impl Oob for Flaky {
        fn allgather(&self, send: &[u8], recv: &mut [u8]) -> Result<(), OobError> {
            self.calls.set(self.calls.get() + 1);
            if self.fails.get() > 0 {
                self.fails.set(self.fails.get() - 1);
                return Err(OobError { code: -7 });
            }
            recv.copy_from_slice(send);
            Ok(())
        }
        fn barrier(&self) -> Result<(), OobError> {
            Ok(())
        }
    }

    #[test]
    fn a_failed_allgather_flushes_once_with_its_failure() {
        let oob = Flaky { fails: Cell::new(1), calls: Cell::new(0) };
        let mut table = [Record::default()];
        let before = Cell::new(0);
        let got = exchange(&oob, &Record::default(), &mut table, || before.set(before.get() + 1));
        let failure = Failure::Oob(OobError { code: -7 });
        assert_eq!(got, Err(failure));
        assert_eq!((oob.calls.get(), before.get()), (2, 1));
        assert_eq!(first_failure(&table), Some((0, failure)));
    }

    #[test]
    fn a_good_allgather_does_not_flush() {
        let oob = Flaky { fails: Cell::new(0), calls: Cell::new(0) };
        let mut table = [Record::default()];
        assert_eq!(exchange(&oob, &Record::default(), &mut table, || unreachable!()), Ok(()));
        assert_eq!((oob.calls.get(), first_failure(&table)), (1, None));
    }

    #[test]
    fn the_first_failure_sticks_and_the_lowest_rank_wins() {
        let mut table = [Record::default(); 3];
        let (a, b) = (Failure::Oob(OobError { code: 1 }), Failure::Oob(OobError { code: 2 }));
        table[2].fail(a);
        table[1].fail(b);
        table[1].fail(a);
        assert_eq!(first_failure(&table), Some((1, b)));
    }
}
