//! The Symfony example (examples/symfony), a Symfony 5.4 app with Twig, a
//! form with CSRF and validation, a session, a login, translations and
//! error pages, whose public/index.php is Symfony's standard front
//! controller. nginx + php-fpm run it through Symfony's default runtime
//! (the kernel boots on every request); `hearth serve` runs the same file
//! with `APP_RUNTIME=Hearth\Symfony\Runtime` from the example's
//! hearth.toml (the kernel boots once per worker). Clients must see the
//! same thing from both, and one client must never see what another left
//! in a worker they share.

#[path = "support/framework.rs"]
mod framework;
#[path = "support/reference.rs"]
mod reference;
#[path = "support/mod.rs"]
mod support;

use std::net::SocketAddr;

use framework::{Browser, ExampleCopy, TRANSPORT_HEADERS};
use reference::Reference;
use support::{Req, Response, Server};

/// The example, copied: its var/ (Symfony's cache, compiled from this
/// checkout's sources) is new for each server.
struct App(ExampleCopy);

impl App {
    fn new() -> App {
        let copy = ExampleCopy::new("symfony");
        // A var/ of someone who ran the example in this checkout is not
        // this app's cache.
        let _ = std::fs::remove_dir_all(copy.root.join("var"));
        App(copy)
    }

    fn hearth(&self, extra: &[&str]) -> Server {
        self.0.hearth(extra)
    }

    /// nginx + php-fpm with the server block of the example's nginx.conf
    /// itself (its listen, root and fastcgi_pass pointed at this run's
    /// port, the copy's public/ and the reference's php-fpm).
    fn fpm(&self) -> Reference {
        let conf = self.0.root.join("nginx.conf");
        Reference::start_with(
            &self.0.root.join("public"),
            "index.php",
            &[("NGINX_SERVER", conf.to_str().expect("path"))],
        )
    }
}

fn session_id(b: &Browser) -> Option<String> {
    b.jar.get("PHPSESSID").map(str::to_owned)
}

/// The CSRF token of the hidden field `name` in a page.
fn token(page: &Response, name: &str) -> String {
    framework::hidden_value(page, name)
}

