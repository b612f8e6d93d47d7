//! Rules of the house's shape that a reader of the source can check: no function in src/ is
//! longer than [`MAX_FN_LINES`] lines (issue 33), so every long piece of work is split into
//! named steps that say what they do; and imports between the rooms of src/ run only
//! downwards ([`ROOMS`]), so no circle crosses rooms.

use std::path::{Path, PathBuf};

/// The most lines a function may span, from its `fn` line to its closing brace.
const MAX_FN_LINES: usize = 120;

/// Functions allowed over the limit: none. (Kept so the check that an entry is still over the
/// limit stays tried.)
const ALLOWED_OVER_LIMIT: &[(&str, &str)] = &[];

/// The source with comments, string and character literals blanked (newlines kept), so that
/// only code's braces are counted.
fn code_only(src: &str) -> Vec<u8> {
    let b = src.as_bytes();
    let mut out = b.to_vec();
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for c in &mut out[from..to] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            let end = b[i..].iter().position(|c| *c == b'\n').map_or(b.len(), |p| i + p);
            blank(&mut out, i, end);
            i = end;
        } else if b[i..].starts_with(b"/*") {
            let (mut depth, mut j) = (0, i);
            while j < b.len() {
                if b[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if b[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            blank(&mut out, i, j);
            i = j;
        } else if (b[i] == b'r' || (b[i] == b'b' && b.get(i + 1) == Some(&b'r')))
            && (i == 0 || !ident(b[i - 1]))
            && raw_string_start(&b[i..]).is_some()
        {
            let (open, hashes) = raw_string_start(&b[i..]).unwrap();
            let mut close = vec![b'"'];
            close.extend(std::iter::repeat_n(b'#', hashes));
            let from = i + open;
            let end = find(&b[from..], &close).map_or(b.len(), |p| from + p + close.len());
            blank(&mut out, i, end);
            i = end;
        } else if b[i] == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            blank(&mut out, i, (j + 1).min(b.len()));
            i = j + 1;
        } else if b[i] == b'\'' {
            // A character literal ('x', '\n', '\u{..}'), not a lifetime ('a).
            let len = if b.get(i + 1) == Some(&b'\\') {
                b[i + 2..].iter().position(|c| *c == b'\'').map(|p| p + 3)
            } else {
                let ch = src[i + 1..].chars().next().map_or(1, char::len_utf8);
                (b.get(i + 1 + ch) == Some(&b'\'')).then_some(ch + 2)
            };
            match len {
                Some(n) => {
                    blank(&mut out, i, i + n);
                    i += n;
                }
                None => i += 1,
            }
        } else {
            i += 1;
        }
    }
    out
}

/// `r"`, `r#"`, `br##"`…: the opening's length and its number of hashes.
fn raw_string_start(b: &[u8]) -> Option<(usize, usize)> {
    let mut j = if b[0] == b'b' { 2 } else { 1 };
    let hashes = b[j..].iter().take_while(|c| **c == b'#').count();
    j += hashes;
    (b.get(j) == Some(&b'"')).then_some((j + 1, hashes))
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Every function with a body in `src`: (name, first line, lines spanned).
fn functions(src: &str) -> Vec<(String, usize, usize)> {
    let code = code_only(src);
    let line_of = |at: usize| code[..at].iter().filter(|c| **c == b'\n').count() + 1;
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(p) = find(&code[i..], b"fn") {
        let at = i + p;
        i = at + 2;
        if (at > 0 && ident(code[at - 1])) || !code.get(at + 2).is_some_and(|c| c.is_ascii_whitespace()) {
            continue;
        }
        let name_start = at + 2 + code[at + 2..].iter().take_while(|c| c.is_ascii_whitespace()).count();
        let name_len = code[name_start..].iter().take_while(|c| ident(**c)).count();
        if name_len == 0 {
            continue;
        }
        let name = String::from_utf8_lossy(&code[name_start..name_start + name_len]).into_owned();
        // The body's opening brace: the first `{` outside parentheses and brackets, unless a
        // `;` ends a declaration first (a trait's method without a body).
        let mut j = name_start + name_len;
        let mut depth = 0i32;
        let open = loop {
            match code.get(j) {
                None => break None,
                Some(b'(') | Some(b'[') => depth += 1,
                Some(b')') | Some(b']') => depth -= 1,
                Some(b';') if depth == 0 => break None,
                Some(b'{') if depth == 0 => break Some(j),
                _ => {}
            }
            j += 1;
        };
        let Some(open) = open else { continue };
        let mut depth = 0;
        let mut close = open;
        for (k, c) in code[open..].iter().enumerate() {
            match c {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        close = open + k;
                        break;
                    }
                }
                _ => {}
            }
        }
        let first = line_of(at);
        out.push((name, first, line_of(close) - first + 1));
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_function_in_src_is_over_the_limit() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    files.sort();
    let mut over = Vec::new();
    let mut allowed_seen = Vec::new();
    for path in &files {
        let rel = path.strip_prefix(root).unwrap().to_string_lossy().into_owned();
        let src = std::fs::read_to_string(path).unwrap();
        for (name, line, lines) in functions(&src) {
            if lines <= MAX_FN_LINES {
                continue;
            }
            if ALLOWED_OVER_LIMIT.contains(&(rel.as_str(), name.as_str())) {
                allowed_seen.push((rel.clone(), name));
                continue;
            }
            over.push(format!("{rel}:{line} fn {name}: {lines} lines"));
        }
    }
    assert!(
        over.is_empty(),
        "functions over {MAX_FN_LINES} lines (split them into named steps):\n{}",
        over.join("\n")
    );
    let stale: Vec<String> = ALLOWED_OVER_LIMIT
        .iter()
        .filter(|(f, n)| !allowed_seen.iter().any(|(sf, sn)| sf == f && sn == n))
        .map(|(f, n)| format!("{f} fn {n}"))
        .collect();
    assert!(
        stale.is_empty(),
        "ALLOWED_OVER_LIMIT names functions no longer over the limit: remove them:\n{}",
        stale.join("\n")
    );
}

