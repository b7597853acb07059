//! `key=value` arguments, with the stress scale applied to round counts.

use std::collections::HashMap;

pub(crate) struct Args(HashMap<String, String>);

impl Args {
    pub(crate) fn parse(argv: impl Iterator<Item = String>) -> Result<Self, String> {
        let mut map = HashMap::new();
        for a in argv {
            let (k, v) = a.split_once('=').ok_or_else(|| format!("argument {a:?} is not key=value"))?;
            map.insert(k.to_owned(), v.to_owned());
        }
        Ok(Self(map))
    }

    pub(crate) fn get<T: std::str::FromStr>(&self, key: &str, default: T) -> Result<T, String> {
        self.0.get(key).map_or(Ok(default), |v| v.parse().map_err(|_| format!("{key}={v:?} is invalid")))
    }

    pub(crate) fn str(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    /// A round count, scaled by `KPCCL_STRESS_SCALE` (qemu runs set it below 1), at least 1.
    pub(crate) fn rounds(&self, key: &str, default: u64) -> Result<u64, String> {
        let scale: f64 = std::env::var("KPCCL_STRESS_SCALE").ok().and_then(|s| s.parse().ok()).unwrap_or(1.0);
        let n = self.get(key, default)?;
        Ok(((n as f64 * scale) as u64).max(1))
    }
}