/// A page with the values of its CSRF fields replaced: Symfony makes a
/// new token (masked with a random salt) for every page.
fn without_tokens(body: &str) -> String {
    let mut out = String::with_capacity(body.len());
    let mut rest = body;
    while let Some(at) = rest.find("_token") {
        let (before, after) = rest.split_at(at);
        out.push_str(before);
        let Some(value) = after.find("value=\"").filter(|v| *v < 40) else {
            out.push_str("_token");
            rest = &after["_token".len()..];
            continue;
        };
        let start = value + "value=\"".len();
        let end = start + after[start..].find('"').unwrap_or(0);
        out.push_str(&after[..start]);
        out.push_str("<token>");
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// A Set-Cookie value with the session id and the dates of the moment
/// replaced.
fn without_ids(cookie: &str) -> String {
    cookie
        .split(';')
        .enumerate()
        .map(|(i, part)| {
            let part = part.trim();
            if i == 0 && part.starts_with("PHPSESSID=") {
                "PHPSESSID=<id>".to_owned()
            } else if part.to_ascii_lowercase().starts_with("expires=") {
                "expires=<date>".to_owned()
            } else {
                part.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Status, headers and body as a client of the app sees them, with what
/// differs from one response to the next (dates, session ids, tokens)
/// replaced.
fn comparable(what: &str, r: &Response) -> (String, u16, Vec<(String, String)>, String) {
    let mut headers: Vec<(String, String)> = r
        .headers
        .iter()
        .map(|(n, v)| (n.to_ascii_lowercase(), v.clone()))
        .filter(|(n, _)| !TRANSPORT_HEADERS.contains(&n.as_str()))
        .map(|(n, v)| {
            let v = match n.as_str() {
                "set-cookie" => without_ids(&v),
                "expires" => "<date>".to_owned(),
                _ => v,
            };
            (n, v)
        })
        .collect();
    headers.sort();
    (
        what.to_owned(),
        r.status,
        headers,
        without_tokens(&r.text()),
    )
}

/// What one visitor does: every page, the guestbook form (invalid, with a
/// wrong token, valid, the redirect and the page after it), logging in
/// and out, a page in French, a missing page and a failing one.
fn visit(addr: SocketAddr) -> Vec<(String, Response)> {
    let mut b = Browser::new(addr);
    b.get("home", "/");
    b.get("home again", "/");
    let page = b.get("guestbook", "/guestbook");
    let t = token(&page, "form[_token]");
    b.post(
        "guestbook, invalid",
        "/guestbook",
        &[
            ("form[name]", ""),
            ("form[message]", "x"),
            ("form[_token]", &t),
        ],
    );
    b.post(
        "guestbook, wrong token",
        "/guestbook",
        &[
            ("form[name]", "Eve"),
            ("form[message]", "Forged"),
            ("form[_token]", "forged"),
        ],
    );
    b.post(
        "guestbook, valid",
        "/guestbook",
        &[
            ("form[name]", "Ann"),
            ("form[message]", "Hello there"),
            ("form[_token]", &t),
        ],
    );
    b.get("guestbook after the redirect", "/guestbook");
    b.get("guestbook reloaded", "/guestbook");
    let page = b.get("login page", "/login");
    let t = token(&page, "form[_token]");
    b.post(
        "login",
        "/login",
        &[("form[name]", "Ann"), ("form[_token]", &t)],
    );
    let page = b.get("home, logged in", "/");
    b.get("in French", "/fr/hello");
    b.get("missing page", "/nowhere");
    b.get("failing page", "/boom");
    b.send(
        "the client, through a proxy nobody trusts",
        Req::new("GET", "/client")
            .header("X-Forwarded-For", "203.0.113.7")
            .header("X-Forwarded-Proto", "https"),
    );
    let t = token(&page, "_token");
    b.post("logout", "/logout", &[("_token", &t)]);
    b.get("home, logged out", "/");
    b.seen
}

#[test]
fn the_symfony_example_behaves_as_under_php_fpm() {
    let warm_app = App::new();
    let hearth = warm_app.hearth(&[]);
    let warm = visit(hearth.addr);
    let cold_app = App::new();
    let fpm = cold_app.fpm();
    let cold = visit(fpm.addr);

    for ((what, h), (_, f)) in warm.iter().zip(&cold) {
        assert_eq!(
            comparable(what, h),
            comparable(what, f),
            "Hearth (left) and nginx + php-fpm (right) differ"
        );
    }

    // What the app did, once (both said the same).
    let status = |what: &str| -> &Response {
        &warm
            .iter()
            .find(|(w, _)| w == what)
            .unwrap_or_else(|| panic!("no {what}"))
            .1
    };
    assert!(status("home again").text().contains("Visit number 2"));
    assert_eq!(status("guestbook, invalid").status, 422);
    assert!(status("guestbook, invalid")
        .text()
        .contains("This value should not be blank."));
    assert_eq!(status("guestbook, wrong token").status, 422);
    assert!(status("guestbook, wrong token")
        .text()
        .contains("The CSRF token is invalid."));
    let posted = status("guestbook, valid");
    assert_eq!(posted.status, 303, "{}", posted.text());
    assert_eq!(posted.header("location"), Some("/guestbook"));
    let after = status("guestbook after the redirect").text();
    assert!(after.contains("Thank you, Ann."), "{after}");
    assert!(after.contains("<b>Ann</b>: Hello there"), "{after}");
    assert!(!status("guestbook reloaded")
        .text()
        .contains("Thank you, Ann."));
    assert_eq!(status("login").status, 303, "{}", status("login").text());
    assert!(status("home, logged in").text().contains("Hello Ann"));
    assert!(status("in French").text().contains("Bonjour Ann !"));
    assert_eq!(status("missing page").status, 404);
    assert!(status("missing page")
        .text()
        .contains("There is no page at /nowhere."));
    assert_eq!(status("failing page").status, 500);
    assert!(status("failing page")
        .text()
        .contains("Something went wrong"));
    assert!(!status("failing page").text().contains("on purpose"));
    assert_eq!(
        status("the client, through a proxy nobody trusts").json()["client_ip"],
        "127.0.0.1"
    );
    assert!(status("home, logged out").text().contains("Hello guest"));
    // public/'s files are served from disk (hearth.toml's root), as
    // nginx's try_files does (their dates and ETags are the copy's).
    let robots = hearth.get("/robots.txt");
    assert_eq!(robots.status, 200);
    assert_eq!(robots.text(), "User-agent: *\nDisallow:\n");
    // The worker's log has the failure, as php-fpm's error log would.
    hearth.wait_for_log(
        "Uncaught PHP Exception RuntimeException: \"/boom failed on purpose\"",
        std::time::Duration::from_secs(5),
    );
}

/// /state: what the app finds left in the process when a request begins.
fn state(b: &mut Browser, what: &str) -> serde_json::Value {
    let r = b.get(what, "/state");
    assert_eq!(r.status, 200, "{what}: {}", r.text());
    r.json()
}

fn log_in(b: &mut Browser, name: &str) {
    let page = b.get("login page", "/login");
    let t = token(&page, "form[_token]");
    let r = b.post(
        "login",
        "/login",
        &[("form[name]", name), ("form[_token]", &t)],
    );
    assert_eq!(r.status, 303, "{}", r.text());
}

/// Two users over one warm worker (`--workers 1`): what one request leaves
/// in the worker (session, locale, services, a failure) is gone for the
/// next, but for a service that keeps state without ResetInterface, which
/// the example has to show what happens then.
#[test]
fn users_sharing_a_worker_do_not_see_each_others_state() {
    let app = App::new();
    let hearth = app.hearth(&[]);
    let mut a = Browser::new(hearth.addr);
    let mut b = Browser::new(hearth.addr);

    // What a request meets in a worker no request has touched.
    let fresh = state(&mut b, "B, first");
    assert_eq!(fresh["user"], serde_json::Value::Null, "{fresh}");
    assert_eq!(fresh["session"], serde_json::json!([]), "{fresh}");
    assert_eq!(fresh["request_locale"], "en", "{fresh}");
    assert_eq!(fresh["translator_locale"], "en", "{fresh}");
    assert_eq!(fresh["request_note"], serde_json::Value::Null, "{fresh}");
    assert_eq!(fresh["sticky_note"], serde_json::Value::Null, "{fresh}");
    // Everything but the sticky note must look like this to a client
    // without a session, whatever came before.
    let clean = |seen: &serde_json::Value, sticky: &str, what: &str| {
        let mut expected = fresh.clone();
        expected["sticky_note"] = sticky.into();
        assert_eq!(seen, &expected, "{what}");
    };

    // A logs in, writes notes, switches to French.
    log_in(&mut a, "Ann");
    let noted = a.get("A writes", "/state/note/secret-of-ann").json();
    assert_eq!(noted["user"], "Ann");
    assert_eq!(noted["translator_locale"], "fr");
    assert_eq!(noted["request_locale"], "fr");
    assert_eq!(noted["request_note"], "secret-of-ann");

    // B, without a cookie: not A's user, session, locale or note. The
    // sticky note has no reset, and keeps what A wrote: under php-fpm it
    // would be empty.
    let seen = state(&mut b, "B after A");
    clean(&seen, "secret-of-ann", "B after A");
    let home = b.get("B's home", "/");
    assert!(home.text().contains("Hello guest"), "{}", home.text());
    assert!(home.text().contains("Visit number 1"), "{}", home.text());
    assert!(session_id(&b).is_some());
    assert_ne!(session_id(&b), session_id(&a));

    // A's own session is still A's.
    let again = state(&mut a, "A again");
    assert_eq!(again["user"], "Ann", "{again}");
    assert_eq!(again["translator_locale"], "en", "{again}");
    assert_eq!(again["request_note"], serde_json::Value::Null, "{again}");

    // A request that fails half-way leaves nothing behind either.
    let boom = a.get("A fails", "/boom");
    assert_eq!(boom.status, 500, "{}", boom.text());
    let mut c = Browser::new(hearth.addr);
    let seen = state(&mut c, "C after the failure");
    clean(&seen, "left by /boom", "C after the failure");
    // (A's session was saved with the error page, as under php-fpm.)
    assert_eq!(
        state(&mut a, "A after the failure")["session"]["boom"],
        "left by /boom"
    );

    // A page in French, then one without a locale: English again.
    let fr = c.get("C in French", "/fr/hello");
    assert!(fr.text().contains("Bonjour guest !"), "{}", fr.text());
    let seen = state(&mut c, "C after French");
    clean(&seen, "left by /boom", "C after French");

    // One worker served them all: the sticky note proves it.
    assert!(!hearth.log().contains("exited"), "{}", hearth.log());
}

/// With `--trusted-proxy`, Hearth believes the proxy's X-Forwarded-For and
/// X-Forwarded-Proto: Symfony sees the client's address and scheme with no
/// trusted_proxies of its own, and makes https URLs.
#[test]
fn behind_a_trusted_proxy_symfony_sees_the_client() {
    let app = App::new();
    let hearth = app.hearth(&["--trusted-proxy", "127.0.0.1"]);
    let through_proxy = Req::new("GET", "/client")
        .header("X-Forwarded-For", "203.0.113.7")
        .header("X-Forwarded-Proto", "https");
    let seen = through_proxy.send(hearth.addr).json();
    assert_eq!(seen["client_ip"], "203.0.113.7", "{seen}");
    assert_eq!(seen["secure"], true, "{seen}");
    assert_eq!(seen["home"], "https://localhost/", "{seen}");
    // The next request, straight from the proxy's address, is not https.
    let seen = Req::new("GET", "/client").send(hearth.addr).json();
    assert_eq!(seen["client_ip"], "127.0.0.1", "{seen}");
    assert_eq!(seen["secure"], false, "{seen}");
    assert_eq!(seen["home"], "http://localhost/", "{seen}");
}

/// The state check (`--check-state`) finds nothing the example's pages
/// leave behind (Hearth's runtime and Symfony's resets put everything
/// back), and names the one thing the example keeps on purpose: the
/// sticky note, a service without a reset.
#[test]
fn the_state_check_names_only_the_sticky_note() {
    let app = App::new();
    let hearth = app.hearth(&["--check-state"]);
    // Four times: what repeated requests keep adding is reported from
    // the third repeat on.
    for _ in 0..4 {
        visit(hearth.addr);
    }
    let mut a = Browser::new(hearth.addr);
    log_in(&mut a, "Ann");
    state(&mut a, "A's state");
    a.get("A writes", "/state/note/secret-of-ann");
    hearth.wait_for_log("stickyNote->text", std::time::Duration::from_secs(10));
    // One worker wrote its findings in the order of its requests: all of
    // them are in the log by now.
    let log = hearth.log();
    let findings: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("state check: "))
        .collect();
    assert_eq!(findings.len(), 1, "{log}");
    assert!(
        findings[0].contains("GET /state/note/secret-of-ann left ")
            && findings[0]
                .contains("['App\\\\Controller\\\\StateController']->stickyNote->text changed: ")
            && findings[0].contains("-> string(13) with data from the request"),
        "{log}"
    );
}

/// Memory growth by route is counted under Symfony's route names (the
/// `_route` attribute), not under the paths (docs/memory.md).
#[test]
fn memory_growth_is_counted_under_symfonys_route_names() {
    let app = App::new();
    let dir = support::tempdir();
    let socket = dir.path().join("control.sock");
    let hearth = app.hearth(&["--control-socket", &socket.to_string_lossy()]);
    let mut b = Browser::new(hearth.addr);
    for i in 0..6 {
        b.get(&format!("home {i}"), "/");
        b.get(&format!("guestbook {i}"), "/guestbook");
    }
    let status = support::status_json(&socket);
    let names: Vec<&str> = status["routes"]["top"]
        .as_array()
        .expect("routes")
        .iter()
        .filter_map(|r| r["route"].as_str())
        .collect();
    assert!(names.contains(&"home"), "{names:?}");
    assert!(names.contains(&"guestbook"), "{names:?}");
    assert!(
        !names.iter().any(|n| n.starts_with("GET ")),
        "no request was counted under its path: {names:?}"
    );
}
