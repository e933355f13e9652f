//! `interlock serve`: the gate's HTTP API (docs/http-api.yaml) from the component of world
//! `http-gate` (dist/interlock_http.wasm) on wasmtime.
//!
//! Everything the API decides (the token, the routes, the JSON, how a configured HTTP target
//! is performed) is the component's sans-IO `http-api` interface (`interlock_core::http_api`),
//! and so is the journal (world `http-gate` runs the journal's backends inside it). This
//! host provides the component's imports (WASI with the settings as environment variables,
//! wasi:http, the journal's storage: a folder or a database), keeps one instance per journal,
//! as the Worker keeps one Durable Object, and does what the API asks, as the Worker's
//! `src/api.js` does: `handle` a request, perform the fetch or the sleep it asks for, `resume`
//! with the answer, until it says what to respond.
//!
//! An instance is held only while the component runs (a gate call and its journal appends,
//! each durable before it returns), never while a target answers or a claim is waited out:
//! one journal's requests run concurrently, interleaved between gate calls, and where two
//! race one effect or one cap, compare-and-append decides (ARCHITECTURE.md, "At the edge").
//!
//! No client holds an instance while it is slow: the token is decided from the headers
//! alone (a refused request is answered without reading its body), the body is read whole,
//! within `http_api::MAX_BODY_BYTES` and `http_api::BODY_DEADLINE_MS`, before any instance
//! is taken, and the answer is sent after the instance is free again.

use std::collections::HashMap;
use std::fmt::Display;
use std::future::poll_fn;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use anyhow::{Context, Result};
use hyper::body::{Body, Bytes, Frame, Incoming, SizeHint};
use hyper::server::conn::http1;
use interlock_core::http_api::{BODY_DEADLINE_MS, MAX_BODY_BYTES};
use tokio::net::TcpListener;
use tokio::sync::Mutex;
use wasmtime::component::{
    ComponentNamedList, ComponentType, HasSelf, InstancePre, Lift, Linker, Lower, TypedFunc,
};
use wasmtime::{Engine, Store};
use wasmtime_wasi_http::io::TokioIo;
use wasmtime_wasi_http::RequestOptions;

use crate::bindings::exports::interlock::gate::journal_admin::Backend;
use crate::bindings::interlock::gate::types::JournalError;
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

// The records and variants of `interlock:gate/http-api` (wit/http-api.wit), as this host
// moves them.

