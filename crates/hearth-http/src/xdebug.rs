//! Debug mode: the Xdebug triggers a request carries.
//!
//! Xdebug looks for its triggers in `$_GET`, then `$_POST`, then
//! `$_COOKIE`, then the environment, when a process starts running PHP.
//! In debug mode each request runs in a worker started for it, and the
//! triggers found here go into that worker's environment, where Xdebug
//! finds them from the first line of the worker script on.

use std::ffi::OsString;

use hearth_pool::PoolConfig;

/// Triggers that start a step-debugging session: the request may then be
/// held at a breakpoint for as long as the developer looks at it.
/// (`XDEBUG_TRIGGER` also starts the profiler and the tracer.)
const DEBUG_TRIGGERS: [&str; 3] = ["XDEBUG_TRIGGER", "XDEBUG_SESSION", SESSION_START];

/// The trigger that also sets the session cookie.
const SESSION_START: &str = "XDEBUG_SESSION_START";

/// Xdebug 2's names for the profiler's and tracer's triggers, which
/// Xdebug 3 still reads.
const OTHER_TRIGGERS: [&str; 2] = ["XDEBUG_PROFILE", "XDEBUG_TRACE"];

/// Longest trigger value passed on; Xdebug compares it with
/// `xdebug.trigger_value`, and an IDE key is a short word.
const MAX_VALUE: usize = 256;

/// The Xdebug triggers of one request.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Triggers {
    /// Each trigger found, with its value from the first place Xdebug
    /// looks (the query, then the form, then the cookies).
    pub found: Vec<(&'static str, String)>,
}

impl Triggers {
    /// Looks for the triggers in the query string, a form body
    /// (`application/x-www-form-urlencoded`) and the `Cookie` headers,
    /// decoded as PHP decodes them for `$_GET`, `$_POST` and `$_COOKIE`.
    pub fn find<'a>(
        query: Option<&str>,
        form: Option<&[u8]>,
        cookies: impl Iterator<Item = &'a [u8]> + Clone,
    ) -> Triggers {
        let mut found = Vec::new();
        for name in DEBUG_TRIGGERS.into_iter().chain(OTHER_TRIGGERS) {
            // XDEBUG_SESSION_START is a request variable, not a cookie:
            // Xdebug answers it with the XDEBUG_SESSION cookie.
            let cookies = cookies.clone().filter(|_| name != SESSION_START);
            let value = query
                .and_then(|q| in_form(q.as_bytes(), name))
                .or_else(|| form.and_then(|f| in_form(f, name)))
                .or_else(|| cookies.clone().find_map(|c| in_cookie(c, name)));
            if let Some(value) = value {
                found.push((name, value));
            }
        }
        Triggers { found }
    }

    /// Whether one of them starts a step-debugging session.
    pub fn debugging(&self) -> bool {
        self.found
            .iter()
            .any(|(name, _)| DEBUG_TRIGGERS.contains(name))
    }

    /// The `Set-Cookie` value with which Xdebug answers
    /// `XDEBUG_SESSION_START=value`, so that the browser's next requests
    /// are debugged too: `XDEBUG_SESSION=value; path=/; SameSite=Lax`.
    /// (Xdebug sends it when the worker starts, before the request, where
    /// it cannot reach the response.)
    pub fn session_cookie(&self) -> Option<String> {
        let (_, value) = self.found.iter().find(|(name, _)| *name == SESSION_START)?;
        let value: String = form_urlencoded::byte_serialize(value.as_bytes()).collect();
        Some(format!("XDEBUG_SESSION={value}; path=/; SameSite=Lax"))
    }

    /// The worker's extra environment: each trigger as a variable.
    pub fn env(&self) -> Vec<(OsString, OsString)> {
        self.found
            .iter()
            .map(|(name, value)| ((*name).into(), value.into()))
            .collect()
    }
}

/// Whether every worker starts a step-debugging session whatever the
/// request: a trigger in the workers' environment (`--env`, or Hearth's
/// own unless `--clear-env`) or `xdebug.start_with_request=yes` among the
/// `--php-ini` settings.
pub(crate) fn always_debugging(config: &PoolConfig) -> bool {
    let configured = config
        .env
        .iter()
        .any(|(name, _)| DEBUG_TRIGGERS.iter().any(|t| name == t));
    let inherited =
        !config.clear_env && DEBUG_TRIGGERS.iter().any(|t| std::env::var_os(t).is_some());
    let ini = config
        .ini
        .iter()
        .rev()
        .find(|(name, _)| name == "xdebug.start_with_request")
        .is_some_and(|(_, value)| value.trim().eq_ignore_ascii_case("yes"));
    configured || inherited || ini
}

