//! `clean` and `lj` of SPEC §5, with Python's notions of whitespace and line breaks so the
//! peers (which call `str.splitlines`, `str.strip`, `str.split`) see the very same text.

/// Python's `str.isspace`: Unicode White_Space plus the four ASCII separators U+001C–U+001F,
/// which Rust's `char::is_whitespace` leaves out.
#[inline]
pub fn py_isspace(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

#[inline]
fn py_is_linebreak(c: char) -> bool {
    matches!(c, '\n' | '\u{b}' | '\u{c}' | '\r' | '\u{1c}' | '\u{1d}' | '\u{1e}' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

/// Python's `str.splitlines()` (no trailing empty line, `\r\n` is one break).
pub fn py_splitlines(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut it = s.char_indices().peekable();
    while let Some((i, c)) = it.next() {
        if py_is_linebreak(c) {
            out.push(&s[start..i]);
            let mut end = i + c.len_utf8();
            if c == '\r' {
                if let Some(&(j, '\n')) = it.peek() {
                    it.next();
                    end = j + 1;
                }
            }
            start = end;
        }
    }
    if start < s.len() {
        out.push(&s[start..]);
    }
    out
}

pub fn py_strip(s: &str) -> &str {
    s.trim_matches(py_isspace)
}

pub fn py_rstrip(s: &str) -> &str {
    s.trim_end_matches(py_isspace)
}

/// Python's `str.split()` without arguments.
pub fn py_split(s: &str) -> impl Iterator<Item = &str> {
    s.split(py_isspace).filter(|t| !t.is_empty())
}

/// Cuts at the first `#` not directly preceded by a quote: the regex `(?<!["'])#.*`.
fn cut_inline_comment(line: &str) -> &str {
    let mut prev: Option<char> = None;
    for (i, c) in line.char_indices() {
        if c == '#' && !matches!(prev, Some('"') | Some('\'')) {
            return &line[..i];
        }
        prev = Some(c);
    }
    line
}

/// The lines `keep` maps to a non-empty text, joined with `sep`: the one shape of `clean`, `lj` and
/// canon's text fallback.
fn join_lines<'a>(
    lines: impl IntoIterator<Item = &'a str>,
    sep: char,
    capacity: usize,
    keep: impl Fn(&'a str) -> Option<&'a str>,
) -> String {
    let mut out = String::with_capacity(capacity);
    for line in lines.into_iter().filter_map(keep).filter(|l| !l.is_empty()) {
        if !out.is_empty() {
            out.push(sep);
        }
        out.push_str(line);
    }
    out
}

/// SPEC §5 `clean`: comments and blank lines out, lines right-stripped, joined with `\n`.
pub fn clean(x: &str) -> String {
    join_lines(py_splitlines(x), '\n', x.len(), |line| {
        (!py_strip(line).starts_with('#')).then(|| py_rstrip(cut_inline_comment(line)))
    })
}

/// SPEC §5 `lj` of an already cleaned text: stripped non-empty lines joined with one space.
pub fn lj_of_clean(cleaned: &str) -> String {
    join_lines(cleaned.split('\n'), ' ', cleaned.len(), |line| Some(py_strip(line)))
}

/// SPEC §5 `lj`.
pub fn lj(x: &str) -> String {
    lj_of_clean(&clean(x))
}

/// The text fallback of `canon`: stripped non-empty lines of an already cleaned text, joined with `\n`.
pub fn stripped_lines_of_clean(cleaned: &str) -> String {
    join_lines(cleaned.split('\n'), '\n', cleaned.len(), |line| Some(py_strip(line)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitlines_like_python() {
        assert_eq!(py_splitlines("a\r\nb\rc\n\nd\u{2028}e\n"), vec!["a", "b", "c", "", "d", "e"]);
        assert_eq!(py_splitlines(""), Vec::<&str>::new());
        assert_eq!(py_splitlines("\n"), vec![""]);
    }

    #[test]
    fn clean_drops_comments_but_not_quoted_hashes() {
        let x = "# top\non: push  # trigger\n\n   \nrun: echo \"#x\" '#y'\n  # indented\nurl: a#b\n";
        assert_eq!(clean(x), "on: push\nrun: echo \"#x\" '#y'\nurl: a");
        assert_eq!(lj(x), "on: push run: echo \"#x\" '#y' url: a");
    }

    #[test]
    fn python_whitespace_includes_file_separators() {
        assert_eq!(py_split("a\u{1f}b\u{a0}c").collect::<Vec<_>>(), vec!["a", "b", "c"]);
        assert_eq!(py_strip("\u{1c} x \u{3000}"), "x");
    }
}
