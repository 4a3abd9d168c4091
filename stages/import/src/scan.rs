//! One JSON object read through once, byte by byte, with every value cut to a bound: what a JSON
//! line too long to hold, or not valid UTF-8, still says. Its id and the first bytes of each value
//! are kept, and each value says what was wrong with it ([`Flaw`]), so a record whose output a
//! model filled with 100 MiB of one line becomes that model's oversized answer instead of a
//! failed import.

use crate::Flaw;

/// One top-level value: a string decoded, any other value as written (`None` for null), cut to
/// the scanner's cap, and what was wrong with it.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    pub text: Option<String>,
    pub flaw: Option<Flaw>,
}

/// Keys are names: one longer than this is not a record doc2ci reads.
const MAX_KEY_BYTES: usize = 4096;

#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    Before,
    /// After `{` (`first`) or after a `,`.
    Key {
        first: bool,
    },
    InKey,
    Colon,
    Value,
    InString,
    /// An object or array as written, `depth` levels deep; `in_str`/`esc` track its strings.
    Nested {
        depth: usize,
        in_str: bool,
        esc: bool,
    },
    /// A number, `true`, `false` or `null`.
    Literal,
    Next,
    After,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Escape {
    No,
    Backslash,
    /// `\u` and the hex digits read so far.
    Unicode(u8, u32),
}

/// Fed the bytes of one line in pieces ([`Scanner::feed`]), then [`Scanner::finish`]ed.
pub struct Scanner {
    cap: usize,
    state: State,
    escape: Escape,
    /// A `\uD800`–`\uDBFF` waiting for its low half.
    high: Option<u32>,
    key: Vec<u8>,
    buf: Vec<u8>,
    /// Bytes the current value has in all, kept or not.
    len: u64,
    lone_surrogate: bool,
    string: bool,
    fields: Vec<(String, Cell)>,
    error: Option<String>,
    offset: u64,
}

impl Scanner {
    /// Each value keeps at most `cap` bytes.
    pub fn new(cap: usize) -> Scanner {
        Scanner {
            cap,
            state: State::Before,
            escape: Escape::No,
            high: None,
            key: Vec::new(),
            buf: Vec::new(),
            len: 0,
            lone_surrogate: false,
            string: false,
            fields: Vec::new(),
            error: None,
            offset: 0,
        }
    }

