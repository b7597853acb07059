//! `cargo xtask test-aarch64`: the workspace's tests, doctests, examples and C
//! tests built for `aarch64-unknown-linux-gnu` and run under `qemu-aarch64`
//! (no Docker, as rustix's CI does), `kpccl-core` built for
//! `aarch64-unknown-none`, and a final `N passed, N failed` line (tests).
//!
//! qemu-user on an x86 host does not show aarch64's weak memory ordering;
//! loom and Miri cover that. This proves the code builds, links and behaves
//! as an aarch64 program.

use std::{env, fs, os::unix::fs::PermissionsExt, path::PathBuf};

use crate::{
    c_tests::{self, CTests},
    cmd::{self, Cmd, Error, Result, bail, which},
    report::{Counts, Done, Steps},
    test,
};

const TARGET: &str = "aarch64-unknown-linux-gnu";
/// The cross sysroot of Debian's `libc6-dev-arm64-cross`; qemu's `-L`.
const SYSROOT: &str = "/usr/aarch64-linux-gnu";
const GCC: &str = "aarch64-linux-gnu-gcc";
const AR: &str = "aarch64-linux-gnu-ar";
const APT_PACKAGES: [&str; 3] = ["qemu-user", "gcc-aarch64-linux-gnu", "libc6-dev-arm64-cross"];
/// xtask runs on the build machine; it is no aarch64 program to test. The
/// Python extension is tested on the host (its pytest suite), not under qemu.
const EXCLUDE: [&str; 4] = ["--exclude", "xtask", "--exclude", "kpccl-python"];
/// How much of their full length the multi-process stress tests run under qemu.
const STRESS_SCALE: &str = "0.1";
/// One test at a time in each test binary: qemu-user (7.2) can deadlock a
/// child forked while another thread of the parent is being created, and
/// libtest creates a thread per test while other tests fork their ranks.
const TEST_THREADS: &str = "1";
/// glib's allocator for qemu-user's own structures: plain `malloc`. glib
/// 2.74's slice allocator (Debian 12) takes mutexes that `fork` does not
/// hand over, so a test forking its ranks while another host thread of
/// qemu holds one leaves a child stuck for ever in its first translation
/// (`tcg_tb_insert` > `g_slice_alloc` > futex), before it reaches `exec`:
/// all three ranks of one launch, once in about forty runs of the scenario
/// tests on a loaded machine. glibc's `malloc` is safe across `fork`.
const GLIB_SLICE: &str = "always-malloc";

