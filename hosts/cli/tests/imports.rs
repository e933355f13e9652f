//! Each component imports exactly its checked-in list. The gate: the primitive storage its
//! journal runs over, the step vocabulary and the WASI wall clock (Rust std would add
//! wasi:cli and wasi:io; the guest is no_std so that nothing else can creep in unnoticed).
//! The journal's contract suite: storage only. The payments simulator: nothing. The wasi:http component (`interlock serve`): the gate's, plus
//! its environment, a monotonic clock and wasi:http. The gate with its HTTP API (the
//! Worker's): the gate's. Only the components that serve HTTP export the HTTP API.
use std::path::PathBuf;

use wasmtime::component::Component;
use wasmtime::{Config, Engine};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn check(wasm: PathBuf, list: &str) {
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
    let listed = std::fs::read_to_string(root().join(list)).unwrap();
    let mut want: Vec<String> = listed
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(String::from)
        .collect();
    want.sort();
    assert_eq!(
        got,
        want,
        "{}'s imports changed; review, then update {list}",
        wasm.display()
    );
}

fn exports(wasm: PathBuf) -> Vec<String> {
    let engine = Engine::new(&Config::new()).unwrap();
    let component = Component::from_file(&engine, &wasm).unwrap();
    component
        .component_type()
        .exports(&engine)
        .map(|(name, _)| name.to_string())
        .collect()
}

#[test]
fn only_the_serving_components_carry_the_http_api() {
    const API: &str = "interlock:gate/http-api@0.1.0";
    let lean = exports(root().join("dist/interlock_gate.wasm"));
    assert!(
        lean.iter().any(|e| e == "interlock:gate/gate@0.1.0"),
        "{lean:?}"
    );
    assert!(
        !lean.iter().any(|e| e == API),
        "the lean gate exports {API}"
    );
    for serving in ["interlock_gate_api.wasm", "interlock_http.wasm"] {
        let got = exports(root().join("dist").join(serving));
        assert!(got.iter().any(|e| e == API), "{serving}: {got:?}");
    }
}

#[test]
fn gate_api_imports_the_gates() {
    check(
        root().join("dist/interlock_gate_api.wasm"),
        "tests/component-imports.txt",
    );
}

#[test]
fn gate_imports_match_the_checked_in_list() {
    check(
        root().join("dist/interlock_gate.wasm"),
        "tests/component-imports.txt",
    );
}

#[test]
fn journal_contract_imports_only_storage() {
    check(
        root().join("dist/journal_contract.wasm"),
        "tests/journal-contract-imports.txt",
    );
}

#[test]
fn http_gate_imports_match_the_checked_in_list() {
    check(
        root().join("dist/interlock_http.wasm"),
        "tests/http-gate-imports.txt",
    );
}

#[test]
fn payments_sim_imports_nothing() {
    check(
        root().join("dist/payments_sim.wasm"),
        "tests/payments-sim-imports.txt",
    );
}
