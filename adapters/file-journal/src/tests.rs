//! What is this store's own: the folder, its lock, owner-only files, fdatasync counting and
//! group commit, threads. The journal's rules are the contract suite of
//! `interlock-journal`, run here on this store (one folder per case).
use super::*;
use interlock_journal::contract::{self, entries, entry, Fixture, Kind, Store};
use std::fs::{self, OpenOptions};
use tempfile::TempDir;

fn journal_bytes(dir: &Path) -> Vec<u8> {
    fs::read(dir.join(JOURNAL_FILE)).unwrap()
}

fn setup() -> (TempDir, PathBuf) {
    let tmp = TempDir::new().unwrap();
    let dir = tmp.path().join("journal");
    (tmp, dir)
}

/// A new folder, locked: every handle is a clone of its store.
struct Folder {
    _tmp: TempDir,
    files: StdFiles,
}

impl Fixture for Folder {
    fn kind(&self) -> Kind {
        Kind::File
    }
    fn store(&mut self) -> Store {
        Store::Files(Box::new(self.files.clone()))
    }
    fn durable_writes(&self) -> Option<u64> {
        Some(self.files.fsyncs())
    }
}

#[test]
fn the_contract_on_a_folder() {
    let mut failed = Vec::new();
    for (name, only, case) in contract::CASES {
        if !only.applies(Kind::File) {
            continue;
        }
        let (tmp, dir) = setup();
        let files = StdFiles::open(&dir, Duration::ZERO).unwrap();
        let mut fx = Folder { _tmp: tmp, files };
        if let Err(why) = case(&mut fx) {
            failed.push(format!("{name}: {why}"));
        }
    }
    assert!(failed.is_empty(), "{failed:#?}");
}

#[test]
fn open_creates_missing_directories() {
    let (_tmp, dir) = setup();
    let nested = dir.join("x").join("y");
    let j = FileJournal::open(&nested).unwrap();
    assert!(nested.join(JOURNAL_FILE).is_file());
    assert!(nested.join(LOCK_FILE).is_file());
    assert!(j.streams().is_empty());
    assert!(j.open_streams().is_empty());
    assert_eq!(j.dir(), nested.as_path());
}

#[test]
fn fsync_counting() {
    let (_tmp, dir) = setup();
    let mut j = FileJournal::open(&dir).unwrap();
    assert_eq!(j.fsyncs(), 0, "opening a new journal counts no fdatasync");
    j.sync().unwrap();
    assert_eq!(j.fsyncs(), 0, "sync with nothing pending does nothing");

    j.append("a", 0, &entries("a", 0, 3, true), true, true)
        .unwrap();
    assert_eq!(j.fsyncs(), 1, "one durable append, one fdatasync");
    j.sync().unwrap();
    assert_eq!(j.fsyncs(), 1, "nothing pending after a durable append");

    j.append("a", 3, &entries("a", 3, 1, true), false, true)
        .unwrap();
    j.append("b", 0, &entries("b", 0, 1, true), false, true)
        .unwrap();
    assert_eq!(j.fsyncs(), 1, "non-durable appends do not sync");
    j.sync().unwrap();
    assert_eq!(j.fsyncs(), 2, "sync after non-durable appends syncs once");
    j.sync().unwrap();
    assert_eq!(j.fsyncs(), 2);
    // A conflict does not sync.
    assert!(j
        .append("a", 0, &entries("a", 0, 1, true), true, true)
        .is_err());
    assert_eq!(j.fsyncs(), 2);
}

#[test]
fn second_open_is_locked_until_drop() {
    let (_tmp, dir) = setup();
    let first = FileJournal::open(&dir).unwrap();
    match FileJournal::open_waiting(&dir, Duration::ZERO) {
        Err(Error::Locked {
            dir: d,
            waited_ms: 0,
        }) => assert_eq!(d, dir),
        other => panic!("expected Locked, got {other:?}"),
    }
    match FileJournal::repair(&dir) {
        Err(Error::Locked { .. }) => {}
        other => panic!("repair must take the lock too, got {other:?}"),
    }
    let msg = FileJournal::open_waiting(&dir, Duration::from_millis(50))
        .unwrap_err()
        .to_string();
    assert!(msg.contains(&dir.display().to_string()), "{msg}");
    // It says how long it waited, and how to run several writers.
    assert!(msg.contains("still after waiting 50 ms"), "{msg}");
    assert!(
        msg.contains("sqlite:///") && msg.contains("postgres://"),
        "{msg}"
    );
    drop(first);
    let mut second = FileJournal::open(&dir).unwrap();
    second
        .append("a", 0, &entries("a", 0, 1, true), true, true)
        .unwrap();
}

