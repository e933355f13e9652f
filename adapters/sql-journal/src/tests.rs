use super::*;

#[test]
fn sqlite_urls_name_an_absolute_file() {
    match parse_url("sqlite:///var/lib/interlock/journal.db").unwrap() {
        Location::Sqlite(p) => assert_eq!(p, PathBuf::from("/var/lib/interlock/journal.db")),
        other => panic!("{other:?}"),
    }
    // Taken literally: a space or a percent sign is part of the path.
    match parse_url("sqlite:///tmp/my journal%20.db").unwrap() {
        Location::Sqlite(p) => assert_eq!(p, PathBuf::from("/tmp/my journal%20.db")),
        other => panic!("{other:?}"),
    }
    for (url, why) in [
        ("sqlite://relative.db", "absolute path"),
        ("sqlite:relative.db", "sqlite:// followed by"),
        ("sqlite:///", "absolute path"),
        ("sqlite://", "absolute path"),
    ] {
        match parse_url(url) {
            Err(Error::BadUrl { url: u, why: w }) => {
                assert_eq!(u, url);
                assert!(w.contains(why), "{url}: {w}");
            }
            other => panic!("{url}: {other:?}"),
        }
    }
}

#[test]
fn postgres_urls_and_key_value_strings() {
    for url in [
        "postgres://app@db.example:5433/journal?connect_timeout=3",
        "postgresql://app@%2Ftmp%2Fpg:55432/journal",
        "host=/tmp/pg port=55432 user=app dbname=journal",
    ] {
        match parse_url(url).unwrap() {
            Location::Postgres(c) => {
                assert_eq!(c.get_user(), Some("app"), "{url}");
                assert_eq!(c.get_dbname(), Some("journal"), "{url}");
            }
            other => panic!("{url}: {other:?}"),
        }
    }
    match parse_url("postgresql://app@%2Ftmp%2Fpg:55432/journal").unwrap() {
        Location::Postgres(c) => assert_eq!(
            c.get_hosts(),
            [postgres::config::Host::Unix("/tmp/pg".into())]
        ),
        other => panic!("{other:?}"),
    }
    let e = parse_url("postgres://app@host:notaport/db").unwrap_err();
    assert!(matches!(e, Error::BadUrl { .. }), "{e:?}");
    assert!(
        e.to_string().contains("not a PostgreSQL connection string"),
        "{e}"
    );
}

#[test]
fn other_urls_say_what_is_expected() {
    for url in ["", "/tmp/journal.db", "mysql://x/y", "file:///tmp/j"] {
        let e = parse_url(url).unwrap_err();
        assert!(
            e.to_string()
                .contains("expected sqlite:///abs/path.db, postgres://"),
            "{url}: {e}"
        );
    }
}

#[test]
fn the_schema_differs_between_dialects_only_in_the_position_and_ordinal_keys() {
    let (lite, pg) = (
        interlock_journal::Dialect::Sqlite.schema(),
        interlock_journal::Dialect::Postgres.schema(),
    );
    assert_eq!(lite.len(), 4, "{lite:#?}");
    assert_eq!(pg.len(), 4);
    assert!(lite[0].contains("CREATE TABLE IF NOT EXISTS interlock_meta"));
    let (lite, pg) = (lite.join("\n"), pg.join("\n"));
    let differ: Vec<(&str, &str)> = lite
        .lines()
        .zip(pg.lines())
        .filter(|(a, b)| a != b)
        .collect();
    assert_eq!(
        differ,
        [
            (
                "    position INTEGER PRIMARY KEY,",
                "    position BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
            ),
            (
                "    ordinal INTEGER NOT NULL UNIQUE,",
                "    ordinal BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,"
            )
        ]
    );
}
