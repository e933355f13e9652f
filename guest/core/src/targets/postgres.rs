//! PostgreSQL writes (`postgres.insert`): one row inserted into a table, keyed by the effect
//! id, at tier 2 (looked up by that key).
//!
//! The effect:
//! ```json
//! {"table": "refunds",
//!  "row": {"order_id": "order_881", "amount_cents": 2000},
//!  "premises": {
//!    "refunded_by_others_cents": {"select": "sum", "column": "amount_cents", "where": {"order_id": "order_881"}},
//!    "refunds_by_others": {"select": "count", "where": {"order_id": "order_881"}},
//!    "eligible": {"sql": "SELECT paid FROM orders WHERE id = $1", "params": ["order_881"]}}}
//! ```
//! The table has a text column `interlock_effect_id` under a unique constraint (or primary
//! key): the key of the insert and of the lookup. `premises` (optional) names what the
//! decision rests on: a `count` or a `sum` of the table's rows matching `where` (each
//! column's text equal to the value's, `null` as `IS NULL`), always leaving out this
//! effect's own row (`interlock_effect_id IS DISTINCT FROM` the effect id: the exclusion
//! rule, written here once, so a row a person inserts by hand counts and the effect's own
//! never does); or any query of one column (`sql`, its parameters `$1`... from `params`,
//! where `"$effect_id"` is the effect id), which must leave the effect's row out itself if
//! it reads this table. A query's value is its one column as JSON (`to_jsonb`); no row is
//! `null`; more than one row fails the read.
//!
//! Every step is one transaction of statements the host runs as given (its parameters all
//! text, `$1`, `$2`, ...), answering each statement's rows as lists of text columns, or the
//! error PostgreSQL raised with its SQLSTATE ([`send_reply`]):
//!
//! | step | statements | the answer |
//! |---|---|---|
//! | premises | `SET TRANSACTION READ ONLY`, then one query per premise asked | each query's one value; an error or a malformed answer: `failed` |
//! | send | `SET LOCAL statement_timeout`, the `INSERT ... ON CONFLICT (interlock_effect_id) DO NOTHING`, then the row read back by its key | the row there under the key: `applied` (`inserted` false when it was already there: an earlier send landed); an error as [`send_reply`] says |
//! | lookup | the row by its key | one row: `found`; none: `not-found`; more (the key is not unique) or an error: `failed` |
//!
//! Its tier: no dedupe window (the gate never resends blind), lookup by the key. The
//! `ON CONFLICT` makes a resend that races a landed one insert nothing all the same.
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;

use serde_json::{json, Map, Value};

use super::{captured, cut, Context, Phase, ServiceAnswer, ServiceCall, Target, Tier, Turn};
use crate::canon::canonical;
use crate::schema::{field_err, kind, pointer, Obj};
use crate::types::{GateError, Reply};

/// The column that carries the effect id: the insert's conflict key and the lookup's.
pub const KEY_COLUMN: &str = "interlock_effect_id";

/// The one operation: statements run in order as one transaction.
pub const TRANSACTION: &str = "transaction";

/// SQLSTATE classes that mean PostgreSQL refused the statement for what it is, so the
/// transaction did not commit and nothing was applied (PostgreSQL's Appendix A): feature
/// not supported, data exceptions (a value that does not fit its column), integrity
/// constraints (a NOT NULL, a CHECK, a foreign key), authorization, a missing catalog or
/// schema, syntax and access rules (an unknown table or column, a missing privilege, no
/// unique constraint on the key), WITH CHECK OPTION, and a trigger's own `RAISE`. Every
/// other class (a lost connection, a serialization failure or deadlock, a statement
/// timeout, the server shutting down, an internal error) is `unknown`: the lookup settles
/// it, and a transient failure is then sent again rather than refused for good.
const REFUSED_CLASSES: [&str; 10] = ["0A", "22", "23", "28", "2B", "3D", "3F", "42", "44", "P0"];

