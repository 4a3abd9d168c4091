//! A position in a scalar's bytes: the hand-written matchers that stand in for ruamel.yaml's
//! resolver regexes (`resolve`) and its timestamp regex (`timestamp`) step through it.

pub(crate) struct Cursor<'a> {
    pub s: &'a [u8],
    pub i: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(s: &'a [u8]) -> Self {
        Cursor { s, i: 0 }
    }

    pub fn eat(&mut self, c: u8) -> bool {
        self.eat_str(&[c])
    }

    pub fn eat_str(&mut self, w: &[u8]) -> bool {
        let hit = self.s[self.i..].starts_with(w);
        if hit {
            self.i += w.len();
        }
        hit
    }

    /// An optional `-` or `+`.
    pub fn sign(&mut self) {
        if matches!(self.s.get(self.i), Some(b'-' | b'+')) {
            self.i += 1;
        }
    }

    /// How many bytes were taken while `f` held.
    pub fn many(&mut self, f: impl Fn(u8) -> bool) -> usize {
        let start = self.i;
        while self.i < self.s.len() && f(self.s[self.i]) {
            self.i += 1;
        }
        self.i - start
    }

    pub fn end(&self) -> bool {
        self.i == self.s.len()
    }
}