    pub fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if self.error.is_some() {
                return;
            }
            self.byte(b);
            self.offset += 1;
        }
    }

    /// The object's values in key order of first appearance (a repeated key keeps its last
    /// value, as serde_json does), or why the bytes were not one JSON object.
    pub fn finish(mut self) -> Result<Vec<(String, Cell)>, String> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        match self.state {
            State::After => Ok(self.fields),
            _ => Err("the line ends inside its JSON object".into()),
        }
    }

    fn fail(&mut self, what: &str) {
        self.error = Some(format!("invalid JSON at byte {}: {what}", self.offset + 1));
    }

    fn byte(&mut self, b: u8) {
        let ws = matches!(b, b' ' | b'\t' | b'\n' | b'\r');
        match self.state {
            State::Before if ws => {}
            State::Before if b == b'{' => self.state = State::Key { first: true },
            State::Before => self.fail("expected a JSON object"),
            State::Key { .. } if ws => {}
            State::Key { .. } if b == b'"' => {
                self.key.clear();
                self.start_value(true);
                self.state = State::InKey;
            }
            State::Key { first: true } if b == b'}' => self.state = State::After,
            State::Key { .. } => self.fail("expected a key"),
            State::InKey | State::InString => self.string_byte(b),
            State::Colon if ws => {}
            State::Colon if b == b':' => self.state = State::Value,
            State::Colon => self.fail("expected `:`"),
            State::Value if ws => {}
            State::Value => {
                self.start_value(false);
                match b {
                    b'"' => {
                        self.string = true;
                        self.state = State::InString;
                    }
                    b'{' | b'[' => {
                        self.push(&[b]);
                        self.state = State::Nested { depth: 1, in_str: false, esc: false };
                    }
                    b'-' | b'0'..=b'9' | b't' | b'f' | b'n' => {
                        self.push(&[b]);
                        self.state = State::Literal;
                    }
                    _ => self.fail("expected a value"),
                }
            }
            State::Nested { depth, in_str, esc } => {
                self.push(&[b]);
                self.state = match (in_str, esc, b) {
                    (true, true, _) => State::Nested { depth, in_str, esc: false },
                    (true, false, b'\\') => State::Nested { depth, in_str, esc: true },
                    (true, false, b'"') => State::Nested { depth, in_str: false, esc },
                    (true, false, _) => State::Nested { depth, in_str, esc },
                    (false, _, b'"') => State::Nested { depth, in_str: true, esc },
                    (false, _, b'{' | b'[') => State::Nested { depth: depth + 1, in_str, esc },
                    (false, _, b'}' | b']') if depth == 1 => {
                        self.end_value();
                        State::Next
                    }
                    (false, _, b'}' | b']') => State::Nested { depth: depth - 1, in_str, esc },
                    _ => State::Nested { depth, in_str, esc },
                };
            }
            State::Literal if ws || b == b',' || b == b'}' => {
                let ok = matches!(&self.buf[..], b"null" | b"true" | b"false")
                    || std::str::from_utf8(&self.buf).is_ok_and(|s| s.parse::<f64>().is_ok());
                if !ok {
                    return self.fail("not a number, true, false or null");
                }
                self.end_value();
                self.state = State::Next;
                self.byte(b);
            }
            State::Literal => self.push(&[b]),
            State::Next if ws => {}
            State::Next if b == b',' => self.state = State::Key { first: false },
            State::Next if b == b'}' => self.state = State::After,
            State::Next => self.fail("expected `,` or `}`"),
            State::After if ws => {}
            State::After => self.fail("text after the JSON object"),
        }
    }

    fn start_value(&mut self, key: bool) {
        if !key {
            self.buf.clear();
            self.len = 0;
            self.lone_surrogate = false;
            self.string = false;
        }
        self.escape = Escape::No;
        self.high = None;
    }

    /// One byte inside a string (a key or a value), escapes decoded.
    fn string_byte(&mut self, b: u8) {
        match self.escape {
            Escape::Backslash => {
                self.escape = Escape::No;
                let c = match b {
                    b'"' => b'"',
                    b'\\' => b'\\',
                    b'/' => b'/',
                    b'b' => 0x08,
                    b'f' => 0x0c,
                    b'n' => b'\n',
                    b'r' => b'\r',
                    b't' => b'\t',
                    b'u' => {
                        self.escape = Escape::Unicode(0, 0);
                        return;
                    }
                    _ => return self.fail("invalid escape"),
                };
                self.text(&[c]);
            }
            Escape::Unicode(n, acc) => {
                let Some(d) = (b as char).to_digit(16) else { return self.fail("invalid \\u escape") };
                let acc = acc * 16 + d;
                if n < 3 {
                    self.escape = Escape::Unicode(n + 1, acc);
                    return;
                }
                self.escape = Escape::No;
                self.code_unit(acc);
            }
            Escape::No => match b {
                b'\\' => self.escape = Escape::Backslash,
                b'"' => {
                    self.flush_high();
                    if self.state == State::InKey {
                        self.state = State::Colon;
                    } else {
                        self.end_value();
                        self.state = State::Next;
                    }
                }
                0..=0x1f => self.fail("a control character inside a string"),
                _ => self.text(&[b]),
            },
        }
    }

    /// A `\uXXXX` code unit: a character, half of a surrogate pair, or a lone half (kept as
    /// U+FFFD: the value is not text).
    fn code_unit(&mut self, u: u32) {
        if (0xdc00..0xe000).contains(&u) {
            if let Some(h) = self.high.take() {
                let c = char::from_u32(0x10000 + ((h - 0xd800) << 10) + (u - 0xdc00)).expect("a surrogate pair");
                self.push_char(c);
            } else {
                self.lone_surrogate = true;
                self.push_char(char::REPLACEMENT_CHARACTER);
            }
            return;
        }
        self.flush_high();
        if (0xd800..0xdc00).contains(&u) {
            self.high = Some(u);
        } else {
            self.push_char(char::from_u32(u).expect("not a surrogate"));
        }
    }

    /// A high surrogate no low one followed.
    fn flush_high(&mut self) {
        if self.high.take().is_some() {
            self.lone_surrogate = true;
            self.push_char(char::REPLACEMENT_CHARACTER);
        }
    }

    fn push_char(&mut self, c: char) {
        let mut b = [0u8; 4];
        let s = c.encode_utf8(&mut b);
        self.text(s.as_bytes());
    }

    fn text(&mut self, bytes: &[u8]) {
        if self.escape == Escape::No && self.high.is_some() {
            self.flush_high();
        }
        if self.state == State::InKey {
            if self.key.len() + bytes.len() > MAX_KEY_BYTES {
                return self.fail("a key longer than 4 KiB");
            }
            self.key.extend_from_slice(bytes);
        } else {
            self.push(bytes);
        }
    }

    /// Value bytes: all counted, the first `cap` kept.
    fn push(&mut self, bytes: &[u8]) {
        self.len += bytes.len() as u64;
        let room = self.cap.saturating_sub(self.buf.len());
        self.buf.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    fn end_value(&mut self) {
        let buf = std::mem::take(&mut self.buf);
        let cut = self.len > buf.len() as u64;
        let (text, decoded) = kept_text(buf, cut);
        let flaw = if cut {
            Some(Flaw::Oversized { bytes: self.len })
        } else if !decoded || self.lone_surrogate {
            Some(Flaw::NotText)
        } else {
            None
        };
        let text = (self.string || text != "null").then_some(text);
        let key = String::from_utf8_lossy(&self.key).into_owned();
        let cell = Cell { text, flaw };
        match self.fields.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = cell,
            None => self.fields.push((key, cell)),
        }
    }
}