pub(crate) fn run(install: bool, cross: bool) -> Result<()> {
    if cross {
        if install {
            bail!("--install sets up the local toolchain and qemu; with --cross, install cross and Docker yourself");
        }
        check_cross()?;
    } else {
        prerequisites(install)?;
    }
    let envs = environment(cross);
    println!("environment for the commands below:");
    for (k, v) in &envs {
        println!("    export {k}={}", if v.contains(' ') { format!("'{v}'") } else { v.clone() });
    }
    let cargo = || if cross { Cmd::new("cross") } else { Cmd::cargo() }.envs_unechoed(&envs);

    let mut steps = Steps::new(5);
    let mut totals = Counts::default();
    // Steps that failed without a failing test to show for it (a build
    // error, a crashed test binary) count as one failure each.
    let mut step_failures = 0;
    let mut fail_step = |ok: bool| step_failures += u64::from(!ok);

    fail_step(steps.run("no_std build (kpccl-core, embedding example; aarch64-unknown-none)", test::no_std));

    let mut running = Vec::new();
    let mut test_failures = 0;
    let ok = steps.run(&format!("tests + doctests ({TARGET}, qemu)"), || {
        let out = cargo()
            .args(["test", "--workspace"])
            .args(EXCLUDE)
            .args(["--target", TARGET, "--no-fail-fast"])
            .run_tee()?;
        let (counts, lines) = Counts::sum(&out.stdout);
        totals += counts;
        test_failures = counts.failed;
        running = test_binaries(&out.stderr);
        let doctests = out.stderr.lines().filter(|l| l.trim_start().starts_with("Doc-tests ")).count();
        let note = format!("{counts} ({lines} test binaries, {doctests} with doctests)");
        if !out.success {
            bail!("cargo test failed ({}): {note}", out.status);
        }
        if lines == 0 {
            bail!("cargo test printed no `test result:` line");
        }
        Ok(Done::Ran(note))
    });
    if !ok && test_failures == 0 {
        fail_step(false);
    }
    if !doctests_cross_compile() {
        println!("note: this cargo is older than 1.89 and does not run doctests for another target; doctests skipped");
    }

    fail_step(steps.run(&format!("examples ({TARGET})"), || {
        cargo().args(["build", "--workspace"]).args(EXCLUDE).args(["--examples", "--target", TARGET]).run()?;
        Ok(Done::Ran(String::new()))
    }));

    let runner: Vec<String> = envs.iter().find(|(k, _)| k == RUNNER_VAR).map_or_else(
        || vec!["qemu-aarch64".to_owned(), "-L".to_owned(), SYSROOT.to_owned()],
        |(_, v)| v.split_whitespace().map(str::to_owned).collect(),
    );
    let mut c_failures = 0;
    let ok = steps.run(&format!("C tests ({TARGET}, qemu)"), || {
        if cross && !c_tests::sources()?.is_empty() {
            return Ok(Done::Skipped("C tests run only without --cross".to_owned()));
        }
        let cfg = CTests { cc: GCC.to_owned(), target: Some(TARGET.to_owned()), runner, launcher: None };
        match c_tests::run(&cfg)? {
            None => Ok(Done::Skipped(format!("no C tests yet (no {}/*.c)", c_tests::DIR))),
            Some(counts) => {
                totals += counts;
                c_failures = counts.failed;
                if counts.failed > 0 {
                    bail!("C tests: {counts}");
                }
                Ok(Done::Ran(counts.to_string()))
            }
        }
    });
    if !ok && c_failures == 0 {
        fail_step(false);
    }

    fail_step(steps.run("aarch64 ELF check", || check_elf(&running)));

    totals.failed += step_failures;
    steps.print_table(&format!("cargo xtask test-aarch64{}", if cross { " --cross" } else { "" }));
    println!("{totals}");
    if totals.failed > 0 { Err(Error::reported()) } else { Ok(()) }
}

const LINKER_VAR: &str = "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER";
const RUNNER_VAR: &str = "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER";

/// The variables every command gets. A value the caller already set wins
/// (a patched qemu, a different stress scale), as env wins over config.
fn environment(cross: bool) -> Vec<(String, String)> {
    let runner = format!("qemu-aarch64 -L {SYSROOT}");
    let defaults: Vec<(&str, &str)> = if cross {
        // cross's image brings its own linker and runner.
        vec![("KPCCL_STRESS_SCALE", STRESS_SCALE), ("RUST_TEST_THREADS", TEST_THREADS), ("G_SLICE", GLIB_SLICE)]
    } else {
        vec![
            (LINKER_VAR, GCC),
            (RUNNER_VAR, &runner),
            ("CC_aarch64_unknown_linux_gnu", GCC),
            ("AR_aarch64_unknown_linux_gnu", AR),
            ("KPCCL_STRESS_SCALE", STRESS_SCALE),
            ("RUST_TEST_THREADS", TEST_THREADS),
            ("G_SLICE", GLIB_SLICE),
        ]
    };
    defaults.into_iter().map(|(k, v)| (k.to_owned(), env::var(k).unwrap_or_else(|_| v.to_owned()))).collect()
}

/// What is missing for the direct (qemu, no Docker) route; with `install`,
/// installs it.
fn prerequisites(install: bool) -> Result<()> {
    let mut missing = missing_prerequisites();
    if missing.is_empty() {
        return Ok(());
    }
    if install {
        install_prerequisites(&missing)?;
        missing = missing_prerequisites();
        if missing.is_empty() {
            return Ok(());
        }
    }
    eprintln!("missing prerequisites for `cargo xtask test-aarch64`:");
    for m in &missing {
        eprintln!("  - {}", m.what);
    }
    eprintln!("install them with:");
    for line in install_commands(&missing) {
        eprintln!("    {}", line.join(" "));
    }
    if !install {
        eprintln!("or run `cargo xtask test-aarch64 --install`");
    }
    bail!("prerequisites missing")
}

