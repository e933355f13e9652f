//! PostgreSQL connection faults, each on a cluster of its own (they restart it or change
//! its settings): the server restarted mid-run, and a commit whose acknowledgement is lost.
//!
//! Run with `cargo test -p interlock-sql-journal --test faults`. Skipped (ignored, and
//! says why) only when PostgreSQL is not installed.
mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::world::{proposal, setup, Worker, CLAIM_MS, T0};
use common::{Backend, Cluster};
use interlock_core::{GateError, Journal, JournalError, State};
use interlock_payments_sim::Tier;
use interlock_sql_journal::PostgresJournal;
use libtest_mimic::{Failed, Trial};

/// A fault case, given a cluster of its own.
type Fault = fn(Cluster);

fn main() {
    let args = libtest_mimic::Arguments::from_args();
    let cases: [(&str, Fault); 3] = [
        (
            "postgres::a_restart_mid_run_fails_calls_then_reconnects",
            a_restart_mid_run,
        ),
        (
            "postgres::a_commit_whose_acknowledgement_is_lost_is_an_error",
            a_lost_acknowledgement,
        ),
        (
            "postgres::the_gate_sends_nothing_it_has_not_durably_recorded",
            the_gate_sends_nothing_unrecorded,
        ),
    ];
    let installed = match Cluster::installed() {
        Ok(()) => true,
        Err(why) => {
            eprintln!("PostgreSQL tests skipped: {why}");
            false
        }
    };
    let trials = cases
        .into_iter()
        .map(|(name, case)| {
            Trial::test(name, move || match Cluster::start() {
                Ok(cluster) => {
                    case(cluster);
                    Ok(())
                }
                Err(why) => Err(Failed::from(format!("PostgreSQL is not installed: {why}"))),
            })
            .with_ignored_flag(!installed)
        })
        .collect();
    libtest_mimic::run(&args, trials).exit();
}

