//! Byte copies into and out of any rank's segment, for host windows
//! ([`kpccl_posix::Window`]) and device windows ([`DeviceWindow`]) alike: the C
//! API's `kpccl_shm_win_put` / `kpccl_shm_win_get` in Rust. A device window picks
//! the copy kinds the hardware allows (see [`DeviceWindow::write`]).

use kpccl_posix::Window;

use super::{DeviceWindow, Error};

/// Bounds-checked byte copies between a host buffer and a rank's segment,
/// complete when the call returns; a fence then makes them visible to the peer.
pub trait PutGet {
    /// Copies `src` to byte `offset` of `rank`'s segment.
    fn put(&self, rank: u32, offset: usize, src: &[u8]) -> Result<(), Error>;
    /// Copies from byte `offset` of `rank`'s segment into `dst`.
    fn get(&self, rank: u32, offset: usize, dst: &mut [u8]) -> Result<(), Error>;
}

impl PutGet for Window {
    fn put(&self, rank: u32, offset: usize, src: &[u8]) -> Result<(), Error> {
        Ok(self.write(rank, offset, src)?)
    }

    fn get(&self, rank: u32, offset: usize, dst: &mut [u8]) -> Result<(), Error> {
        Ok(self.read(rank, offset, dst)?)
    }
}

impl PutGet for DeviceWindow {
    fn put(&self, rank: u32, offset: usize, src: &[u8]) -> Result<(), Error> {
        self.write(rank, offset, src)
    }

    fn get(&self, rank: u32, offset: usize, dst: &mut [u8]) -> Result<(), Error> {
        self.read(rank, offset, dst)
    }
}
