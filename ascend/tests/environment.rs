//! The README's table of environment variables is generated from
//! `kpccl_posix::ENVIRONMENT` and `kpccl_ascend::ENVIRONMENT`, and every
//! `KPCCL_*` and `ASCEND_*` variable the libraries read is in it.
//!
//! `KPCCL_BLESS=1 cargo test -p kpccl-ascend --test environment` rewrites
//! the README's table from the code.

use std::path::{Path, PathBuf};

const BEGIN: &str = "<!-- generated from kpccl_posix::ENVIRONMENT and kpccl_ascend::ENVIRONMENT; \
                     KPCCL_BLESS=1 cargo test -p kpccl-ascend --test environment rewrites it -->\n";
const END: &str = "<!-- end of the generated table -->";

/// Read by the launcher and its ranks among themselves, or by tests only:
/// not for users to set.
const INTERNAL: &[&str] = &["KPCCL_RANK", "KPCCL_NRANKS", "KPCCL_RUN_SOCKET", "KPCCL_BLESS"];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace").to_path_buf()
}

fn all() -> impl Iterator<Item = &'static kpccl_posix::EnvVar> {
    kpccl_posix::ENVIRONMENT.iter().chain(kpccl_ascend::ENVIRONMENT)
}

#[test]
fn the_readme_table_is_generated_from_the_code() {
    let path = repo().join("README.md");
    let readme = std::fs::read_to_string(&path).expect("README.md");
    let start = readme.find(BEGIN).expect("the README marks its generated table") + BEGIN.len();
    let end = start + readme[start..].find(END).expect("the end marker");
    let table = kpccl_posix::markdown_table(all());
    if std::env::var_os("KPCCL_BLESS").is_some() {
        std::fs::write(&path, format!("{}{table}{}", &readme[..start], &readme[end..])).expect("README.md written");
        return;
    }
    assert_eq!(
        readme[start..end],
        table,
        "README.md is stale: KPCCL_BLESS=1 cargo test -p kpccl-ascend --test environment"
    );
}

/// The `"KPCCL_…"` and `"ASCEND_…"` string literals of the `.rs` files under `dir`.
fn names_read(dir: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).expect("a source directory") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            names_read(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).expect("a source file");
            for prefix in ["KPCCL_", "ASCEND_"] {
                for piece in text.split(&format!("\"{prefix}")).skip(1) {
                    let name: String = piece.chars().take_while(|c| c.is_ascii_uppercase() || *c == '_').collect();
                    if piece[name.len()..].starts_with('"') {
                        out.push(format!("{prefix}{name}"));
                    }
                }
            }
        }
    }
}

#[test]
fn every_variable_the_libraries_read_is_in_the_table() {
    let mut read = Vec::new();
    for krate in ["posix/src", "ascend/src", "ffi/src", "run/src", "python/src"] {
        names_read(&repo().join(krate), &mut read);
    }
    read.sort();
    read.dedup();
    let missing: Vec<_> = read
        .iter()
        .filter(|n| !n.starts_with("KPCCL_TEST_") && !INTERNAL.contains(&n.as_str()))
        .filter(|n| !all().any(|v| v.name == n.as_str()))
        .collect();
    assert!(missing.is_empty(), "read by the code but not documented in ENVIRONMENT: {missing:?}");
    assert!(read.len() > 10, "the scan found the variables: {read:?}");
}
