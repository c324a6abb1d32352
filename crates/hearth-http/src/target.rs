//! The request target as nginx takes it.
//!
//! nginx accepts any byte in a request target but control characters,
//! spaces and DEL, and passes the target to PHP byte for byte:
//! `REQUEST_URI` is the target as sent (from the path on, for an absolute
//! URL), `#` and all; `QUERY_STRING` is what follows the first `?` up to a
//! `#`. hyper parses the target with the `http` crate, which is stricter:
//! it refuses `"`, `<`, `>` and `` ` `` (in the path or the query), bytes
//! >= 0x80 that are not UTF-8, and it cuts a `#` and what follows off.
//!
//! hyper has no option to relax that, so a target holding any of these
//! bytes is handed to hyper with them percent-encoded (what a browser would
//! have sent; a path decodes to the same bytes either way), and the target
//! as the client sent it travels beside the request as a [`RawTarget`],
//! from which `$_SERVER` is built. No I/O here.

use bytes::Bytes;
use http::StatusCode;

/// The request URI exactly as the client sent it (for an absolute URL,
/// from the path on), when hyper was given a re-encoded one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawTarget(pub Bytes);

/// Whether a request-line target has one of the forms nginx serves: a path
/// (`/...`), or an absolute URL (`scheme://...`). nginx refuses `*` and a
/// bare authority with 400, and so does Hearth.
pub(crate) fn has_valid_form(target: &[u8]) -> bool {
    match target.first() {
        Some(b'/') => true,
        Some(first) if first.is_ascii_alphabetic() => {
            let scheme_end = target
                .iter()
                .position(|&b| !(b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.')))
                .unwrap_or(target.len());
            target[scheme_end..].starts_with(b"://")
        }
        _ => false,
    }
}

/// Bytes the `http` crate refuses somewhere in a target that nginx takes.
fn needs_encoding(b: u8) -> bool {
    matches!(b, b'"' | b'<' | b'>' | b'`') || b >= 0x80
}

/// Where the request URI starts: 0 for a path, after the scheme and the
/// authority for an absolute URL.
fn request_uri_start(target: &[u8]) -> usize {
    if target.first() == Some(&b'/') {
        return 0;
    }
    let after_scheme = target
        .windows(3)
        .position(|w| w == b"://")
        .map_or(0, |at| at + 3);
    target[after_scheme..]
        .iter()
        .position(|&b| matches!(b, b'/' | b'?' | b'#'))
        .map_or(target.len(), |at| after_scheme + at)
}

/// Longest target hyper takes (`http`'s limit); a longer one is a 414.
const MAX_URI_LEN: usize = u16::MAX as usize - 1;

/// The target to hand hyper, and the one to keep for `$_SERVER`, when they
/// differ: None when hyper can take the target as it is. Err with the
/// status to answer when not even the re-encoded target is one hyper takes
/// (a malformed absolute URL, or one too long once encoded).
pub(crate) fn for_hyper(
    target: &[u8],
) -> Result<Option<(Bytes, RawTarget)>, (StatusCode, &'static str)> {
    let start = request_uri_start(target);
    let uri = &target[start..];
    let rewrite = uri.iter().any(|&b| needs_encoding(b) || b == b'#');
    if !rewrite && start == 0 {
        // A path of bytes the `http` crate takes everywhere: the common case.
        return Ok(None);
    }
    let handed = if rewrite {
        let mut encoded = Vec::with_capacity(target.len() + 32);
        encoded.extend_from_slice(&target[..start]);
        for &b in uri {
            if needs_encoding(b) {
                encoded.extend_from_slice(&[
                    b'%',
                    HEX[usize::from(b >> 4)],
                    HEX[usize::from(b & 15)],
                ]);
            } else {
                encoded.push(b);
            }
        }
        Bytes::from(encoded)
    } else {
        Bytes::copy_from_slice(target)
    };
    if handed.len() > MAX_URI_LEN {
        return Err((
            StatusCode::URI_TOO_LONG,
            "request target too long once encoded",
        ));
    }
    match http::Uri::from_maybe_shared(handed.clone()) {
        Ok(_) if rewrite => Ok(Some((handed, RawTarget(Bytes::copy_from_slice(uri))))),
        Ok(_) => Ok(None),
        Err(_) => Err((StatusCode::BAD_REQUEST, "invalid request target")),
    }
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

/// `QUERY_STRING` as nginx makes it from a request URI: what follows the
/// first `?`, up to a `#`; empty when a `#` comes first.
pub(crate) fn query(request_uri: &[u8]) -> &[u8] {
    let end = request_uri
        .iter()
        .position(|&b| b == b'#')
        .unwrap_or(request_uri.len());
    let uri = &request_uri[..end];
    match uri.iter().position(|&b| b == b'?') {
        Some(at) => &uri[at + 1..],
        None => b"",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_nginx_serves() {
        for ok in [
            &b"/"[..],
            b"/a?b",
            b"http://x/a",
            b"HTTPS://x",
            b"coap+tcp://x/",
        ] {
            assert!(has_valid_form(ok), "{}", String::from_utf8_lossy(ok));
        }
        for bad in [
            &b"*"[..],
            b"a",
            b"x:80",
            b"http:/a",
            b"1http://x/",
            b"?a",
            b"",
        ] {
            assert!(!has_valid_form(bad), "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn targets_hyper_takes_are_left_alone() {
        for target in [&b"/a/b?c=d&e[]=f"[..], b"/{x}|^\\?{y}|^\\", b"http://x/a?b"] {
            assert_eq!(
                for_hyper(target),
                Ok(None),
                "{}",
                String::from_utf8_lossy(target)
            );
        }
    }

    #[test]
    fn other_bytes_are_encoded_for_hyper_and_kept_for_php() {
        let (handed, raw) = for_hyper(b"/p\"<`>\xc3\xa9\xff?q=\"<>`\xe9#f?g")
            .unwrap()
            .unwrap();
        assert_eq!(
            &handed[..],
            b"/p%22%3C%60%3E%C3%A9%FF?q=%22%3C%3E%60%E9#f?g"
        );
        assert_eq!(&raw.0[..], b"/p\"<`>\xc3\xa9\xff?q=\"<>`\xe9#f?g");
        let uri = http::Uri::from_maybe_shared(handed).unwrap();
        assert_eq!(uri.path(), "/p%22%3C%60%3E%C3%A9%FF");

        let (handed, raw) = for_hyper(b"http://x:8080/a?\"b\"").unwrap().unwrap();
        assert_eq!(&handed[..], b"http://x:8080/a?%22b%22");
        assert_eq!(&raw.0[..], b"/a?\"b\"");

        // A fragment alone: hyper cuts it, PHP keeps it.
        let (handed, raw) = for_hyper(b"/a?b#c").unwrap().unwrap();
        assert_eq!(&handed[..], b"/a?b#c");
        assert_eq!(&raw.0[..], b"/a?b#c");
    }

    #[test]
    fn malformed_absolute_urls_are_refused() {
        let bad = Err((StatusCode::BAD_REQUEST, "invalid request target"));
        assert_eq!(for_hyper(b"http://a{b}/"), bad);
        assert_eq!(for_hyper(b"http://a b/"), bad);
        let long = [&b"/"[..], &[0xe9; 30000]].concat();
        assert_eq!(
            for_hyper(&long).map_err(|e| e.0),
            Err(StatusCode::URI_TOO_LONG)
        );
    }

    #[test]
    fn the_query_ends_at_a_fragment() {
        assert_eq!(query(b"/a?b=1&c"), b"b=1&c");
        assert_eq!(query(b"/a?b#c?d"), b"b");
        assert_eq!(query(b"/a#c?d"), b"");
        assert_eq!(query(b"/a"), b"");
        assert_eq!(query(b"/a?b?c"), b"b?c");
    }
}
