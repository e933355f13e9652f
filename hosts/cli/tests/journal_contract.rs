//! The journal contract suite (adapters/journal) as every host runs it: the component
//! `dist/journal_contract.wasm`, over this host's storage (the `storage` it gives the gate:
//! a journal folder, memory, SQLite, PostgreSQL), each case on a new, empty store. The same
//! cases run natively in adapters/journal, file-journal and sql-journal; here they run
//! through the component boundary and this host's storage interface.
use std::path::PathBuf;

use interlock_cli::gate::HostState;
use interlock_cli::{Clock, MemoryFiles, Storage};
use interlock_file_journal::StdFiles;
use interlock_sql_journal::testing::Cluster;
use interlock_sql_journal::SqlStore;
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Engine, Store};

mod bindings {
    wasmtime::component::bindgen!({
        world: "journal-contract",
        path: "../../adapters/journal/contract/wit",
        with: {
            "interlock:gate/storage": interlock_cli::bindings::interlock::gate::storage,
        },
    });
}

use bindings::exports::interlock::journal_contract::suite::Kind;
use bindings::JournalContract;

struct Suite {
    engine: Engine,
    component: Component,
    linker: Linker<HostState>,
}

impl Suite {
    fn load() -> Suite {
        let wasm =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../dist/journal_contract.wasm");
        let engine = Engine::default();
        let component = Component::from_file(&engine, &wasm).unwrap_or_else(|e| {
            panic!(
                "{}: {e} (bash scripts/build-wasm.sh builds it)",
                wasm.display()
            )
        });
        let mut linker = Linker::<HostState>::new(&engine);
        interlock_cli::bindings::interlock::gate::storage::add_to_linker::<_, HasSelf<_>>(
            &mut linker,
            |s| s,
        )
        .unwrap();
        Suite {
            engine,
            component,
            linker,
        }
    }

    fn instance(&self, storage: Storage) -> (Store<HostState>, JournalContract) {
        let mut store = Store::new(&self.engine, HostState::new(storage, Clock::fake(0), &[]));
        let suite =
            JournalContract::instantiate(&mut store, &self.component, &self.linker).unwrap();
        (store, suite)
    }

    /// Every case of `kind`, each on the storage `fresh` makes; the failures.
    fn run(&self, kind: Kind, fresh: &dyn Fn() -> Storage) -> Vec<String> {
        let (mut store, suite) = self.instance(Storage::memory());
        let cases = suite
            .interlock_journal_contract_suite()
            .call_cases(&mut store, kind)
            .unwrap();
        assert!(cases.len() > 10, "{cases:?}");
        let mut failed = Vec::new();
        for name in cases {
            let (mut store, suite) = self.instance(fresh());
            let result = suite
                .interlock_journal_contract_suite()
                .call_run(&mut store, &name, kind)
                .unwrap_or_else(|trap| Err(format!("trapped: {trap:?}")));
            if let Err(why) = result {
                failed.push(format!("{name}: {why}"));
            }
        }
        failed
    }
}

#[test]
fn the_suite_on_a_journal_folder() {
    let suite = Suite::load();
    let tmp = tempfile::tempdir().unwrap();
    let n = std::cell::Cell::new(0);
    let failed = suite.run(Kind::File, &|| {
        n.set(n.get() + 1);
        StdFiles::at(&tmp.path().join(format!("j{}", n.get())))
            .unwrap()
            .into()
    });
    assert!(failed.is_empty(), "{failed:#?}");
}

#[test]
fn the_suite_on_memory_files() {
    let suite = Suite::load();
    let failed = suite.run(Kind::File, &|| MemoryFiles::new().into());
    assert!(failed.is_empty(), "{failed:#?}");
}

#[test]
fn the_suite_on_sqlite() {
    let suite = Suite::load();
    let tmp = tempfile::tempdir().unwrap();
    let n = std::cell::Cell::new(0);
    let failed = suite.run(Kind::Sqlite, &|| {
        n.set(n.get() + 1);
        let url = format!("sqlite://{}/j{}.db", tmp.path().display(), n.get());
        SqlStore::open_url(&url).unwrap().into()
    });
    assert!(failed.is_empty(), "{failed:#?}");
}

#[test]
fn the_suite_on_postgresql() {
    let cluster = match Cluster::start() {
        Ok(c) => c,
        Err(why) => {
            eprintln!("PostgreSQL not installed, not run: {why}");
            return;
        }
    };
    let suite = Suite::load();
    let failed = suite.run(Kind::Postgres, &|| {
        SqlStore::open_url(&cluster.database()).unwrap().into()
    });
    assert!(failed.is_empty(), "{failed:#?}");
}
