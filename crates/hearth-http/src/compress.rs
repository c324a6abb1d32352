//! Content codings: which one a client accepts, which responses are worth
//! compressing, and gzip or brotli on the fly, for static files and for
//! whole PHP responses.

use async_compression::tokio::bufread::{BrotliEncoder, GzipEncoder};
use async_compression::Level;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Response, StatusCode};
use http_body_util::BodyExt as _;
use tokio::io::AsyncBufRead;

use crate::response::{ReaderBody, ResponseBody};

/// Bodies smaller than this are sent as they are: compressing them saves
/// less than the coding costs (nginx's `gzip_min_length` is 20, but brotli
/// and gzip headers make anything this small barely shrink).
pub(crate) const MIN_SIZE: u64 = 1024;

/// gzip level 6 (zlib's default) and brotli quality 4: most of the gain
/// for a fraction of the time the highest levels take, as fits a response
/// compressed for every request.
const GZIP_LEVEL: i32 = 6;
const BROTLI_QUALITY: i32 = 4;

/// A content coding Hearth produces or serves precompressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Coding {
    Brotli,
    Gzip,
}

impl Coding {
    /// The `Content-Encoding` value.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Coding::Brotli => "br",
            Coding::Gzip => "gzip",
        }
    }

    /// The suffix of a precompressed sibling file.
    pub(crate) fn suffix(self) -> &'static str {
        match self {
            Coding::Brotli => ".br",
            Coding::Gzip => ".gz",
        }
    }

    /// Compresses what `reader` yields, as a streamed body.
    pub(crate) fn encode(self, reader: impl AsyncBufRead + Send + 'static) -> ReaderBody {
        match self {
            Coding::Brotli => ReaderBody::new(
                BrotliEncoder::with_quality(reader, Level::Precise(BROTLI_QUALITY)),
                None,
            ),
            Coding::Gzip => ReaderBody::new(
                GzipEncoder::with_quality(reader, Level::Precise(GZIP_LEVEL)),
                None,
            ),
        }
    }
}

/// The codings the client accepts, most preferred first: by q-value, and
/// brotli before gzip when the client weighs them the same. `*` stands for
/// any coding not named; `q=0` refuses one.
pub(crate) fn accepted(headers: &HeaderMap) -> Vec<Coding> {
    let mut br: Option<f32> = None;
    let mut gzip: Option<f32> = None;
    let mut any: Option<f32> = None;
    for value in headers.get_all(header::ACCEPT_ENCODING) {
        let Ok(value) = value.to_str() else { continue };
        for item in value.split(',') {
            let mut params = item.split(';');
            let name = params.next().unwrap_or("").trim();
            let q = params
                .filter_map(|p| p.trim().strip_prefix("q=").or(p.trim().strip_prefix("Q=")))
                .find_map(|q| q.trim().parse::<f32>().ok())
                .unwrap_or(1.0);
            if name.eq_ignore_ascii_case("br") {
                br = Some(q);
            } else if name.eq_ignore_ascii_case("gzip") || name.eq_ignore_ascii_case("x-gzip") {
                gzip = Some(q);
            } else if name == "*" {
                any = Some(q);
            }
        }
    }
    let br = br.or(any).unwrap_or(0.0);
    let gzip = gzip.or(any).unwrap_or(0.0);
    let mut codings = Vec::with_capacity(2);
    if br > 0.0 && br >= gzip {
        codings.push(Coding::Brotli);
    }
    if gzip > 0.0 {
        codings.push(Coding::Gzip);
    }
    if br > 0.0 && br < gzip {
        codings.push(Coding::Brotli);
    }
    codings
}

/// Whether a media type compresses well: text, and the structured text
/// formats (JSON, JavaScript, XML, SVG) and uncompressed fonts and icons.
/// Server-sent events are left alone: they must reach the client as they
/// are written.
pub(crate) fn is_compressible(content_type: &str) -> bool {
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if essence == "text/event-stream" {
        return false;
    }
    essence.starts_with("text/")
        || essence.ends_with("+json")
        || essence.ends_with("+xml")
        || matches!(
            essence.as_str(),
            "application/json"
                | "application/javascript"
                | "application/x-javascript"
                | "application/ecmascript"
                | "application/xml"
                | "application/wasm"
                | "application/vnd.ms-fontobject"
                | "font/ttf"
                | "font/otf"
                | "image/x-icon"
                | "image/vnd.microsoft.icon"
                | "image/bmp"
        )
}