/// `http-api.request`.
#[derive(ComponentType, Lower)]
#[component(record)]
struct ApiRequest {
    method: String,
    path: String,
    authorization: Option<String>,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

/// `http-api.response`.
#[derive(ComponentType, Lift)]
#[component(record)]
struct ApiResponse {
    status: u16,
    #[component(name = "content-type")]
    content_type: String,
    body: String,
    challenge: bool,
}

/// `http-api.fetch`.
#[derive(ComponentType, Lift)]
#[component(record)]
struct ApiFetch {
    method: String,
    url: String,
    headers: Vec<(String, String)>,
    body: Option<String>,
    #[component(name = "timeout-ms")]
    timeout_ms: Option<u64>,
}

/// `http-api.fetched`.
#[derive(ComponentType, Lower)]
#[component(record)]
struct Fetched {
    status: u16,
    body: String,
}

/// `http-api.next`.
#[derive(ComponentType, Lift)]
#[component(variant)]
enum Next {
    #[component(name = "respond")]
    Respond(ApiResponse),
    #[component(name = "fetch")]
    Fetch(ApiFetch),
    #[component(name = "sleep")]
    Sleep(u64),
}

/// `http-api.api-step`.
#[derive(ComponentType, Lift)]
#[component(record)]
struct ApiStep {
    id: u64,
    next: Next,
}

/// Settings by name, as `http-api.configure` takes them.
type Settings = Vec<(String, String)>;

/// The answer `http-api.resume` takes: a fetch's (`Err`: none came, and why), none after a
/// sleep.
type Answer = Option<Result<Fetched, String>>;

/// The exports this host calls: `http-api`'s and `journal-admin.open`.
struct Api {
    /// The API's settings (`INTERLOCK_TOKEN`, ...), given once to each instance, as the
    /// Worker gives them.
    configure: TypedFunc<(Settings,), (Result<(), String>,)>,
    /// The token rule, asked before a request may reach a journal's instance.
    refusal: TypedFunc<(String, Option<String>), (Option<ApiResponse>,)>,
    /// The answer to a body that could not be read.
    unreadable: TypedFunc<(String, Option<String>, bool, String), (ApiResponse,)>,
    handle: TypedFunc<(ApiRequest,), (ApiStep,)>,
    resume: TypedFunc<(u64, Answer), (ApiStep,)>,
    open: TypedFunc<(Backend,), (Result<(), JournalError>,)>,
}

/// One instance of the component and its store: one journal.
struct Instance {
    store: Store<HostState>,
    api: Api,
    /// Whether `journal-admin.open` succeeded: until it does, each request that reaches
    /// this instance opens its storage and the journal again first (a journal locked by
    /// another process, or torn, is answered as the component's typed journal error, and
    /// may be there by the next request).
    opened: bool,
}

impl Instance {
    async fn handle(&mut self, request: ApiRequest) -> Result<ApiStep> {
        let (step,) = self
            .api
            .handle
            .call_async(&mut self.store, (request,))
            .await?;
        Ok(step)
    }

