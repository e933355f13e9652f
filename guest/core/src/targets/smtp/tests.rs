//! `smtp.send`: the message, and the dialogue against scripted servers (the real one,
//! aiosmtpd, is the hosts' tests').
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use serde_json::{json, Value};

use super::*;
use crate::targets::testing::{cx, play, ID};

fn email() -> Value {
    json!({"from": "support@shop.example", "to": ["a@example.com", "b@example.com"],
           "subject": "Your refund", "text": "Hello.\n.\nBye\n"})
}

fn data(s: &str) -> ServiceAnswer {
    ServiceAnswer::Returned(json!({ "data": s }))
}

fn sent() -> ServiceAnswer {
    ServiceAnswer::Returned(json!({}))
}

/// A server: each command line's reply, by its first word (the greeting on `connect`'s
/// first receive, the message's on the final `.`); `None` for a command: the answer the
/// host gives instead (a dropped connection, a timeout).
struct Server<F: FnMut(&str) -> Result<String, ServiceAnswer>> {
    reply: F,
    pending: Option<Result<String, ServiceAnswer>>,
    log: Vec<String>,
}

impl<F: FnMut(&str) -> Result<String, ServiceAnswer>> Server<F> {
    fn answer(&mut self, c: &ServiceCall) -> ServiceAnswer {
        match c.operation.as_str() {
            "connect" => {
                self.pending = Some((self.reply)("greeting"));
                ServiceAnswer::Returned(json!({"connection": 7}))
            }
            "send" => {
                assert_eq!(c.params["connection"], 7);
                let d = c.params["data"].as_str().unwrap();
                self.log.push(d.into());
                let word = if d.ends_with("\r\n.\r\n") {
                    "."
                } else {
                    d.split([' ', ':', '\r']).next().unwrap()
                };
                self.pending = Some((self.reply)(word));
                sent()
            }
            "receive" => match self.pending.take() {
                Some(Ok(s)) => data(&s),
                Some(Err(a)) => a,
                None => panic!("a receive with nothing said"),
            },
            "close" => sent(),
            other => panic!("{other}"),
        }
    }
}

fn talk(
    reply: impl FnMut(&str) -> Result<String, ServiceAnswer>,
) -> (Vec<ServiceCall>, Reply, Vec<String>) {
    let e = email();
    let mut s = Server {
        reply,
        pending: None,
        log: Vec::new(),
    };
    let (calls, r) = play(&Send, Phase::Send, &cx(&e, &[]), |c| s.answer(c));
    (calls, r, s.log)
}

fn good(word: &str) -> Result<String, ServiceAnswer> {
    Ok(match word {
        "greeting" => "220 mx ESMTP\r\n".into(),
        "EHLO" => "250-mx\r\n250-8BITMIME\r\n250 HELP\r\n".into(),
        "DATA" => "354 go ahead\r\n".into(),
        "QUIT" => "221 bye\r\n".into(),
        _ => "250 OK\r\n".into(),
    })
}

#[test]
fn the_message_names_its_effect_and_is_dot_stuffed() {
    let m = message(&email(), ID);
    assert_eq!(
        m,
        format!(
            "From: support@shop.example\r\nTo: a@example.com, b@example.com\r\nSubject: Your refund\r\n\
             Message-ID: <{ID}@interlock>\r\nInterlock-Effect: {ID}\r\nMIME-Version: 1.0\r\n\
             Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 7bit\r\n\r\n\
             Hello.\r\n..\r\nBye\r\n\r\n.\r\n"
        )
    );
    let mut e = email();
    e["text"] = json!("Grüße\n");
    e["subject"] = json!("Rückerstattung");
    let m = message(&e, ID);
    assert!(
        m.contains("Subject: =?utf-8?b?UsO8Y2tlcnN0YXR0dW5n?=\r\n"),
        "{m}"
    );
    assert!(
        m.contains("Content-Transfer-Encoding: base64\r\n\r\nR3LDvMOfZQo=\r\n.\r\n"),
        "{m}"
    );
}

#[test]
fn the_effect_is_checked_at_its_pointer() {
    Send.check_effect(&email()).unwrap();
    let bad = |patch: Value| {
        let mut e = email();
        for (k, v) in patch.as_object().unwrap() {
            e[k] = v.clone();
        }
        match Send.check_effect(&e) {
            Err(GateError::InvalidField { field, .. }) => field,
            other => panic!("{e} was not refused: {other:?}"),
        }
    };
    assert_eq!(bad(json!({"from": "no-at"})), "/effect/from");
    assert_eq!(bad(json!({"to": ["a@b>\r\nRCPT TO:<c@d"]})), "/effect/to/0");
    assert_eq!(bad(json!({"to": []})), "/effect/to");
    assert_eq!(bad(json!({"subject": "a\r\nBcc: x@y"})), "/effect/subject");
    assert_eq!(bad(json!({"text": 1})), "/effect/text");
}

