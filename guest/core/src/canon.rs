//! Canonical JSON and the hashes taken over it. Hashes are always over a canonical form,
//! never over text as received, so the same request hashes the same in every host.
//!
//! The canonical form is RFC 8785, the JSON Canonicalization Scheme (JCS), so that anyone
//! outside the component, with any JCS library, can recompute an entry's hash or check a
//! receipt's signature (tests/outside/ does it in Python and JavaScript).
use alloc::string::String;
use alloc::vec::Vec;
use serde_json::{Map, Number, Value};
use sha2::{Digest, Sha256};

/// RFC 8785: no whitespace, object members sorted by the UTF-16 code units of their names,
/// strings escaped as ECMAScript's JSON.stringify does, numbers as ECMAScript's
/// Number.prototype.toString.
pub fn canonical(v: &Value) -> String {
    let mut out = String::with_capacity(256);
    write_value(&mut out, v);
    out
}

/// The canonical text of the object `map` less its member `name` (a top-level entry's
/// `hash`, which covers the rest), and the byte offset in that text where the member goes
/// back ([`with_member`]): one pass of the writer serves the hash and the stored line.
pub fn canonical_without(map: &Map<String, Value>, name: &str) -> (String, usize) {
    let mut out = String::with_capacity(256);
    let at = write_object(&mut out, map, Some(name)).unwrap_or(out.len() - 1);
    (out, at)
}

/// The member `"name":value` put back into `text` at `at` (from [`canonical_without`]):
/// the canonical text of the whole object.
pub fn with_member(text: &str, at: usize, name: &str, value: &Value) -> String {
    let (head, tail) = text.split_at(at);
    [head, &member_between(head, tail, name, value), tail].concat()
}

/// Whether `line` is exactly [`with_member`]`(text, at, name, value)`, compared in place
/// (a stored entry checked against its canonical form, with no copy of it written).
pub fn is_with_member(line: &str, text: &str, at: usize, name: &str, value: &Value) -> bool {
    let (head, tail) = text.split_at(at);
    let member = member_between(head, tail, name, value);
    line.len() == head.len() + member.len() + tail.len()
        && line.starts_with(head)
        && line[head.len()..].starts_with(&member)
        && line.ends_with(tail)
}

/// `"name":value` with the commas that join it to the members before (`head`) and after
/// (`tail`) it in an object's canonical text.
fn member_between(head: &str, tail: &str, name: &str, value: &Value) -> String {
    let mut member = String::with_capacity(name.len() + 80);
    if head.len() > 1 && tail == "}" {
        member.push(',');
    }
    write_string(&mut member, name);
    member.push(':');
    write_value(&mut member, value);
    if tail != "}" {
        member.push(',');
    }
    member
}

/// The canonical text of an object, less its member `skip` when given (a document's
/// `signature`): what is signed, with no copy of the object made.
pub fn canonical_object(map: &Map<String, Value>, skip: Option<&str>) -> String {
    let mut out = String::with_capacity(256);
    write_object(&mut out, map, skip);
    out
}

fn write_value(out: &mut String, v: &Value) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            write_object(out, map, None);
        }
    }
}

/// Writes `map` in canonical order, less its member `skip`; answers where `skip` would
/// have been written (the offset of the first member sorting after it), if before `}`.
fn write_object(out: &mut String, map: &Map<String, Value>, skip: Option<&str>) -> Option<usize> {
    let utf16 = |a: &str, b: &str| a.encode_utf16().cmp(b.encode_utf16());
    let mut slot = None;
    let mut first = true;
    let mut member = |out: &mut String, k: &String, v: &Value| {
        if let Some(skip) = skip {
            if k == skip {
                return;
            }
            if slot.is_none() && utf16(k, skip).is_gt() {
                if !first {
                    out.push(',');
                }
                slot = Some(out.len());
                first = true;
            }
        }
        if !first {
            out.push(',');
        }
        first = false;
        write_string(out, k);
        out.push(':');
        write_value(out, v);
    };
    out.push('{');
    if in_utf16_order(map) {
        for (k, v) in map {
            member(out, k, v);
        }
    } else {
        let mut members: Vec<(&String, &Value)> = map.iter().collect();
        members.sort_by(|a, b| utf16(a.0, b.0));
        for (k, v) in members {
            member(out, k, v);
        }
    }
    out.push('}');
    slot
}

