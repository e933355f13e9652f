//! Email over SMTP (`smtp.send`), at tier 3: SMTP neither dedupes a message nor lets anyone
//! ask whether one was delivered, so after a crash, or any answer that leaves it open,
//! mid-send, the effect ends AMBIGUOUS for a person, and no second email is ever sent.
//!
//! The effect: `{"from": "support@shop.example", "to": ["customer@example.com"], "subject":
//! "Your refund", "text": "..."}`. The message is built here (RFC 5322: `From`, `To`,
//! `Subject`, `Message-ID: <effect id@interlock>`, `Interlock-Effect: <effect id>`, a
//! text/plain UTF-8 body; base64 when it is not short ASCII lines; no `Date`, which the
//! submission server adds, RFC 6409 section 8.2), so the person settling an AMBIGUOUS one
//! can search the mailbox for its effect id.
//!
//! The SMTP dialogue is here too (RFC 5321), sans-IO: the host only keeps a TCP connection
//! to its server and moves bytes (operations `connect`, `send`, `receive`, `close` of the
//! service `smtp`; [`Send`]'s `turn`). `connect`'s `timeout_ms` is the whole send's: the
//! host fails every later call on that connection once it has passed. No TLS, no AUTH:
//! a local relay.
//!
//! | where it ends | reply | why |
//! |---|---|---|
//! | before the message's bytes were handed over (connect, greeting, `EHLO`, `MAIL`, `RCPT`, `DATA`): a refusal, a malformed reply, a lost connection | `rejected` | a server delivers nothing it has not received to the final `.` |
//! | the message handed over, the server answers 2xx | `applied` | it took the message |
//! | the message handed over, the server answers 4xx or 5xx | `rejected` | it refused the message (RFC 5321 4.2.5: it is not delivered) |
//! | handing over the message failed, or after it: a lost connection, no reply in time, a malformed reply | `unknown` | it may have been delivered: recovery finds no dedupe and no lookup, AMBIGUOUS |
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use base64::Engine as _;
use serde_json::{json, Map, Value};

use super::{cut, Context, Phase, ServiceAnswer, ServiceCall, Target, Tier, Turn};
use crate::schema::{field_err, pointer, Obj};
use crate::types::{GateError, Reply};

/// The name this client gives in `EHLO`.
const EHLO_NAME: &str = "interlock.invalid";

/// Base64 body lines (RFC 2045) and the longest line sent as it is (RFC 5321 4.5.3.1.6).
const B64_LINE: usize = 76;
const MAX_LINE: usize = 998;

pub struct Send;

impl Target for Send {
    fn name(&self) -> &'static str {
        "smtp.send"
    }

    fn service(&self) -> &'static str {
        "smtp"
    }

    fn tier(&self) -> Tier {
        Tier {
            dedupes: false,
            dedupe_window_ms: None,
            lookup: false,
        }
    }

    fn premises(&self) -> &'static [&'static str] {
        &[]
    }

    fn check_effect(&self, effect: &Value) -> Result<(), GateError> {
        let e = Obj::strict(
            effect,
            "/effect",
            "an email",
            &["from", "to", "subject", "text"],
        )?;
        check_address(&e.name("from", "the sender's address")?, "/effect/from")?;
        let to = e.names("to", "the recipients' addresses")?;
        if to.is_empty() {
            return Err(field_err("/effect/to", "names no recipient"));
        }
        for (i, a) in to.iter().enumerate() {
            check_address(a, &pointer("/effect/to", &i.to_string()))?;
        }
        let subject = e.name("subject", "the subject")?;
        if subject.contains(['\r', '\n']) {
            return Err(field_err("/effect/subject", "must be one line"));
        }
        if !e.get("text").is_some_and(Value::is_string) {
            return Err(field_err("/effect/text", "must be the message's text"));
        }
        Ok(())
    }

    fn turn(&self, phase: Phase, cx: &Context<'_>, answers: &[ServiceAnswer]) -> Turn {
        match phase {
            // It reads none: any name asked fails the read.
            Phase::Premises => Turn::Reply(super::captured(self.name(), cx.names, &Map::new())),
            Phase::Lookup => Turn::Reply(Reply::Failed(
                "SMTP cannot be asked whether a message was delivered".into(),
            )),
            Phase::Send => {
                let mut d = Dialogue {
                    answers,
                    next: 0,
                    buf: String::new(),
                    connection: Value::Null,
                };
                match d.send(cx) {
                    Ok(t) | Err(t) => t,
                }
            }
        }
    }
}

/// An address SMTP carries as it is: `local@domain`, printable ASCII, none of the
/// characters that would end a path or a header (space, `<`, `>`, `,`, `"`, `(`, `)`).
fn check_address(a: &str, at: &str) -> Result<(), GateError> {
    let ok = a.len() <= 254
        && a.split_once('@')
            .is_some_and(|(l, d)| !l.is_empty() && !d.is_empty() && !d.contains('@'))
        && a.bytes()
            .all(|b| b.is_ascii_graphic() && !b"<>,\"()[];:\\".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(field_err(
            at,
            format!(
                "{:?} is not an email address (local@domain, ASCII)",
                cut(a, 80)
            ),
        ))
    }
}

