//! A git repository, for coding agents working in parallel (`git.commit`, `git.merge`,
//! `git.push`), at tier 2: each commit the gate makes carries the effect id in a trailer
//! (`Interlock-Effect: <id>`), and the lookup finds it in the branch's log.
//!
//! The host runs the git binary in its repository, as told: `git <args>` with the given
//! standard input and environment (operation `run`), and answers the exit status, standard
//! output and standard error; or `no-answer` when git could not be started or did not end
//! within `timeout_ms` (then the host kills it).
//!
//! The effects:
//! ```json
//! {"branch": "main", "files": {"src/lib.rs": "new text", "old.txt": null}, "message": "...",
//!  "base": "<the commit the agent read>", "author": {"name": "...", "email": "..."},
//!  "reads": ["symbol:src/parse.rs#parse"]}                                   (git.commit)
//! {"branch": "main", "from": "agent-a", "message": "...", "reads": [...]}   (git.merge)
//! {"remote": "origin", "branch": "main", "commit": "<sha>", "reads": [...]} (git.push)
//! ```
//! A commit writes whole files (text; `null` deletes one) on top of the branch as it is at
//! the send. A merge merges `from` into `branch` (no conflict, or it is refused, nothing
//! written). A push sends `commit` to `remote`'s `branch` (a fast-forward, or the remote
//! refuses it).
//!
//! The premises, by name:
//!
//! | premise | its value |
//! |---|---|
//! | `file:<path>` | the file's blob id on the branch, `null` when it has none |
//! | `symbol:<path>#<name>` | the text of the declaration of `name` in the file ([`symbol`]), `null` when there is none |
//! | `ref:<branch>` | the commit the branch is at, `null` when there is no such branch |
//! | `remote:<remote>/<branch>` | the commit the remote's branch is at (`ls-remote`), `null` when there is none |
//!
//! A commit rests on `file:` of every file it writes, a merge on `ref:<from>` (the commit
//! that was reviewed), a push on `remote:<remote>/<branch>`, each with its `reads` besides.
//! The read a proposal is made from reads files as of `base` when the commit gives it (the
//! commit the agent read them at): a file someone changed since is then refused at the
//! send, saying what it was and what it is now, instead of overwritten. A re-check reads
//! the branch as it is.
//!
//! | step | git | the answer |
//! |---|---|---|
//! | premises | `ls-tree` of the files, `cat-file blob` of each file a symbol is read from, `for-each-ref`, `ls-remote` | the values above; a failure: `failed` |
//! | send, commit | `fast-import` of one commit on the branch's tip, the trailer in its message | [`fast_import_reply`] |
//! | send, merge | `rev-parse` of both tips, `merge-tree --write-tree`, then `fast-import` of the merge commit on the tip it merged | a conflict: `rejected`, nothing written; then [`fast_import_reply`] |
//! | send, push | `push --porcelain remote commit:refs/heads/branch` | pushed: `applied`; the remote refused the update (`!` in the porcelain): `rejected`; anything else (a lost connection, a timeout): `unknown` |
//! | lookup, commit and merge | `log -F --grep=<id>` of the branch | a commit whose message has the line `Interlock-Effect: <id>`: `found`; none: `not-found`; a failure: `failed` |
//! | lookup, push | `ls-remote`, then `fetch` of the remote branch and `merge-base --is-ancestor` | the commit in the remote branch: `found`; not: `not-found`; a failure: `failed` |
//!
//! The tip a commit is made on, and the tip a merge was computed on, is compared and set in
//! one step by `fast-import` (it refuses a ref update that is not a fast-forward): a
//! branch that moved between the read and the write is never overwritten.
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;

use serde_json::{json, Map, Value};

use super::{captured, cut, Context, Phase, ServiceAnswer, ServiceCall, Target, Tier, Turn};
use crate::canon::canonical;
use crate::schema::{field_err, kind, pointer, Obj};
use crate::types::{GateError, Reply};

/// The trailer that carries the effect id in a commit message.
pub const TRAILER: &str = "Interlock-Effect";

/// The one operation: run git.
pub const RUN: &str = "run";

/// Who commits when the effect names no author.
const DEFAULT_AUTHOR: (&str, &str) = ("Interlock agent", "agent@interlock.invalid");

/// What a git target's effect does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Commit,
    Merge,
    Push,
}

/// The git targets: one each for a commit, a merge and a push, sharing the repository's
/// premises and its lookups.
pub struct Git(pub Kind);

pub const COMMIT: Git = Git(Kind::Commit);
pub const MERGE: Git = Git(Kind::Merge);
pub const PUSH: Git = Git(Kind::Push);