#[derive(Debug)]
struct Missing {
    what: String,
    /// Installed by `rustup target add <target>`, else by apt.
    rust_target: Option<&'static str>,
    /// An extra apt package beyond the cross toolchain's three.
    apt_extra: Option<&'static str>,
}

fn missing_prerequisites() -> Vec<Missing> {
    let mut missing = Vec::new();
    if let Some(installed) = cmd::rustup_targets() {
        for target in [TARGET, test::NO_STD_TARGET] {
            if !installed.iter().any(|t| t == target) {
                missing.push(Missing {
                    what: format!("Rust target {target}"),
                    rust_target: Some(target),
                    apt_extra: None,
                });
            }
        }
    }
    for tool in ["qemu-aarch64", GCC, AR] {
        if which(tool).is_none() {
            missing.push(Missing { what: format!("`{tool}` (not on PATH)"), rust_target: None, apt_extra: None });
        }
    }
    if !cmd::is_dir(SYSROOT) {
        missing.push(Missing { what: format!("the aarch64 sysroot {SYSROOT}"), rust_target: None, apt_extra: None });
    }
    if which("file").is_none() {
        missing.push(Missing { what: "`file` (not on PATH)".to_owned(), rust_target: None, apt_extra: Some("file") });
    }
    missing
}

/// The exact commands that install `missing`, as argument vectors.
fn install_commands(missing: &[Missing]) -> Vec<Vec<String>> {
    let mut commands = Vec::new();
    let targets: Vec<&str> = missing.iter().filter_map(|m| m.rust_target).collect();
    if !targets.is_empty() {
        commands.push(["rustup", "target", "add"].iter().chain(&targets).map(|s| (*s).to_owned()).collect());
    }
    let needs_toolchain = missing.iter().any(|m| m.rust_target.is_none() && m.apt_extra.is_none());
    let mut packages: Vec<&str> = if needs_toolchain { APT_PACKAGES.to_vec() } else { Vec::new() };
    packages.extend(missing.iter().filter_map(|m| m.apt_extra));
    if !packages.is_empty() {
        commands.push(["apt-get", "install", "-y"].iter().chain(&packages).map(|s| (*s).to_owned()).collect());
    }
    commands
}

fn install_prerequisites(missing: &[Missing]) -> Result<()> {
    let sudo = match Cmd::new("id").quiet().arg("-u").read() {
        Ok(uid) if uid.trim() == "0" => None,
        _ if which("sudo").is_some() => Some("sudo"),
        _ => None,
    };
    for command in install_commands(missing) {
        let apt = command[0] == "apt-get";
        let as_root = |args: &[String]| match (apt, sudo) {
            (true, Some(sudo)) => Cmd::new(sudo).arg("DEBIAN_FRONTEND=noninteractive").args(args),
            _ => Cmd::new(&args[0]).args(&args[1..]).env("DEBIAN_FRONTEND", "noninteractive"),
        };
        if apt {
            as_root(&["apt-get".to_owned(), "update".to_owned()]).run()?;
            as_root(&command).run()?;
        } else {
            Cmd::new(&command[0]).args(&command[1..]).run()?;
        }
    }
    Ok(())
}

/// `cross` and a running container engine, for `--cross`.
fn check_cross() -> Result<()> {
    if which("cross").is_none() {
        bail!(
            "--cross needs `cross`, which is not on PATH; install it with\n    \
             cargo install cross --git https://github.com/cross-rs/cross\n\
             or run without --cross (qemu-aarch64 directly, no Docker)"
        );
    }
    let engine = env::var("CROSS_CONTAINER_ENGINE")
        .ok()
        .or_else(|| ["docker", "podman"].into_iter().find(|e| which(e).is_some()).map(str::to_owned));
    let Some(engine) = engine else {
        bail!("--cross needs Docker or Podman, and neither is on PATH; or run without --cross");
    };
    if !Cmd::new(&engine).arg("info").succeeds() {
        bail!(
            "--cross needs a running container engine, but `{engine} info` fails (is the daemon running, \
             and may this user talk to it?); or run without --cross"
        );
    }
    Ok(())
}

