//! `interlock serve`: the gate's HTTP API (docs/http-api.yaml) from the wasi:http component
//! (world `http-gate`, dist/interlock_http.wasm) on wasmtime's wasi-http.
//!
//! Everything the API decides (the token, the routes, the JSON, how a configured HTTP target
//! is performed) is the component's (`interlock_core::http_api`), and so is the journal
//! (world `http-gate` runs the journal's backends inside it). This host provides the
//! component's imports (WASI with the settings as environment variables, wasi:http, the
//! journal's storage: a folder or a database) and keeps one instance per journal, as the
//! Worker keeps one Durable Object:
//! an instance holds the operations in progress (`POST .../submit`, then `.../ops/{op}`),
//! and its requests are handled one at a time, so compare-and-append sees no interleaving
//! within it.
//!
//! No client holds an instance while it is slow: the token is decided from the headers
//! alone (a refused request is answered without reading its body), the body is read whole,
//! within `http_api::MAX_BODY_BYTES` and `http_api::BODY_DEADLINE_MS`, before any instance
//! is taken, and the response is collected whole before it is sent, so an instance is free
//! again as soon as the component has answered, however slowly the client reads.

use std::collections::HashMap;
use std::future::poll_fn;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use hyper::body::{Body, Bytes, Frame, Incoming, SizeHint};
use hyper::server::conn::http1;
use interlock_core::http_api::{BODY_DEADLINE_MS, MAX_BODY_BYTES};
use tokio::net::TcpListener;
use tokio::sync::Mutex;
use wasmtime::component::{Func, HasSelf, Linker, Val};
use wasmtime::{Engine, Store};
use wasmtime_wasi_http::io::TokioIo;
use wasmtime_wasi_http::p2::bindings::http::types::{ErrorCode, Scheme};
use wasmtime_wasi_http::p2::bindings::{Proxy, ProxyPre};
use wasmtime_wasi_http::p2::body::HyperOutgoingBody;
use wasmtime_wasi_http::WasiHttpView;

use crate::clock::Clock;
use crate::gate::HostState;
use crate::storage::{Storage, Unavailable};

/// Where the journals are.
#[derive(Clone, Debug)]
pub enum Journals {
    /// One journal per name, each in its own subfolder (made at its first authorized use).
    Folder(PathBuf),
    /// One shared journal (sqlite:///..., postgres://...), served under one name.
    Url { url: String, name: String },
}

/// What `interlock serve` runs with.
pub struct Options {
    pub listen: SocketAddr,
    pub journals: Journals,
    /// The component's environment: INTERLOCK_TOKEN, INTERLOCK_TARGETS, INTERLOCK_RECEIPT_KEY.
    pub env: Vec<(String, String)>,
    /// Called once the socket is bound, with its address.
    pub on_listening: Box<dyn FnOnce(SocketAddr) + Send>,
    /// Deliver the notices due (`POST .../notices`) of every journal this often.
    pub notify_every: Option<std::time::Duration>,
}

/// One instance of the component and its store: one journal.
struct Instance {
    store: Store<HostState>,
    proxy: Proxy,
    /// The component's `http-api.refusal`: the token rule, asked before a request may
    /// reach a journal's instance.
    refusal: Func,
    /// The component's `http-api.unreadable`: the answer to a body that could not be read.
    unreadable: Func,
    /// The component's `journal-admin.open`, and whether it succeeded: until it does, each
    /// request that reaches this instance opens its storage and the journal again first (a
    /// journal locked by another process, or torn, is answered as the component's typed
    /// journal error, and may be there by the next request).
    open: Func,
    opened: bool,
}

/// A body read whole: what the component reads at once, and what the client is sent.
struct Whole(Option<Bytes>);

impl Body for Whole {
    type Data = Bytes;
    type Error = wasmtime_wasi_http::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut TaskContext<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Poll::Ready(self.0.take().map(|b| Ok(Frame::data(b))))
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.0.as_ref().map_or(0, |b| b.len() as u64))
    }
}

/// Why a request's body was not read: `(too_large, problem)`, as `http-api.unreadable`
/// takes them.
type Unread = (bool, String);