/// The value of `name` in `a=1&b=2` form encoding, if it is there.
fn in_form(text: &[u8], name: &str) -> Option<String> {
    form_urlencoded::parse(text)
        .find(|(n, _)| n == name)
        .and_then(|(_, v)| usable(&v))
}

/// The value of `name` in a `Cookie` header (`a=1; b=2`), URL-decoded as
/// PHP decodes `$_COOKIE`.
fn in_cookie(header: &[u8], name: &str) -> Option<String> {
    header.split(|&b| b == b';').find_map(|pair| {
        let text = std::str::from_utf8(pair).ok()?.trim_start();
        let (n, v) = text.split_once('=').unwrap_or((text, ""));
        if n != name {
            return None;
        }
        let decoded = percent_encoding::percent_decode_str(v).decode_utf8().ok()?;
        usable(&decoded)
    })
}

/// A value that may go into an environment variable: no NUL byte, and
/// not too long to be a key.
fn usable(value: &str) -> Option<String> {
    (!value.contains('\0') && value.len() <= MAX_VALUE).then(|| value.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find(query: Option<&str>, form: Option<&str>, cookies: &[&str]) -> Triggers {
        Triggers::find(
            query,
            form.map(str::as_bytes),
            cookies.iter().map(|c| c.as_bytes()),
        )
    }

    #[test]
    fn triggers_are_found_where_xdebug_looks() {
        let t = find(None, None, &["a=1; XDEBUG_SESSION=PHPSTORM"]);
        assert_eq!(t.found, [("XDEBUG_SESSION", "PHPSTORM".to_owned())]);
        assert!(t.debugging());
        let t = find(Some("x=1&XDEBUG_SESSION_START=vsc%20ode"), None, &[]);
        assert_eq!(t.found, [("XDEBUG_SESSION_START", "vsc ode".to_owned())]);
        let t = find(None, Some("XDEBUG_TRIGGER=1&b=2"), &[]);
        assert_eq!(t.found, [("XDEBUG_TRIGGER", "1".to_owned())]);
        assert_eq!(
            t.env(),
            [(OsString::from("XDEBUG_TRIGGER"), OsString::from("1"))]
        );
    }

    #[test]
    fn session_start_is_answered_with_the_session_cookie() {
        let t = find(Some("XDEBUG_SESSION_START=my%20key"), None, &[]);
        assert_eq!(
            t.session_cookie().as_deref(),
            Some("XDEBUG_SESSION=my+key; path=/; SameSite=Lax")
        );
        let t = find(None, None, &["XDEBUG_SESSION_START=1; XDEBUG_SESSION=2"]);
        assert_eq!(t.found, [("XDEBUG_SESSION", "2".to_owned())]);
        assert_eq!(t.session_cookie(), None);
    }

    #[test]
    fn the_query_comes_before_the_form_and_the_cookies() {
        let t = find(
            Some("XDEBUG_SESSION=get"),
            Some("XDEBUG_SESSION=post"),
            &["XDEBUG_SESSION=cookie"],
        );
        assert_eq!(t.found, [("XDEBUG_SESSION", "get".to_owned())]);
        let t = find(
            None,
            Some("XDEBUG_SESSION=post"),
            &["XDEBUG_SESSION=cookie"],
        );
        assert_eq!(t.found, [("XDEBUG_SESSION", "post".to_owned())]);
    }

    #[test]
    fn profiler_triggers_do_not_hold_the_request() {
        let t = find(Some("XDEBUG_PROFILE=1"), None, &[]);
        assert_eq!(t.found, [("XDEBUG_PROFILE", "1".to_owned())]);
        assert!(!t.debugging());
    }

    #[test]
    fn no_trigger_no_variables() {
        let t = find(
            Some("XDEBUG=1&xdebug_session=1"),
            None,
            &["XDEBUG_SESSIONX=1", "PHPSESSID=abc"],
        );
        assert_eq!(t, Triggers::default());
        assert!(!t.debugging());
    }

    #[test]
    fn values_that_cannot_be_variables_are_left_out() {
        let long = "x".repeat(MAX_VALUE + 1);
        let t = find(
            Some(&format!("XDEBUG_SESSION={long}")),
            None,
            &["XDEBUG_TRIGGER=a%00b"],
        );
        assert_eq!(t, Triggers::default());
    }

    #[test]
    fn start_with_request_yes_or_a_trigger_in_the_environment_always_debugs() {
        let mut config = PoolConfig::new("php-cgi", "/app/worker.php", 1);
        config.clear_env = true;
        assert!(!always_debugging(&config));
        config
            .ini
            .push(("xdebug.start_with_request".into(), "yes".into()));
        assert!(always_debugging(&config));
        config
            .ini
            .push(("xdebug.start_with_request".into(), "trigger".into()));
        assert!(!always_debugging(&config));
        config.env.push(("XDEBUG_SESSION".into(), "1".into()));
        assert!(always_debugging(&config));
    }
}
