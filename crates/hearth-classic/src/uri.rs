//! nginx's `$uri`: the request path decoded and normalized.
//!
//! This follows `ngx_http_parse_complex_uri()` with nginx's default
//! `merge_slashes on` (nginx 1.22, the one Debian 12 ships): `%XX` escapes
//! are decoded once, and a decoded byte counts as what it decodes to, so
//! `%2F` is a slash and `%2e%2e` a `..` segment; runs of slashes are merged;
//! `.` segments are dropped and `..` removes the segment before it. nginx
//! answers 400 to a path that climbs above `/`, to a broken escape and to an
//! escape that decodes to NUL, and so does [`normalize_uri`]. Written by hand
//! because the result must be nginx's, byte for byte (`%25` stays `%`,
//! `+` stays `+`, non-UTF-8 bytes stay as they are), which general URL
//! crates do not promise.

use std::fmt;

/// Why a request path has no `$uri`: nginx answers 400 to each of these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadUri {
    /// The path does not begin with `/`.
    NotAbsolute,
    /// A `%` not followed by two hex digits.
    BadEscape,
    /// A NUL byte, raw or as `%00`.
    Nul,
    /// A `..` segment that would climb above `/`.
    AboveRoot,
}

impl fmt::Display for BadUri {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BadUri::NotAbsolute => "the request path does not begin with /",
            BadUri::BadEscape => "the request path has a % not followed by two hex digits",
            BadUri::Nul => "the request path has a NUL byte",
            BadUri::AboveRoot => "the request path climbs above /",
        })
    }
}

impl std::error::Error for BadUri {}

/// The `$uri` nginx makes of a request path (the part of the target before
/// `?`, still percent-encoded): decoded, `//` merged, `.` and `..` resolved.
/// A trailing `.` or `..` segment leaves a trailing slash, as in nginx
/// (`/a/b/..` is `/a/`).
pub fn normalize_uri(raw: &[u8]) -> Result<Vec<u8>, BadUri> {
    if raw.first() != Some(&b'/') {
        return Err(BadUri::NotAbsolute);
    }
    let decoded = percent_decode(raw)?;
    let mut segments: Vec<&[u8]> = Vec::new();
    let mut trailing_slash = false;
    for segment in decoded.split(|&b| b == b'/').skip(1) {
        trailing_slash = matches!(segment, b"" | b"." | b"..");
        match segment {
            b"" | b"." => {}
            b".." => {
                if segments.pop().is_none() {
                    return Err(BadUri::AboveRoot);
                }
            }
            _ => segments.push(segment),
        }
    }
    let mut uri = Vec::with_capacity(decoded.len());
    for segment in &segments {
        uri.push(b'/');
        uri.extend_from_slice(segment);
    }
    if trailing_slash || segments.is_empty() {
        uri.push(b'/');
    }
    Ok(uri)
}

/// Whether `uri` is already what [`normalize_uri`] gives for it when its
/// `%` signs are taken literally: absolute, no NUL, no `//`, `.` or `..`.
pub fn is_normalized(uri: &[u8]) -> bool {
    uri.first() == Some(&b'/')
        && !uri.contains(&0)
        && uri
            .split(|&b| b == b'/')
            .skip(1)
            .enumerate()
            .all(|(i, segment)| match segment {
                b"." | b".." => false,
                // Only the last segment may be empty: a trailing slash.
                b"" => i == uri.split(|&b| b == b'/').count() - 2,
                _ => true,
            })
}