/// A request's body, whole: refused past `MAX_BODY_BYTES` (at once when its
/// `Content-Length` says so) or when not all of it came within `BODY_DEADLINE_MS`.
async fn read_body(body: Incoming) -> Result<Bytes, Unread> {
    let too_large = || (true, format!("larger than {MAX_BODY_BYTES} bytes"));
    if body.size_hint().lower() > MAX_BODY_BYTES as u64 {
        return Err(too_large());
    }
    let read = async {
        let mut body = pin!(body);
        let mut out = Vec::new();
        while let Some(frame) = poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
            let frame = frame.map_err(|e| (false, format!("cut short: {e}")))?;
            if let Ok(data) = frame.into_data() {
                if out.len() + data.len() > MAX_BODY_BYTES {
                    return Err(too_large());
                }
                out.extend_from_slice(&data);
            }
        }
        Ok(Bytes::from(out))
    };
    let deadline = Duration::from_millis(BODY_DEADLINE_MS);
    tokio::time::timeout(deadline, read)
        .await
        .unwrap_or_else(|_| {
            Err((
                false,
                format!("not all of it came within {} s", BODY_DEADLINE_MS / 1000),
            ))
        })
}

/// A response's body, whole.
async fn collect(body: HyperOutgoingBody) -> Result<Bytes> {
    let mut body = pin!(body);
    let mut out = Vec::new();
    while let Some(frame) = poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
        if let Ok(data) = frame?.into_data() {
            out.extend_from_slice(&data);
        }
    }
    Ok(Bytes::from(out))
}

fn whole(bytes: Bytes) -> HyperOutgoingBody {
    HyperOutgoingBody::new(Whole(Some(bytes)))
}

/// The component's `http-api.response` record as the answer to send, on a connection that
/// is then closed (the request's body may be unread).
fn closing(v: &Val) -> Result<hyper::Response<HyperOutgoingBody>> {
    let Val::Record(fields) = v else {
        bail!("http-api answered {v:?}, not a response");
    };
    let field = |name: &str| fields.iter().find(|(n, _)| n == name).map(|(_, v)| v);
    let (
        Some(Val::U16(status)),
        Some(Val::String(content_type)),
        Some(Val::String(body)),
        Some(Val::Bool(challenge)),
    ) = (
        field("status"),
        field("content-type"),
        field("body"),
        field("challenge"),
    )
    else {
        bail!("http-api answered {v:?}, not a response");
    };
    let mut r = hyper::Response::builder()
        .status(*status)
        .header(hyper::header::CONNECTION, "close");
    if !content_type.is_empty() {
        r = r.header(hyper::header::CONTENT_TYPE, content_type.as_str());
    }
    if *challenge {
        r = r.header(hyper::header::WWW_AUTHENTICATE, "Bearer");
    }
    Ok(r.body(whole(Bytes::from(body.clone())))?)
}

struct Server {
    pre: ProxyPre<HostState>,
    journals: Journals,
    env: Vec<(String, String)>,
    instances: std::sync::Mutex<HashMap<Option<String>, Arc<Mutex<Instance>>>>,
}

/// The component's linker: WASI (the environment, clocks), wasi:http, the journal.
pub fn linker(engine: &Engine) -> Result<Linker<HostState>> {
    let mut linker = Linker::<HostState>::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
    crate::bindings::interlock::gate::storage::add_to_linker::<_, HasSelf<_>>(
        &mut linker,
        |s: &mut HostState| s,
    )?;
    Ok(linker)
}

impl Server {
    /// The storage of the journal a request's journal name names (`None`: the path names
    /// no journal), opened now: one that cannot be opened answers every call with why, and
    /// the component's `journal-admin.open` says so.
    fn storage_for(&self, name: Option<&str>) -> Storage {
        let unavailable = |why: String| Storage::from_files(Unavailable(why));
        match (&self.journals, name) {
            (_, None) => unavailable("the path names no journal".into()),
            (Journals::Folder(dir), Some(n)) => {
                match interlock_file_journal::StdFiles::open(
                    &dir.join(n),
                    Duration::from_millis(interlock_file_journal::LOCK_WAIT_MS),
                ) {
                    Ok(files) => files.into(),
                    Err(e) => unavailable(format!("journal {n}: {e}")),
                }
            }
            (Journals::Url { url, name: served }, Some(n)) if n == served => {
                match interlock_sql_journal::SqlStore::open_url(url) {
                    Ok(sql) => sql.into(),
                    Err(e) => unavailable(format!("journal {n}: {e}")),
                }
            }
            (Journals::Url { name: served, .. }, Some(n)) => unavailable(format!(
                "this server serves one journal, {served:?}; there is no journal {n:?} here"
            )),
        }
    }