/// The message, as it goes after `DATA`: CRLF lines, dot-stuffed, ending with `.`.
pub fn message(effect: &Value, effect_id: &str) -> String {
    let to: Vec<&str> = effect["to"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let subject = effect["subject"].as_str().unwrap_or_default();
    let text = effect["text"]
        .as_str()
        .unwrap_or_default()
        .replace("\r\n", "\n");
    let plain = text.is_ascii() && text.lines().all(|l| l.len() <= MAX_LINE);
    let mut m = String::new();
    let mut header = |name: &str, value: &str| m.push_str(&format!("{name}: {value}\r\n"));
    header("From", effect["from"].as_str().unwrap_or_default());
    header("To", &to.join(", "));
    header("Subject", &encoded_subject(subject));
    header("Message-ID", &format!("<{effect_id}@interlock>"));
    header(super::git::TRAILER, effect_id);
    header("MIME-Version", "1.0");
    header("Content-Type", "text/plain; charset=utf-8");
    header(
        "Content-Transfer-Encoding",
        if plain { "7bit" } else { "base64" },
    );
    m.push_str("\r\n");
    let body: Vec<String> = if plain {
        text.split('\n').map(String::from).collect()
    } else {
        let b64 = base64::engine::general_purpose::STANDARD.encode(text.as_bytes());
        b64.as_bytes()
            .chunks(B64_LINE)
            .map(|c| String::from_utf8_lossy(c).into_owned())
            .collect()
    };
    for line in body {
        if line.starts_with('.') {
            m.push('.');
        }
        m.push_str(&line);
        m.push_str("\r\n");
    }
    m.push_str(".\r\n");
    m
}

/// The subject as it is when it is ASCII, else RFC 2047 encoded words (UTF-8, base64),
/// each at most 75 characters.
fn encoded_subject(s: &str) -> String {
    if s.is_ascii() {
        return s.into();
    }
    let mut words = Vec::new();
    let mut chunk = String::new();
    for c in s.chars() {
        // 45 bytes encode to 60 characters, which with `=?utf-8?b?` and `?=` make 72.
        if chunk.len() + c.len_utf8() > 45 {
            words.push(core::mem::take(&mut chunk));
        }
        chunk.push(c);
    }
    words.push(chunk);
    words
        .iter()
        .map(|w| {
            format!(
                "=?utf-8?b?{}?=",
                base64::engine::general_purpose::STANDARD.encode(w.as_bytes())
            )
        })
        .collect::<Vec<_>>()
        .join("\r\n ")
}

/// A complete reply at the start of `buf`: its code, its text and how many bytes it took;
/// `Ok(None)` when more bytes are needed; `Err` when it is not an SMTP reply.
fn parse_reply(buf: &str) -> Result<Option<(u16, String, usize)>, String> {
    let mut taken = 0;
    let mut text = Vec::new();
    for line in buf.split_inclusive('\n') {
        if !line.ends_with('\n') {
            return Ok(None);
        }
        taken += line.len();
        let l = line.trim_end_matches(['\r', '\n']);
        let code = l.get(..3).filter(|c| c.bytes().all(|b| b.is_ascii_digit()));
        let Some(code) = code else {
            return Err(format!(
                "a reply that is not an SMTP reply: {:?}",
                cut(l, 100)
            ));
        };
        text.push(l.get(4..).unwrap_or_default());
        match l.as_bytes().get(3) {
            None | Some(b' ') => {
                let code: u16 = code.parse().unwrap_or(0);
                return Ok(Some((code, text.join(" "), taken)));
            }
            Some(b'-') => {}
            Some(_) => {
                return Err(format!(
                    "a reply that is not an SMTP reply: {:?}",
                    cut(l, 100)
                ))
            }
        }
    }
    Ok(None)
}

/// How one exchange went: the server's reply, or why there is none.
type Exchange = Result<(u16, String), String>;

/// The dialogue, replayed from the answers so far: each step either consumes the next
/// answer or, when there is none, is the call to make next (`Err(Turn::Call)`).
struct Dialogue<'a> {
    answers: &'a [ServiceAnswer],
    next: usize,
    buf: String,
    connection: Value,
}

