//! The fault table keeps its published numbers, and keeps its teeth: the baselines must
//! still fail where they are known to fail, cell by cell.

use std::sync::OnceLock;

use interlock_fault_table::{compute, Approach, Table, FAULTS, TIERS};

/// The table, played once for all the tests of this binary.
fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| compute().expect("the fault table plays"))
}

/// Tier 1 as published (FAULTS.md), refunded cents F1..F10 (F10 from `F10-t1+lookup`).
fn published(approach: Approach) -> [u64; 10] {
    match approach {
        Approach::PlainRetry => [2000, 4000, 4000, 5000, 5000, 2000, 2000, 4000, 2000, 4000],
        Approach::RequestIds | Approach::DurableWorkflows => {
            [2000, 2000, 2000, 2000, 2000, 2000, 2000, 4000, 2000, 4000]
        }
        Approach::Interlock => [2000, 2000, 2000, 2000, 2000, 0, 0, 2000, 0, 2000],
    }
}

#[test]
fn interlock_is_never_wrong_at_any_tier_and_its_runner_never_fails() {
    let t = table();
    for tier in TIERS {
        let cells = t.counted(tier, Approach::Interlock);
        assert!(!cells.is_empty(), "no Interlock cells at tier {tier}");
        for c in cells {
            assert_eq!(c.wrong, Some(false), "Interlock is wrong on {c:?}");
        }
    }
    for c in t.cells.iter().filter(|c| c.approach == Approach::Interlock) {
        assert!(
            c.runner_failures.is_empty(),
            "the conformance runner failed on {:?}: {:?}",
            c.vector_id,
            c.runner_failures
        );
        if c.vector_id.is_some() {
            assert_eq!(c.wrong, Some(false), "Interlock is wrong on {c:?}");
        }
    }
}

#[test]
fn tier_one_wrong_counts_are_the_published_ones() {
    let t = table();
    let got: Vec<usize> = Approach::ALL
        .iter()
        .map(|a| t.wrong_count("1", *a))
        .collect();
    assert_eq!(
        got,
        vec![9, 5, 5, 0],
        "plain / request IDs / durable / Interlock"
    );
}

#[test]
fn every_approach_reproduces_its_published_cells_at_tier_one() {
    let t = table();
    for approach in Approach::ALL {
        let cells = t.counted("1", approach);
        let got: Vec<(String, Option<u64>)> = cells
            .iter()
            .map(|c| (c.fault.clone(), c.refunded_cents))
            .collect();
        let want: Vec<(String, Option<u64>)> = FAULTS
            .iter()
            .zip(published(approach))
            .map(|(f, cents)| (f.to_string(), Some(cents)))
            .collect();
        assert_eq!(got, want, "{} at tier 1", approach.label());
        for c in cells {
            let right = c.right_cents.expect("a played cell has a right amount");
            assert_eq!(
                c.wrong,
                Some(c.refunded_cents != Some(right)),
                "{} {}: the wrong flag disagrees with the amounts",
                approach.label(),
                c.fault
            );
        }
    }
}

#[test]
fn every_fault_has_a_cell_for_every_approach_at_tier_one() {
    let t = table();
    for approach in Approach::ALL {
        for fault in FAULTS {
            let n = t
                .counted("1", approach)
                .iter()
                .filter(|c| c.fault == fault && c.refunded_cents.is_some())
                .count();
            assert_eq!(
                n,
                1,
                "{} has {n} counted tier-1 cells for {fault}",
                approach.label()
            );
        }
    }
    let headline_f10 = t
        .cell("F10-t1+lookup", Approach::Interlock)
        .expect("F10's headline row");
    assert!(headline_f10.counted && headline_f10.tier == "1");
    assert!(!t.cell("F10-t1", Approach::Interlock).unwrap().counted);
}

#[test]
fn the_vectors_agree_with_the_right_amounts() {
    assert_eq!(table().problems, Vec::<String>::new());
}
