//! A throwaway PostgreSQL cluster for tests (the `testing` feature): this crate's tests and
//! the CLI's run against a real server, started with scripts/postgres.sh under a temporary
//! directory and stopped when dropped.

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use tempfile::TempDir;

/// scripts/postgres.sh, found from this crate's manifest.
const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/postgres.sh");

/// A PostgreSQL cluster under a temporary directory, stopped (and removed) when dropped.
pub struct Cluster {
    dir: TempDir,
    /// The `postgres` database; [`Cluster::database`] makes others.
    pub url: String,
}

impl Cluster {
    /// Starts a cluster with scripts/postgres.sh; `Err` (why) only when PostgreSQL is not
    /// installed: any other failure is a failed test.
    pub fn start() -> Result<Cluster, String> {
        let dir = tempfile::Builder::new()
            .prefix("interlock-pg-")
            .tempdir()
            .expect("a temporary directory");
        let url = script("start", &dir)?;
        Ok(Cluster { dir, url })
    }

    /// `Err` (why, and how to install it) when PostgreSQL is not installed.
    pub fn installed() -> Result<(), String> {
        let dir = tempfile::tempdir().unwrap();
        script("check", &dir).map(drop)
    }

    /// Stops the server (fast shutdown: sessions are ended) and starts it again.
    pub fn restart(&self) {
        script("stop", &self.dir).unwrap();
        script("start", &self.dir).unwrap();
    }

    pub fn admin(&self) -> postgres::Client {
        postgres::Client::connect(&self.url, postgres::NoTls).expect("admin connection")
    }

    /// A new, empty database; its URL.
    pub fn database(&self) -> String {
        static N: AtomicUsize = AtomicUsize::new(0);
        let name = format!("journal_{}", N.fetch_add(1, Ordering::SeqCst));
        self.admin()
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .unwrap();
        self.url_of(&name)
    }

    pub fn url_of(&self, database: &str) -> String {
        let base = self
            .url
            .strip_suffix("/postgres")
            .expect("the script's URL");
        format!("{base}/{database}")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Err(e) = script("stop", &self.dir) {
            eprintln!("could not stop the test cluster: {e}");
        }
    }
}

/// Runs scripts/postgres.sh; its printed URL, or `Err` when PostgreSQL is not installed
/// (exit status 3). Panics on any other failure.
fn script(verb: &str, dir: &TempDir) -> Result<String, String> {
    let out = Command::new("bash")
        .arg(SCRIPT)
        .arg(verb)
        .arg(dir.path())
        .output()
        .expect("bash runs");
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_owned();
    match out.status.code() {
        Some(0) => Ok(String::from_utf8(out.stdout).unwrap().trim().to_owned()),
        Some(3) => Err(stderr),
        other => panic!("scripts/postgres.sh {verb} failed ({other:?}): {stderr}"),
    }
}