#[test]
fn the_counter_sees_what_the_compiler_sees() {
    let src = r##"
fn short() {
    let s = "}}} fn fake() {";
    let c = '}';
    // fn commented() {
    /* } */
}

trait T {
    fn declared(&self) -> u32;
}

fn takes_pointer(f: fn(u32) -> u32, x: &'static str) -> [u8; 2] where u32: Copy {
    let _ = (f, x, r#"{"#);
    [0; 2]
}
"##;
    let found = functions(src);
    assert_eq!(
        found,
        vec![("short".to_string(), 2, 6), ("takes_pointer".to_string(), 13, 4)]
    );
}

/// The rooms of `src/` (its top-level modules), ground first: a room's code names only rooms
/// before it, so no import circle crosses rooms and no arrow points upward (its tests may use
/// anything). A new top-level module takes its place here.
const ROOMS: &[&str] = &[
    "stop",
    "sys",
    "format",
    "warning",
    "choice",
    "machine",
    "observation",
    "case",
    "measure",
    "sysinfo",
    "net",
    "fake",
    "servers",
    "micro",
    "fleet",
    "sweep",
    "store",
    "report",
    "cli",
];

/// `code` (from [`code_only`]) with every `#[cfg(test)]` item blanked: the attribute and the
/// item after it, to its closing brace or its `;`.
fn without_tests(mut code: Vec<u8>) -> Vec<u8> {
    while let Some(at) = find(&code, b"#[cfg(test)]") {
        let mut end = at;
        let mut depth = 0;
        for (k, c) in code[at..].iter().enumerate() {
            match c {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = at + k + 1;
                        break;
                    }
                }
                b';' if depth == 0 => {
                    end = at + k + 1;
                    break;
                }
                _ => {}
            }
        }
        for c in &mut code[at..end.max(at + 1)] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    }
    code
}

/// The rooms `code` names (`crate::room::…`, `$crate::room::…`, `crate::{room, …}`).
fn rooms_named(code: &[u8]) -> Vec<String> {
    let ident = |c: &u8| c.is_ascii_alphanumeric() || *c == b'_';
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(p) = find(&code[i..], b"crate::") {
        let at = i + p;
        i = at + 7;
        if at > 0 && ident(&code[at - 1]) {
            continue;
        }
        if code.get(i) == Some(&b'{') {
            // A group: the first name of each path at its top level.
            let mut depth = 0;
            let mut start = true;
            for (k, c) in code[i..].iter().enumerate() {
                match c {
                    b'{' => {
                        depth += 1;
                        start = depth == 1;
                    }
                    b'}' => {
                        depth -= 1;
                        if depth == 0 {
                            i += k;
                            break;
                        }
                    }
                    b',' if depth == 1 => start = true,
                    c if start && ident(c) => {
                        let name: Vec<u8> = code[i + k..].iter().take_while(|c| ident(c)).copied().collect();
                        out.push(String::from_utf8_lossy(&name).into_owned());
                        start = false;
                    }
                    _ => {}
                }
            }
        } else {
            let name: Vec<u8> = code[i..].iter().take_while(|c| ident(c)).copied().collect();
            out.push(String::from_utf8_lossy(&name).into_owned());
        }
    }
    out
}

/// The upward arrows of one file of room `room`: each room it names above its own.
fn upward_arrows(room: &str, src: &str) -> Vec<String> {
    let rank = |r: &str| ROOMS.iter().position(|x| *x == r);
    let own = rank(room).unwrap_or_else(|| panic!("src/{room} is in no room of ROOMS: give it its place"));
    let mut named = rooms_named(&without_tests(code_only(src)));
    named.sort();
    named.dedup();
    named
        .into_iter()
        .filter(|r| rank(r).is_some_and(|other| other > own))
        .collect()
}

#[test]
fn imports_run_only_downwards_between_rooms() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    files.sort();
    let mut upward = Vec::new();
    for path in &files {
        let rel = path
            .strip_prefix(root.join("src"))
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let room = rel.split('/').next().unwrap().trim_end_matches(".rs");
        if room == "lib" || room == "main" {
            continue;
        }
        for above in upward_arrows(room, &std::fs::read_to_string(path).unwrap()) {
            upward.push(format!("src/{rel} ({room}) names {above}"));
        }
    }
    assert!(
        upward.is_empty(),
        "imports pointing up the rooms (ground first: {}):\n{}",
        ROOMS.join(" < "),
        upward.join("\n")
    );
}

#[test]
fn an_upward_arrow_is_seen_and_tests_and_comments_are_not() {
    let src = r#"
use crate::sys::net;
use crate::{stop, cli::Args};
// crate::report in a comment
const S: &str = "crate::store";
fn f() { let _ = crate::format::bytes(1); }
#[cfg(test)]
mod tests {
    use crate::report::x;
}
"#;
    assert_eq!(upward_arrows("case", src), vec!["cli".to_string()]);
    assert_eq!(upward_arrows("cli", src), Vec::<String>::new());
}