const PATTERNS: &[&str] = &[
    "file:<path>",
    "symbol:<path>#<name>",
    "ref:<branch>",
    "remote:<remote>/<branch>",
];

impl Target for Git {
    fn name(&self) -> &'static str {
        match self.0 {
            Kind::Commit => "git.commit",
            Kind::Merge => "git.merge",
            Kind::Push => "git.push",
        }
    }

    fn service(&self) -> &'static str {
        "git"
    }

    fn tier(&self) -> Tier {
        Tier::LOOKUP
    }

    fn premises(&self) -> &'static [&'static str] {
        PATTERNS
    }

    /// A commit rests on the files it writes, a merge on the branch it merges, a push on
    /// the remote's branch; each on its `reads` besides.
    fn premises_of(&self, effect: &Value) -> Vec<String> {
        let text = |k: &str| effect[k].as_str().unwrap_or_default();
        let own = match self.0 {
            Kind::Commit => effect["files"]
                .as_object()
                .into_iter()
                .flat_map(|m| m.keys())
                .map(|p| format!("file:{p}"))
                .collect(),
            Kind::Merge => vec![format!("ref:{}", text("from"))],
            Kind::Push => vec![format!("remote:{}/{}", text("remote"), text("branch"))],
        };
        with_reads(own, effect)
    }

    fn check_effect(&self, effect: &Value) -> Result<(), GateError> {
        let fields: &[&str] = match self.0 {
            Kind::Commit => &["branch", "files", "message", "base", "author", "reads"],
            Kind::Merge => &["branch", "from", "message", "author", "reads"],
            Kind::Push => &["remote", "branch", "commit", "reads"],
        };
        let what = format!("a {}", self.name().replace('.', " "));
        let e = Obj::strict(effect, "/effect", &what, fields)?;
        let branch = e.name("branch", "the branch")?;
        check_branch(&branch, "/effect/branch")?;
        match self.0 {
            Kind::Commit => {
                check_files(&e)?;
                check_message(&e, true)?;
                if let Some(b) = e.get("base") {
                    check_oid(b, "/effect/base")?;
                }
                check_author(&e)?;
            }
            Kind::Merge => {
                let from = e.name("from", "the branch to merge")?;
                check_branch(&from, "/effect/from")?;
                if from == branch {
                    return Err(field_err("/effect/from", "is the branch merged into"));
                }
                check_message(&e, false)?;
                check_author(&e)?;
            }
            Kind::Push => {
                check_remote(&e.name("remote", "the remote's name")?, "/effect/remote")?;
                check_oid(
                    e.required("commit", "the commit to push")?,
                    "/effect/commit",
                )?;
            }
        }
        check_reads(&e)
    }

    fn turn(&self, phase: Phase, cx: &Context<'_>, answers: &[ServiceAnswer]) -> Turn {
        let (remote, branch) = remote_branch(cx.effect);
        let commit = cx.effect["commit"].as_str().unwrap_or_default();
        match (phase, self.0) {
            (Phase::Premises, _) => read_premises(self.name(), cx, answers),
            (Phase::Send, Kind::Commit) => match answers.first() {
                None => Turn::Call(commit_import(cx, cx.timeout_ms)),
                Some(a) => Turn::Reply(fast_import_reply(a, cx.effect)),
            },
            (Phase::Send, Kind::Merge) => merge_turn(cx, answers),
            (Phase::Send, Kind::Push) => match answers.first() {
                None => Turn::Call(git(
                    &[
                        "push",
                        "--porcelain",
                        remote,
                        &format!("{commit}:refs/heads/{branch}"),
                    ],
                    None,
                    cx.timeout_ms,
                )),
                Some(a) => Turn::Reply(push_reply(a, cx.effect)),
            },
            (Phase::Lookup, Kind::Push) => push_lookup(remote, branch, commit, answers),
            (Phase::Lookup, _) => log_lookup(cx, answers),
        }
    }
}

// ------------------------------------------------------------------ checks

fn bad(at: &str, what: &str, s: &str) -> GateError {
    field_err(at, format!("{:?} is not {what}", cut(s, 80)))
}

