//! The I/O behind the built-in targets that are not an SDK's: a PostgreSQL database, a git
//! repository, an SMTP server. Each does the call it is told, exactly, and hands back what
//! came back; what any answer means (applied, refused, unknown) is the component's
//! (guest/core/src/targets/: postgres.rs, git.rs, smtp.rs), the same for every host.
//! hosts/python/src/interlock/services.py is the same I/O in Python.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::process::{Command, Stdio};
#[cfg(feature = "sql")]
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::gate::{ServiceAnswer, ServiceCall, ServiceError};

/// What came back from one call.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    Returned(Value),
    /// The service raised this error: its type, status, code and message.
    Raised {
        error_type: Option<String>,
        status: Option<u32>,
        code: Option<String>,
        message: String,
    },
    /// Nothing came back (why, for a person).
    NoAnswer(String),
}

/// A service the host reaches, named as the component names it (`postgres`, `git`, `smtp`).
pub trait Service: Send {
    fn service(&self) -> &'static str;
    /// Makes `operation` with `params` (a JSON object), giving up after `timeout_ms`.
    fn call(&mut self, operation: &str, params: &Value, timeout_ms: Option<u64>) -> Answer;
}

/// `call` made by `service`, as the component's `service-answer`. The component names the
/// service each call is for; one this host did not give it is a broken host.
pub fn answer_of(service: &mut dyn Service, call: &ServiceCall) -> ServiceAnswer {
    assert_eq!(
        call.service,
        service.service(),
        "the component asked {} for a {} call",
        service.service(),
        call.service
    );
    let params: Value =
        serde_json::from_str(&call.params).expect("the component's params are JSON");
    match service.call(&call.operation, &params, call.timeout_ms) {
        Answer::Returned(v) => ServiceAnswer::Returned(v.to_string()),
        Answer::Raised {
            error_type,
            status,
            code,
            message,
        } => ServiceAnswer::Raised(ServiceError {
            error_type,
            status,
            code,
            message,
        }),
        Answer::NoAnswer(m) => ServiceAnswer::NoAnswer(m),
    }
}

/// The component asks only for its own operations: another one is a broken host or
/// component, never answered with a made-up reply.
fn unknown_operation(service: &str, operation: &str) -> ! {
    panic!("the {service} client has no operation {operation:?}")
}

#[cfg(feature = "sql")]
/// A PostgreSQL database: `transaction` runs the statements as one transaction, their
/// parameters bound as text, and answers each statement's rows (every column text or
/// null); an error PostgreSQL raised comes back with its SQLSTATE, a lost connection or an
/// unacknowledged commit as no answer.
pub struct Postgres {
    url: String,
    client: Option<postgres::Client>,
}

#[cfg(feature = "sql")]
impl Postgres {
    pub fn new(url: &str) -> Postgres {
        Postgres {
            url: url.into(),
            client: None,
        }
    }

    fn transaction(&mut self, statements: &[Value], timeout_ms: Option<u64>) -> Answer {
        if self.client.as_ref().is_none_or(|c| c.is_closed()) {
            match postgres::Client::connect(&self.url, postgres::NoTls) {
                Ok(c) => self.client = Some(c),
                Err(e) => return Answer::NoAnswer(format!("cannot connect: {e}")),
            }
        }
        let client = self.client.as_mut().expect("connected above");
        // Give up after timeout_ms: cancel what runs (the component also sets the server's
        // statement_timeout).
        let (done, wait) = mpsc::channel::<()>();
        let canceller = timeout_ms.map(|ms| {
            let token = client.cancel_token();
            thread::spawn(move || {
                if wait.recv_timeout(Duration::from_millis(ms)).is_err() {
                    let _ = token.cancel_query(postgres::NoTls);
                }
            })
        });
        let result = run_all(client, statements);
        let _ = done.send(());
        if let Some(t) = canceller {
            let _ = t.join();
        }
        match result {
            Ok(rows) => Answer::Returned(json!({ "rows": rows })),
            Err(e) => match e.code() {
                Some(code) if !e.is_closed() => Answer::Raised {
                    error_type: Some("postgres".into()),
                    status: None,
                    code: Some(code.code().into()),
                    message: e.to_string(),
                },
                _ => {
                    self.client = None;
                    Answer::NoAnswer(match e.as_db_error() {
                        Some(db) => format!("connection lost: {db}"),
                        None => e.to_string(),
                    })
                }
            },
        }
    }
}

