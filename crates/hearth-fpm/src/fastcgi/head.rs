//! The CGI response head (RFC 3875 section 6) as nginx's FastCGI module
//! reads it (`ngx_http_fastcgi_process_header`). No I/O.

/// Where the head ends in `buf`: the offset of the first body byte, after
/// the first empty line (`\r\n` or `\n` line ends, mixed as nginx allows).
pub(crate) fn end_of_head(buf: &[u8]) -> Option<usize> {
    let mut start = 0;
    while let Some(nl) = buf[start..].iter().position(|&b| b == b'\n') {
        let line = &buf[start..start + nl];
        if line.is_empty() || line == b"\r" {
            return Some(start + nl + 1);
        }
        start += nl + 1;
    }
    None
}

/// A parsed head: the status, its reason phrase and the other header lines
/// in the order PHP sent them.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Head {
    pub(crate) status: u16,
    pub(crate) reason: String,
    pub(crate) headers: Vec<(String, Vec<u8>)>,
}

/// Parses the head (without its empty line) as nginx does: `Status: 404
/// Not Found` gives the status (three digits, else the response is
/// invalid: nginx's "upstream sent invalid status", a 502); a `Location`
/// without `Status` gives 302 Moved Temporarily; otherwise 200 OK. Names
/// are letters, digits, `-` and `_`; a line without a colon is a header with
/// an empty value, as nginx reads it.
pub(crate) fn parse(head: &[u8]) -> Result<Head, String> {
    let mut status = None;
    let mut headers = Vec::new();
    for line in head.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            continue;
        }
        let (name, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => (&line[..colon], trim(&line[colon + 1..])),
            None => (line, &b""[..]),
        };
        let valid_name = !name.is_empty()
            && name
                .iter()
                .all(|&b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !valid_name || value.contains(&0) {
            return Err(format!(
                "invalid header line {:?}",
                String::from_utf8_lossy(line)
            ));
        }
        let name = String::from_utf8_lossy(name).into_owned();
        if name.eq_ignore_ascii_case("status") {
            if status.is_none() {
                status = Some(parse_status(value)?);
            }
            continue;
        }
        headers.push((name, value.to_vec()));
    }
    let (status, reason) = match status {
        Some(found) => found,
        None if headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("location")) =>
        {
            (302, "Moved Temporarily".to_owned())
        }
        None => (200, "OK".to_owned()),
    };
    Ok(Head {
        status,
        reason,
        headers,
    })
}

fn parse_status(value: &[u8]) -> Result<(u16, String), String> {
    let code = value.get(..3).filter(|c| c.iter().all(u8::is_ascii_digit));
    let status = code
        .map(|c| c.iter().fold(0u16, |n, d| n * 10 + u16::from(d - b'0')))
        .filter(|&n| n >= 100)
        .ok_or_else(|| format!("invalid status {:?}", String::from_utf8_lossy(value)))?;
    let reason = String::from_utf8_lossy(trim(&value[3..])).into_owned();
    Ok((status, reason))
}

fn trim(bytes: &[u8]) -> &[u8] {
    let start = bytes.iter().position(|b| !matches!(b, b' ' | b'\t'));
    let end = bytes.iter().rposition(|b| !matches!(b, b' ' | b'\t'));
    match (start, end) {
        (Some(s), Some(e)) => &bytes[s..=e],
        _ => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(head: &Head) -> Vec<&str> {
        head.headers.iter().map(|(n, _)| n.as_str()).collect()
    }

    #[test]
    fn the_head_ends_at_the_first_empty_line_with_either_line_end() {
        assert_eq!(end_of_head(b"A: b\r\n\r\nbody"), Some(8));
        assert_eq!(end_of_head(b"A: b\n\nbody"), Some(6));
        assert_eq!(end_of_head(b"A: b\r\n\nbody"), Some(7));
        assert_eq!(end_of_head(b"A: b\r\n"), None);
        assert_eq!(end_of_head(b"\r\nbody"), Some(2));
    }

    #[test]
    fn status_header_gives_the_status_and_is_not_kept() {
        let head = parse(b"X-Powered-By: PHP\r\nStatus: 404 Not Found\r\nContent-type: text/html")
            .expect("valid");
        assert_eq!((head.status, head.reason.as_str()), (404, "Not Found"));
        assert_eq!(names(&head), ["X-Powered-By", "Content-type"]);
    }

    #[test]
    fn status_without_reason_has_an_empty_reason() {
        let head = parse(b"Status: 418").expect("valid");
        assert_eq!((head.status, head.reason.as_str()), (418, ""));
    }

    #[test]
    fn location_without_status_is_302_and_with_status_keeps_it() {
        let head = parse(b"Location: /x").expect("valid");
        assert_eq!(
            (head.status, head.reason.as_str()),
            (302, "Moved Temporarily")
        );
        assert_eq!(head.headers, [("Location".to_owned(), b"/x".to_vec())]);
        let head = parse(b"Status: 301 Moved Permanently\nLocation: /x").expect("valid");
        assert_eq!(head.status, 301);
    }

    #[test]
    fn no_status_is_200_and_order_and_repeats_are_kept() {
        let head = parse(b"Set-Cookie: a=1\r\nVary: x\r\nSet-Cookie: b=2").expect("valid");
        assert_eq!((head.status, head.reason.as_str()), (200, "OK"));
        assert_eq!(names(&head), ["Set-Cookie", "Vary", "Set-Cookie"]);
        assert_eq!(head.headers[2].1, b"b=2");
    }

    #[test]
    fn invalid_status_and_names_are_errors() {
        for bad in [
            &b"Status: abc"[..],
            b"Status: 4",
            b"Status: 099 x",
            b"Bad Name: x",
            b"A: x\0y",
        ] {
            assert!(parse(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn a_line_without_colon_is_a_header_with_an_empty_value() {
        let head = parse(b"X-Flag").expect("valid");
        assert_eq!(head.headers, [("X-Flag".to_owned(), Vec::new())]);
    }
}