/// A branch name as `git check-ref-format --branch` takes it (the common subset): no
/// control characters, space, `~^:?*[\`, `..`, `@{` or `//`; no part starting with `.` or
/// ending with `.lock`; not starting with `-` or `/`, not ending with `/` or `.`.
fn check_branch(b: &str, at: &str) -> Result<(), GateError> {
    let ok = !b.is_empty()
        && b.len() <= 200
        && !b.starts_with(['-', '/'])
        && !b.ends_with(['/', '.'])
        && !b.contains("..")
        && !b.contains("@{")
        && !b.contains("//")
        && b != "@"
        && !b.chars().any(|c| c.is_control() || " ~^:?*[\\".contains(c))
        && b.split('/')
            .all(|p| !p.starts_with('.') && !p.ends_with(".lock"));
    ok.then_some(()).ok_or_else(|| bad(at, "a branch name", b))
}

/// A path inside the repository: relative, no empty, `.` or `..` part, no `.git`, no line
/// breaks, not starting with `"` (fast-import would read it as quoted).
fn check_path(p: &str, at: &str) -> Result<(), GateError> {
    let ok = !p.is_empty()
        && p.len() <= 4096
        && !p.starts_with('"')
        && !p.chars().any(|c| c == '\0' || c == '\n' || c == '\r')
        && p.split('/').all(|part| {
            !part.is_empty() && part != "." && part != ".." && !part.eq_ignore_ascii_case(".git")
        });
    ok.then_some(())
        .ok_or_else(|| bad(at, "a path inside the repository", p))
}

/// A commit's files: path -> the text (or null, to delete it).
fn check_files(e: &Obj<'_, '_>) -> Result<(), GateError> {
    let files = Obj::any(
        e.required("files", "path -> text")?,
        "/effect/files",
        "path -> text",
    )?;
    if files.map().is_empty() {
        return Err(field_err("/effect/files", "names no file"));
    }
    for (path, text) in files.map() {
        check_path(path, &files.at(path))?;
        if !(text.is_string() || text.is_null()) {
            return Err(field_err(
                &files.at(path),
                format!(
                    "must be the file's text, or null to delete it, not {}",
                    kind(text)
                ),
            ));
        }
    }
    Ok(())
}

fn check_remote(r: &str, at: &str) -> Result<(), GateError> {
    let ok = !r.is_empty()
        && r.len() <= 100
        && !r.starts_with('-')
        && r.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    ok.then_some(())
        .ok_or_else(|| bad(at, "a remote's name", r))
}

fn is_oid(s: &str) -> bool {
    (s.len() == 40 || s.len() == 64)
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn check_oid(v: &Value, at: &str) -> Result<(), GateError> {
    match v.as_str() {
        Some(s) if is_oid(s) => Ok(()),
        _ => Err(field_err(
            at,
            "must be a full commit id (40 or 64 lowercase hex digits)",
        )),
    }
}

fn check_message(e: &Obj<'_, '_>, required: bool) -> Result<(), GateError> {
    match e.get("message") {
        None if !required => Ok(()),
        Some(Value::String(m)) if !m.trim().is_empty() => Ok(()),
        _ => Err(field_err(
            "/effect/message",
            "must be the commit message's text",
        )),
    }
}

fn check_author(e: &Obj<'_, '_>) -> Result<(), GateError> {
    let Some(a) = e.get("author") else {
        return Ok(());
    };
    let a = Obj::strict(a, "/effect/author", "an author", &["name", "email"])?;
    for k in ["name", "email"] {
        let s = a.name(k, "")?;
        if s.contains(['<', '>', '\n']) {
            return Err(field_err(&a.at(k), "must not contain <, > or a line break"));
        }
    }
    Ok(())
}

fn check_reads(e: &Obj<'_, '_>) -> Result<(), GateError> {
    let Some(r) = e.get("reads") else {
        return Ok(());
    };
    let Value::Array(list) = r else {
        return Err(field_err(
            "/effect/reads",
            "must be a list of premise names",
        ));
    };
    for (i, n) in list.iter().enumerate() {
        let at = pointer("/effect/reads", &i.to_string());
        let Some(n) = n.as_str() else {
            return Err(field_err(&at, "must be a premise name"));
        };
        Premise::parse(n).map_err(|m| field_err(&at, m))?;
    }
    Ok(())
}

fn with_reads(mut own: Vec<String>, effect: &Value) -> Vec<String> {
    for r in effect["reads"].as_array().into_iter().flatten() {
        if let Some(r) = r.as_str() {
            if !own.iter().any(|o| o == r) {
                own.push(r.into());
            }
        }
    }
    own
}

fn remote_branch(effect: &Value) -> (&str, &str) {
    (
        effect["remote"].as_str().unwrap_or_default(),
        effect["branch"].as_str().unwrap_or_default(),
    )
}

// ------------------------------------------------------------------ premises

/// One premise, parsed from its name.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Premise {
    File(String),
    Symbol(String, String),
    Ref(String),
    Remote(String, String),
}