#[cfg(feature = "sql")]
fn run_all(
    client: &mut postgres::Client,
    statements: &[Value],
) -> Result<Vec<Value>, postgres::Error> {
    let mut tx = client.transaction()?;
    let mut out = Vec::new();
    for s in statements {
        let params: Vec<Option<String>> = s["params"]
            .as_array()
            .map(|ps| ps.iter().map(|p| p.as_str().map(String::from)).collect())
            .unwrap_or_default();
        let refs: Vec<&(dyn postgres::types::ToSql + Sync)> = params
            .iter()
            .map(|p| p as &(dyn postgres::types::ToSql + Sync))
            .collect();
        let rows = tx.query(s["sql"].as_str().unwrap_or_default(), &refs)?;
        let rows: Vec<Value> = rows
            .iter()
            .map(|r| {
                (0..r.len())
                    .map(|i| r.try_get::<_, Option<String>>(i).map(Value::from))
                    .collect::<Result<Vec<Value>, _>>()
                    .map(Value::Array)
            })
            .collect::<Result<_, _>>()?;
        out.push(Value::Array(rows));
    }
    tx.commit()?;
    Ok(out)
}

#[cfg(feature = "sql")]
impl Service for Postgres {
    fn service(&self) -> &'static str {
        "postgres"
    }

    fn call(&mut self, operation: &str, params: &Value, timeout_ms: Option<u64>) -> Answer {
        match operation {
            "transaction" => {
                let statements = params["statements"].as_array().cloned().unwrap_or_default();
                self.transaction(&statements, timeout_ms)
            }
            other => unknown_operation(self.service(), other),
        }
    }
}

/// A git repository: `run` runs `git -C <path> <args>` with the given standard input and
/// environment, and answers its exit status, standard output and standard error (UTF-8,
/// bad bytes replaced); git that cannot be started, or that is still running after
/// `timeout_ms` (then killed with everything it started), is no answer.
pub struct GitRepository {
    pub path: PathBuf,
}

impl GitRepository {
    fn run(&self, params: &Value, timeout_ms: Option<u64>) -> Answer {
        let args: Vec<&str> = params["args"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut cmd = Command::new("git");
        cmd.arg("-C").arg(&self.path).args(&args);
        for (k, v) in params["env"].as_object().into_iter().flatten() {
            cmd.env(k, v.as_str().unwrap_or_default());
        }
        // Its own process group, so a timeout kills its hooks too.
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let mut child = match cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
        {
            Ok(c) => c,
            Err(e) => return Answer::NoAnswer(format!("git could not be started: {e}")),
        };
        let stdin = params["stdin"].as_str().unwrap_or_default().to_owned();
        let mut input = child.stdin.take().expect("piped");
        let writer = thread::spawn(move || {
            let _ = input.write_all(stdin.as_bytes());
        });
        let reader = |mut r: Box<dyn Read + Send>| {
            thread::spawn(move || {
                let mut buf = Vec::new();
                let _ = r.read_to_end(&mut buf);
                String::from_utf8_lossy(&buf).into_owned()
            })
        };
        let out = reader(Box::new(child.stdout.take().expect("piped")));
        let err = reader(Box::new(child.stderr.take().expect("piped")));
        let deadline = timeout_ms.map(|ms| Instant::now() + Duration::from_millis(ms));
        let status = loop {
            match child.try_wait() {
                Ok(Some(s)) => break Some(s),
                Ok(None) if deadline.is_some_and(|d| Instant::now() >= d) => break None,
                Ok(None) => thread::sleep(Duration::from_millis(2)),
                Err(e) => return Answer::NoAnswer(format!("waiting for git: {e}")),
            }
        };
        let Some(status) = status else {
            // SAFETY: a plain kill(2) of the process group this call started.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
            let what = args.first().copied().unwrap_or("git");
            return Answer::NoAnswer(format!(
                "git {what} did not end within {} ms; killed",
                timeout_ms.unwrap_or_default()
            ));
        };
        let _ = writer.join();
        let (stdout, stderr) = (
            out.join().unwrap_or_default(),
            err.join().unwrap_or_default(),
        );
        let code = std::os::unix::process::ExitStatusExt::signal(&status)
            .map(|s| -s)
            .or(status.code())
            .unwrap_or(-1);
        Answer::Returned(json!({"status": code, "stdout": stdout, "stderr": stderr}))
    }
}

impl Service for GitRepository {
    fn service(&self) -> &'static str {
        "git"
    }