/// Bytes kept of a value as text, and whether they were valid UTF-8: a value cut short loses
/// the partial character at its end, not its claim to be text; other invalid bytes become U+FFFD.
pub fn kept_text(mut buf: Vec<u8>, cut: bool) -> (String, bool) {
    if cut {
        if let Err(e) = std::str::from_utf8(&buf) {
            if e.error_len().is_none() {
                buf.truncate(e.valid_up_to());
            }
        }
    }
    match String::from_utf8(buf) {
        Ok(s) => (s, true),
        Err(e) => (String::from_utf8_lossy(e.as_bytes()).into_owned(), false),
    }
}

/// A whole line scanned at once.
pub fn scan(bytes: &[u8], cap: usize) -> Result<Vec<(String, Cell)>, String> {
    let mut s = Scanner::new(cap);
    s.feed(bytes);
    s.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(c: &[(String, Cell)], k: &str) -> Option<String> {
        c.iter().find(|(key, _)| key == k).and_then(|(_, c)| c.text.clone())
    }

    /// The scanner reads what serde_json reads, value for value, on well-formed objects.
    #[test]
    fn agrees_with_serde_json_on_valid_objects() {
        let lines = [
            r#"{"id": 7, "output": "on: push\njobs: {}\n", "n": null, "t": true, "x": -1.5e3}"#,
            r#"{"a": "\u00e9\ud83d\ude00 \"q\" \\ \/ \b\f\n\r\t", "nested": {"b": [1, "}", {"c": "]"}]}}"#,
            r#"  {}  "#,
            r#"{"k": "v", "k": "w"}"#,
        ];
        for line in lines {
            let ours = scan(line.as_bytes(), 1 << 20).unwrap();
            let theirs: serde_json::Map<String, serde_json::Value> = serde_json::from_str(line).unwrap();
            assert_eq!(ours.len(), theirs.len(), "{line}");
            for (k, v) in &theirs {
                let want = match v {
                    serde_json::Value::Null => None,
                    serde_json::Value::String(s) => Some(s.clone()),
                    serde_json::Value::Number(_) | serde_json::Value::Bool(_) => Some(v.to_string()),
                    other => Some(other.to_string()),
                };
                let got = text(&ours, k);
                // Nested values are kept as written (serde_json re-serialises them compactly).
                if matches!(
                    v,
                    serde_json::Value::Object(_) | serde_json::Value::Array(_) | serde_json::Value::Number(_)
                ) {
                    let reparsed: serde_json::Value = serde_json::from_str(got.as_deref().unwrap()).unwrap();
                    assert_eq!(&reparsed, v, "{line}: {k}");
                } else {
                    assert_eq!(got, want, "{line}: {k}");
                }
            }
            assert!(ours.iter().all(|(_, c)| c.flaw.is_none()), "{line}");
        }
    }

    #[test]
    fn refuses_what_is_not_one_object() {
        for bad in [
            "[1]",
            "{\"a\" 1}",
            "{\"a\": 1,}",
            "{\"a\": 1} x",
            "{\"a\": \"\\x\"}",
            "{\"a\": \"b",
            "{\"a\": nul}",
            "{\"a\": tru }",
        ] {
            assert!(scan(bad.as_bytes(), 64).is_err(), "{bad}");
        }
    }

    /// A value over the cap keeps its first bytes (whole characters) and its true length; bytes
    /// that are not UTF-8 and lone surrogates make a value undecodable, the others stay text.
    #[test]
    fn long_and_undecodable_values_are_flagged_not_refused() {
        let mut line = br#"{"output": ""#.to_vec();
        line.extend("é".repeat(40).as_bytes());
        line.extend(br#"", "id": "9", "bad": "a"#);
        line.extend([0xff, 0xfe]);
        line.extend(br#"", "lone": "\ud800x"}"#);
        let c = scan(&line, 9).unwrap();
        assert_eq!(c[0].1, Cell { text: Some("éééé".into()), flaw: Some(Flaw::Oversized { bytes: 80 }) });
        assert_eq!(c[1].1, Cell { text: Some("9".into()), flaw: None });
        assert_eq!(c[2].1, Cell { text: Some("a\u{fffd}\u{fffd}".into()), flaw: Some(Flaw::NotText) });
        assert_eq!(c[3].1, Cell { text: Some("\u{fffd}x".into()), flaw: Some(Flaw::NotText) });
        // Fed in pieces, the same.
        let mut s = Scanner::new(9);
        for piece in line.chunks(3) {
            s.feed(piece);
        }
        assert_eq!(s.finish().unwrap(), c);
    }
}