pub struct Insert;

impl Target for Insert {
    fn name(&self) -> &'static str {
        "postgres.insert"
    }

    fn service(&self) -> &'static str {
        "postgres"
    }

    fn tier(&self) -> Tier {
        Tier::LOOKUP
    }

    fn premises(&self) -> &'static [&'static str] {
        &["<the effect's premises>"]
    }

    fn premises_of(&self, effect: &Value) -> Vec<String> {
        effect
            .get("premises")
            .and_then(Value::as_object)
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    }

    fn check_effect(&self, effect: &Value) -> Result<(), GateError> {
        let e = Obj::strict(
            effect,
            "/effect",
            "a PostgreSQL insert",
            &["table", "row", "premises"],
        )?;
        check_table(&e.name("table", "the table to insert into (schema.table)")?)?;
        let row = Obj::any(
            e.required("row", "the row's columns")?,
            "/effect/row",
            "a row",
        )?;
        if row.map().is_empty() {
            return Err(field_err("/effect/row", "names no column"));
        }
        for (k, v) in row.map() {
            check_identifier(k, &row.at(k))?;
            if k == KEY_COLUMN {
                return Err(field_err(
                    &row.at(k),
                    "is the gate's: it carries the effect id",
                ));
            }
            let _ = v;
        }
        if let Some(p) = e.get("premises") {
            let p = Obj::any(p, "/effect/premises", "premise queries (name -> query)")?;
            for (name, q) in p.map() {
                check_premise(q, &p.at(name))?;
            }
        }
        Ok(())
    }

    fn turn(&self, phase: Phase, cx: &Context<'_>, answers: &[ServiceAnswer]) -> Turn {
        let table = cx.effect["table"].as_str().unwrap_or_default();
        match (phase, answers.first()) {
            (Phase::Premises, None) => {
                let mut statements = vec![statement("SET TRANSACTION READ ONLY", vec![])];
                for name in cx.names {
                    match cx.effect["premises"].get(name) {
                        Some(q) => statements.push(premise_query(table, q, cx.effect_id)),
                        None => {
                            return Turn::Reply(Reply::Failed(format!(
                                "{} reads no premise {name:?} (the effect names {})",
                                self.name(),
                                self.premises_of(cx.effect).join(", ")
                            )))
                        }
                    }
                }
                Turn::Call(transaction(statements, None))
            }
            (Phase::Premises, Some(a)) => Turn::Reply(premises_reply(self.name(), cx, a)),
            (Phase::Send, None) => Turn::Call(insert(table, cx)),
            (Phase::Send, Some(a)) => Turn::Reply(send_reply(a)),
            (Phase::Lookup, None) => {
                Turn::Call(transaction(vec![by_key(table, cx.effect_id)], None))
            }
            (Phase::Lookup, Some(a)) => Turn::Reply(lookup_reply(a)),
        }
    }
}

/// A name PostgreSQL takes unquoted or quoted: 1 to 63 bytes of letters, digits and `_`,
/// not starting with a digit (so its quoted form is exactly itself).
fn check_identifier(s: &str, at: &str) -> Result<(), GateError> {
    let ok = !s.is_empty()
        && s.len() <= 63
        && !s.as_bytes()[0].is_ascii_digit()
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(field_err(
            at,
            format!("{s:?} is not a column or table name: 1 to 63 letters, digits or _, not starting with a digit"),
        ))
    }
}

fn check_table(t: &str) -> Result<(), GateError> {
    let parts: Vec<&str> = t.split('.').collect();
    if parts.len() > 2 {
        return Err(field_err("/effect/table", "is table or schema.table"));
    }
    parts
        .iter()
        .try_for_each(|p| check_identifier(p, "/effect/table"))
}