/// Cargo runs doctests for another target from 1.89 on (`doctest-xcompile`
/// was stabilized there); older cargo skips them silently.
fn doctests_cross_compile() -> bool {
    let version = Cmd::cargo().quiet().arg("--version").read().unwrap_or_default();
    // "cargo 1.95.0 (f2d3ce0bd 2026-03-21)"
    let minor = version.split_whitespace().nth(1).and_then(|v| v.split('.').nth(1)).and_then(|m| m.parse::<u32>().ok());
    minor.is_none_or(|minor| minor >= 89)
}

/// The test programs cargo ran, from its `Running … (path)` lines.
fn test_binaries(stderr: &str) -> Vec<PathBuf> {
    stderr
        .lines()
        .filter_map(|line| {
            line.trim_start().strip_prefix("Running ")?.strip_suffix(')')?.rsplit_once('(').map(|(_, p)| p)
        })
        .map(|path| {
            // cross prints paths inside its container, where target/ is /target.
            match path.strip_prefix("/target/") {
                Some(rest) if !std::path::Path::new(path).exists() => PathBuf::from("target").join(rest),
                _ => PathBuf::from(path),
            }
        })
        .collect()
}

/// `file` on one test program this run built: it must be an aarch64 ELF.
fn check_elf(running: &[PathBuf]) -> Result<Done> {
    let binary = running.iter().find(|p| p.is_file()).cloned().or_else(any_test_binary);
    let Some(binary) = binary else { bail!("no aarch64 test binary found to check") };
    let line = Cmd::new("file").arg("-L").arg(&binary).read()?;
    let line = line.trim();
    println!("{line}");
    if !(line.contains("ELF 64-bit") && line.contains("aarch64")) {
        bail!("not an aarch64 ELF: {line}");
    }
    let name = binary.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    Ok(Done::Ran(format!("{name}: ELF 64-bit, ARM aarch64")))
}

/// Any executable in `target/<TARGET>/debug/deps`, when cargo's output named none.
fn any_test_binary() -> Option<PathBuf> {
    let dir = env::var_os("CARGO_TARGET_DIR").map_or_else(|| PathBuf::from("target"), PathBuf::from);
    let deps = dir.join(TARGET).join("debug").join("deps");
    let mut found: Vec<PathBuf> = fs::read_dir(deps)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_none())
        .filter(|p| p.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
        .collect();
    found.sort();
    found.into_iter().next()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_programs_cargo_ran() {
        let stderr = "\
   Compiling kpccl-core v0.1.0 (/work/main/core)
    Finished `test` profile [unoptimized + debuginfo] target(s) in 2.00s
     Running unittests src/lib.rs (target/aarch64-unknown-linux-gnu/debug/deps/kpccl_core-0f1e2d3c)
     Running tests/layout.rs (target/aarch64-unknown-linux-gnu/debug/deps/layout-99)
   Doc-tests kpccl_core
";
        assert_eq!(
            test_binaries(stderr),
            [
                PathBuf::from("target/aarch64-unknown-linux-gnu/debug/deps/kpccl_core-0f1e2d3c"),
                PathBuf::from("target/aarch64-unknown-linux-gnu/debug/deps/layout-99"),
            ]
        );
    }

    #[test]
    fn install_commands_are_exact() {
        let all = [
            Missing { what: String::new(), rust_target: Some(TARGET), apt_extra: None },
            Missing { what: String::new(), rust_target: None, apt_extra: None },
        ];
        let joined: Vec<String> = install_commands(&all).iter().map(|c| c.join(" ")).collect();
        assert_eq!(
            joined,
            [
                "rustup target add aarch64-unknown-linux-gnu",
                "apt-get install -y qemu-user gcc-aarch64-linux-gnu libc6-dev-arm64-cross"
            ]
        );
        let file_only = [Missing { what: String::new(), rust_target: None, apt_extra: Some("file") }];
        assert_eq!(install_commands(&file_only), [["apt-get", "install", "-y", "file"]]);
    }
}
