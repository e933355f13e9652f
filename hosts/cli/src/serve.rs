//! `interlock serve`: the gate's HTTP API (docs/http-api.yaml) from the wasi:http component
//! (world `http-gate`, dist/interlock_http.wasm) on wasmtime's wasi-http.
//!
//! Everything the API decides (the token, the routes, the JSON, how a configured HTTP target
//! is performed) is the component's (`interlock_core::http_api`). This host provides the
//! component's imports (WASI with the settings as environment variables, wasi:http, the
//! journal) and keeps one instance per journal, as the Worker keeps one Durable Object:
//! an instance holds the operations in progress (`POST .../submit`, then `.../ops/{op}`),
//! and its requests are handled one at a time, so compare-and-append sees no interleaving
//! within it.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{anyhow, Context, Result};
use hyper::server::conn::http1;
use interlock_core::{Journal as CoreJournal, JournalError as CoreError};
use tokio::net::TcpListener;
use tokio::sync::Mutex;
use wasmtime::component::{Func, HasSelf, Linker, Val};
use wasmtime::{Engine, Store};
use wasmtime_wasi_http::io::TokioIo;
use wasmtime_wasi_http::p2::bindings::http::types::Scheme;
use wasmtime_wasi_http::p2::bindings::{Proxy, ProxyPre};
use wasmtime_wasi_http::p2::body::HyperOutgoingBody;
use wasmtime_wasi_http::WasiHttpView;

use crate::clock::Clock;
use crate::gate::HostState;
use crate::journal::JournalBackend;

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
}

/// A journal opened at its first use: a journal that cannot be opened (locked by another
/// process, a torn tail) fails that call, which the component answers as its typed journal
/// error (503), and the next call tries again; an instance whose path names no journal never
/// opens one.
struct Lazy {
    open: Box<dyn FnMut() -> Result<Box<dyn JournalBackend>, CoreError> + Send>,
    store: Option<Box<dyn JournalBackend>>,
}

impl Lazy {
    fn get(&mut self) -> Result<&mut Box<dyn JournalBackend>, CoreError> {
        if self.store.is_none() {
            self.store = Some((self.open)()?);
        }
        Ok(self.store.as_mut().expect("just opened"))
    }
}

impl CoreJournal for Lazy {
    fn append(
        &mut self,
        stream: &str,
        expected_len: u64,
        entries: &[String],
        durable: bool,
        open: bool,
    ) -> Result<(), CoreError> {
        self.get()?
            .append(stream, expected_len, entries, durable, open)
    }
    fn read(&mut self, stream: &str, start: u64) -> Result<Vec<String>, CoreError> {
        self.get()?.read(stream, start)
    }
    fn length(&mut self, stream: &str) -> Result<u64, CoreError> {
        self.get()?.length(stream)
    }
    fn open_streams(&mut self) -> Result<Vec<String>, CoreError> {
        self.get()?.open_streams()
    }
    fn streams(&mut self) -> Result<Vec<String>, CoreError> {
        self.get()?.streams()
    }
    fn sync(&mut self) -> Result<(), CoreError> {
        self.get()?.sync()
    }
}

/// One instance of the component and its store: one journal.
struct Instance {
    store: Store<HostState>,
    proxy: Proxy,
    /// The component's `http-api.refusal`: the token rule, asked before a request may
    /// reach a journal's instance.
    refusal: Func,
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
    crate::bindings::interlock::gate::journal::add_to_linker::<_, HasSelf<_>>(
        &mut linker,
        |s: &mut HostState| &mut s.journal,
    )?;
    Ok(linker)
}

impl Server {
    /// The journal a request's journal name opens (`None`: the path names no journal).
    fn journal_for(&self, name: Option<&str>) -> Box<dyn JournalBackend> {
        let name = name.map(String::from);
        let journals = self.journals.clone();
        let open = move || -> Result<Box<dyn JournalBackend>, CoreError> {
            match (&journals, &name) {
                (_, None) => Err(CoreError::Other("the path names no journal".into())),
                (Journals::Folder(dir), Some(n)) => {
                    let j = interlock_file_journal::FileJournal::open(&dir.join(n))
                        .map_err(|e| CoreError::Io(format!("journal {n}: {e}")))?;
                    Ok(Box::new(j))
                }
                (Journals::Url { url, name: served }, Some(n)) if n == served => {
                    let j = interlock_sql_journal::open_url(url)
                        .map_err(|e| CoreError::Io(format!("journal {n}: {e}")))?;
                    Ok(Box::new(j))
                }
                (Journals::Url { name: served, .. }, Some(n)) => Err(CoreError::Other(format!(
                    "this server serves one journal, {served:?}; there is no journal {n:?} here"
                ))),
            }
        };
        Box::new(Lazy {
            open: Box::new(open),
            store: None,
        })
    }

    async fn instance(&self, name: Option<&str>) -> Result<Arc<Mutex<Instance>>> {
        let key = name.map(String::from);
        if let Some(i) = self.lock().get(&key) {
            return Ok(i.clone());
        }
        let state = HostState::new(self.journal_for(name), Clock::System, &self.env);
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
        let refusal = instance
            .get_export_index(&mut store, Some(&api), "refusal")
            .and_then(|i| instance.get_func(&mut store, i))
            .context("the component's http-api has no refusal")?;
        let made = Arc::new(Mutex::new(Instance {
            store,
            proxy,
            refusal,
        }));
        // Two first requests may race to make one: the first one in is kept.
        Ok(self.lock().entry(key).or_insert(made).clone())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Option<String>, Arc<Mutex<Instance>>>> {
        self.instances.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the component refuses a request with this `Authorization` (asked of the
    /// instance that holds no journal).
    async fn refused(&self, authorization: Option<String>) -> Result<bool> {
        let nameless = self.instance(None).await?;
        let mut guard = nameless.lock().await;
        let Instance { store, refusal, .. } = &mut *guard;
        let arg = Val::Option(authorization.map(|a| Box::new(Val::String(a))));
        let mut result = [Val::Bool(false)];
        refusal.call_async(&mut *store, &[arg], &mut result).await?;
        Ok(matches!(result[0], Val::Option(Some(_))))
    }

    async fn handle(
        self: Arc<Self>,
        req: hyper::Request<hyper::body::Incoming>,
    ) -> Result<hyper::Response<HyperOutgoingBody>> {
        // A request the component refuses (no token) is answered by the instance that
        // holds no journal: it makes no instance, and opens no journal, for its name.
        let authorization = req
            .headers()
            .get(hyper::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .map(String::from);
        let name = match interlock_core::http_api::journal_of(req.uri().path()) {
            Some(n) if !self.refused(authorization).await? => Some(n.to_string()),
            _ => None,
        };
        let instance = self.instance(name.as_deref()).await?;
        let (sender, receiver) = tokio::sync::oneshot::channel();
        let task = tokio::task::spawn(async move {
            let mut guard = instance.lock().await;
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
        });
        match receiver.await {
            Ok(Ok(resp)) => Ok(resp),
            Ok(Err(e)) => Err(e.into()),
            Err(_) => {
                let e = match task.await {
                    Ok(Ok(())) => anyhow!("the component answered nothing"),
                    Ok(Err(e)) => anyhow::Error::from(e),
                    Err(e) => e.into(),
                };
                Err(e.context("the component answered nothing"))
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
