//! Finding, compiling and caching the gate component.
//!
//! Compiling the component with cranelift costs ~100 ms, paid by every CLI process (the
//! demo runs three). So the compiled artifact is cached next to the .wasm, keyed by a hash
//! of the wasm bytes and of the engine's settings: a rebuilt guest or another wasmtime
//! never loads a stale artifact.

use std::fmt::Write as _;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};
use sha2::{Digest, Sha256};
use wasmtime::component::{Component, HasSelf, Instance, InstancePre, Linker};
use wasmtime::{AsContextMut, Config, Engine};

use crate::bindings::exports::interlock::gate::{
    effects, exporter, gate, journal_admin, proof, tools,
};
use crate::bindings::{interlock, wasi};
use crate::gate::{Exports, HostState};

/// The file name scripts/build-wasm.sh produces.
pub const WASM_NAME: &str = "interlock_component.wasm";

/// Where the exports this host calls are, found once per component.
#[derive(Clone)]
pub(crate) struct ExportIndices {
    gate: gate::GuestIndices,
    tools: tools::GuestIndices,
    effects: effects::GuestIndices,
    admin: journal_admin::GuestIndices,
    proof: proof::GuestIndices,
    exporter: exporter::GuestIndices,
}

impl ExportIndices {
    fn new(pre: &InstancePre<HostState>) -> wasmtime::Result<ExportIndices> {
        Ok(ExportIndices {
            gate: gate::GuestIndices::new(pre)?,
            tools: tools::GuestIndices::new(pre)?,
            effects: effects::GuestIndices::new(pre)?,
            admin: journal_admin::GuestIndices::new(pre)?,
            proof: proof::GuestIndices::new(pre)?,
            exporter: exporter::GuestIndices::new(pre)?,
        })
    }

    pub(crate) fn load(
        &self,
        mut store: impl AsContextMut,
        instance: &Instance,
    ) -> wasmtime::Result<Exports> {
        Ok(Exports {
            gate: self.gate.load(&mut store, instance)?,
            tools: self.tools.load(&mut store, instance)?,
            effects: self.effects.load(&mut store, instance)?,
            admin: self.admin.load(&mut store, instance)?,
            proof: self.proof.load(&mut store, instance)?,
            exporter: self.exporter.load(&mut store, instance)?,
        })
    }
}

/// The compiled component, linked against the host's imports, ready to instantiate many
/// times (one instance per [`crate::GateHost`]).
#[derive(Clone)]
pub struct Runtime {
    pub(crate) engine: Engine,
    pub(crate) pre: InstancePre<HostState>,
    pub(crate) exports: ExportIndices,
}

impl Runtime {
    /// Loads the component at `wasm`, from the compiled cache when it is there: the gate
    /// (world `gate-component`), or its wasi:http form (`http-gate`, which exports the same
    /// gate).
    pub fn load(wasm: &Path) -> Result<Runtime> {
        let engine = Engine::new(&Config::new()).map_err(anyhow::Error::from)?;
        let component = load_component(&engine, wasm)?;
        let mut linker = Linker::<HostState>::new(&engine);
        let imports = |prefix: &str| {
            component
                .component_type()
                .imports(&engine)
                .any(|(name, _)| name.starts_with(prefix))
        };
        if imports("wasi:http/") {
            // The wasi:http component (world http-gate) exports the same gate: run it as the
            // gate, its WASI wall clock the host's clock (see HostState). WASI's clocks
            // include wall-clock, so ours is not added a second time.
            #[cfg(feature = "serve")]
            {
                wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(anyhow::Error::from)?;
                wasmtime_wasi_http::p2::add_only_http_to_linker_sync(&mut linker)
                    .map_err(anyhow::Error::from)?;
            }
            #[cfg(not(feature = "serve"))]
            anyhow::bail!(
                "{} is the wasi:http component; this interlock was built without WASI \
                 (feature `serve`): cargo build -p interlock-cli --features serve",
                wasm.display()
            );
        } else {
            wasi::clocks0_2_0::wall_clock::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| {
                &mut s.clock
            })
            .map_err(anyhow::Error::from)?;
        }
        if imports("interlock:gate/storage") {
            interlock::gate::storage::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s)
                .map_err(anyhow::Error::from)?;
        }
        let pre = linker
            .instantiate_pre(&component)
            .map_err(anyhow::Error::from)
            .with_context(|| {
                format!(
                    "{} does not fit this host's imports (worlds gate-component, http-gate)",
                    wasm.display()
                )
            })?;
        let exports = ExportIndices::new(&pre)
            .map_err(anyhow::Error::from)
            .with_context(|| format!("{} does not export the gate", wasm.display()))?;
        Ok(Runtime {
            engine,
            pre,
            exports,
        })
    }

    /// Loads the component from [`locate`].
    pub fn locate_and_load(explicit: Option<&Path>) -> Result<Runtime> {
        Runtime::load(&locate(explicit)?)
    }
}