#[test]
fn repair_needs_an_existing_folder_and_reports_paths() {
    let (_tmp, dir) = setup();
    assert!(matches!(FileJournal::repair(&dir), Err(Error::Io(_))));
    assert!(!dir.exists(), "repair creates no folder");
    {
        let mut j = FileJournal::open(&dir).unwrap();
        j.append("a", 0, &entries("a", 0, 1, true), true, true)
            .unwrap();
    }
    let good = journal_bytes(&dir);
    let mut f = OpenOptions::new()
        .append(true)
        .open(dir.join(JOURNAL_FILE))
        .unwrap();
    std::io::Write::write_all(&mut f, b"{\"torn").unwrap();
    assert!(matches!(
        FileJournal::open(&dir),
        Err(Error::TornTail { .. })
    ));
    let report = FileJournal::repair(&dir).unwrap();
    let side = dir.join(format!("{TORN_PREFIX}{}", good.len()));
    assert_eq!(report.saved_to, Some(side.clone()));
    assert!(report.to_string().contains(&side.display().to_string()));
    assert_eq!(fs::read(&side).unwrap(), b"{\"torn");
    assert_eq!(journal_bytes(&dir), good);
}

#[test]
fn debug_and_error_messages_are_informative() {
    let (_tmp, dir) = setup();
    let mut j = FileJournal::open(&dir).unwrap();
    j.append("a", 0, &entries("a", 0, 2, true), false, true)
        .unwrap();
    let debug = format!("{j:?}");
    assert!(debug.contains("FileJournal"), "{debug}");
    assert!(debug.contains("entries: 2"), "{debug}");
    assert!(debug.contains("pending: true"), "{debug}");
    let conflict = j
        .append("a", 0, &entries("a", 0, 1, true), false, true)
        .unwrap_err()
        .to_string();
    assert!(conflict.contains("2 entries"), "{conflict}");
    let invalid = j
        .append("a", 2, &entries("a", 3, 1, true), false, true)
        .unwrap_err()
        .to_string();
    assert!(
        invalid.contains("seq member is 3 but should be 2"),
        "{invalid}"
    );
}

#[test]
fn threads_share_fsyncs_and_lose_nothing() {
    let (_tmp, dir) = setup();
    let shared = SharedFileJournal::open(&dir).unwrap();
    const THREADS: u64 = 16;
    const EACH: u64 = 20;
    std::thread::scope(|scope| {
        for t in 0..THREADS {
            let shared = shared.clone();
            scope.spawn(move || {
                let s = format!("t{t}");
                for i in 0..EACH {
                    shared
                        .append(&s, i, &entries(&s, i, 1, true), true, true)
                        .unwrap();
                }
            });
        }
    });
    let fsyncs = shared.fsyncs();
    assert!(
        (1..=THREADS * EACH).contains(&fsyncs),
        "{fsyncs} fsyncs for {} durable appends",
        THREADS * EACH
    );
    assert_eq!(
        shared
            .append("t0", 0, &entries("t0", 0, 1, true), true, true)
            .unwrap_err()
            .to_string(),
        Error::Conflict { actual: EACH }.to_string()
    );
    shared.sync().unwrap();
    assert_eq!(
        shared.fsyncs(),
        fsyncs,
        "nothing pending after durable appends"
    );
    drop(shared);
    let j = FileJournal::open(&dir).unwrap();
    for t in 0..THREADS {
        let s = format!("t{t}");
        assert_eq!(j.read(&s, 0).unwrap(), entries(&s, 0, EACH, true));
    }
}

