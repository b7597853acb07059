//! Where the hub listens: a Unix stream socket named in the Linux abstract
//! namespace, so nothing is left on disk whoever crashes.
//!
//! `KPCCL_RUN_SOCKET` holds `@name` for the abstract name `\0name` (the
//! notation of `ss` and `/proc/net/unix`), or a filesystem path otherwise.

use std::hash::{BuildHasher, RandomState};
use std::io::{self, Read};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::SocketAddr;
use std::time::{SystemTime, UNIX_EPOCH};

/// Parses a `KPCCL_RUN_SOCKET` value.
pub fn parse(socket: &str) -> io::Result<SocketAddr> {
    match socket.strip_prefix('@') {
        Some(name) => SocketAddr::from_abstract_name(name.as_bytes()),
        None => SocketAddr::from_pathname(socket),
    }
}

/// A fresh abstract name, `@kpccl-run-<pid>-<64 random bits>`.
pub fn unique() -> String {
    format!("@kpccl-run-{}-{:016x}", std::process::id(), random_u64())
}

fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    if std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut b)).is_ok() {
        return u64::from_ne_bytes(b);
    }
    // No /dev/urandom (a sandbox): std's per-process random hash keys, mixed with the clock.
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    RandomState::new().hash_one(nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_abstract_and_unique() {
        let (a, b) = (unique(), unique());
        assert_ne!(a, b);
        assert!(a.starts_with(&format!("@kpccl-run-{}-", std::process::id())));
        let addr = parse(&a).unwrap();
        assert_eq!(addr.as_abstract_name(), Some(&a.as_bytes()[1..]));
        assert!(addr.as_pathname().is_none());
    }

    #[test]
    fn paths_are_paths() {
        let addr = parse("/tmp/kpccl.sock").unwrap();
        assert_eq!(addr.as_pathname(), Some(std::path::Path::new("/tmp/kpccl.sock")));
    }
}