impl Premise {
    fn parse(name: &str) -> Result<Premise, String> {
        let (kind, rest) = name.split_once(':').unwrap_or((name, ""));
        let p = match kind {
            "file" => Premise::File(rest.into()),
            "symbol" => match rest.rsplit_once('#') {
                Some((path, sym)) => Premise::Symbol(path.into(), sym.into()),
                None => {
                    return Err(format!(
                        "{name:?}: a symbol premise is symbol:<path>#<name>"
                    ))
                }
            },
            "ref" => Premise::Ref(rest.into()),
            "remote" => match rest.split_once('/') {
                Some((r, b)) => Premise::Remote(r.into(), b.into()),
                None => {
                    return Err(format!(
                        "{name:?}: a remote premise is remote:<remote>/<branch>"
                    ))
                }
            },
            _ => {
                return Err(format!(
                    "{name:?} is not a premise git reads: {}",
                    PATTERNS.join(", ")
                ))
            }
        };
        let checked = match &p {
            Premise::File(path) => check_path(path, ""),
            Premise::Symbol(path, sym) => check_path(path, "").and_then(|()| {
                let ok = !sym.is_empty()
                    && sym.len() <= 200
                    && !sym.as_bytes()[0].is_ascii_digit()
                    && sym
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'$');
                ok.then_some(())
                    .ok_or_else(|| bad("", "a symbol's name", sym))
            }),
            Premise::Ref(b) => check_branch(b, ""),
            Premise::Remote(r, b) => check_remote(r, "").and_then(|()| check_branch(b, "")),
        };
        checked.map_err(|e| match e {
            GateError::InvalidField { problem, .. } => format!("{name:?}: {problem}"),
            other => format!("{other:?}"),
        })?;
        Ok(p)
    }
}

/// `git <args>` with LC_ALL=C (so its words are the ones read here).
fn git(args: &[&str], stdin: Option<String>, timeout_ms: Option<u64>) -> ServiceCall {
    let mut params = json!({"args": args, "env": {"LC_ALL": "C"}});
    if let Some(s) = stdin {
        params["stdin"] = json!(s);
    }
    ServiceCall {
        operation: RUN.into(),
        params,
        options: json!({}),
        timeout_ms,
    }
}

/// A finished git run: (status, stdout, stderr).
fn ran(answer: &ServiceAnswer) -> Result<(i64, &str, &str), String> {
    match answer {
        ServiceAnswer::Returned(v) => match (
            v["status"].as_i64(),
            v["stdout"].as_str(),
            v["stderr"].as_str(),
        ) {
            (Some(s), Some(o), Some(e)) => Ok((s, o, e)),
            _ => Err(format!("a malformed answer: {}", cut(&canonical(v), 200))),
        },
        ServiceAnswer::Raised(e) => Err(format!("{e}")),
        ServiceAnswer::NoAnswer(m) => Err(format!("no answer ({m})")),
    }
}

/// `ran` that must have exited 0 (or one of `ok`): its status and stdout.
fn ok_run<'a>(answer: &'a ServiceAnswer, what: &str, ok: &[i64]) -> Result<(i64, &'a str), String> {
    let (status, out, err) = ran(answer).map_err(|m| format!("{what}: {m}"))?;
    if status == 0 || ok.contains(&status) {
        Ok((status, out))
    } else {
        Err(format!(
            "{what}: git exited {status}: {}",
            cut(err.trim(), 300)
        ))
    }
}

fn read_premises(target: &str, cx: &Context<'_>, answers: &[ServiceAnswer]) -> Turn {
    match premise_values(cx, answers) {
        Ok(Ok(values)) => Turn::Reply(captured(target, cx.names, &values)),
        Ok(Err(call)) => Turn::Call(call),
        Err(m) => Turn::Reply(Reply::Failed(m)),
    }
}