/// Gate instances of one process: each its own journal (its own index) over a clone of one
/// store, all racing on one stream and on their own. Every append goes in once; a loser
/// learns the stream's actual length; the durable appends share fdatasyncs.
#[test]
fn journals_sharing_one_store_race_and_lose_nothing() {
    let (_tmp, dir) = setup();
    let files = StdFiles::open(&dir, Duration::ZERO).unwrap();
    const THREADS: u64 = 8;
    const EACH: u64 = 30;
    let wins: u64 = std::thread::scope(|scope| {
        let racers: Vec<_> = (0..THREADS)
            .map(|t| {
                let files = files.clone();
                scope.spawn(move || {
                    let mut j = interlock_journal::FileJournal::open(files).unwrap();
                    let own = format!("own{t}");
                    let mut wins = 0;
                    for i in 0..EACH {
                        j.append(&own, i, &entries(&own, i, 1, true), i % 2 == 0, true)
                            .unwrap();
                        let len = j.length("race").unwrap();
                        let e = format!(r#"{{"by":{t},"open":true,"seq":{len},"stream":"race"}}"#);
                        match j.append("race", len, &[e], true, true) {
                            Ok(()) => wins += 1,
                            Err(interlock_journal::Error::Conflict { actual }) => {
                                assert!(actual > len)
                            }
                            Err(e) => panic!("{e}"),
                        }
                    }
                    wins
                })
            })
            .collect();
        racers.into_iter().map(|r| r.join().unwrap()).sum()
    });
    assert!(files.fsyncs() <= THREADS * EACH * 2);
    drop(files);
    let j = FileJournal::open(&dir).unwrap();
    assert_eq!(j.length("race"), wins);
    for (i, e) in j.read("race", 0).unwrap().iter().enumerate() {
        assert!(e.contains(&format!(r#""seq":{i},"#)), "{e}");
    }
    for t in 0..THREADS {
        let own = format!("own{t}");
        assert_eq!(j.read(&own, 0).unwrap(), entries(&own, 0, EACH, true));
    }
}

/// Issue 11: a journal holds customers' orders and amounts; every host creates it owner-only.
#[test]
fn the_journal_is_created_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let (_tmp, dir) = setup();
    let nested = dir.join("a").join("b");
    let mut j = FileJournal::open(&nested).unwrap();
    j.append("a", 0, &entries("a", 0, 2, true), true, true)
        .unwrap();
    j.checkpoint().unwrap();
    drop(j);
    assert_eq!(mode(&dir), 0o700, "a created parent");
    assert_eq!(mode(&nested), 0o700);
    for f in [JOURNAL_FILE, LOCK_FILE, INDEX_FILE, FORMAT_FILE] {
        assert_eq!(mode(&nested.join(f)), 0o600, "{f}");
    }
    // The side file a repair saves torn bytes to.
    let mut f = OpenOptions::new()
        .append(true)
        .open(nested.join(JOURNAL_FILE))
        .unwrap();
    std::io::Write::write_all(&mut f, b"{\"torn").unwrap();
    let saved = FileJournal::repair(&nested).unwrap().saved_to.unwrap();
    assert_eq!(mode(&saved), 0o600);
}

/// Issue 12: a new journal records its format version; a journal made before versions
/// (journal.jsonl, no journal.format) is version 1 and is left as it is.
#[test]
fn a_new_journal_records_its_format_version_and_an_old_one_is_version_1() {
    let (_tmp, dir) = setup();
    drop(FileJournal::open(&dir).unwrap());
    assert_eq!(
        fs::read_to_string(dir.join(FORMAT_FILE)).unwrap(),
        "interlock-journal 1\n"
    );
    assert!(!dir.join(format!("{FORMAT_FILE}.tmp")).exists());

    let (_tmp2, old) = setup();
    fs::create_dir_all(&old).unwrap();
    fs::write(old.join(JOURNAL_FILE), format!("{}\n", entry("a", 0, true))).unwrap();
    let j = FileJournal::open(&old).unwrap();
    assert_eq!(j.length("a"), 1);
    assert!(!old.join(FORMAT_FILE).exists());
}

/// Issue 12: a newer format is refused and nothing in the directory changes.
#[test]
fn a_newer_format_version_is_refused_and_nothing_is_created() {
    let (_tmp, dir) = setup();
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join(FORMAT_FILE), "interlock-journal 2\n").unwrap();
    let e = FileJournal::open(&dir).unwrap_err();
    assert!(matches!(e, Error::Format(_)), "{e:?}");
    assert!(!dir.join(JOURNAL_FILE).exists());
}

#[test]
fn a_second_writer_waits_for_the_lock_and_gets_it_when_the_first_lets_go() {
    let (_tmp, dir) = setup();
    let first = FileJournal::open(&dir).unwrap();
    let release = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        drop(first);
    });
    let start = std::time::Instant::now();
    let second = FileJournal::open_waiting(&dir, Duration::from_secs(10)).unwrap();
    assert!(
        start.elapsed() >= Duration::from_millis(150),
        "it did not wait"
    );
    release.join().unwrap();
    drop(second);
}
