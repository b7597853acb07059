//! Out-of-band doubles: one rank alone, a layer that fails one chosen
//! allgather (every rank must get an error, and none hang, when one rank's
//! collective fails), and one that alters what an allgather delivers (a
//! lying, corrupting or late layer).

use core::cell::Cell;

use kpccl_core::{Oob, OobError};

/// The out-of-band collectives of a communicator of one rank (this
/// process): the allgather copies, the barrier returns.
#[derive(Clone, Copy, Debug, Default)]
pub struct Solo;

impl Oob for Solo {
    fn allgather(&self, send: &[u8], recv: &mut [u8]) -> Result<(), OobError> {
        if send.len() != recv.len() {
            return Err(OobError { code: -1 });
        }
        recv.copy_from_slice(send);
        Ok(())
    }
    fn barrier(&self) -> Result<(), OobError> {
        Ok(())
    }
}

/// The code of the error a [`FailingOob`] injects.
pub const INJECTED: i32 = -99;

/// When the failing allgather fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    /// Before taking part: the other ranks are still waiting for this one.
    Before,
    /// After taking part: the collective completed everywhere else.
    After,
}

/// `inner`, except that its allgather number `call` (counting from 1) fails
/// with [`INJECTED`], [`When::Before`] or [`When::After`] taking part; a
/// [`FailingOob::passing`] one never fails (the other ranks of a test).
#[derive(Debug)]
pub struct FailingOob<O> {
    inner: O,
    fail: Option<(u32, When)>,
    calls: Cell<u32>,
}

impl<O: Oob> FailingOob<O> {
    /// Fails allgather number `call` (from 1), `when`.
    pub fn new(inner: O, call: u32, when: When) -> Self {
        Self { inner, fail: Some((call, when)), calls: Cell::new(0) }
    }

    /// Never fails: `inner` as it is, for the ranks that are not the victim.
    pub fn passing(inner: O) -> Self {
        Self { inner, fail: None, calls: Cell::new(0) }
    }

    /// The wrapped layer.
    pub fn inner(&self) -> &O {
        &self.inner
    }
}

impl<O: Oob> Oob for FailingOob<O> {
    fn allgather(&self, send: &[u8], recv: &mut [u8]) -> Result<(), OobError> {
        let call = self.calls.get() + 1;
        self.calls.set(call);
        match self.fail {
            Some((at, When::Before)) if at == call => Err(OobError { code: INJECTED }),
            Some((at, When::After)) if at == call => {
                self.inner.allgather(send, recv).and(Err(OobError { code: INJECTED }))
            }
            _ => self.inner.allgather(send, recv),
        }
    }

    fn barrier(&self) -> Result<(), OobError> {
        self.inner.barrier()
    }
}

/// `inner`, after whose allgather number `call` (counting from 1) succeeds
/// `tamper(call, record_len, recv)` may change what it delivered (rank r's
/// record is `recv[r * record_len..][..record_len]`), or take its time.
pub struct Tampering<O, F> {
    inner: O,
    tamper: F,
    calls: Cell<u32>,
}

impl<O: Oob, F: Fn(u32, usize, &mut [u8])> Tampering<O, F> {
    /// `inner`, with `tamper` run after each of its allgathers.
    pub fn new(inner: O, tamper: F) -> Self {
        Self { inner, tamper, calls: Cell::new(0) }
    }
}

impl<O: core::fmt::Debug, F> core::fmt::Debug for Tampering<O, F> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Tampering").field("inner", &self.inner).field("calls", &self.calls).finish_non_exhaustive()
    }
}

impl<O: Oob, F: Fn(u32, usize, &mut [u8])> Oob for Tampering<O, F> {
    fn allgather(&self, send: &[u8], recv: &mut [u8]) -> Result<(), OobError> {
        self.inner.allgather(send, recv)?;
        let call = self.calls.get() + 1;
        self.calls.set(call);
        (self.tamper)(call, send.len(), recv);
        Ok(())
    }

    fn barrier(&self) -> Result<(), OobError> {
        self.inner.barrier()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcomes(oob: &FailingOob<Solo>) -> Vec<(Result<(), OobError>, u8)> {
        (1..=3u8)
            .map(|i| {
                let mut got = [0u8];
                (oob.allgather(&[i], &mut got), got[0])
            })
            .collect()
    }

    #[test]
    fn only_the_chosen_call_fails_before_or_after_taking_part() {
        let e = Err(OobError { code: INJECTED });
        assert_eq!(outcomes(&FailingOob::new(Solo, 2, When::Before)), [(Ok(()), 1), (e, 0), (Ok(()), 3)]);
        assert_eq!(outcomes(&FailingOob::new(Solo, 2, When::After)), [(Ok(()), 1), (e, 2), (Ok(()), 3)]);
        assert_eq!(outcomes(&FailingOob::passing(Solo)), [(Ok(()), 1), (Ok(()), 2), (Ok(()), 3)]);
        assert_eq!(FailingOob::new(Solo, 1, When::Before).barrier(), Ok(()));
    }

    #[test]
    fn tampering_sees_each_call_and_changes_what_it_names() {
        let oob = Tampering::new(Solo, |call, len, recv: &mut [u8]| {
            assert_eq!(len, 1);
            if call == 2 {
                recv[0] ^= 0xff;
            }
        });
        let got: Vec<u8> = (1..=3u8)
            .map(|i| {
                let mut got = [0u8];
                oob.allgather(&[i], &mut got).unwrap();
                got[0]
            })
            .collect();
        assert_eq!(got, [1, !2, 3]);
    }

    #[test]
    fn solo_refuses_a_buffer_of_the_wrong_length() {
        assert_eq!(Solo.allgather(&[1, 2], &mut [0u8; 3]), Err(OobError { code: -1 }));
    }
}