/// The values of the premises asked for, or the next call to make; `Err`: the read failed.
fn premise_values(
    cx: &Context<'_>,
    answers: &[ServiceAnswer],
) -> Result<Result<Map<String, Value>, ServiceCall>, String> {
    let mut asked = Vec::new();
    for n in cx.names {
        asked.push((n, Premise::parse(n)?));
    }
    let branch = cx.effect["branch"].as_str().unwrap_or_default();
    let rev = match cx.effect.get("base").and_then(Value::as_str) {
        Some(base) if cx.decision => String::from(base),
        _ => format!("refs/heads/{branch}"),
    };
    let mut paths: Vec<&str> = Vec::new();
    let mut symbol_paths: Vec<&str> = Vec::new();
    let mut refs: Vec<&str> = Vec::new();
    let mut remotes: Vec<(&str, &str)> = Vec::new();
    for (_, p) in &asked {
        match p {
            Premise::File(path) => paths.push(path),
            Premise::Symbol(path, _) => {
                paths.push(path);
                symbol_paths.push(path);
            }
            Premise::Ref(b) => refs.push(b),
            Premise::Remote(r, b) => remotes.push((r, b)),
        }
    }
    for v in [&mut paths, &mut symbol_paths, &mut refs] {
        v.sort_unstable();
        v.dedup();
    }
    remotes.sort_unstable();
    remotes.dedup();

    let mut next = answers.iter();
    // 1. The files' blob ids at the revision.
    let mut blobs: Map<String, Value> = Map::new();
    if !paths.is_empty() {
        let Some(a) = next.next() else {
            let mut args = vec!["--literal-pathspecs", "ls-tree", "-z", rev.as_str(), "--"];
            args.extend(paths.iter().copied());
            return Ok(Err(git(&args, None, None)));
        };
        let (_, out) = ok_run(a, "ls-tree", &[])?;
        for entry in out.split('\0').filter(|e| !e.is_empty()) {
            let (meta, path) = entry.split_once('\t').ok_or_else(|| {
                format!(
                    "ls-tree: an entry that is not <mode> <type> <id>\\t<path>: {}",
                    cut(entry, 100)
                )
            })?;
            let oid = meta.split(' ').nth(2).filter(|o| is_oid(o));
            let Some(oid) = oid else {
                return Err(format!(
                    "ls-tree: an entry without an object id: {}",
                    cut(entry, 100)
                ));
            };
            blobs.insert(path.into(), json!(oid));
        }
    }
    // 2. The text of each file a symbol is read from.
    let mut texts: Map<String, Value> = Map::new();
    for path in &symbol_paths {
        let Some(oid) = blobs.get(*path).and_then(Value::as_str) else {
            continue;
        };
        let Some(a) = next.next() else {
            return Ok(Err(git(&["cat-file", "blob", oid], None, None)));
        };
        let (_, out) = ok_run(a, "cat-file", &[])?;
        texts.insert(String::from(*path), json!(out));
    }
    // 3. The branches' commits.
    let mut heads: Map<String, Value> = Map::new();
    if !refs.is_empty() {
        let Some(a) = next.next() else {
            let full: Vec<String> = refs.iter().map(|b| format!("refs/heads/{b}")).collect();
            let mut args = vec!["for-each-ref", "--format=%(refname)%00%(objectname)"];
            args.extend(full.iter().map(String::as_str));
            return Ok(Err(git(&args, None, None)));
        };
        let (_, out) = ok_run(a, "for-each-ref", &[])?;
        for line in out.lines() {
            if let Some((name, oid)) = line.split_once('\0') {
                if let Some(b) = name.strip_prefix("refs/heads/") {
                    heads.insert(b.into(), json!(oid));
                }
            }
        }
    }
    // 4. The remotes' branches.
    let mut remote_heads: Map<String, Value> = Map::new();
    for (r, b) in &remotes {
        let Some(a) = next.next() else {
            return Ok(Err(git(
                &["ls-remote", r, &format!("refs/heads/{b}")],
                None,
                None,
            )));
        };
        let (_, out) = ok_run(a, "ls-remote", &[])?;
        if let Some(oid) = ls_remote_tip(out, b) {
            remote_heads.insert(format!("{r}/{b}"), json!(oid));
        }
    }
    let mut values = Map::new();
    for (name, p) in asked {
        let v = match p {
            Premise::File(path) => blobs.get(&path).cloned(),
            Premise::Symbol(path, sym) => texts
                .get(&path)
                .and_then(Value::as_str)
                .and_then(|t| symbol(t, &sym))
                .map(|s| json!(s)),
            Premise::Ref(b) => heads.get(&b).cloned(),
            Premise::Remote(r, b) => remote_heads.get(&format!("{r}/{b}")).cloned(),
        };
        values.insert(name.clone(), v.unwrap_or(Value::Null));
    }
    Ok(Ok(values))
}

fn ls_remote_tip<'a>(out: &'a str, branch: &str) -> Option<&'a str> {
    let want = format!("refs/heads/{branch}");
    out.lines()
        .filter_map(|l| l.split_once('\t'))
        .find(|(_, r)| *r == want)
        .map(|(oid, _)| oid)
}