/// Whether `map` iterates in the UTF-16 order of its names already. serde_json's map
/// iterates in UTF-8 byte order (code point order), which differs from UTF-16 order only
/// between a character above U+FFFF and one in U+E000..U+FFFF (UTF-8 lead bytes 0xEE and
/// up); with no such byte in any name, or names out of byte order (a map that keeps
/// insertion order), the members are sorted instead.
fn in_utf16_order(map: &Map<String, Value>) -> bool {
    let mut prev: Option<&str> = None;
    for k in map.keys() {
        if k.bytes().any(|b| b >= 0xEE) || prev.is_some_and(|p| p >= k.as_str()) {
            return false;
        }
        prev = Some(k);
    }
    true
}

/// Integers are written exactly. Within 2^53 (all the core accepts in decision inputs)
/// that is what ECMAScript writes; beyond it JCS would round to the nearest double, which
/// would silently change a recorded value, so such an integer is kept as given.
fn write_number(out: &mut String, n: &Number) {
    if let Some(u) = n.as_u64() {
        write_u64(out, u);
    } else if let Some(i) = n.as_i64() {
        out.push('-');
        write_u64(out, i.unsigned_abs());
    } else if let Some(f) = n.as_f64() {
        // A serde_json number is always finite, so ECMAScript's NaN and Infinity cannot occur.
        out.push_str(ryu_js::Buffer::new().format_finite(f));
    }
}

fn write_u64(out: &mut String, mut u: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (u % 10) as u8;
        u /= 10;
        if u == 0 {
            break;
        }
    }
    out.push_str(core::str::from_utf8(&digits[at..]).expect("ASCII digits"));
}

/// As JSON.stringify: `"` and `\` escaped, the control characters below U+0020 by their
/// short escapes or `\u00xx`, everything else (U+2028 and U+2029 included) as it is. The
/// runs between escapes are copied whole.
fn write_string(out: &mut String, s: &str) {
    out.reserve(s.len() + 2);
    out.push('"');
    let mut run = 0;
    for (i, b) in s.bytes().enumerate() {
        let short = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            0x08 => "\\b",
            b'\t' => "\\t",
            b'\n' => "\\n",
            0x0c => "\\f",
            b'\r' => "\\r",
            0..=0x1f => "",
            _ => continue,
        };
        out.push_str(&s[run..i]);
        run = i + 1;
        if short.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.push_str("\\u00");
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 0xf)]));
        } else {
            out.push_str(short);
        }
    }
    out.push_str(&s[run..]);
    out.push('"');
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(2 * digest.len());
    for b in digest {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    out
}

/// Effect ids are 128 bits: at a billion effects the chance of any collision is about
/// 1.5e-21, and 32 hex digits stay readable in logs and fit every idempotency-key limit.
pub const EFFECT_ID_HEX_LEN: usize = 32;

/// The identity of an approved request: SHA-256 over the canonical key, or over the
/// canonical effect when the request has no key. Never from anything the model adds later.
pub fn effect_id_for(key: Option<&Value>, effect: &Value) -> String {
    let mut h = sha256_hex(canonical(key.unwrap_or(effect)).as_bytes());
    h.truncate(EFFECT_ID_HEX_LEN);
    h
}