/// Where the component is: `explicit` (the `--wasm` flag), else `$INTERLOCK_WASM`, else
/// scripts/build-wasm.sh's output (under `$CARGO_TARGET_DIR`, or ./target), else next to
/// this executable, else the checkout's dist/.
pub fn locate(explicit: Option<&Path>) -> Result<PathBuf> {
    find(
        explicit,
        "INTERLOCK_WASM",
        "",
        DIST_WASM_NAME,
        "--wasm PATH",
        "gate component",
    )
}

/// Where the wasi:http component (world http-gate) is: `explicit` (`--component`), else
/// `$INTERLOCK_HTTP_WASM`, else scripts/build-wasm.sh's output (its own target folder
/// `http-gate`), next to this executable, or the checkout's dist/.
pub fn locate_http(explicit: Option<&Path>) -> Result<PathBuf> {
    find(
        explicit,
        "INTERLOCK_HTTP_WASM",
        "http-gate",
        HTTP_WASM_NAME,
        "--component PATH",
        "wasi:http component",
    )
}

/// The file name scripts/build-wasm.sh gives the gate component in dist/.
pub const DIST_WASM_NAME: &str = "interlock_gate.wasm";

/// The file name scripts/build-wasm.sh gives the wasi:http component in dist/.
pub const HTTP_WASM_NAME: &str = "interlock_http.wasm";

fn find(
    explicit: Option<&Path>,
    var: &str,
    sub: &str,
    dist_name: &str,
    flag: &str,
    what: &str,
) -> Result<PathBuf> {
    if let Some(p) = explicit {
        return Ok(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os(var) {
        return Ok(PathBuf::from(p));
    }
    let mut tried = Vec::new();
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target"));
    tried.push(
        target_dir
            .join(sub)
            .join("wasm32-wasip2/release")
            .join(WASM_NAME),
    );
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
    {
        tried.push(dir.join(if sub.is_empty() { WASM_NAME } else { dist_name }));
        // Test binaries live one level down, in target/<profile>/deps.
        if let Some(target) = dir
            .ancestors()
            .find(|a| a.join(sub).join("wasm32-wasip2").is_dir())
        {
            tried.push(
                target
                    .join(sub)
                    .join("wasm32-wasip2/release")
                    .join(WASM_NAME),
            );
        }
    }
    // A development checkout: scripts/build-wasm.sh also copies it to dist/.
    tried.push(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../dist")
            .join(dist_name),
    );
    if let Some(found) = tried.iter().find(|p| p.is_file()) {
        return Ok(found.clone());
    }
    let list = tried.iter().fold(String::new(), |mut s, p| {
        let _ = write!(s, "\n  {}", p.display());
        s
    });
    Err(anyhow!(
        "the {what} was not found; build it with `bash scripts/build-wasm.sh` \
         (or pass {flag} / set {var}). Looked in:{list}"
    ))
}

/// The component compiled for `engine`: deserialized from the cache file when one
/// matches, else compiled and cached (best effort: a read-only folder only costs time).
pub(crate) fn load_component(engine: &Engine, wasm: &Path) -> Result<Component> {
    let bytes = std::fs::read(wasm).with_context(|| {
        format!(
            "cannot read the gate component {}; build it with `bash scripts/build-wasm.sh`",
            wasm.display()
        )
    })?;
    let cache = cache_path(engine, wasm, &bytes);
    if cache.is_file() {
        // SAFETY: deserialize trusts its input to be wasmtime's own output. The file is
        // named by the hash of the wasm and of this engine's settings, and only this
        // function writes it (whole, by rename), so it is our output for this engine.
        if let Ok(c) = unsafe { Component::deserialize_file(engine, &cache) } {
            return Ok(c);
        }
    }
    let compiled = engine
        .precompile_component(&bytes)
        .map_err(anyhow::Error::from)
        .with_context(|| format!("{} is not a valid component", wasm.display()))?;
    // Write under a unique name, then rename: a concurrent process never reads half a file.
    let tmp = cache.with_extension(format!("tmp{}", std::process::id()));
    if std::fs::write(&tmp, &compiled).is_ok() && std::fs::rename(&tmp, &cache).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    // SAFETY: `compiled` was produced just now by this engine.
    unsafe { Component::deserialize(engine, &compiled) }.map_err(anyhow::Error::from)
}

fn cache_path(engine: &Engine, wasm: &Path, bytes: &[u8]) -> PathBuf {
    let mut engine_hash = std::collections::hash_map::DefaultHasher::new();
    engine
        .precompile_compatibility_hash()
        .hash(&mut engine_hash);
    let mut h = Sha256::new();
    h.update(bytes);
    h.update(engine_hash.finish().to_le_bytes());
    let digest = h.finalize();
    let key: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    let dir = wasm.parent().unwrap_or(Path::new("."));
    dir.join(format!("interlock_component.{key}.cwasm"))
}