fn check_premise(q: &Value, at: &str) -> Result<(), GateError> {
    if q.get("sql").is_some() {
        let o = Obj::strict(q, at, "a premise query", &["sql", "params"])?;
        let sql = o.get("sql").and_then(Value::as_str).map(str::trim);
        if sql.is_none_or(|s| s.is_empty() || s.ends_with(';')) {
            return Err(field_err(
                &o.at("sql"),
                "must be one query's text (one column, no closing ;)",
            ));
        }
        if let Some(ps) = o.get("params") {
            let Value::Array(ps) = ps else {
                return Err(field_err(&o.at("params"), "must be a list of values"));
            };
            for (i, p) in ps.iter().enumerate() {
                if matches!(p, Value::Array(_) | Value::Object(_)) {
                    return Err(field_err(
                        &pointer(&o.at("params"), &i.to_string()),
                        format!("must be text, a number, a bool or null, not {}", kind(p)),
                    ));
                }
            }
        }
        return Ok(());
    }
    let o = Obj::strict(
        q,
        at,
        "a premise over the table",
        &["select", "column", "where"],
    )?;
    match o.name("select", "count or sum")?.as_str() {
        "count" => {
            if o.get("column").is_some() {
                return Err(field_err(&o.at("column"), "a count takes no column"));
            }
        }
        "sum" => check_identifier(&o.name("column", "the column to sum")?, &o.at("column"))?,
        other => {
            return Err(field_err(
                &o.at("select"),
                format!("{other:?} is not count or sum (or give sql)"),
            ))
        }
    }
    if let Some(w) = o.get("where") {
        let at = o.at("where");
        let w = Obj::any(w, &at, "column -> value")?;
        for (k, v) in w.map() {
            check_identifier(k, &w.at(k))?;
            if matches!(v, Value::Array(_) | Value::Object(_)) {
                return Err(field_err(
                    &w.at(k),
                    format!("must be text, a number, a bool or null, not {}", kind(v)),
                ));
            }
        }
    }
    Ok(())
}

/// `"name"` or `"schema"."name"`: identifiers are checked, so quoting is only wrapping.
fn quoted(name: &str) -> String {
    name.split('.')
        .map(|p| format!("\"{p}\""))
        .collect::<Vec<_>>()
        .join(".")
}

/// A value as a text parameter: a string as it is, any other scalar as its JSON text.
fn text(v: &Value) -> Value {
    match v {
        Value::Null => Value::Null,
        Value::String(s) => json!(s),
        other => json!(canonical(other)),
    }
}

fn statement(sql: &str, params: Vec<Value>) -> Value {
    json!({"sql": sql, "params": params})
}

fn transaction(statements: Vec<Value>, timeout_ms: Option<u64>) -> ServiceCall {
    ServiceCall {
        operation: TRANSACTION.into(),
        params: json!({ "statements": statements }),
        options: json!({}),
        timeout_ms,
    }
}

/// One premise's query: one row of one text column, the value's JSON.
fn premise_query(table: &str, q: &Value, effect_id: &str) -> Value {
    if let Some(sql) = q.get("sql").and_then(Value::as_str) {
        let params = q
            .get("params")
            .and_then(Value::as_array)
            .map(|ps| {
                ps.iter()
                    .map(|p| match p.as_str() {
                        Some("$effect_id") => json!(effect_id),
                        _ => text(p),
                    })
                    .collect()
            })
            .unwrap_or_default();
        return statement(
            &format!("SELECT to_jsonb(q.*)::text FROM ({sql}) AS q"),
            params,
        );
    }
    let value = match q["select"].as_str() {
        Some("sum") => format!(
            "coalesce(sum({}), 0)",
            quoted(q["column"].as_str().unwrap_or_default())
        ),
        _ => "count(*)".into(),
    };
    let mut params = vec![json!(effect_id)];
    let mut conds = vec![format!("{} IS DISTINCT FROM $1::text", quoted(KEY_COLUMN))];
    if let Some(w) = q.get("where").and_then(Value::as_object) {
        for (col, v) in w {
            if v.is_null() {
                conds.push(format!("{} IS NULL", quoted(col)));
            } else {
                params.push(text(v));
                conds.push(format!("{}::text = ${}::text", quoted(col), params.len()));
            }
        }
    }
    statement(
        &format!(
            "SELECT to_jsonb(v)::text FROM (SELECT {value} AS v FROM {} WHERE {}) AS q",
            quoted(table),
            conds.join(" AND ")
        ),
        params,
    )
}