pub fn is_effect_id(s: &str) -> bool {
    s.len() == EFFECT_ID_HEX_LEN
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn canon_text(text: &str) -> String {
        canonical(&serde_json::from_str::<Value>(text).unwrap())
    }

    fn number(bits: u64) -> String {
        canonical(&Value::from(f64::from_bits(bits)))
    }

    #[test]
    fn a_line_is_compared_with_its_member_put_back_in_place() {
        for text in [
            r#"{"a":1,"z":2}"#,
            r#"{"a":1}"#,
            r#"{"z":1}"#,
            r#"{}"#,
            r#"{"hash":"x","a":1}"#,
        ] {
            let map = match serde_json::from_str::<Value>(text).unwrap() {
                Value::Object(m) => m,
                _ => unreachable!(),
            };
            let (without, at) = canonical_without(&map, "hash");
            let hash = Value::String("ab\"c".into());
            let line = with_member(&without, at, "hash", &hash);
            assert!(is_with_member(&line, &without, at, "hash", &hash), "{line}");
            let other = Value::String("abc".into());
            assert!(
                !is_with_member(&line, &without, at, "hash", &other),
                "{line}"
            );
            assert!(!is_with_member(
                &alloc::format!("{line} "),
                &without,
                at,
                "hash",
                &hash
            ));
            assert!(!is_with_member(&line[1..], &without, at, "hash", &hash));
        }
    }

    #[test]
    fn identity_ignores_key_order_and_whitespace() {
        let a: Value =
            serde_json::from_str(r#"{"order":"order_881","amount_cents":2000}"#).unwrap();
        let b: Value =
            serde_json::from_str(r#"{ "amount_cents" : 2000, "order" : "order_881" }"#).unwrap();
        assert_eq!(effect_id_for(None, &a), effect_id_for(None, &b));
        assert_eq!(effect_id_for(None, &a).len(), 32);
        assert!(is_effect_id(&effect_id_for(None, &a)));
    }

    #[test]
    fn identity_comes_from_the_key_when_given() {
        let key = json!("refund:order_881");
        let e20 = json!({"order":"order_881","amount_cents":2000});
        let e30 = json!({"order":"order_881","amount_cents":3000});
        assert_eq!(
            effect_id_for(Some(&key), &e20),
            effect_id_for(Some(&key), &e30)
        );
        assert_ne!(effect_id_for(None, &e20), effect_id_for(None, &e30));
        // Pinned: a change to canonicalization or hashing breaks every stored journal.
        assert_eq!(
            effect_id_for(Some(&key), &e20),
            &sha256_hex(br#""refund:order_881""#)[..32]
        );
    }

    /// RFC 8785 appendix B: IEEE 754 bit patterns and their canonical text.
    #[test]
    fn numbers_follow_rfc8785_appendix_b() {
        for (bits, text) in [
            (0x0000000000000000, "0"),
            (0x8000000000000000, "0"),
            (0x0000000000000001, "5e-324"),
            (0x8000000000000001, "-5e-324"),
            (0x7fefffffffffffff, "1.7976931348623157e+308"),
            (0xffefffffffffffff, "-1.7976931348623157e+308"),
            (0x4340000000000000, "9007199254740992"),
            (0xc340000000000000, "-9007199254740992"),
            (0x4430000000000000, "295147905179352830000"),
            (0x44b52d02c7e14af5, "9.999999999999997e+22"),
            (0x44b52d02c7e14af6, "1e+23"),
            (0x44b52d02c7e14af7, "1.0000000000000001e+23"),
            (0x444b1ae4d6e2ef4e, "999999999999999700000"),
            (0x444b1ae4d6e2ef4f, "999999999999999900000"),
            (0x444b1ae4d6e2ef50, "1e+21"),
            (0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"),
            (0x3eb0c6f7a0b5ed8d, "0.000001"),
            (0x41b3de4355555553, "333333333.3333332"),
            (0x41b3de4355555554, "333333333.33333325"),
            (0x41b3de4355555555, "333333333.3333333"),
            (0x41b3de4355555556, "333333333.3333334"),
            (0x41b3de4355555557, "333333333.33333343"),
            (0xbecbf647612f3696, "-0.0000033333333333333333"),
            (0x43143ff3c1cb0959, "1424953923781206.2"),
        ] {
            assert_eq!(number(bits), text, "bits {bits:#018x}");
        }
        // And as parsed from text, where serde_json's own printer would differ.
        assert_eq!(
            canon_text("[1e21,1e-7,1.0,-0,2.50,1E30]"),
            "[1e+21,1e-7,1,0,2.5,1e+30]"
        );
        // Integers are unchanged.
        assert_eq!(
            canon_text("[2000,-7,9007199254740991]"),
            "[2000,-7,9007199254740991]"
        );
    }

    /// RFC 8785 section 3.2.2: whitespace, number forms and string escapes.
    #[test]
    fn rfc8785_section_3_2_2_example() {
        let input = r#"{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}"#;
        assert_eq!(
            canon_text(input),
            r#"{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}"#
        );
    }

    /// RFC 8785 section 3.2.3: members sorted by UTF-16 code units, so the emoji (a
    /// surrogate pair, D83D..) sorts before U+FB33, though its UTF-8 bytes sort after.
    #[test]
    fn keys_sort_by_utf16_code_units() {
        let input = r#"{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}"#;
        let text = canon_text(input);
        let keys: Vec<&str> = ["\\r", "1", "\u{80}", "ö", "€", "😀", "\u{fb33}"].into();
        let mut at = 0;
        for k in keys {
            let found = text[at..].find(&alloc::format!("\"{k}\":")).unwrap();
            at += found + 1;
        }
        assert_eq!(
            canonical(&json!({"\u{e000}": 1, "\u{10000}": 2})),
            "{\"\u{10000}\":2,\"\u{e000}\":1}"
        );
    }

    #[test]
    fn strings_escape_as_json_stringify() {
        assert_eq!(
            canonical(&json!(
                "\u{0}\u{8}\t\n\u{b}\u{c}\r\u{1f} \"\\/\u{7f}\u{2028}é😀"
            )),
            "\"\\u0000\\b\\t\\n\\u000b\\f\\r\\u001f \\\"\\\\/\u{7f}\u{2028}é😀\""
        );
    }

    /// One pass of the writer without a member, the member put back: the whole object's
    /// canonical text, wherever the member sorts (first, between, last, alone), and with
    /// names that need the UTF-16 sort.
    #[test]
    fn a_member_put_back_is_the_canonical_text_of_the_whole() {
        let names = [
            "a",
            "hash",
            "hasg",
            "hasi",
            "zz",
            "",
            "\u{e000}",
            "\u{10000}",
            "h\"x",
        ];
        for mask in 0u32..(1 << names.len()) {
            let mut m = Map::new();
            for (i, n) in names.iter().enumerate() {
                if mask & (1 << i) != 0 {
                    m.insert((*n).into(), json!({"k": i, "s": "\u{1}\\"}));
                }
            }
            let value = json!("0123abcd");
            let (without, at) = canonical_without(&m, "hash");
            let mut whole = m.clone();
            whole.remove("hash");
            assert_eq!(without, canonical(&Value::Object(whole.clone())));
            whole.insert("hash".into(), value.clone());
            assert_eq!(
                with_member(&without, at, "hash", &value),
                canonical(&Value::Object(whole)),
                "mask {mask:#b}"
            );
        }
    }

    /// A stored line must re-read as exactly itself (entry.rs refuses any other text), so
    /// every double must print and parse back to the same bits.
    #[test]
    fn every_double_reads_back_to_the_same_text() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..200_000 {
            // xorshift64: a fixed, wide spread of bit patterns, subnormals included.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let f = f64::from_bits(x);
            if !f.is_finite() {
                continue;
            }
            let text = canonical(&Value::from(f));
            let back: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(
                back.as_f64().map(f64::to_bits),
                Some(if f == 0.0 { 0 } else { x }),
                "{text}"
            );
            assert_eq!(canonical(&back), text);
        }
    }
}