/// One entry of batch `batch` (three entries each), at `seq` of stream "s".
fn part(batch: u64, i: u64, seq: u64) -> String {
    format!(r#"{{"batch":{batch},"open":true,"part":{i},"seq":{seq},"stream":"s"}}"#)
}

/// A writer appends three-entry batches while the server restarts under it. Every
/// acknowledged batch is kept; a batch whose call failed is either wholly there or not at
/// all; the next call after the restart fails with `io`, and the handle then goes on.
fn a_restart_mid_run(cluster: Cluster) {
    let url = cluster.database();
    let mut j = PostgresJournal::open(&url).unwrap();
    let stop = AtomicBool::new(false);
    let errors = AtomicUsize::new(0);
    let (acked, failed) = (Mutex::new(Vec::new()), Mutex::new(Vec::new()));
    std::thread::scope(|scope| {
        let writer = scope.spawn(|| {
            let mut w = PostgresJournal::open(&url).unwrap();
            let deadline = Instant::now() + Duration::from_secs(60);
            for batch in 0.. {
                if stop.load(Ordering::SeqCst) || Instant::now() > deadline {
                    break;
                }
                let len = match w.length("s") {
                    Ok(len) => len,
                    Err(JournalError::Io(_)) => {
                        errors.fetch_add(1, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(20));
                        continue;
                    }
                    Err(e) => panic!("{e}"),
                };
                let entries: Vec<String> = (0..3).map(|i| part(batch, i, len + i)).collect();
                match w.append("s", len, &entries, batch % 2 == 0, true) {
                    Ok(()) => acked.lock().unwrap().push(batch),
                    Err(JournalError::Io(_)) => {
                        errors.fetch_add(1, Ordering::SeqCst);
                        failed.lock().unwrap().push(batch)
                    }
                    Err(e) => panic!("batch {batch}: {e}"),
                }
            }
        });
        while acked.lock().unwrap().len() < 20 {
            std::thread::sleep(Duration::from_millis(5));
        }
        let before = j.length("s").unwrap();
        cluster.restart();
        // This handle's connection died with the server: its next call says so...
        let next = j.append(
            "t",
            0,
            &[r#"{"open":true,"seq":0,"stream":"t"}"#.to_owned()],
            true,
            true,
        );
        match next {
            Err(JournalError::Io(m)) => assert!(m.contains("connection lost"), "{m}"),
            other => panic!("expected an io error after the restart, got {other:?}"),
        }
        // ...and the call after it reconnects.
        assert!(j.length("s").unwrap() >= before);
        j.append(
            "t",
            0,
            &[r#"{"open":true,"seq":0,"stream":"t"}"#.to_owned()],
            true,
            true,
        )
        .unwrap();
        let acked_at_restart = acked.lock().unwrap().len();
        while acked.lock().unwrap().len() < acked_at_restart + 20 {
            std::thread::sleep(Duration::from_millis(5));
        }
        stop.store(true, Ordering::SeqCst);
        writer.join().unwrap();
    });
    let (acked, failed) = (acked.into_inner().unwrap(), failed.into_inner().unwrap());
    assert!(errors.into_inner() > 0, "the writer saw the restart");
    let stored = j.read("s", 0).unwrap();
    assert_eq!(stored.len() % 3, 0, "only whole batches");
    let mut batches = Vec::new();
    for (k, chunk) in stored.chunks(3).enumerate() {
        let v: Vec<serde_json::Value> = chunk
            .iter()
            .map(|e| serde_json::from_str(e).unwrap())
            .collect();
        let batch = v[0]["batch"].as_u64().unwrap();
        for (i, e) in v.iter().enumerate() {
            assert_eq!(e["batch"], batch, "batch {batch} is whole");
            assert_eq!(e["part"], i as u64);
            assert_eq!(e["seq"], (3 * k + i) as u64);
        }
        batches.push(batch);
    }
    for b in &acked {
        assert!(batches.contains(b), "acknowledged batch {b} was kept");
    }
    for b in &batches {
        assert!(
            acked.contains(b) || failed.contains(b),
            "batch {b} came from somewhere"
        );
    }
}

/// Makes every `synchronous_commit = on` commit wait for a standby that never comes: the
/// commit is written locally, but its acknowledgement never arrives.
fn hold_acknowledgements(cluster: &Cluster) {
    cluster
        .admin()
        .batch_execute("ALTER SYSTEM SET synchronous_standby_names = 'nobody'")
        .unwrap();
    cluster
        .admin()
        .batch_execute("SELECT pg_reload_conf()")
        .unwrap();
}

fn release_acknowledgements(cluster: &Cluster) {
    cluster
        .admin()
        .batch_execute("ALTER SYSTEM RESET synchronous_standby_names")
        .unwrap();
    cluster
        .admin()
        .batch_execute("SELECT pg_reload_conf()")
        .unwrap();
}

/// Waits until a commit waits for its acknowledgement, then ends that session, as a
/// network cut between the commit and its acknowledgement would.
fn cut_the_waiting_commit(cluster: &Cluster) {
    let mut admin = cluster.admin();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let rows = admin
            .query(
                "SELECT pid FROM pg_stat_activity WHERE wait_event = 'SyncRep'",
                &[],
            )
            .unwrap();
        if let Some(row) = rows.first() {
            let pid: i32 = row.get(0);
            admin
                .execute("SELECT pg_terminate_backend($1)", &[&pid])
                .unwrap();
            return;
        }
        if Instant::now() > deadline {
            // Let whatever waits go, so the test fails instead of hanging.
            release_acknowledgements(cluster);
            panic!("no commit ever waited for its acknowledgement");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn a_lost_acknowledgement(cluster: Cluster) {
    let url = cluster.database();
    let mut j = PostgresJournal::open(&url).unwrap();
    hold_acknowledgements(&cluster);
    // Non-durable appends do not wait for the flush, so not for the standby either.
    j.append("s", 0, &[part(0, 0, 0)], false, true).unwrap();
    let result = std::thread::scope(|scope| {
        let append = scope.spawn(|| {
            let batch: Vec<String> = (0..3).map(|i| part(1, i, 1 + i)).collect();
            let r = j.append("s", 1, &batch, true, true);
            (r, batch)
        });
        cut_the_waiting_commit(&cluster);
        append.join().unwrap()
    });
    release_acknowledgements(&cluster);
    let (result, batch) = result;
    match result {
        Err(JournalError::Io(m)) => assert!(m.contains("was not acknowledged"), "{m}"),
        other => panic!("an unacknowledged commit must be an error, got {other:?}"),
    }
    // Its fate was unknown to the writer; reading again (on a new connection) tells: here
    // it was committed locally, whole.
    let mut want = vec![part(0, 0, 0)];
    want.extend(batch);
    assert_eq!(j.read("s", 0).unwrap(), want);
    assert_eq!(j.length("s").unwrap(), 4);
}

/// The durable intent (DISPATCHED) of a submit is committed but its acknowledgement lost:
/// the gate reports the journal error and asks for no send. Recovery, after the claim,
/// finds the intent and converges with one send.
fn the_gate_sends_nothing_unrecorded(cluster: Cluster) {
    let backend = Backend::Postgres(cluster);
    let Backend::Postgres(cluster) = &backend else {
        unreachable!()
    };
    let (url, pay) = setup(&backend, Tier::TWO, 1);
    hold_acknowledgements(cluster);
    let mut w = Worker::new(&backend, &url, &pay);
    let p = proposal(&pay, 0, 2000);
    let result = std::thread::scope(|scope| {
        let submit = scope.spawn(|| w.try_submit(T0, &p, None));
        cut_the_waiting_commit(cluster);
        submit.join().unwrap()
    });
    release_acknowledgements(cluster);
    match result {
        Err(GateError::Journal(JournalError::Io(m))) => {
            assert!(m.contains("was not acknowledged"), "{m}")
        }
        other => panic!("expected the journal error, got {other:?}"),
    }
    assert_eq!(pay.lock().unwrap().refund_count(), 0, "nothing sent");
    drop(w);
    let mut other = Worker::new(&backend, &url, &pay);
    let o = other.recover_all(T0 + 2 * CLAIM_MS);
    assert_eq!(o.len(), 1, "the intent was recorded, so the effect is open");
    assert_eq!(o[0].state, State::Committed);
    assert_eq!(pay.lock().unwrap().refund_count(), 1);
    assert!(other.recover_all(T0 + 3 * CLAIM_MS).is_empty());
    other.verifies();
    let j: &mut dyn Journal = &mut *other.j;
    assert!(j
        .open_streams()
        .unwrap()
        .iter()
        .all(|s| !s.starts_with("effect:")));
}
