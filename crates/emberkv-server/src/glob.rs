//! Redis glob patterns, for KEYS, SCAN MATCH and CONFIG GET.
//!
//! The syntax is Redis's `stringmatchlen`: `*` any run of bytes, `?` any
//! one byte, `[abc]` a class, `[^a]` a negated class, `[a-z]` a range (a
//! reversed range is swapped), `\x` the byte `x` literally (inside and
//! outside classes); an unterminated class runs to the end of the pattern.
//! Matching is byte-wise. `*` is matched by backtracking to the last star
//! only, which is complete for globs and takes O(pattern x string) time, so
//! a hostile pattern cannot blow up (Redis bounds its recursion instead).

/// Whether `s` matches the glob `pattern`. An empty `s` matches only the
/// empty pattern and a lone `*`, as in Redis: `stringmatchlen` matches an
/// empty string only with an empty pattern (so not `**` nor `?*`), and
/// KEYS and SCAN take a lone `*` as every key without matching.
pub fn matches(pattern: &[u8], s: &[u8]) -> bool {
    if s.is_empty() {
        return pattern.is_empty() || pattern == b"*";
    }
    let (mut p, mut i) = (0, 0);
    // After a star: where the pattern resumes and the string position the
    // star has absorbed up to.
    let mut star: Option<(usize, usize)> = None;
    loop {
        if p < pattern.len() && pattern[p] == b'*' {
            while p < pattern.len() && pattern[p] == b'*' {
                p += 1;
            }
            if p == pattern.len() {
                return true;
            }
            star = Some((p, i));
            continue;
        }
        if i < s.len() && p < pattern.len() {
            let (ok, next) = token(pattern, p, s[i]);
            if ok {
                p = next;
                i += 1;
                continue;
            }
        } else if i == s.len() && p == pattern.len() {
            return true;
        }
        match star {
            Some((sp, si)) if si < s.len() => {
                star = Some((sp, si + 1));
                p = sp;
                i = si + 1;
            }
            _ => return false,
        }
    }
}

/// Matches the one pattern token at `p` (not a star) against byte `c`;
/// returns whether it matched and where the next token starts.
fn token(pattern: &[u8], mut p: usize, c: u8) -> (bool, usize) {
    let n = pattern.len();
    match pattern[p] {
        b'?' => (true, p + 1),
        b'\\' if n - p >= 2 => (pattern[p + 1] == c, p + 2),
        b'[' => {
            p += 1;
            let negate = p < n && pattern[p] == b'^';
            if negate {
                p += 1;
            }
            let mut hit = false;
            loop {
                if p >= n {
                    // Unterminated: the class ends with the pattern.
                    break;
                } else if pattern[p] == b'\\' && n - p >= 2 {
                    p += 1;
                    hit |= pattern[p] == c;
                } else if pattern[p] == b']' {
                    p += 1;
                    break;
                } else if n - p >= 3 && pattern[p + 1] == b'-' {
                    let (a, b) = (pattern[p], pattern[p + 2]);
                    let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                    hit |= (lo..=hi).contains(&c);
                    p += 2;
                } else {
                    hit |= pattern[p] == c;
                }
                p += 1;
            }
            (hit != negate, p.min(n))
        }
        literal => (literal == c, p + 1),
    }
}

/// Whether `pattern` has no special bytes, so that it matches only itself.
pub fn is_literal(pattern: &[u8]) -> bool {
    !pattern
        .iter()
        .any(|b| matches!(b, b'*' | b'?' | b'[' | b'\\'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, s: &str) -> bool {
        matches(p.as_bytes(), s.as_bytes())
    }

    #[test]
    fn stars_and_question_marks() {
        assert!(m("*", ""));
        assert!(m("*", "anything"));
        assert!(m("h?llo", "hello"));
        assert!(m("h?llo", "hallo"));
        assert!(!m("h?llo", "hllo"));
        assert!(m("h*llo", "hllo"));
        assert!(m("h*llo", "heeeello"));
        assert!(m("*a*b*c*", "xxaxxbxxcxx"));
        assert!(!m("*a*b*c*", "xxaxxcxxbxx"));
        assert!(m("user:*", "user:42"));
        assert!(!m("user:*", "session:42"));
        assert!(m("**", "x"));
        // Regression (a differential test against redis-server 7.0.15,
        // 2026-12-05): `KEYS **` listed the empty key, which Redis's
        // matcher never matches but through a lone `*`.
        assert!(!m("**", ""));
        assert!(!m("*\\*", ""));
        assert!(!m("[a]*", ""));
        assert!(!m("a", ""));
        assert!(!m("", "a"));
        assert!(m("", ""));
        assert!(m("*x", "xxx"));
        assert!(!m("*x", "xxy"));
    }

    #[test]
    fn classes_ranges_and_negation() {
        assert!(m("h[ae]llo", "hello"));
        assert!(m("h[ae]llo", "hallo"));
        assert!(!m("h[ae]llo", "hillo"));
        assert!(m("h[^e]llo", "hallo"));
        assert!(!m("h[^e]llo", "hello"));
        assert!(m("h[a-b]llo", "hbllo"));
        assert!(!m("h[a-b]llo", "hcllo"));
        assert!(m("h[b-a]llo", "hallo"), "a reversed range is swapped");
        assert!(m("[\\]]", "]"));
        assert!(!m("[]", "a"), "an empty class matches nothing");
        assert!(m("[abc", "b"), "an unterminated class runs to the end");
        assert!(!m("[abc", "bx"));
    }

    #[test]
    fn escapes_are_literal() {
        assert!(m("h\\*llo", "h*llo"));
        assert!(!m("h\\*llo", "hello"));
        assert!(m("\\?", "?"));
        assert!(!m("\\?", "a"));
        assert!(m("a\\", "a\\"), "a trailing backslash is literal");
    }

    #[test]
    fn binary_bytes_match() {
        assert!(matches(b"a*\x00", b"ab\r\n\x00"));
        assert!(matches(b"[\x00-\x01]", b"\x01"));
    }

    #[test]
    fn hostile_patterns_stay_fast() {
        let s = "a".repeat(10_000);
        let p = format!("{}b", "*a".repeat(50));
        assert!(!m(&p, &s));
    }

    #[test]
    fn literal_detection() {
        assert!(is_literal(b"user:42"));
        assert!(!is_literal(b"user:*"));
        assert!(!is_literal(b"a[b]"));
        assert!(!is_literal(b"a\\b"));
    }
}