impl<'a> Dialogue<'a> {
    fn call(
        &mut self,
        operation: &str,
        mut params: Value,
        timeout_ms: Option<u64>,
    ) -> Result<&'a ServiceAnswer, Turn> {
        if !self.connection.is_null() {
            params["connection"] = self.connection.clone();
        }
        let answers = self.answers;
        match answers.get(self.next) {
            Some(a) => {
                self.next += 1;
                Ok(a)
            }
            None => Err(Turn::Call(ServiceCall {
                operation: operation.into(),
                params,
                options: json!({}),
                timeout_ms,
            })),
        }
    }

    /// The next reply from the server.
    fn reply(&mut self) -> Result<Exchange, Turn> {
        loop {
            match parse_reply(&self.buf) {
                Err(m) => return Ok(Err(m)),
                Ok(Some((code, text, taken))) => {
                    self.buf.drain(..taken);
                    return Ok(Ok((code, text)));
                }
                Ok(None) => {}
            }
            match self.call("receive", json!({}), None)? {
                ServiceAnswer::Returned(v) => match v["data"].as_str() {
                    Some("") => return Ok(Err("the server closed the connection".into())),
                    Some(s) => self.buf.push_str(s),
                    None => return Ok(Err("receive answered no data".into())),
                },
                ServiceAnswer::Raised(e) => return Ok(Err(format!("{e}"))),
                ServiceAnswer::NoAnswer(m) => return Ok(Err(format!("no answer ({m})"))),
            }
        }
    }

    /// Hands `data` to the connection; `Err` (in the outer `Ok`) when it could not.
    fn write(&mut self, data: &str) -> Result<Result<(), String>, Turn> {
        Ok(match self.call("send", json!({ "data": data }), None)? {
            ServiceAnswer::Returned(_) => Ok(()),
            ServiceAnswer::Raised(e) => Err(format!("{e}")),
            ServiceAnswer::NoAnswer(m) => Err(format!("no answer ({m})")),
        })
    }

    fn command(&mut self, line: &str) -> Result<Exchange, Turn> {
        match self.write(&format!("{line}\r\n"))? {
            Ok(()) => self.reply(),
            Err(m) => Ok(Err(m)),
        }
    }

    /// `QUIT` when the connection still works, then `close`, whatever they answer; then
    /// the reply.
    fn finish(&mut self, reply: Reply, polite: bool) -> Result<Turn, Turn> {
        if polite && !self.connection.is_null() {
            let _ = self.write("QUIT\r\n")?;
        }
        if !self.connection.is_null() {
            let _ = self.call("close", json!({}), None)?;
        }
        Ok(Turn::Reply(reply))
    }

    /// Before the message's bytes leave: anything but the expected reply refuses the send
    /// with nothing delivered.
    fn expect(&mut self, step: &str, got: Exchange, ok: &[u16]) -> Result<(), Result<Turn, Turn>> {
        match got {
            Ok((code, _)) if ok.contains(&code) => Ok(()),
            Ok((code, text)) => Err(self.finish(
                Reply::Rejected(format!(
                    "{step}: {code} {}; nothing was sent",
                    cut(&text, 300)
                )),
                true,
            )),
            Err(m) => Err(self.finish(
                Reply::Rejected(format!("{step}: {m}; nothing was sent")),
                false,
            )),
        }
    }

    fn send(&mut self, cx: &Context<'_>) -> Result<Turn, Turn> {
        match self.call("connect", json!({}), cx.timeout_ms)? {
            ServiceAnswer::Returned(v) if v.get("connection").is_some_and(|c| !c.is_null()) => {
                self.connection = v["connection"].clone();
            }
            other => {
                let why = match other {
                    ServiceAnswer::Raised(e) => format!("{e}"),
                    ServiceAnswer::NoAnswer(m) => format!("no answer ({m})"),
                    ServiceAnswer::Returned(_) => "connect answered no connection".into(),
                };
                return Ok(Turn::Reply(Reply::Rejected(format!(
                    "connect: {why}; nothing was sent"
                ))));
            }
        }
        macro_rules! step {
            ($what:expr, $got:expr, $ok:expr) => {{
                let got = $got;
                if let Err(done) = self.expect($what, got, $ok) {
                    return done;
                }
            }};
        }
        step!("greeting", self.reply()?, &[220]);
        step!("EHLO", self.command(&format!("EHLO {EHLO_NAME}"))?, &[250]);
        let from = cx.effect["from"].as_str().unwrap_or_default();
        step!(
            "MAIL",
            self.command(&format!("MAIL FROM:<{from}>"))?,
            &[250]
        );
        for to in cx.effect["to"].as_array().into_iter().flatten() {
            let to = to.as_str().unwrap_or_default();
            step!(
                &format!("RCPT {to}"),
                self.command(&format!("RCPT TO:<{to}>"))?,
                &[250, 251]
            );
        }
        step!("DATA", self.command("DATA")?, &[354]);
        // From here the server may have the whole message: only its 2xx, 4xx or 5xx
        // answer says what became of it.
        let after = match self.write(&message(cx.effect, cx.effect_id))? {
            Err(m) => Err(format!("handing over the message failed ({m})")),
            Ok(()) => self.reply()?,
        };
        let reply = match after {
            Ok((code, text)) if (200..300).contains(&code) => Reply::Applied(
                crate::canon::canonical(&json!({"reply": format!("{code} {}", cut(&text, 300))})),
            ),
            Ok((code, text)) if (400..600).contains(&code) => Reply::Rejected(format!(
                "the server refused the message: {code} {}",
                cut(&text, 300)
            )),
            Ok((code, text)) => Reply::Unknown(format!(
                "after the message, a reply that says nothing: {code} {}",
                cut(&text, 300)
            )),
            Err(m) => Reply::Unknown(format!(
                "after the message: {m}; it may have been delivered"
            )),
        };
        let polite = !matches!(reply, Reply::Unknown(_));
        self.finish(reply, polite)
    }
}

#[cfg(test)]
mod tests;