/// Adds `Accept-Encoding` to `Vary` unless it is there already.
pub(crate) fn add_vary(headers: &mut HeaderMap) {
    let present = headers.get_all(header::VARY).iter().any(|v| {
        v.to_str().is_ok_and(|v| {
            v.split(',')
                .any(|t| t.trim() == "*" || t.trim().eq_ignore_ascii_case("accept-encoding"))
        })
    });
    if !present {
        headers.append(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    }
}

/// A compressed body is not the bytes a strong `ETag` promised; like
/// nginx, keep the tag but make it weak.
fn weaken_etag(headers: &mut HeaderMap) {
    if let Some(tag) = headers.get(header::ETAG) {
        if tag.as_bytes().starts_with(b"\"") {
            let mut weak = b"W/".to_vec();
            weak.extend_from_slice(tag.as_bytes());
            if let Ok(weak) = HeaderValue::from_bytes(&weak) {
                headers.insert(header::ETAG, weak);
            }
        }
    }
}

/// Compresses a PHP response when nginx's gzip filter would: status 200,
/// 403 or 404, a compressible `Content-Type`, no `Content-Encoding` or
/// `Content-Range` of the app's own, no `Cache-Control: no-transform`, and
/// a whole body (not streamed) of at least [`MIN_SIZE`].
///
/// Streamed responses (the app flushed) are left alone: compressing them
/// would hold back what the app meant to send at once.
pub(crate) async fn php_response(
    response: Response<ResponseBody>,
    method: &Method,
    request: &HeaderMap,
) -> Response<ResponseBody> {
    compress_php(response, method, request, false).await
}

/// Compresses a classic-mode (php-fpm) response as [`php_response`] does,
/// and also one spooled as php-fpm sends it, of a length not known yet:
/// nginx's gzip filter compresses a FastCGI response whatever its length
/// when it has no `Content-Length`, and with `fastcgi_buffering on` (as
/// Hearth reads it) what PHP flushes is not sent at once anyway.
pub(crate) async fn fastcgi_response(
    response: Response<ResponseBody>,
    method: &Method,
    request: &HeaderMap,
) -> Response<ResponseBody> {
    compress_php(response, method, request, true).await
}

async fn compress_php(
    response: Response<ResponseBody>,
    method: &Method,
    request: &HeaderMap,
    spooled: bool,
) -> Response<ResponseBody> {
    if method == Method::HEAD
        || !matches!(
            response.status(),
            StatusCode::OK | StatusCode::FORBIDDEN | StatusCode::NOT_FOUND
        )
    {
        return response;
    }
    let headers = response.headers();
    let eligible = !headers.contains_key(header::CONTENT_ENCODING)
        && !headers.contains_key(header::CONTENT_RANGE)
        && !headers.get_all(header::CACHE_CONTROL).iter().any(|v| {
            v.to_str()
                .is_ok_and(|v| v.to_ascii_lowercase().contains("no-transform"))
        })
        && headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(is_compressible);
    let whole = match response.body() {
        ResponseBody::Full(_) | ResponseBody::Charged(..) => true,
        ResponseBody::Spooled(spool) => spooled || spool.len().is_some(),
        ResponseBody::Reader(_) | ResponseBody::File(_) => false,
    };
    let big = match hyper::body::Body::size_hint(response.body()).exact() {
        Some(n) => n >= MIN_SIZE,
        None => spooled,
    };
    if !(eligible && whole && big) {
        return response;
    }
    let Some(&coding) = accepted(request).first() else {
        return response;
    };
    let (mut parts, body) = response.into_parts();
    let body = match body {
        ResponseBody::Full(full) => match full.collect().await {
            Ok(collected) => coding.encode(std::io::Cursor::new(collected.to_bytes())),
            Err(never) => match never {},
        },
        // The charge goes with the bytes, until the encoder has read them.
        ResponseBody::Charged(held) => coding.encode(std::io::Cursor::new(held)),
        ResponseBody::Spooled(spool) => coding.encode(tokio_util::io::StreamReader::new(spool)),
        other => return Response::from_parts(parts, other),
    };
    parts.headers.insert(
        header::CONTENT_ENCODING,
        HeaderValue::from_static(coding.name()),
    );
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.remove(header::ACCEPT_RANGES);
    add_vary(&mut parts.headers);
    weaken_etag(&mut parts.headers);
    Response::from_parts(parts, ResponseBody::Reader(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ae(value: &str) -> Vec<Coding> {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::ACCEPT_ENCODING,
            HeaderValue::from_str(value).unwrap(),
        );
        accepted(&headers)
    }

    #[test]
    fn accept_encoding_preferences() {
        use Coding::{Brotli, Gzip};
        assert_eq!(accepted(&HeaderMap::new()), vec![]);
        assert_eq!(ae("gzip, deflate, br"), vec![Brotli, Gzip]);
        assert_eq!(ae("gzip"), vec![Gzip]);
        assert_eq!(ae("br;q=0.5, gzip"), vec![Gzip, Brotli]);
        assert_eq!(ae("gzip;q=0, br"), vec![Brotli]);
        assert_eq!(ae("*"), vec![Brotli, Gzip]);
        assert_eq!(ae("*;q=0"), vec![]);
        assert_eq!(ae("*, br;q=0"), vec![Gzip]);
        assert_eq!(ae("identity"), vec![]);
        assert_eq!(ae("deflate"), vec![]);
    }

    #[test]
    fn compressible_types() {
        for t in [
            "text/html; charset=UTF-8",
            "text/css",
            "application/json",
            "application/problem+json",
            "image/svg+xml",
            "text/javascript",
        ] {
            assert!(is_compressible(t), "{t}");
        }
        for t in ["image/png", "application/zip", "text/event-stream", ""] {
            assert!(!is_compressible(t), "{t}");
        }
    }

    #[tokio::test]
    async fn php_response_is_gzipped_and_decodes_to_the_original() {
        use std::io::Read as _;
        let text = "hello world ".repeat(200);
        let mut response = Response::new(ResponseBody::full(text.clone()));
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html"));
        response
            .headers_mut()
            .insert(header::ETAG, HeaderValue::from_static("\"abc\""));
        let mut request = HeaderMap::new();
        request.insert(header::ACCEPT_ENCODING, HeaderValue::from_static("gzip"));
        let response = php_response(response, &Method::GET, &request).await;
        assert_eq!(response.headers()[header::CONTENT_ENCODING], "gzip");
        assert_eq!(response.headers()[header::VARY], "Accept-Encoding");
        assert_eq!(response.headers()[header::ETAG], "W/\"abc\"");
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let mut decoded = String::new();
        flate2::read::GzDecoder::new(&body[..])
            .read_to_string(&mut decoded)
            .unwrap();
        assert_eq!(decoded, text);
    }

    #[tokio::test]
    async fn small_encoded_or_streamed_php_responses_are_left_alone() {
        let mut request = HeaderMap::new();
        request.insert(header::ACCEPT_ENCODING, HeaderValue::from_static("br"));
        let small = Response::new(ResponseBody::full("x".repeat(100)));
        let mut small = small;
        small
            .headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html"));
        let small = php_response(small, &Method::GET, &request).await;
        assert!(!small.headers().contains_key(header::CONTENT_ENCODING));

        let mut encoded = Response::new(ResponseBody::full("x".repeat(5000)));
        encoded
            .headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html"));
        encoded.headers_mut().insert(
            header::CONTENT_ENCODING,
            HeaderValue::from_static("deflate"),
        );
        let encoded = php_response(encoded, &Method::GET, &request).await;
        assert_eq!(encoded.headers()[header::CONTENT_ENCODING], "deflate");

        let limits = crate::sendbuf::Limits {
            buffer: 1024,
            memory: crate::sendbuf::Budget::new(0),
            disk: crate::sendbuf::Budget::new(0),
            dir: None,
        };
        let (_writer, reader) = crate::sendbuf::spool(limits, None, 1024);
        let mut streamed = Response::new(ResponseBody::Spooled(reader));
        streamed
            .headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html"));
        let streamed = php_response(streamed, &Method::GET, &request).await;
        assert!(!streamed.headers().contains_key(header::CONTENT_ENCODING));
    }
}