/// The text of the declaration of `name` in `text`: from the first line where a
/// declaration keyword (`fn`, `def`, `class`, `struct`, `enum`, `trait`, `impl`, `type`,
/// `interface`, `function`, `const`, `let`, `var`, `static`, `mod`) is followed by the name,
/// to the end of its block: for a line ending in `:` (Python), the lines indented deeper
/// than it (blank ones within); otherwise to the line where its braces close, or the
/// line that ends it with `;` before any brace opens. `None` when there is no declaration.
pub fn symbol(text: &str, name: &str) -> Option<String> {
    const KEYWORDS: [&str; 15] = [
        "fn",
        "def",
        "class",
        "struct",
        "enum",
        "trait",
        "impl",
        "type",
        "interface",
        "function",
        "const",
        "let",
        "var",
        "static",
        "mod",
    ];
    let lines: Vec<&str> = text.lines().collect();
    let declares = |line: &str| {
        let words: Vec<&str> = line
            .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$'))
            .filter(|w| !w.is_empty())
            .collect();
        words
            .windows(2)
            .any(|w| KEYWORDS.contains(&w[0]) && w[1] == name)
    };
    let start = lines.iter().position(|l| declares(l))?;
    let indent = |l: &str| l.len() - l.trim_start().len();
    let end = if lines[start].trim_end().ends_with(':') {
        let mut end = start;
        for (i, l) in lines.iter().enumerate().skip(start + 1) {
            if l.trim().is_empty() {
                continue;
            }
            if indent(l) <= indent(lines[start]) {
                break;
            }
            end = i;
        }
        end
    } else {
        let mut depth: i64 = 0;
        let mut opened = false;
        let mut end = lines.len() - 1;
        for (i, l) in lines.iter().enumerate().skip(start) {
            for c in l.chars() {
                match c {
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            if (opened && depth <= 0) || (!opened && l.trim_end().ends_with(';')) {
                end = i;
                break;
            }
        }
        end
    };
    Some(lines[start..=end].join("\n"))
}

// ------------------------------------------------------------------ the send

/// The message with the trailer `Interlock-Effect: <id>` as its last line: in the message's
/// trailer block when its last paragraph is one (every line `Token: value`), else in a new
/// paragraph.
pub fn with_trailer(message: &str, effect_id: &str) -> String {
    let body = message.trim_end();
    let last = body.rsplit("\n\n").next().unwrap_or_default();
    let is_trailer = |l: &str| {
        l.split_once(": ").is_some_and(|(k, v)| {
            !k.is_empty()
                && !v.is_empty()
                && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
    };
    let in_block = body.contains("\n\n") && last.lines().all(is_trailer);
    let sep = if in_block { "\n" } else { "\n\n" };
    format!("{body}{sep}{TRAILER}: {effect_id}\n")
}

fn author_line(effect: &Value) -> String {
    let a = &effect["author"];
    let name = a["name"].as_str().unwrap_or(DEFAULT_AUTHOR.0);
    let email = a["email"].as_str().unwrap_or(DEFAULT_AUTHOR.1);
    format!("{name} <{email}> now")
}

/// `data <n>` and the bytes: fast-import counts bytes.
fn data(s: &str) -> String {
    format!("data {}\n{s}\n", s.len())
}

/// One commit on `branch`, on `from`, by fast-import, its id printed (`get-mark`).
fn import(
    effect: &Value,
    message: &str,
    from: &str,
    body: &str,
    timeout_ms: Option<u64>,
) -> ServiceCall {
    let branch = effect["branch"].as_str().unwrap_or_default();
    let who = author_line(effect);
    let stream = format!(
        "commit refs/heads/{branch}\nmark :1\nauthor {who}\ncommitter {who}\n{}from {from}\n{body}\nget-mark :1\ndone\n",
        data(message)
    );
    git(
        &["fast-import", "--quiet", "--date-format=now", "--done"],
        Some(stream),
        timeout_ms,
    )
}

fn commit_import(cx: &Context<'_>, timeout_ms: Option<u64>) -> ServiceCall {
    let mut body = String::new();
    for (path, text) in cx.effect["files"].as_object().into_iter().flatten() {
        match text.as_str() {
            Some(t) => body.push_str(&format!("M 100644 inline {path}\n{}", data(t))),
            None => body.push_str(&format!("D {path}\n")),
        }
    }
    let branch = cx.effect["branch"].as_str().unwrap_or_default();
    let message = with_trailer(
        cx.effect["message"].as_str().unwrap_or_default(),
        cx.effect_id,
    );
    import(
        cx.effect,
        &message,
        &format!("refs/heads/{branch}^0"),
        &body,
        timeout_ms,
    )
}

/// What fast-import's run of a commit answered:
///
/// | answer | reply | why |
/// |---|---|---|
/// | exit 0, a commit id printed | `applied` (`{commit, branch}`) | the branch points at the new commit |
/// | exit 1, `Not updating refs/heads/<branch>` | `unknown` | the branch moved between the read and the write: nothing was written, and recovery looks up, re-checks the premises on the branch as it now is, and sends again |
/// | `Invalid ref name or SHA1 expression` (the branch does not exist) | `rejected` | nothing was written |
/// | any other exit, a malformed answer, no answer in time | `unknown` | the lookup settles it |
pub fn fast_import_reply(answer: &ServiceAnswer, effect: &Value) -> Reply {
    let branch = effect["branch"].as_str().unwrap_or_default();
    match ran(answer) {
        Ok((0, out, _)) => match out.split_whitespace().next().filter(|o| is_oid(o)) {
            Some(oid) => Reply::Applied(canonical(&json!({"commit": oid, "branch": branch}))),
            None => Reply::Unknown(format!("fast-import printed no commit id: {}", cut(out, 200))),
        },
        Ok((_, _, err)) if err.contains(&format!("Not updating refs/heads/{branch} ")) => Reply::Unknown(format!(
            "the branch {branch} moved during the send and was not updated; recovery re-checks and sends again"
        )),
        Ok((_, _, err)) if err.contains("Invalid ref name or SHA1 expression") => {
            Reply::Rejected(format!("there is no branch {branch}: {}", cut(err.trim(), 300)))
        }
        Ok((status, _, err)) => Reply::Unknown(format!("fast-import exited {status}: {}", cut(err.trim(), 300))),
        Err(m) => Reply::Unknown(format!("fast-import: {m}")),
    }
}

/// A merge: both tips, the merged tree, then the commit on the tip it was merged on. Each
/// of the three runs gets a third of the send's time, so the whole send ends within it.
fn merge_turn(cx: &Context<'_>, answers: &[ServiceAnswer]) -> Turn {
    let branch = cx.effect["branch"].as_str().unwrap_or_default();
    let from = cx.effect["from"].as_str().unwrap_or_default();
    let third = cx.timeout_ms.map(|t| (t / 3).max(1));
    let Some(first) = answers.first() else {
        return Turn::Call(git(
            &[
                "rev-parse",
                &format!("refs/heads/{branch}^{{commit}}"),
                &format!("refs/heads/{from}^{{commit}}"),
            ],
            None,
            third,
        ));
    };
    let tips: Vec<&str> = match ran(first) {
        Ok((0, out, _)) => out.split_whitespace().collect(),
        Ok((_, _, err)) if err.contains("unknown revision") => {
            return Turn::Reply(Reply::Rejected(format!(
                "{branch} or {from} is not a branch here: {}",
                cut(err.trim(), 300)
            )))
        }
        Ok((status, _, err)) => {
            return Turn::Reply(Reply::Unknown(format!(
                "rev-parse exited {status}: {}",
                cut(err.trim(), 300)
            )))
        }
        Err(m) => return Turn::Reply(Reply::Unknown(format!("rev-parse: {m}"))),
    };
    let [tip, theirs] = tips.as_slice() else {
        return Turn::Reply(Reply::Unknown(
            "rev-parse did not print the two commits".into(),
        ));
    };
    if !is_oid(tip) || !is_oid(theirs) {
        return Turn::Reply(Reply::Unknown(
            "rev-parse printed something that is not a commit id".into(),
        ));
    }
    let Some(second) = answers.get(1) else {
        return Turn::Call(git(
            &[
                "merge-tree",
                "--write-tree",
                "-z",
                "--name-only",
                tip,
                theirs,
            ],
            None,
            third,
        ));
    };
    let tree = match ran(second) {
        Ok((0, out, _)) => match out.split('\0').next().filter(|t| is_oid(t)) {
            Some(t) => t,
            None => return Turn::Reply(Reply::Unknown("merge-tree printed no tree".into())),
        },
        Ok((1, out, _)) => {
            let files: Vec<&str> = out
                .split('\0')
                .skip(1)
                .take_while(|f| !f.is_empty())
                .collect();
            return Turn::Reply(Reply::Rejected(format!(
                "merging {from} into {branch} conflicts in {}; nothing was written",
                cut(&files.join(", "), 300)
            )));
        }
        Ok((status, _, err)) => {
            return Turn::Reply(Reply::Unknown(format!(
                "merge-tree exited {status}: {}",
                cut(err.trim(), 300)
            )))
        }
        Err(m) => return Turn::Reply(Reply::Unknown(format!("merge-tree: {m}"))),
    };
    let Some(third_answer) = answers.get(2) else {
        let message = cx.effect["message"]
            .as_str()
            .map(String::from)
            .unwrap_or_else(|| format!("Merge branch '{from}' into {branch}"));
        let message = with_trailer(&message, cx.effect_id);
        return Turn::Call(import(
            cx.effect,
            &message,
            tip,
            &format!("merge {theirs}\nM 040000 {tree} \"\"\n"),
            third,
        ));
    };
    Turn::Reply(fast_import_reply(third_answer, cx.effect))
}

fn push_reply(answer: &ServiceAnswer, effect: &Value) -> Reply {
    let (remote, branch) = remote_branch(effect);
    let commit = effect["commit"].as_str().unwrap_or_default();
    match ran(answer) {
        Ok((0, _, _)) => Reply::Applied(canonical(
            &json!({"remote": remote, "branch": branch, "commit": commit}),
        )),
        Ok((_, out, _)) if out.lines().any(|l| l.starts_with("!\t")) => {
            let line = out
                .lines()
                .find(|l| l.starts_with("!\t"))
                .unwrap_or_default();
            Reply::Rejected(format!("{remote} refused the update: {}", cut(line, 300)))
        }
        Ok((status, _, err)) => {
            Reply::Unknown(format!("push exited {status}: {}", cut(err.trim(), 300)))
        }
        Err(m) => Reply::Unknown(format!("push: {m}")),
    }
}

// ------------------------------------------------------------------ the lookup

fn log_lookup(cx: &Context<'_>, answers: &[ServiceAnswer]) -> Turn {
    let branch = cx.effect["branch"].as_str().unwrap_or_default();
    let Some(a) = answers.first() else {
        return Turn::Call(git(
            &[
                "log",
                "-F",
                &format!("--grep={TRAILER}: {}", cx.effect_id),
                "--format=%H%x00%B%x00",
                &format!("refs/heads/{branch}"),
                "--",
            ],
            None,
            None,
        ));
    };
    let line = format!("{TRAILER}: {}", cx.effect_id);
    Turn::Reply(match ok_run(a, "log", &[]) {
        Err(m) => Reply::Failed(m),
        Ok((_, out)) => {
            let fields: Vec<&str> = out.split('\0').collect();
            let found = fields
                .chunks(2)
                .filter(|c| c.len() == 2)
                .map(|c| (c[0].trim(), c[1]))
                .find(|(_, body)| body.lines().any(|l| l.trim_end() == line));
            match found {
                Some((oid, _)) if is_oid(oid) => {
                    Reply::Found(canonical(&json!({"commit": oid, "branch": branch})))
                }
                Some((oid, _)) => {
                    Reply::Failed(format!("log: {:?} is not a commit id", cut(oid, 80)))
                }
                None => Reply::NotFound,
            }
        }
    })
}

fn push_lookup(remote: &str, branch: &str, commit: &str, answers: &[ServiceAnswer]) -> Turn {
    let found = || {
        Reply::Found(canonical(
            &json!({"remote": remote, "branch": branch, "commit": commit}),
        ))
    };
    let private = format!("refs/interlock/remotes/{remote}/{branch}");
    let Some(a) = answers.first() else {
        return Turn::Call(git(
            &["ls-remote", remote, &format!("refs/heads/{branch}")],
            None,
            None,
        ));
    };
    let tip = match ok_run(a, "ls-remote", &[]) {
        Err(m) => return Turn::Reply(Reply::Failed(m)),
        Ok((_, out)) => match ls_remote_tip(out, branch) {
            None => return Turn::Reply(Reply::NotFound),
            Some(t) if t == commit => return Turn::Reply(found()),
            Some(t) => String::from(t),
        },
    };
    let _ = tip;
    let Some(b) = answers.get(1) else {
        return Turn::Call(git(
            &[
                "fetch",
                "--no-tags",
                "--no-write-fetch-head",
                remote,
                &format!("+refs/heads/{branch}:{private}"),
            ],
            None,
            None,
        ));
    };
    if let Err(m) = ok_run(b, "fetch", &[]) {
        return Turn::Reply(Reply::Failed(m));
    }
    let Some(c) = answers.get(2) else {
        return Turn::Call(git(
            &["merge-base", "--is-ancestor", commit, &private],
            None,
            None,
        ));
    };
    Turn::Reply(match ok_run(c, "merge-base", &[1]) {
        Ok((0, _)) => found(),
        Ok(_) => Reply::NotFound,
        Err(m) => Reply::Failed(m),
    })
}

#[cfg(test)]
mod tests;
