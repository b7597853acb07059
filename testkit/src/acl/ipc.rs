//! The skeleton the conformance cases share: an exported device block on the
//! exporter's side (the test process), and forked importers that get its key over
//! the channel. Each case then only says what its processes do with the key.

use core::ffi::c_void;

use kpccl_ascend::codes::*;
use kpccl_ascend::{AclError, AclRuntime, IpcKey, Memcpy};

use super::proc::{Chan, Child, spawn};

/// The size of every exported block.
pub const SIZE: usize = 1 << 20;

/// The ACL error code of `r`, 0 for success.
pub fn code<T: core::fmt::Debug>(r: Result<T, AclError>) -> i32 {
    r.err().map_or(0, |e| e.code())
}

pub fn send_key(c: &mut Chan, k: &IpcKey) {
    c.send(k.as_bytes());
}

pub fn recv_key(c: &mut Chan) -> IpcKey {
    IpcKey::from_bytes(c.recv::<65>())
}

/// Fills the first 4096 bytes of device memory `ptr` with `byte`.
// A test helper given device memory of the runtime under test, as every
// caller in the suite is: marking it unsafe would only move the comment.
#[allow(clippy::not_unsafe_ptr_arg_deref)]
pub fn fill<R: AclRuntime>(rt: &R, ptr: *mut c_void, byte: u8) {
    let host = vec![byte; 4096];
    // SAFETY: `ptr` is device memory of at least 4096 bytes, `host` is 4096 bytes.
    unsafe { rt.memcpy(Memcpy::exact(ptr, host.as_ptr().cast(), 4096, ACL_MEMCPY_HOST_TO_DEVICE)) }.unwrap();
}

/// The first 4096 bytes of device memory `ptr`.
#[allow(clippy::not_unsafe_ptr_arg_deref)] // as `fill`
pub fn read<R: AclRuntime>(rt: &R, ptr: *mut c_void) -> Vec<u8> {
    let mut host = vec![0u8; 4096];
    // SAFETY: as in `fill`.
    unsafe { rt.memcpy(Memcpy::exact(host.as_mut_ptr().cast(), ptr, 4096, ACL_MEMCPY_DEVICE_TO_HOST)) }.unwrap();
    host
}

/// Exporter side before the export: on device `dev`, a [`SIZE`] block filled with `byte`.
pub fn exporter<R: AclRuntime>(rt: &R, dev: i32, byte: u8) -> *mut c_void {
    rt.set_device(dev).unwrap();
    let p = rt.malloc(SIZE, ACL_MEM_MALLOC_NORMAL_ONLY).unwrap();
    fill(rt, p, byte);
    p
}

/// Forks an importer: it receives the key, sets device `dev`, then runs `body`.
/// The parent sends the key with [`Exported::send_to`] (or spawns through
/// [`Exported::spawn_importer`], which does).
pub fn importer<R: AclRuntime>(rt: &R, dev: i32, body: impl FnOnce(&mut Chan, &IpcKey)) -> Child {
    spawn(|c| {
        let k = recv_key(c);
        rt.set_device(dev).unwrap();
        body(c, &k);
    })
}

/// Forks an importer that asks to be whitelisted first: it sets device `dev`, sends
/// its tgid, receives the key, then runs `body`. The parent answers with
/// [`Exported::admit`] (or whitelists the tgid and sends the key itself).
pub fn whitelisted_importer<R: AclRuntime>(rt: &R, dev: i32, body: impl FnOnce(&mut Chan, &IpcKey)) -> Child {
    spawn(|c| {
        rt.set_device(dev).unwrap();
        c.send_i32(rt.device_get_bare_tgid().unwrap());
        let k = recv_key(c);
        body(c, &k);
    })
}

/// The exporter's block and its key. Nothing is released on drop: a case ends it
/// with [`Exported::release`] (close, then free), or with its own order of
/// [`Exported::close`] and [`Exported::free`] when that order is what it checks;
/// `acl::run` fails a case that leaves the key behind.
#[derive(Debug)]
pub struct Exported<'r, R> {
    rt: &'r R,
    /// The exported block.
    pub ptr: *mut c_void,
    /// Its key.
    pub key: IpcKey,
}

impl<'r, R: AclRuntime> Exported<'r, R> {
    /// A [`SIZE`] block on device `dev`, filled with `byte`, exported with `flags`.
    pub fn new(rt: &'r R, dev: i32, byte: u8, flags: u64) -> Self {
        Self::of(rt, exporter(rt, dev, byte), flags)
    }

    /// Exports the whole [`SIZE`] block `ptr` (from [`exporter`]) with `flags`.
    pub fn of(rt: &'r R, ptr: *mut c_void, flags: u64) -> Self {
        let key = rt.ipc_mem_get_export_key(ptr, SIZE, flags).unwrap();
        Self { rt, ptr, key }
    }

    /// Sends the key to `child`.
    pub fn send_to(&self, child: &mut Child) {
        send_key(&mut child.chan, &self.key);
    }

    /// Whitelists `tgid` for the key.
    pub fn whitelist(&self, tgid: i32) {
        self.rt.ipc_mem_set_import_pid(&self.key, &[tgid]).unwrap();
    }

    /// Answers a [`whitelisted_importer`]: receives its tgid, whitelists it, sends
    /// the key; returns the tgid.
    pub fn admit(&self, child: &mut Child) -> i32 {
        let tgid = child.chan.recv_i32();
        self.whitelist(tgid);
        self.send_to(child);
        tgid
    }

    /// An [`importer`] on device `dev` running `body`, already sent the key.
    pub fn spawn_importer(&self, dev: i32, body: impl FnOnce(&mut Chan, &IpcKey)) -> Child {
        let mut child = importer(self.rt, dev, body);
        self.send_to(&mut child);
        child
    }

    /// An [`importer`] on device `dev` running `body`, sent the key and joined: it
    /// must exit 0.
    pub fn run_importer(&self, dev: i32, body: impl FnOnce(&mut Chan, &IpcKey)) {
        self.spawn_importer(dev, body).join();
    }

    /// An [`importer`] on device `dev` that maps the key (flag 0) and holds it: this
    /// returns once it has imported; it closes the key and exits when sent any i32.
    pub fn spawn_holder(&self, dev: i32) -> Child {
        let rt = self.rt;
        let mut holder = self.spawn_importer(dev, |c, k| {
            rt.ipc_mem_import_by_key(k, 0).unwrap();
            c.send_i32(1);
            let _ = c.recv_i32();
            rt.ipc_mem_close(k).unwrap();
        });
        assert_eq!(holder.chan.recv_i32(), 1);
        holder
    }

    /// The exporter closes the key; it must succeed.
    pub fn close(&self) {
        self.rt.ipc_mem_close(&self.key).unwrap();
    }

    /// The exporter frees the block; it must succeed.
    pub fn free(&self) {
        self.rt.free(self.ptr).unwrap();
    }

    /// The usual end: close the key, then free the block.
    pub fn release(self) {
        self.close();
        self.free();
    }
}
