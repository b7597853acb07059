//! Running commands: each one is echoed (`$ ENV=v program args`) before it
//! starts, and a failure names the command and how it ended.

use std::{
    env,
    ffi::{OsStr, OsString},
    fmt,
    io::{self, Read, Write},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    thread,
};

/// An xtask failure: a message for the user, nothing more. An empty message
/// means the failure has already been reported (a summary was printed).
#[derive(Debug)]
pub(crate) struct Error(pub(crate) String);

impl Error {
    /// A failure whose details are already on the screen.
    pub(crate) fn reported() -> Error {
        Error(String::new())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

pub(crate) type Result<T, E = Error> = std::result::Result<T, E>;

/// `err!("fmt", args..)`: an [`Error`] with a formatted message.
macro_rules! err {
    ($($fmt:tt)*) => { $crate::cmd::Error(format!($($fmt)*)) };
}
/// `bail!("fmt", args..)`: return early with an [`Error`].
macro_rules! bail {
    ($($fmt:tt)*) => { return Err($crate::cmd::err!($($fmt)*)) };
}
pub(crate) use {bail, err};

/// A command to run from the workspace root.
#[derive(Debug, Clone)]
pub(crate) struct Cmd {
    program: OsString,
    /// How the program is shown in the echo (`cargo` rather than `$CARGO`'s full path).
    shown: String,
    args: Vec<OsString>,
    envs: Vec<(OsString, OsString)>,
    /// Variables set but not echoed: a task prints them once, up front.
    quiet_envs: Vec<(String, String)>,
    quiet: bool,
}

/// What a command printed, for commands whose output is parsed.
#[derive(Debug)]
pub(crate) struct Output {
    pub(crate) success: bool,
    /// How the command ended, for messages (`exit status: 101`).
    pub(crate) status: String,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Cmd {
    pub(crate) fn new(program: impl AsRef<OsStr>) -> Cmd {
        let program = program.as_ref().to_owned();
        let shown = program.to_string_lossy().into_owned();
        Cmd { program, shown, args: Vec::new(), envs: Vec::new(), quiet_envs: Vec::new(), quiet: false }
    }

    /// The cargo that runs this xtask (`$CARGO`), so that every step uses
    /// the same toolchain; `cargo` from `PATH` when run some other way.
    pub(crate) fn cargo() -> Cmd {
        let mut cmd = Cmd::new(env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
        cmd.shown = "cargo".to_owned();
        cmd
    }

    /// The `cargo` on `PATH` (normally rustup's proxy), for `cargo +toolchain`:
    /// `$CARGO` is a toolchain's own binary and does not understand `+nightly`.
    pub(crate) fn cargo_toolchain(toolchain: &str) -> Cmd {
        Cmd::new("cargo").arg(format!("+{toolchain}"))
    }

    pub(crate) fn arg(mut self, arg: impl AsRef<OsStr>) -> Cmd {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    pub(crate) fn args<I>(mut self, args: I) -> Cmd
    where
        I: IntoIterator,
        I::Item: AsRef<OsStr>,
    {
        self.args.extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// Sets a variable for this command only; it is shown in the echo.
    pub(crate) fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Cmd {
        self.envs.push((key.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    /// Sets variables without echoing them on every command: for an
    /// environment that the task has printed once.
    pub(crate) fn envs_unechoed(mut self, envs: &[(String, String)]) -> Cmd {
        self.quiet_envs.extend_from_slice(envs);
        self
    }

    /// Does not echo the command (probes whose output is not interesting).
    pub(crate) fn quiet(mut self) -> Cmd {
        self.quiet = true;
        self
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new(&self.program);
        cmd.envs(self.quiet_envs.iter().map(|(k, v)| (k, v)));
        cmd.args(&self.args).envs(self.envs.iter().map(|(k, v)| (k, v))).stdin(Stdio::null());
        cmd
    }

    fn echo(&self) {
        if !self.quiet {
            println!("$ {self}");
        }
    }

    fn spawn_error(&self, err: &io::Error) -> Error {
        if err.kind() == io::ErrorKind::NotFound {
            err!("could not run `{}`: not found on PATH", self.shown)
        } else {
            err!("could not run `{self}`: {err}")
        }
    }

    /// Runs the command with inherited output; fails unless it exits with 0.
    pub(crate) fn run(&self) -> Result<()> {
        self.echo();
        let status = self.command().status().map_err(|e| self.spawn_error(&e))?;
        if !status.success() {
            bail!("`{self}` failed ({status})");
        }
        Ok(())
    }

    /// Runs the command and returns its standard output; fails unless it
    /// exits with 0 (its standard error then goes into the message).
    pub(crate) fn read(&self) -> Result<String> {
        self.echo();
        let out = self.command().output().map_err(|e| self.spawn_error(&e))?;
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            bail!(
                "`{self}` failed ({}){}{}",
                out.status,
                if stderr.is_empty() { "" } else { ":\n" },
                stderr.trim_end()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// True when the command starts and exits with 0; prints nothing.
    pub(crate) fn succeeds(&self) -> bool {
        self.command().stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
    }

    /// Runs the command with its output passed through live *and* captured,
    /// for output that is parsed afterwards. Only a failure to start is an
    /// `Err`; a non-zero exit is reported in [`Output::success`].
    pub(crate) fn run_tee(&self) -> Result<Output> {
        self.echo();
        let mut child =
            self.command().stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().map_err(|e| self.spawn_error(&e))?;
        let (Some(out), Some(errs)) = (child.stdout.take(), child.stderr.take()) else {
            bail!("`{self}`: no pipes to read from");
        };
        let out = thread::spawn(move || tee(out, io::stdout()));
        let errs = thread::spawn(move || tee(errs, io::stderr()));
        let status = child.wait().map_err(|e| err!("waiting for `{self}`: {e}"))?;
        let stdout = out.join().unwrap_or_default();
        let stderr = errs.join().unwrap_or_default();
        Ok(Output { success: status.success(), status: status.to_string(), stdout, stderr })
    }
}

/// Copies `from` to `to` as it arrives and returns everything read.
fn tee(mut from: impl Read, mut to: impl Write) -> String {
    let mut all = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                let chunk = &buf[..n];
                all.extend_from_slice(chunk);
                // A closed terminal must not stop the capture.
                let _ = to.write_all(chunk).and_then(|()| to.flush());
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    String::from_utf8_lossy(&all).into_owned()
}

impl fmt::Display for Cmd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (k, v) in &self.envs {
            write!(f, "{}={} ", k.to_string_lossy(), quote(&v.to_string_lossy()))?;
        }
        f.write_str(&quote(&self.shown))?;
        for arg in &self.args {
            write!(f, " {}", quote(&arg.to_string_lossy()))?;
        }
        Ok(())
    }
}

/// Shell-quotes `s` when it needs it, so that an echoed command can be pasted.
fn quote(s: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-./=:,+@%".contains(c);
    if !s.is_empty() && s.chars().all(plain) { s.to_owned() } else { format!("'{}'", s.replace('\'', r"'\''")) }
}

/// The path of an executable `name` on `PATH`, like `command -v`.
pub(crate) fn which(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = env::var_os("PATH")?;
    env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
}

/// True when `path` is an existing directory.
pub(crate) fn is_dir(path: impl AsRef<Path>) -> bool {
    path.as_ref().is_dir()
}

/// The Rust targets rustup has installed for the active toolchain; `None`
/// without rustup (then cargo's own errors have to do).
pub(crate) fn rustup_targets() -> Option<Vec<String>> {
    let list = Cmd::new("rustup").quiet().args(["target", "list", "--installed"]).read().ok()?;
    Some(list.lines().map(|l| l.trim().to_owned()).filter(|l| !l.is_empty()).collect())
}

/// Fails with the command to run when rustup lacks one of `targets`.
pub(crate) fn require_targets(targets: &[&str]) -> Result<()> {
    let Some(installed) = rustup_targets() else { return Ok(()) };
    let missing: Vec<&str> = targets.iter().copied().filter(|t| !installed.iter().any(|i| i == t)).collect();
    if !missing.is_empty() {
        bail!("Rust target {} not installed; run:\n    rustup target add {}", missing.join(", "), missing.join(" "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echo_quotes_what_needs_it() {
        let cmd = Cmd::cargo().env("RUSTFLAGS", "--cfg loom").args(["test", "--test", "loom_*"]);
        assert_eq!(cmd.to_string(), "RUSTFLAGS='--cfg loom' cargo test --test 'loom_*'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote(""), "''");
    }

    #[test]
    fn failures_name_the_command() {
        let err = Cmd::new("false").quiet().run().unwrap_err();
        assert!(err.0.contains("`false` failed"), "{err}");
        let err = Cmd::new("kpccl-no-such-program").quiet().run().unwrap_err();
        assert!(err.0.contains("not found on PATH"), "{err}");
    }

    #[test]
    fn tee_captures_both_streams() {
        let out = Cmd::new("sh").quiet().args(["-c", "echo out; echo err >&2; exit 3"]).run_tee().unwrap();
        assert!(!out.success);
        assert_eq!((out.stdout.as_str(), out.stderr.as_str()), ("out\n", "err\n"));
    }
}
