//! The component imports exactly the checked-in list (tests/component-imports.txt): its
//! journal, the step vocabulary, and the WASI wall clock. Rust std would add wasi:cli and
//! wasi:io; the guest is no_std so that nothing else can creep in unnoticed.
use std::path::PathBuf;

use wasmtime::component::Component;
use wasmtime::{Config, Engine};

#[test]
fn component_imports_match_the_checked_in_list() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let wasm = std::env::var_os("INTERLOCK_WASM")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("dist/interlock_gate.wasm"));
    assert!(
        wasm.exists(),
        "{} is missing: run scripts/build-wasm.sh first",
        wasm.display()
    );
    let engine = Engine::new(&Config::new()).unwrap();
    let component = Component::from_file(&engine, &wasm).unwrap();
    let mut got: Vec<String> = component
        .component_type()
        .imports(&engine)
        .map(|(name, _)| name.to_string())
        .collect();
    got.sort();
    let listed = std::fs::read_to_string(root.join("tests/component-imports.txt")).unwrap();
    let mut want: Vec<String> = listed
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(String::from)
        .collect();
    want.sort();
    assert_eq!(
        got, want,
        "the component's imports changed; review, then update tests/component-imports.txt"
    );
}