fn percent_decode(raw: &[u8]) -> Result<Vec<u8>, BadUri> {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let byte = match raw[i] {
            b'%' => {
                let hex = |at: usize| raw.get(at).and_then(|&b| (b as char).to_digit(16));
                match (hex(i + 1), hex(i + 2)) {
                    (Some(hi), Some(lo)) => {
                        i += 3;
                        (hi * 16 + lo) as u8
                    }
                    _ => return Err(BadUri::BadEscape),
                }
            }
            other => {
                i += 1;
                other
            }
        };
        if byte == 0 {
            return Err(BadUri::Nul);
        }
        out.push(byte);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(raw: &str) -> Result<String, BadUri> {
        normalize_uri(raw.as_bytes()).map(|u| String::from_utf8_lossy(&u).into_owned())
    }

    #[test]
    fn decodes_once() {
        assert_eq!(norm("/ad%6din.php").as_deref(), Ok("/admin.php"));
        assert_eq!(norm("/a%25b").as_deref(), Ok("/a%b"));
        assert_eq!(norm("/a%2541").as_deref(), Ok("/a%41"));
        assert_eq!(norm("/a+b%20c").as_deref(), Ok("/a+b c"));
        assert_eq!(normalize_uri(b"/%ff"), Ok(b"/\xff".to_vec()));
        assert_eq!(norm("/index.php/%0a").as_deref(), Ok("/index.php/\n"));
    }

    #[test]
    fn merges_slashes_including_encoded_ones() {
        assert_eq!(norm("//admin.php").as_deref(), Ok("/admin.php"));
        assert_eq!(norm("/index.php//x//y").as_deref(), Ok("/index.php/x/y"));
        assert_eq!(norm("/a%2F%2fb").as_deref(), Ok("/a/b"));
        assert_eq!(norm("/sub%2F").as_deref(), Ok("/sub/"));
    }

    #[test]
    fn resolves_dot_segments() {
        assert_eq!(norm("/sub/../admin.php").as_deref(), Ok("/admin.php"));
        assert_eq!(norm("/a/%2e%2e/admin.php").as_deref(), Ok("/admin.php"));
        assert_eq!(norm("/sub/./index.php").as_deref(), Ok("/sub/index.php"));
        assert_eq!(norm("/a/.").as_deref(), Ok("/a/"));
        assert_eq!(norm("/a/b/..").as_deref(), Ok("/a/"));
        assert_eq!(norm("/sub/..").as_deref(), Ok("/"));
        assert_eq!(norm("/").as_deref(), Ok("/"));
        assert_eq!(norm("/a..b/.../x").as_deref(), Ok("/a..b/.../x"));
    }

    #[test]
    fn refuses_what_nginx_answers_400() {
        assert_eq!(norm("/.."), Err(BadUri::AboveRoot));
        assert_eq!(norm("/../etc/passwd"), Err(BadUri::AboveRoot));
        assert_eq!(norm("/index.php/../.."), Err(BadUri::AboveRoot));
        assert_eq!(norm("/a/..%2F..%2Fx"), Err(BadUri::AboveRoot));
        assert_eq!(norm("/x.php%00.jpg"), Err(BadUri::Nul));
        assert_eq!(normalize_uri(b"/x\0"), Err(BadUri::Nul));
        assert_eq!(norm("/zz%zz"), Err(BadUri::BadEscape));
        assert_eq!(norm("/a%2"), Err(BadUri::BadEscape));
        assert_eq!(norm("a.php"), Err(BadUri::NotAbsolute));
        assert_eq!(norm(""), Err(BadUri::NotAbsolute));
    }

    #[test]
    fn normalized_paths_are_recognized() {
        for good in ["/", "/a", "/a/", "/a/b.php/c/", "/%zz"] {
            assert!(is_normalized(good.as_bytes()), "{good}");
        }
        for bad in ["", "a", "//", "/a//b", "/a/./b", "/a/..", "/.", "/a\0"] {
            assert!(!is_normalized(bad.as_bytes()), "{bad:?}");
        }
        for raw in ["/x", "/a/b/..", "/a//b/", "/sub%2F", "/%2e/x"] {
            let uri = normalize_uri(raw.as_bytes()).expect("valid");
            assert!(is_normalized(&uri), "{raw}");
        }
    }
}
