//! Zhang–Shasha tree edit distance with keyroots, matching `zss.simple_distance` with unit costs:
//! relabel costs 1 unless labels are equal, and — as zss's `label_dist('', label)` implies — inserting
//! or deleting a node costs 1 unless its label is the empty string.

use rustc_hash::FxHashMap;

/// A labelled ordered tree in left-to-right postorder with leftmost-leaf descendants and keyroots.
#[derive(Debug, Clone)]
pub struct Tree {
    labels: Vec<Box<str>>,
    lld: Vec<u32>,
    keyroots: Vec<u32>,
}

/// Nodes under construction: label and children (indices into the same arena).
#[derive(Debug, Default)]
pub struct Arena {
    labels: Vec<Box<str>>,
    children: Vec<Vec<u32>>,
}

impl Arena {
    pub fn add(&mut self, label: &str) -> u32 {
        self.labels.push(Box::from(label));
        self.children.push(Vec::new());
        (self.labels.len() - 1) as u32
    }

    pub fn attach(&mut self, parent: u32, child: u32) {
        self.children[parent as usize].push(child);
    }

    /// Freezes the arena into a tree rooted at `root`; iterative, so deep nesting cannot overflow the stack.
    pub fn into_tree(mut self, root: u32) -> Tree {
        let n = self.labels.len();
        let mut post: Vec<u32> = Vec::with_capacity(n);
        let mut stack: Vec<(u32, usize)> = vec![(root, 0)];
        while let Some(&mut (node, ref mut next)) = stack.last_mut() {
            let kids = &self.children[node as usize];
            if *next < kids.len() {
                let c = kids[*next];
                *next += 1;
                stack.push((c, 0));
            } else {
                post.push(node);
                stack.pop();
            }
        }
        let mut pos = vec![u32::MAX; n];
        for (i, &node) in post.iter().enumerate() {
            pos[node as usize] = i as u32;
        }
        let mut lld = vec![0u32; post.len()];
        for (i, &node) in post.iter().enumerate() {
            let kids = &self.children[node as usize];
            lld[i] = match kids.first() {
                None => i as u32,
                Some(&c) => lld[pos[c as usize] as usize],
            };
        }
        // A keyroot is the highest node (in postorder) for its leftmost leaf.
        let mut highest: FxHashMap<u32, u32> = FxHashMap::default();
        for (i, &l) in lld.iter().enumerate() {
            highest.insert(l, i as u32);
        }
        let mut keyroots: Vec<u32> = highest.into_values().collect();
        keyroots.sort_unstable();
        let labels = post.iter().map(|&node| std::mem::take(&mut self.labels[node as usize])).collect();
        Tree { labels, lld, keyroots }
    }
}

impl Tree {
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    #[cfg(test)]
    pub fn labels(&self) -> impl Iterator<Item = &str> {
        self.labels.iter().map(|l| &**l)
    }
}

fn intern<'t>(labels: &'t [Box<str>], ids: &mut FxHashMap<&'t str, u32>) -> Vec<u32> {
    labels
        .iter()
        .map(|l| {
            let next = ids.len() as u32;
            *ids.entry(&**l).or_insert(next)
        })
        .collect()
}

/// Tree edit distance between `a` and `b`.
pub fn distance(a: &Tree, b: &Tree) -> u32 {
    // Labels become small integers shared by both trees so the inner loop compares integers.
    let mut ids: FxHashMap<&str, u32> = FxHashMap::default();
    let la = intern(&a.labels, &mut ids);
    let lb = intern(&b.labels, &mut ids);
    let empty = ids.get("").copied();
    let cost_a: Vec<u32> = la.iter().map(|&l| (Some(l) != empty) as u32).collect();
    let cost_b: Vec<u32> = lb.iter().map(|&l| (Some(l) != empty) as u32).collect();
    let (n1, n2) = (a.len(), b.len());
    let mut td = vec![0u32; n1 * n2];
    let mut fd = vec![0u32; (n1 + 1) * (n2 + 1)];
    for &i in &a.keyroots {
        let i = i as usize;
        let li = a.lld[i] as usize;
        for &j in &b.keyroots {
            let j = j as usize;
            let lj = b.lld[j] as usize;
            let rows = i - li + 2;
            let cols = j - lj + 2;
            fd[0] = 0;
            for x in 1..rows {
                fd[x * cols] = fd[(x - 1) * cols] + cost_a[li + x - 1];
            }
            for y in 1..cols {
                fd[y] = fd[y - 1] + cost_b[lj + y - 1];
            }
            for x in 1..rows {
                let na = li + x - 1;
                let whole_a = a.lld[na] as usize == li;
                let del = cost_a[na];
                let p = a.lld[na] as usize - li;
                for y in 1..cols {
                    let nb = lj + y - 1;
                    let up = fd[(x - 1) * cols + y] + del;
                    let left = fd[x * cols + y - 1] + cost_b[nb];
                    let v = if whole_a && b.lld[nb] as usize == lj {
                        let diag = fd[(x - 1) * cols + y - 1] + (la[na] != lb[nb]) as u32;
                        let v = up.min(left).min(diag);
                        td[na * n2 + nb] = v;
                        v
                    } else {
                        let q = b.lld[nb] as usize - lj;
                        up.min(left).min(fd[p * cols + q] + td[na * n2 + nb])
                    };
                    fd[x * cols + y] = v;
                }
            }
        }
    }
    td[(n1 - 1) * n2 + (n2 - 1)]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds a tree from a compact notation: `a(b,c(d))`.
    pub(crate) fn parse(s: &str) -> Tree {
        let mut arena = Arena::default();
        let chars: Vec<char> = s.chars().collect();
        let mut stack: Vec<u32> = Vec::new();
        let mut root = None;
        let mut i = 0;
        while i < chars.len() {
            match chars[i] {
                '(' => {}
                ',' => {
                    stack.pop();
                }
                ')' => {
                    stack.pop();
                }
                _ => {
                    let start = i;
                    while i < chars.len() && !"(),".contains(chars[i]) {
                        i += 1;
                    }
                    let label: String = chars[start..i].iter().collect();
                    let label = if label == "_" { String::new() } else { label };
                    let node = arena.add(&label);
                    if let Some(&p) = stack.last() {
                        arena.attach(p, node);
                    } else {
                        root = Some(node);
                    }
                    stack.push(node);
                    continue;
                }
            }
            i += 1;
        }
        arena.into_tree(root.unwrap())
    }

    #[test]
    fn classic_example() {
        // The zss README example: distance 2.
        let a = parse("f(d(a,c(b)),e)");
        let b = parse("f(c(d(a,b)),e)");
        assert_eq!(distance(&a, &b), 2);
        assert_eq!(distance(&a, &a), 0);
    }

    #[test]
    fn empty_labels_are_free_to_insert() {
        let a = parse("root(k)");
        let b = parse("root(k(_))");
        assert_eq!(distance(&a, &b), 0);
        let c = parse("root(k(v))");
        assert_eq!(distance(&a, &c), 1);
    }
}