/// The row under the effect's key, as JSON text.
fn by_key(table: &str, effect_id: &str) -> Value {
    statement(
        &format!(
            "SELECT to_jsonb(t.*)::text FROM {} AS t WHERE {} = $1::text",
            quoted(table),
            quoted(KEY_COLUMN)
        ),
        vec![json!(effect_id)],
    )
}

/// The send: the statement timeout, the insert (PostgreSQL converts the row's JSON to the
/// columns' types), the row read back by its key.
fn insert(table: &str, cx: &Context<'_>) -> ServiceCall {
    let mut row = cx.effect["row"].as_object().cloned().unwrap_or_default();
    row.insert(KEY_COLUMN.into(), json!(cx.effect_id));
    let cols = row.keys().map(|c| quoted(c)).collect::<Vec<_>>().join(", ");
    let t = quoted(table);
    let mut statements = Vec::new();
    if let Some(ms) = cx.timeout_ms {
        statements.push(statement(
            &format!("SET LOCAL statement_timeout = {ms}"),
            vec![],
        ));
    }
    statements.push(statement(
        &format!(
            "INSERT INTO {t} AS t ({cols}) SELECT {cols} FROM jsonb_populate_record(NULL::{t}, $1::text::jsonb) \
             ON CONFLICT ({}) DO NOTHING RETURNING to_jsonb(t.*)::text",
            quoted(KEY_COLUMN)
        ),
        vec![json!(canonical(&Value::Object(row)))],
    ));
    statements.push(by_key(table, cx.effect_id));
    transaction(statements, cx.timeout_ms)
}

/// Each statement's rows, each row its columns (text or null), from a returned answer.
fn results(v: &Value) -> Option<Vec<Vec<Vec<Option<&str>>>>> {
    v.get("rows")?
        .as_array()?
        .iter()
        .map(|rows| {
            rows.as_array()?
                .iter()
                .map(|row| {
                    row.as_array()?
                        .iter()
                        .map(|c| match c {
                            Value::Null => Some(None),
                            Value::String(s) => Some(Some(s.as_str())),
                            _ => None,
                        })
                        .collect()
                })
                .collect()
        })
        .collect()
}

/// Statement `i`'s rows, each one JSON column: `Err` says what is malformed.
fn json_rows(all: &[Vec<Vec<Option<&str>>>], i: usize) -> Result<Vec<Value>, String> {
    let rows = all
        .get(i)
        .ok_or_else(|| format!("no result for statement {}", i + 1))?;
    rows.iter()
        .map(|r| match r.as_slice() {
            [Some(t)] => {
                serde_json::from_str(t).map_err(|e| format!("a column that is not JSON: {e}"))
            }
            [None] => Ok(Value::Null),
            _ => Err(format!("a row of {} columns where one was asked", r.len())),
        })
        .collect()
}

fn describe(answer: &ServiceAnswer) -> String {
    match answer {
        ServiceAnswer::Returned(v) => format!("a malformed answer: {}", cut(&canonical(v), 200)),
        ServiceAnswer::Raised(e) => format!("{e}"),
        ServiceAnswer::NoAnswer(m) => format!("no answer ({m})"),
    }
}