    async fn instance(&self, name: Option<&str>) -> Result<Arc<Mutex<Instance>>> {
        let key = name.map(String::from);
        if let Some(i) = self.lock().get(&key) {
            return Ok(i.clone());
        }
        // The storage is opened at the instance's first journal call (`open_journal`).
        let state = HostState::new(
            Storage::from_files(Unavailable(String::new())),
            Clock::System,
            &self.env,
        );
        let mut store = Store::new(self.pre.engine(), state);
        let instance = self
            .pre
            .instance_pre()
            .instantiate_async(&mut store)
            .await?;
        let proxy = Proxy::new(&mut store, &instance)?;
        let api = instance
            .get_export_index(&mut store, None, "interlock:gate/http-api@0.1.0")
            .context("the component exports no interlock:gate/http-api")?;
        let mut func = |name: &str| {
            instance
                .get_export_index(&mut store, Some(&api), name)
                .and_then(|i| instance.get_func(&mut store, i))
                .with_context(|| format!("the component's http-api has no {name}"))
        };
        let refusal = func("refusal")?;
        let unreadable = func("unreadable")?;
        let admin = instance
            .get_export_index(&mut store, None, "interlock:gate/journal-admin@0.1.0")
            .context("the component exports no interlock:gate/journal-admin")?;
        let open = instance
            .get_export_index(&mut store, Some(&admin), "open")
            .and_then(|i| instance.get_func(&mut store, i))
            .context("the component's journal-admin has no open")?;
        let made = Arc::new(Mutex::new(Instance {
            store,
            proxy,
            refusal,
            unreadable,
            open,
            opened: false,
        }));
        // Two first requests may race to make one: the first one in is kept.
        Ok(self.lock().entry(key).or_insert(made).clone())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Option<String>, Arc<Mutex<Instance>>>> {
        self.instances.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Calls `f` of the instance that holds no journal, held only for the call: the token
    /// rule and the answer to an unreadable body, which no journal's instance waits for.
    async fn ask(&self, f: fn(&Instance) -> Func, args: &[Val]) -> Result<Val> {
        let nameless = self.instance(None).await?;
        let mut guard = nameless.lock().await;
        let func = f(&guard);
        let mut result = [Val::Bool(false)];
        func.call_async(&mut guard.store, args, &mut result).await?;
        let [result] = result;
        Ok(result)
    }

    async fn handle(
        self: Arc<Self>,
        req: hyper::Request<Incoming>,
    ) -> Result<hyper::Response<HyperOutgoingBody>> {
        let authorization = req
            .headers()
            .get(hyper::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .map(String::from);
        let auth_arg = || Val::Option(authorization.clone().map(|a| Box::new(Val::String(a))));
        let path_arg = Val::String(req.uri().path().to_string());
        // The token first, from the headers alone: a refused request is answered without
        // reading its body, makes no instance and opens no journal for its name.
        let asked = self
            .ask(|i| i.refusal, &[path_arg.clone(), auth_arg()])
            .await?;
        if let Val::Option(Some(refusal)) = asked {
            return closing(&refusal);
        }
        // Then the whole body, before any instance is taken: a client that sends slowly,
        // or never, waits alone.
        let (parts, body) = req.into_parts();
        let body = match read_body(body).await {
            Ok(body) => body,
            Err((too_large, problem)) => {
                let args = [
                    path_arg,
                    auth_arg(),
                    Val::Bool(too_large),
                    Val::String(problem),
                ];
                return closing(&self.ask(|i| i.unreadable, &args).await?);
            }
        };
        let name = interlock_core::http_api::journal_of(parts.uri.path()).map(String::from);
        let req = hyper::Request::from_parts(parts, Whole(Some(body)));
        let instance = self.instance(name.as_deref()).await?;
        let server = self.clone();
        // Spawned: a client that goes away does not stop a gate operation midway.
        let task = tokio::task::spawn(async move {
            let (sender, receiver) = tokio::sync::oneshot::channel::<
                Result<hyper::Response<HyperOutgoingBody>, ErrorCode>,
            >();
            // The response is collected beside the call, so the instance is free once the
            // component has answered, however slowly the client reads.
            let response = tokio::task::spawn(async move {
                let resp = match receiver.await {
                    Ok(r) => r?,
                    Err(_) => bail!("the component answered nothing"),
                };
                let (parts, body) = resp.into_parts();
                let body = collect(body).await?;
                Ok(hyper::Response::from_parts(parts, whole(body)))
            });
            let called = {
                let mut guard = instance.lock().await;
                if !guard.opened {
                    if let Err(e) = open_journal(&server, &mut guard, name.as_deref()).await {
                        response.abort();
                        return Err(e);
                    }
                }
                let Instance { store, proxy, .. } = &mut *guard;
                let req = store
                    .data_mut()
                    .http()
                    .new_incoming_request(Scheme::Http, req)?;
                let out = store.data_mut().http().new_response_outparam(sender)?;
                proxy
                    .wasi_http_incoming_handler()
                    .call_handle(&mut *store, req, out)
                    .await
            };
            match called {
                Ok(()) => response.await?,
                Err(e) => {
                    response.abort();
                    Err(anyhow::Error::from(e).context("the component failed"))
                }
            }
        });
        task.await?
    }
}

/// Opens the storage of the instance's journal and the journal over it
/// (`journal-admin.open`). A failure is left for the component to answer (its journal
/// calls fail with the open's error, a 503), and the next request tries again.
async fn open_journal(server: &Server, instance: &mut Instance, name: Option<&str>) -> Result<()> {
    let Some(name) = name else {
        return Ok(());
    };
    let storage = server.storage_for(Some(name));
    let backend = match storage.backend() {
        crate::bindings::exports::interlock::gate::journal_admin::Backend::File => "file",
        crate::bindings::exports::interlock::gate::journal_admin::Backend::Sqlite => "sqlite",
        crate::bindings::exports::interlock::gate::journal_admin::Backend::Postgres => "postgres",
    };
    instance.store.data_mut().storage = storage;
    let mut result = [Val::Bool(false)];
    instance
        .open
        .call_async(
            &mut instance.store,
            &[Val::Enum(backend.into())],
            &mut result,
        )
        .await?;
    instance.opened = matches!(result, [Val::Result(Ok(_))]);
    Ok(())
}

/// The names of the journals there are now.
fn journal_names(journals: &Journals) -> Vec<String> {
    match journals {
        Journals::Url { name, .. } => vec![name.clone()],
        Journals::Folder(dir) => std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.path().is_dir())
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| interlock_core::http_api::journal_name_ok(n))
            .collect(),
    }
}

/// Every `every`, asks this server to deliver each journal's notices (`POST .../notices`,
/// the component's rule: what is due, signed, recorded once delivered), and prints what
/// went out.
async fn notify(addr: SocketAddr, token: String, journals: Journals, every: std::time::Duration) {
    let client = reqwest::Client::new();
    let mut tick = tokio::time::interval(every);
    loop {
        tick.tick().await;
        for name in journal_names(&journals) {
            let url = format!("http://{addr}/v1/journals/{name}/notices");
            let sent = client.post(&url).bearer_auth(&token).send().await;
            let report = match sent {
                Ok(r) => r.json::<serde_json::Value>().await.ok(),
                Err(e) => {
                    eprintln!("notices of {name}: {e}");
                    None
                }
            };
            for n in report
                .as_ref()
                .and_then(|r| r.as_array())
                .into_iter()
                .flatten()
            {
                let s = |k: &str| n.get(k).and_then(|v| v.as_str()).unwrap_or("");
                let outcome = match n.get("delivered").and_then(|d| d.as_bool()) {
                    Some(true) => "delivered".to_string(),
                    _ => format!(
                        "not delivered ({}), due again",
                        n.get("status")
                            .or(n.get("error"))
                            .map(|v| v.to_string())
                            .unwrap_or_default()
                    ),
                };
                eprintln!(
                    "notice {} ({}) to {}: {outcome}",
                    s("id"),
                    s("event"),
                    s("url")
                );
            }
        }
    }
}

/// Loads the component, binds `options.listen` and serves until the process ends.
pub fn run(wasm: &Path, options: Options) -> Result<()> {
    let engine = Engine::new(&wasmtime::Config::new()).map_err(anyhow::Error::from)?;
    let component = crate::runtime::load_component(&engine, wasm)?;
    let linker = linker(&engine)?;
    let pre = linker
        .instantiate_pre(&component)
        .map_err(anyhow::Error::from)
        .with_context(|| format!("{} does not fit world http-gate", wasm.display()))?;
    let pre = ProxyPre::new(pre).map_err(anyhow::Error::from)?;
    let token = options
        .env
        .iter()
        .find(|(k, _)| k == "INTERLOCK_TOKEN")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    let server = Arc::new(Server {
        pre,
        journals: options.journals,
        env: options.env,
        instances: Default::default(),
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = TcpListener::bind(options.listen)
            .await
            .with_context(|| format!("cannot listen on {}", options.listen))?;
        let addr = listener.local_addr()?;
        (options.on_listening)(addr);
        if let Some(every) = options.notify_every {
            tokio::task::spawn(notify(addr, token, server.journals.clone(), every));
        }
        loop {
            let (client, _) = listener.accept().await?;
            let server = server.clone();
            tokio::task::spawn(async move {
                let service = hyper::service::service_fn(move |req| server.clone().handle(req));
                // A client that goes away mid-request is not the server's failure.
                let _ = http1::Builder::new()
                    .keep_alive(true)
                    .serve_connection(TokioIo::new(client), service)
                    .await;
            });
        }
    })
}