#[test]
fn a_send_is_the_whole_dialogue_then_quit() {
    let (calls, reply, log) = talk(good);
    assert_eq!(reply, Reply::Applied(r#"{"reply":"250 OK"}"#.into()));
    assert_eq!(calls[0].operation, "connect");
    // The send's whole time is the connection's.
    assert_eq!(calls[0].timeout_ms, Some(30_000));
    assert_eq!(
        log.iter()
            .map(|l| l.lines().next().unwrap())
            .collect::<Vec<_>>(),
        [
            "EHLO interlock.invalid",
            "MAIL FROM:<support@shop.example>",
            "RCPT TO:<a@example.com>",
            "RCPT TO:<b@example.com>",
            "DATA",
            "From: support@shop.example",
            "QUIT"
        ]
    );
    assert_eq!(calls.last().unwrap().operation, "close");
}

#[test]
fn a_reply_may_come_in_pieces() {
    let mut greeting = Some("220 m".to_string());
    let e = email();
    let mut s = Server {
        reply: good,
        pending: None,
        log: Vec::new(),
    };
    let (_, r) = play(&Send, Phase::Send, &cx(&e, &[]), |c| {
        if c.operation == "receive" {
            if let Some(g) = greeting.take() {
                return data(&g);
            }
            if s.pending.is_none() {
                return data("x ESMTP\r\n");
            }
        }
        s.answer(c)
    });
    assert_eq!(r.kind(), "applied");
}

#[test]
fn before_the_message_leaves_anything_wrong_is_rejected_with_nothing_sent() {
    let cases: Vec<(&str, Result<String, ServiceAnswer>)> = vec![
        ("greeting", Ok("554 no service\r\n".into())),
        ("greeting", Ok("hello there\r\n".into())), // not an SMTP reply
        ("greeting", Ok(String::new())),            // closed at once
        ("EHLO", Ok("502 no\r\n".into())),
        ("MAIL", Ok("451 try later\r\n".into())),
        ("RCPT", Ok("550 no such user\r\n".into())),
        ("DATA", Ok("554 no\r\n".into())),
        (
            "DATA",
            Err(ServiceAnswer::NoAnswer("the connection was reset".into())),
        ),
    ];
    for (at, answer) in cases {
        let mut answer = Some(answer);
        let (_, reply, log) = talk(|w| {
            if w == at {
                answer.take().unwrap()
            } else {
                good(w)
            }
        });
        assert_eq!(reply.kind(), "rejected", "{at}: {reply:?}");
        assert!(
            !log.iter().any(|l| l.ends_with("\r\n.\r\n")),
            "{at}: the message went out"
        );
    }
}

#[test]
fn after_the_message_only_the_servers_answer_says_what_happened() {
    for (answer, want) in [
        (Ok(String::from("550 rejected: spam\r\n")), "rejected"),
        (Ok(String::from("452 mailbox full\r\n")), "rejected"),
        (Ok(String::new()), "unknown"), // dropped after DATA
        (Ok(String::from("OK thanks\r\n")), "unknown"), // malformed
        (Ok(String::from("150 what\r\n")), "unknown"),
        (Err(ServiceAnswer::NoAnswer("timed out".into())), "unknown"), // no reply in time
    ] {
        let mut answer = Some(answer);
        let (calls, reply, log) = talk(|w| {
            if w == "." {
                answer.take().unwrap()
            } else {
                good(w)
            }
        });
        assert_eq!(reply.kind(), want, "{reply:?}");
        if want == "unknown" {
            // Never QUIT on a connection in doubt: closed at once.
            assert!(!log.iter().any(|l| l.starts_with("QUIT")));
        }
        assert_eq!(calls.last().unwrap().operation, "close");
    }
}

#[test]
fn it_reads_no_premises_and_cannot_be_looked_up() {
    let e = email();
    assert_eq!(
        Send.turn(Phase::Premises, &cx(&e, &[]), &[]),
        Turn::Reply(Reply::Captured("{}".into()))
    );
    assert_eq!(
        Send.turn(Phase::Lookup, &cx(&e, &[]), &[]).clone(),
        Turn::Reply(Reply::Failed(
            "SMTP cannot be asked whether a message was delivered".into()
        ))
    );
    let t = Send.tier();
    assert!(!t.dedupes && !t.lookup);
}