fn premises_reply(target: &str, cx: &Context<'_>, answer: &ServiceAnswer) -> Reply {
    let ServiceAnswer::Returned(v) = answer else {
        return Reply::Failed(format!("premises: {}", describe(answer)));
    };
    let Some(all) = results(v).filter(|r| r.len() == cx.names.len() + 1) else {
        return Reply::Failed(format!("premises: {}", describe(answer)));
    };
    let mut values = Map::new();
    for (i, name) in cx.names.iter().enumerate() {
        let rows = match json_rows(&all, i + 1) {
            Ok(r) => r,
            Err(m) => return Reply::Failed(format!("premise {name}: {m}")),
        };
        let value = match rows.as_slice() {
            [] => Value::Null,
            // A `sql` premise answers its row as an object of its one column.
            [Value::Object(cols)] if cx.effect["premises"][name].get("sql").is_some() => {
                match cols.values().collect::<Vec<_>>().as_slice() {
                    [v] => (*v).clone(),
                    _ => {
                        return Reply::Failed(format!(
                            "premise {name}: the query selects {} columns; it must select one",
                            cols.len()
                        ))
                    }
                }
            }
            [v] => v.clone(),
            more => {
                return Reply::Failed(format!(
                    "premise {name}: the query answered {} rows; it must answer one",
                    more.len()
                ))
            }
        };
        values.insert(name.clone(), value);
    }
    captured(target, cx.names, &values)
}

/// What the send's transaction answered:
///
/// | answer | reply | why |
/// |---|---|---|
/// | the row read back under the key | `applied` (`inserted`: whether this insert wrote it) | the row is there: this send, or an earlier one that landed |
/// | no row under the key after the insert, or a malformed answer | `unknown` | nothing can be read from it (a trigger or a policy hid the row) |
/// | an error in a class of [`REFUSED_CLASSES`] | `rejected` | PostgreSQL refused the statement; the transaction rolled back |
/// | any other error (connection, serialization, timeout, shutdown, internal) | `unknown` | the lookup settles it |
/// | no answer (a lost connection, an unacknowledged commit, the host's timeout) | `unknown` | the commit may have happened |
pub fn send_reply(answer: &ServiceAnswer) -> Reply {
    match answer {
        ServiceAnswer::Returned(v) => {
            let read = results(v).and_then(|all| {
                let n = all.len();
                // The timeout's statement is first when there is one; the insert and the
                // read-back are always the last two.
                (n >= 2).then(|| (json_rows(&all, n - 2), json_rows(&all, n - 1)))
            });
            match read {
                Some((Ok(inserted), Ok(rows))) if rows.len() == 1 && inserted.len() <= 1 => {
                    Reply::Applied(canonical(&json!({"row": rows[0], "inserted": inserted.len() == 1})))
                }
                Some((Ok(_), Ok(rows))) if rows.is_empty() => Reply::Unknown(
                    "the row is not under its key after the insert (a trigger or a row policy hides it)".into(),
                ),
                _ => Reply::Unknown(format!("insert: {}", describe(answer))),
            }
        }
        ServiceAnswer::Raised(e) => {
            let class = e.code.as_deref().and_then(|c| c.get(..2));
            if class.is_some_and(|c| REFUSED_CLASSES.contains(&c)) {
                Reply::Rejected(format!("insert: {e}"))
            } else {
                Reply::Unknown(format!("insert: {e}"))
            }
        }
        ServiceAnswer::NoAnswer(m) => Reply::Unknown(format!("insert: no answer ({m})")),
    }
}

fn lookup_reply(answer: &ServiceAnswer) -> Reply {
    let ServiceAnswer::Returned(v) = answer else {
        return Reply::Failed(format!("lookup: {}", describe(answer)));
    };
    match results(v).map(|all| json_rows(&all, 0)) {
        Some(Ok(rows)) => match rows.as_slice() {
            [] => Reply::NotFound,
            [row] => Reply::Found(canonical(&json!({"row": row}))),
            more => Reply::Failed(format!(
                "lookup: {} rows carry the effect id ({KEY_COLUMN} is not unique): nothing can be concluded",
                more.len()
            )),
        },
        Some(Err(m)) => Reply::Failed(format!("lookup: {m}")),
        None => Reply::Failed(format!("lookup: {}", describe(answer))),
    }
}

#[cfg(test)]
mod tests;