    async fn resume(&mut self, id: u64, answer: Answer) -> Result<ApiStep> {
        let (step,) = self
            .api
            .resume
            .call_async(&mut self.store, (id, answer))
            .await?;
        Ok(step)
    }
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

/// Why a body was not read: `(too_large, problem)`, as `http-api.unreadable` takes them.
type Unread = (bool, String);

fn too_large() -> Unread {
    (true, format!("larger than {MAX_BODY_BYTES} bytes"))
}

/// A body, whole: refused past `MAX_BODY_BYTES` (at once when its size is known to be).
async fn read_whole<B: Body<Data = Bytes>>(body: B) -> Result<Bytes, Unread>
where
    B::Error: Display,
{
    if body.size_hint().lower() > MAX_BODY_BYTES as u64 {
        return Err(too_large());
    }
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
}

/// A request's body, whole, or why not: past `MAX_BODY_BYTES`, cut short, or not all of it
/// within `BODY_DEADLINE_MS`.
async fn read_body(body: Incoming) -> Result<Bytes, Unread> {
    let deadline = Duration::from_millis(BODY_DEADLINE_MS);
    tokio::time::timeout(deadline, read_whole(body))
        .await
        .unwrap_or_else(|_| {
            Err((
                false,
                format!("not all of it came within {} s", BODY_DEADLINE_MS / 1000),
            ))
        })
}

/// The component's `http-api.response` as the answer to send (`close`: on a connection
/// that is then closed, for a request whose body may be unread).
fn reply(r: ApiResponse, close: bool) -> Result<hyper::Response<Whole>> {
    let mut b = hyper::Response::builder().status(r.status);
    if close {
        b = b.header(hyper::header::CONNECTION, "close");
    }
    if !r.content_type.is_empty() {
        b = b.header(hyper::header::CONTENT_TYPE, r.content_type);
    }
    if r.challenge {
        b = b.header(hyper::header::WWW_AUTHENTICATE, "Bearer");
    }
    Ok(b.body(Whole(Some(Bytes::from(r.body))))?)
}

/// Performs a request the component asked for, with wasmtime-wasi-http's own client (the
/// one behind wasi:http's outgoing handler: plain or TLS, a new connection each time): the
/// target's answer, or why none came. The send's `timeout_ms` bounds the connect, the first
/// byte and each gap between bytes, as the component asked of wasi:http before.
async fn perform(f: ApiFetch) -> Result<Fetched, String> {
    let uri: hyper::Uri = f.url.parse().map_err(|e| format!("{e}: {}", f.url))?;
    let (Some("http" | "https"), Some(authority)) = (uri.scheme_str(), uri.authority()) else {
        return Err(format!("not an http(s) URL: {}", f.url));
    };
    let mut req = hyper::Request::builder()
        .method(f.method.as_str())
        .header(hyper::header::HOST, authority.as_str());
    for (k, v) in &f.headers {
        req = req.header(k, v);
    }
    let req = req
        .uri(uri)
        .body(Whole(Some(Bytes::from(f.body.unwrap_or_default()))))
        .map_err(|e| format!("not accepted: {e}: {}", f.url))?;
    let timeout = f.timeout_ms.map(Duration::from_millis);
    let options = RequestOptions {
        connect_timeout: timeout,
        first_byte_timeout: timeout,
        between_bytes_timeout: timeout,
    };
    let (response, io) = wasmtime_wasi_http::default_send_request(req, Some(options))
        .await
        .map_err(|e| e.to_string())?;
    // The connection's I/O, driven while the body is read (its end is the body's end).
    let io = tokio::task::spawn(io);
    let status = response.status().as_u16();
    let body = read_whole(response.into_body()).await;
    io.abort();
    let body = body.map_err(|(_, problem)| problem)?;
    Ok(Fetched {
        status,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

/// One journal's instance, shared by its requests (each holds it for one component call).
type Shared = Arc<Mutex<Instance>>;

struct Server {
    pre: InstancePre<HostState>,
    journals: Journals,
    env: Vec<(String, String)>,
    instances: std::sync::Mutex<HashMap<Option<String>, Shared>>,
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

    async fn instance(&self, name: Option<&str>) -> Result<Shared> {
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
        let instance = self.pre.instantiate_async(&mut store).await?;
        let mut index = |iface: Option<&_>, name: &str| {
            instance
                .get_export_index(&mut store, iface, name)
                .with_context(|| format!("the component exports no {name}"))
        };
        let http_api = index(None, "interlock:gate/http-api@0.1.0")?;
        let admin = index(None, "interlock:gate/journal-admin@0.1.0")?;
        let at = [
            index(Some(&http_api), "configure")?,
            index(Some(&http_api), "refusal")?,
            index(Some(&http_api), "unreadable")?,
            index(Some(&http_api), "handle")?,
            index(Some(&http_api), "resume")?,
            index(Some(&admin), "open")?,
        ];
        let api = Api {
            configure: instance.get_typed_func(&mut store, at[0])?,
            refusal: instance.get_typed_func(&mut store, at[1])?,
            unreadable: instance.get_typed_func(&mut store, at[2])?,
            handle: instance.get_typed_func(&mut store, at[3])?,
            resume: instance.get_typed_func(&mut store, at[4])?,
            open: instance.get_typed_func(&mut store, at[5])?,
        };
        // Settings that are wrong were refused before serve started (the same rule); were
        // they wrong here, the component would answer every request 500, saying why.
        let _ = api
            .configure
            .call_async(&mut store, (self.env.clone(),))
            .await?;
        let made = Arc::new(Mutex::new(Instance {
            store,
            api,
            opened: false,
        }));
        // Two first requests may race to make one: the first one in is kept.
        Ok(self.lock().entry(key).or_insert(made).clone())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Option<String>, Shared>> {
        self.instances.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Forgets `instance` after a call into it failed (a trap leaves an instance unusable):
    /// the journal's next request makes a fresh one over the same journal, which holds all
    /// that was decided; an effect left open is recovered as after a crash.
    fn forget(&self, name: Option<&str>, instance: &Shared) {
        let mut map = self.lock();
        let key = name.map(String::from);
        if map.get(&key).is_some_and(|i| Arc::ptr_eq(i, instance)) {
            map.remove(&key);
        }
    }

    /// Calls `f` of the instance that holds no journal, held only for the call: the token
    /// rule (`refusal`) and the answer to an unreadable body, which no journal's instance
    /// waits for.
    async fn ask<P, R>(&self, f: fn(&Api) -> TypedFunc<P, R>, args: P) -> Result<R>
    where
        P: ComponentNamedList + Lower + Send + Sync,
        R: ComponentNamedList + Lift + Send + Sync + 'static,
    {
        let nameless = self.instance(None).await?;
        let mut guard = nameless.lock().await;
        let i = &mut *guard;
        let called = f(&i.api).call_async(&mut i.store, args).await;
        drop(guard);
        Ok(called.inspect_err(|_| self.forget(None, &nameless))?)
    }

    async fn handle(
        self: Arc<Self>,
        req: hyper::Request<Incoming>,
    ) -> Result<hyper::Response<Whole>> {
        let (parts, body) = req.into_parts();
        // Every header as received, names in lower case (hyper's), values that are text.
        let headers: Vec<(String, String)> = parts
            .headers
            .iter()
            .filter_map(|(k, v)| {
                Some((
                    k.to_string(),
                    String::from_utf8(v.as_bytes().to_vec()).ok()?,
                ))
            })
            .collect();
        let authorization = headers
            .iter()
            .find(|(k, _)| k == "authorization")
            .map(|(_, v)| v.clone());
        let path = parts.uri.path().to_string();
        // The token first, from the headers alone: a refused request is answered without
        // reading its body, makes no instance and opens no journal for its name.
        let asked = (path.clone(), authorization.clone());
        if let (Some(refusal),) = self.ask(|a| a.refusal, asked).await? {
            return reply(refusal, true);
        }
        // Then the whole body, before any instance is taken: a client that sends slowly,
        // or never, waits alone.
        let body = match read_body(body).await {
            Ok(body) => body,
            Err((too_large, problem)) => {
                let asked = (path, authorization, too_large, problem);
                let (r,) = self.ask(|a| a.unreadable, asked).await?;
                return reply(r, true);
            }
        };
        let name = interlock_core::http_api::journal_of(&path).map(String::from);
        let request = ApiRequest {
            method: parts.method.as_str().to_string(),
            path,
            authorization,
            headers,
            body: body.into(),
        };
        // Spawned: a client that goes away does not stop a gate operation midway.
        let answer = tokio::task::spawn(async move { self.answer(name, request).await });
        reply(answer.await??, false)
    }

    /// Answers `request` to journal `name` by doing what its instance's `http-api` asks: the
    /// instance is held for each call (`handle`, each `resume`), and free while a target
    /// answers or a sleep runs, so other requests to the journal go on meanwhile.
    async fn answer(&self, name: Option<String>, request: ApiRequest) -> Result<ApiResponse> {
        let name = name.as_deref();
        let instance = self.instance(name).await?;
        let mut step = {
            let mut guard = instance.lock().await;
            let called = async {
                if !guard.opened {
                    open_journal(self, &mut guard, name).await?;
                }
                guard.handle(request).await
            }
            .await;
            drop(guard);
            called.inspect_err(|_| self.forget(name, &instance))?
        };
        loop {
            let answer = match step.next {
                Next::Respond(r) => return Ok(r),
                Next::Fetch(f) => Some(perform(f).await),
                Next::Sleep(ms) => {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    None
                }
            };
            let mut guard = instance.lock().await;
            let called = guard.resume(step.id, answer).await;
            drop(guard);
            step = called.inspect_err(|_| self.forget(name, &instance))?;
        }
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
    let backend = storage.backend();
    instance.store.data_mut().storage = storage;
    let (opened,) = instance
        .api
        .open
        .call_async(&mut instance.store, (backend,))
        .await?;
    instance.opened = opened.is_ok();
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