    fn call(&mut self, operation: &str, params: &Value, timeout_ms: Option<u64>) -> Answer {
        match operation {
            "run" => self.run(params, timeout_ms),
            other => unknown_operation(self.service(), other),
        }
    }
}

/// TCP connections to an SMTP server, moving bytes as told (the dialogue is the
/// component's): `connect` (its `timeout_ms` is the whole exchange's: every later call on
/// that connection fails once it has passed), `send` (answers once every byte was handed
/// to the connection), `receive` (what arrived, at least a byte; `""` when the server closed
/// it), `close`.
pub struct Smtp {
    pub address: String,
    /// For a `connect` that names no time.
    pub timeout_ms: u64,
    connections: HashMap<u64, (TcpStream, Instant)>,
    next: u64,
}

impl Smtp {
    pub fn new(address: &str) -> Smtp {
        Smtp {
            address: address.into(),
            timeout_ms: 30_000,
            connections: HashMap::new(),
            next: 0,
        }
    }

    fn connect(&mut self, timeout_ms: Option<u64>) -> Answer {
        let budget = Duration::from_millis(timeout_ms.unwrap_or(self.timeout_ms));
        let deadline = Instant::now() + budget;
        let addr = match self.address.to_socket_addrs().map(|mut a| a.next()) {
            Ok(Some(a)) => a,
            Ok(None) => return Answer::NoAnswer(format!("{} names no address", self.address)),
            Err(e) => return Answer::NoAnswer(format!("cannot resolve {}: {e}", self.address)),
        };
        match TcpStream::connect_timeout(&addr, budget) {
            Ok(s) => {
                self.next += 1;
                self.connections.insert(self.next, (s, deadline));
                Answer::Returned(json!({ "connection": self.next }))
            }
            Err(e) => Answer::NoAnswer(format!("cannot connect to {}: {e}", self.address)),
        }
    }

    fn io(&mut self, operation: &str, params: &Value) -> Answer {
        let Some((sock, deadline)) = params["connection"]
            .as_u64()
            .and_then(|n| self.connections.get_mut(&n))
        else {
            return Answer::NoAnswer("no such connection".into());
        };
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Answer::NoAnswer("the exchange's time is up".into());
        }
        let timeouts = sock
            .set_read_timeout(Some(left))
            .and_then(|()| sock.set_write_timeout(Some(left)));
        let done = timeouts.and_then(|()| match operation {
            "send" => sock
                .write_all(params["data"].as_str().unwrap_or_default().as_bytes())
                .map(|()| json!({})),
            _ => {
                let mut buf = [0u8; 65536];
                sock.read(&mut buf)
                    .map(|n| json!({ "data": String::from_utf8_lossy(&buf[..n]) }))
            }
        });
        match done {
            Ok(v) => Answer::Returned(v),
            Err(e) => Answer::NoAnswer(format!("{operation}: {e}")),
        }
    }
}

impl Service for Smtp {
    fn service(&self) -> &'static str {
        "smtp"
    }

    fn call(&mut self, operation: &str, params: &Value, timeout_ms: Option<u64>) -> Answer {
        match operation {
            "connect" => self.connect(timeout_ms),
            "send" | "receive" => self.io(operation, params),
            "close" => {
                if let Some(n) = params["connection"].as_u64() {
                    self.connections.remove(&n);
                }
                Answer::Returned(json!({}))
            }
            other => unknown_operation(self.service(), other),
        }
    }
}
