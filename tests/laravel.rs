//! The Laravel example (examples/laravel), a Laravel 8 app on Debian's
//! php-laravel-framework with Blade views, a form with CSRF and validation
//! (errors and old input through the session), a session login, SQLite
//! through Eloquent, a page in French and error pages. nginx + php-fpm run
//! its standard public/index.php (the application boots on every
//! request); `hearth serve` runs its hearth.php, Hearth\Laravel\Worker
//! (the application boots once per worker). Clients must see the same
//! thing from both, and one client must never see what another left in a
//! worker they share.

#[path = "support/framework.rs"]
mod framework;
#[path = "support/reference.rs"]
mod reference;
#[path = "support/mod.rs"]
mod support;

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use framework::{Browser, ExampleCopy, TRANSPORT_HEADERS};
use reference::Reference;
use support::{Req, Response, Server};

/// The example, copied, with its database made by `php artisan migrate
/// --seed` (as a user sets it up).
struct App(ExampleCopy);

impl App {
    fn new() -> App {
        let copy = ExampleCopy::new("laravel");
        let root = &copy.root;
        // What someone who ran the example in this checkout left is not
        // this app's.
        let _ = std::fs::remove_file(root.join("database/database.sqlite"));
        for leftover in [
            "bootstrap/cache/packages.php",
            "bootstrap/cache/services.php",
        ] {
            let _ = std::fs::remove_file(root.join(leftover));
        }
        std::fs::write(root.join("database/database.sqlite"), b"").expect("database file");
        let out = support::output_within(
            Command::new("php")
                .args(["artisan", "migrate", "--seed", "--force"])
                .current_dir(root),
            Duration::from_secs(60),
        );
        assert!(
            out.status.success(),
            "php artisan migrate --seed failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        App(copy)
    }

    /// `hearth serve --config hearth.toml`, one worker.
    fn hearth(&self) -> Server {
        self.0.hearth(&[])
    }

    /// `hearth()` with `extra` arguments.
    fn hearth_with(&self, extra: &[&str]) -> Server {
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

    fn log(&self) -> String {
        std::fs::read_to_string(self.0.root.join("storage/logs/laravel.log")).unwrap_or_default()
    }
}

fn session(b: &Browser) -> Option<String> {
    b.jar
        .get("hearth_laravel_example_session")
        .map(str::to_owned)
}

/// The CSRF token of a page's form (Blade's @csrf).
fn token(page: &Response) -> String {
    framework::hidden_value(page, "_token")
}

/// A page with the values of its CSRF fields replaced: the token is the
/// session's, and each side has its own sessions.
fn without_tokens(body: &str) -> String {
    let mut out = String::with_capacity(body.len());
    let mut rest = body;
    let needle = "name=\"_token\" value=\"";
    while let Some(at) = rest.find(needle) {
        let start = at + needle.len();
        out.push_str(&rest[..start]);
        out.push_str("<token>");
        let end = start + rest[start..].find('"').unwrap_or(0);
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// A Set-Cookie value with the value (Laravel encrypts every cookie, with
/// a random IV), the date of the moment and the seconds left to it
/// replaced.
fn without_values(cookie: &str) -> String {
    cookie
        .split(';')
        .enumerate()
        .map(|(i, part)| {
            let part = part.trim();
            if i == 0 {
                let name = part.split('=').next().unwrap_or("");
                format!("{name}=<value>")
            } else if part.to_ascii_lowercase().starts_with("expires=") {
                "expires=<date>".to_owned()
            } else if let Some(seconds) = part
                .strip_prefix("Max-Age=")
                .and_then(|n| n.parse::<i64>().ok())
                .filter(|n| *n > 7000)
            {
                // The expiry less the time the header was made: one
                // second less when a second ticks in between (2 hours
                // is the session's lifetime).
                assert!(seconds <= 7200, "{cookie}");
                "Max-Age=<about 7200>".to_owned()
            } else {
                part.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Status, headers and body as a client of the app sees them, with what
/// differs from one response to the next (dates, cookie values, tokens)
/// replaced.
fn comparable(what: &str, r: &Response) -> (String, u16, Vec<(String, String)>, String) {
    let mut headers: Vec<(String, String)> = r
        .headers
        .iter()
        .map(|(n, v)| (n.to_ascii_lowercase(), v.clone()))
        .filter(|(n, _)| !TRANSPORT_HEADERS.contains(&n.as_str()))
        .map(|(n, v)| {
            let v = match n.as_str() {
                "set-cookie" => without_values(&v),
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

/// What one visitor does: the pages, the guestbook form (invalid, then
/// the page with the errors and the old input, with a wrong token, valid,
/// the redirect and the page after it), a failed and a good login, a page
/// for users only, a page in French, a missing page, a failing one, and
/// logging out.
fn visit(addr: SocketAddr) -> Vec<(String, Response)> {
    let mut b = Browser::new(addr);
    b.get("home", "/");
    b.get("home again", "/");
    let page = b.get("guestbook", "/guestbook");
    let t = token(&page);
    b.post(
        "guestbook, invalid",
        "/guestbook",
        &[("name", ""), ("message", "x"), ("_token", &t)],
    );
    b.get("guestbook with the errors", "/guestbook");
    b.post(
        "guestbook, wrong token",
        "/guestbook",
        &[("name", "Eve"), ("message", "Forged"), ("_token", "forged")],
    );
    b.post(
        "guestbook, valid",
        "/guestbook",
        &[("name", "Ann"), ("message", "Hello there"), ("_token", &t)],
    );
    b.get("guestbook after the redirect", "/guestbook");
    b.get("guestbook reloaded", "/guestbook");
    b.get("account, logged out", "/account");
    let page = b.get("login page", "/login");
    let t = token(&page);
    b.post(
        "login, wrong password",
        "/login",
        &[
            ("email", "ann@example.com"),
            ("password", "wrong"),
            ("_token", &t),
        ],
    );
    b.get("login page with the error", "/login");
    b.post(
        "login",
        "/login",
        &[
            ("email", "ann@example.com"),
            ("password", "ann-secret"),
            ("_token", &t),
        ],
    );
    let page = b.get("home, logged in", "/");
    b.get("account", "/account");
    b.get("in French", "/fr/hello");
    b.get("missing page", "/nowhere");
    b.get("failing page", "/boom");
    b.send(
        "the client, through a proxy nobody trusts",
        Req::new("GET", "/client")
            .header("X-Forwarded-For", "203.0.113.7")
            .header("X-Forwarded-Proto", "https"),
    );
    let t = token(&page);
    b.post("logout", "/logout", &[("_token", &t)]);
    b.get("home, logged out", "/");
    b.seen
}

#[test]
fn the_laravel_example_behaves_as_under_php_fpm() {
    let warm_app = App::new();
    let hearth = warm_app.hearth();
    let warm = visit(hearth.addr);
    let cold_app = App::new();
    let fpm = cold_app.fpm();
    let cold = visit(fpm.addr);

    assert_eq!(warm.len(), cold.len());
    for ((what, h), (_, f)) in warm.iter().zip(&cold) {
        assert_eq!(
            comparable(what, h),
            comparable(what, f),
            "Hearth (left) and nginx + php-fpm (right) differ"
        );
    }

    // What the app did, once (both said the same).
    let seen = |what: &str| -> &Response {
        &warm
            .iter()
            .find(|(w, _)| w == what)
            .unwrap_or_else(|| panic!("no {what}"))
            .1
    };
    assert!(seen("home again").text().contains("Visit number 2"));
    let invalid = seen("guestbook, invalid");
    assert_eq!(invalid.status, 302, "{}", invalid.text());
    assert_eq!(
        invalid.header("location"),
        Some("http://localhost/guestbook")
    );
    let errors = seen("guestbook with the errors").text();
    assert!(errors.contains("The name field is required."), "{errors}");
    assert!(
        errors.contains("The message must be at least 3 characters."),
        "{errors}"
    );
    assert!(errors.contains(">x</textarea>"), "old input: {errors}");
    assert_eq!(seen("guestbook, wrong token").status, 419);
    let posted = seen("guestbook, valid");
    assert_eq!(posted.status, 302, "{}", posted.text());
    let after = seen("guestbook after the redirect").text();
    assert!(after.contains("Thank you, Ann."), "{after}");
    assert!(after.contains("<b>Ann</b>: Hello there"), "{after}");
    assert!(!after.contains("is required"), "{after}");
    assert!(!seen("guestbook reloaded")
        .text()
        .contains("Thank you, Ann."));
    assert_eq!(
        seen("account, logged out").header("location"),
        Some("http://localhost/login")
    );
    let failed = seen("login page with the error").text();
    assert!(
        failed.contains("These credentials do not match our records."),
        "{failed}"
    );
    assert!(failed.contains("value=\"ann@example.com\""), "{failed}");
    assert_eq!(seen("login").status, 302, "{}", seen("login").text());
    assert!(seen("home, logged in").text().contains("Hello Ann"));
    assert!(seen("account")
        .text()
        .contains("Ann &lt;ann@example.com&gt;"));
    assert!(seen("in French").text().contains("Bonjour Ann !"));
    assert_eq!(seen("missing page").status, 404);
    assert!(seen("missing page")
        .text()
        .contains("There is no page at /nowhere."));
    assert_eq!(seen("failing page").status, 500);
    assert!(seen("failing page").text().contains("Something went wrong"));
    assert!(!seen("failing page").text().contains("on purpose"));
    assert_eq!(
        seen("the client, through a proxy nobody trusts").json()["client_ip"],
        "127.0.0.1"
    );
    assert!(seen("home, logged out").text().contains("Hello guest"));
    // public/'s files are served from disk (hearth.toml's root), as
    // nginx's try_files does.
    let robots = hearth.get("/robots.txt");
    assert_eq!(robots.status, 200);
    assert_eq!(robots.text(), "User-agent: *\nDisallow:\n");
    // The failure is in the app's log, as under php-fpm.
    assert!(
        warm_app.log().contains("/boom failed on purpose"),
        "{}",
        warm_app.log()
    );
    assert!(cold_app.log().contains("/boom failed on purpose"));
}

/// /state: what the app finds left in the process when a request begins.
fn state(b: &mut Browser, what: &str) -> serde_json::Value {
    let r = b.get(what, "/state");
    assert_eq!(r.status, 200, "{what}: {}", r.text());
    r.json()
}

fn log_in(b: &mut Browser, email: &str, password: &str) {
    let page = b.get("login page", "/login");
    let t = token(&page);
    let r = b.post(
        "login",
        "/login",
        &[("email", email), ("password", password), ("_token", &t)],
    );
    assert_eq!(r.status, 302, "{}", r.text());
    assert_eq!(r.header("location"), Some("http://localhost"));
}

/// Two users over one warm worker (`--workers 1`): what one request leaves
/// in the worker (user, session, locale, queued cookie, view data, scoped
/// service, an open transaction, a failure) is gone for the next; the
/// sticky note, a singleton resolved at boot that nothing resets, keeps
/// what the request before wrote (docs/laravel.md), and Tally, another,
/// is put back by the example's own reset callback.
#[test]
fn users_sharing_a_worker_do_not_see_each_others_state() {
    let app = App::new();
    let hearth = app.hearth();
    let mut a = Browser::new(hearth.addr);
    let mut b = Browser::new(hearth.addr);

    // What a request meets in a worker no request has touched.
    let fresh = state(&mut b, "B, first");
    assert_eq!(fresh["user"], serde_json::Value::Null, "{fresh}");
    assert_eq!(fresh["session"], serde_json::json!({}), "{fresh}");
    assert_eq!(fresh["app_locale"], "en", "{fresh}");
    assert_eq!(fresh["translator_locale"], "en", "{fresh}");
    assert_eq!(fresh["greeting"], "Hello x!", "{fresh}");
    assert_eq!(fresh["request_note"], serde_json::Value::Null, "{fresh}");
    assert_eq!(fresh["sticky_note"], serde_json::Value::Null, "{fresh}");
    assert_eq!(fresh["tally"], 1, "{fresh}");
    assert_eq!(fresh["messages"], 1, "{fresh}");
    assert_eq!(fresh["transaction_level"], 0, "{fresh}");
    assert_eq!(fresh["queued_cookies"], 0, "{fresh}");
    assert_eq!(
        fresh["shared_view_data"],
        serde_json::json!(["errors"]),
        "{fresh}"
    );
    // Everything but the sticky note must look like this to a client
    // without a session, whatever came before.
    let clean = |seen: &serde_json::Value, sticky: &str, what: &str| {
        let mut expected = fresh.clone();
        expected["sticky_note"] = sticky.into();
        assert_eq!(seen, &expected, "{what}");
    };

    // A logs in, writes everywhere, switches to French.
    log_in(&mut a, "ann@example.com", "ann-secret");
    let noted = a.get("A writes", "/state/note/secret-of-ann");
    assert_eq!(noted.status, 200, "{}", noted.text());
    assert!(noted
        .headers_named("set-cookie")
        .iter()
        .any(|c| c.starts_with("note=")));
    let noted = noted.json();
    assert_eq!(noted["user"], "Ann");
    assert_eq!(noted["app_locale"], "fr");
    assert_eq!(noted["config_locale"], "fr");
    assert_eq!(noted["translator_locale"], "fr");
    assert_eq!(noted["greeting"], "Bonjour x !");
    assert_eq!(noted["request_note"], "secret-of-ann");
    assert_eq!(noted["queued_cookies"], 1);
    assert_eq!(noted["session"]["note"], "secret-of-ann");
    assert_eq!(
        noted["shared_view_data"],
        serde_json::json!(["errors", "note"])
    );

    // B, without a cookie: not A's user, session, locale, cookie, view
    // data or notes. The sticky note has no reset, and keeps what A
    // wrote: under php-fpm it would be empty.
    let r = b.get("B after A", "/state");
    assert!(
        !r.headers_named("set-cookie")
            .iter()
            .any(|c| c.starts_with("note=")),
        "A's queued cookie was sent to B: {:?}",
        r.headers
    );
    clean(&r.json(), "secret-of-ann", "B after A");
    let home = b.get("B's home", "/");
    assert!(home.text().contains("Hello guest"), "{}", home.text());
    assert!(home.text().contains("Visit number 1"), "{}", home.text());
    assert!(session(&b).is_some());
    assert_ne!(session(&b), session(&a));

    // A's own session is still A's, in English again.
    let again = state(&mut a, "A again");
    assert_eq!(again["user"], "Ann", "{again}");
    assert_eq!(again["session"]["note"], "secret-of-ann", "{again}");
    assert_eq!(again["app_locale"], "en", "{again}");
    assert_eq!(again["translator_locale"], "en", "{again}");
    assert_eq!(again["request_note"], serde_json::Value::Null, "{again}");

    // A transaction A leaves open is rolled back before the next request:
    // a new client does not see A's row.
    let open = a.get("A's open transaction", "/state/uncommitted/Eve");
    assert_eq!(open.status, 200, "{}", open.text());
    assert_eq!(open.json()["messages"], 2);
    assert_eq!(open.json()["transaction_level"], 1);
    let mut d = Browser::new(hearth.addr);
    clean(
        &state(&mut d, "D after the transaction"),
        "secret-of-ann",
        "D after the transaction",
    );

    // A request that fails half-way leaves nothing behind either.
    let boom = a.get("A fails", "/boom");
    assert_eq!(boom.status, 500, "{}", boom.text());
    let mut c = Browser::new(hearth.addr);
    clean(
        &state(&mut c, "C after the failure"),
        "secret-of-ann",
        "C after the failure",
    );
    // (A's session was saved with the error page, as under php-fpm.)
    assert_eq!(
        state(&mut a, "A after the failure")["session"]["boom"],
        "left by /boom"
    );

    // A page in French, then one without a locale: English again.
    let fr = c.get("C in French", "/fr/hello");
    assert!(fr.text().contains("Bonjour guest !"), "{}", fr.text());
    clean(
        &state(&mut c, "C after French"),
        "secret-of-ann",
        "C after French",
    );

    // One worker served them all: the sticky note proves it.
    assert!(!hearth.log().contains("exited"), "{}", hearth.log());
}

/// The state check (`--check-state`) finds nothing the example's pages
/// leave behind (Hearth's Laravel worker puts back what Octane does), and
/// names what the example leaves on purpose: the sticky note, a singleton
/// nothing resets, and a transaction left open, which the worker rolled
/// back. (It found that the worker's auth manager made each request's
/// session guard on the booted application, which then kept one more
/// `request` rebinding per request: `$app->reboundCallbacks['request']
/// growing`, and memory with it.)
#[test]
fn the_state_check_names_only_the_sticky_note_and_the_open_transaction() {
    let app = App::new();
    let hearth = app.hearth_with(&["--check-state"]);
    // Four times: what repeated requests keep adding is reported from
    // the third repeat on.
    for _ in 0..4 {
        visit(hearth.addr);
    }
    let mut a = Browser::new(hearth.addr);
    log_in(&mut a, "ann@example.com", "ann-secret");
    state(&mut a, "A's state");
    a.get("A writes", "/state/note/secret-of-ann");
    a.get("A leaves a transaction open", "/state/uncommitted/Ann");
    hearth.wait_for_log("rolled it back", Duration::from_secs(10));
    // One worker wrote its findings in the order of its requests: all of
    // them are in the log by now.
    let log = hearth.log();
    let findings: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("state check: "))
        .collect();
    assert_eq!(findings.len(), 2, "{log}");
    assert!(
        findings[0].contains("GET /state/note/secret-of-ann left ")
            && findings[0].contains("StickyNote")
            && findings[0]
                .contains("->text changed: null -> string(13) with data from the request"),
        "{log}"
    );
    assert!(
        findings[1].contains("GET /state/uncommitted/Ann left a database transaction open on connection sqlite; Hearth rolled it back"),
        "{log}"
    );
}

/// Memory growth by route is counted under Laravel's route names, and
/// under the method and URI pattern of a route without one
/// (docs/memory.md).
#[test]
fn memory_growth_is_counted_under_laravels_route_names() {
    let app = App::new();
    let dir = support::tempdir();
    let socket = dir.path().join("control.sock");
    let hearth = app.hearth_with(&["--control-socket", &socket.to_string_lossy()]);
    let mut b = Browser::new(hearth.addr);
    for i in 0..6 {
        b.get(&format!("home {i}"), "/");
        b.get(&format!("guestbook {i}"), "/guestbook");
        b.get(&format!("hello {i}"), "/fr/hello");
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
        names.contains(&"GET /fr/hello"),
        "the unnamed route's pattern: {names:?}"
    );
    assert!(!names.contains(&"GET /"), "{names:?}");
}
