//! The kinds of values options take, each read the same way from a flag
//! and from `hearth.toml`: sizes, durations, addresses, php.ini settings,
//! environment variables, proxies. A type here parses with `FromStr` (the flag) and deserializes
//! through the same parser (the file), and prints back in a form it reads
//! (the defaults in `--help` and the docs).

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// A byte size: a number of bytes, or a whole number with K, M or G
/// (binary: "512K", "8M", "1G"). In the file, a TOML integer or a string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size(pub u64);

impl Size {
    /// The size as a `usize`, saturating (on 32-bit targets).
    pub fn as_usize(self) -> usize {
        usize::try_from(self.0).unwrap_or(usize::MAX)
    }
}

impl std::str::FromStr for Size {
    type Err = String;

    fn from_str(s: &str) -> Result<Size, String> {
        let invalid = || format!("invalid size {s:?}: expected bytes or a number with K, M or G");
        let t = s.trim();
        let (digits, unit) = t.split_at(t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len()));
        let n: u64 = digits.parse().map_err(|_| invalid())?;
        let shift = match unit.trim().to_ascii_uppercase().as_str() {
            "" | "B" => 0,
            "K" | "KB" | "KIB" => 10,
            "M" | "MB" | "MIB" => 20,
            "G" | "GB" | "GIB" => 30,
            _ => return Err(invalid()),
        };
        n.checked_mul(1 << shift)
            .map(Size)
            .ok_or_else(|| format!("size {s:?} is too large"))
    }
}

/// The largest unit that divides the size exactly: "8M", "64K", "100".
impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (shift, unit) in [(30, "G"), (20, "M"), (10, "K")] {
            if self.0 != 0 && self.0.trailing_zeros() >= shift {
                return write!(f, "{}{unit}", self.0 >> shift);
            }
        }
        write!(f, "{}", self.0)
    }
}

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Size, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Size;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a size in bytes or a string like \"8M\"")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Size, E> {
                u64::try_from(v)
                    .map(Size)
                    .map_err(|_| E::custom("a size cannot be negative"))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Size, E> {
                v.parse().map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// A duration: seconds, possibly fractional, or a number with ms, s, m or
/// h ("500ms", "30s", "2m"), read by `hearth_run::parse_duration`, the one
/// grammar for every duration Hearth reads, task lines included. In the
/// file, a TOML integer or float (seconds) or a string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seconds(pub Duration);

impl Seconds {
    pub const fn from_secs(secs: u64) -> Seconds {
        Seconds(Duration::from_secs(secs))
    }

    /// The duration, or none for 0 (which means "no limit").
    pub fn nonzero(self) -> Option<Duration> {
        Some(self.0).filter(|d| !d.is_zero())
    }
}

impl std::str::FromStr for Seconds {
    type Err = String;

    fn from_str(s: &str) -> Result<Seconds, String> {
        hearth_run::parse_duration(s).map(Seconds)
    }
}

/// "30s", "500ms", "1.5s".
impl fmt::Display for Seconds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.0;
        if d.subsec_nanos() == 0 {
            write!(f, "{}s", d.as_secs())
        } else if d.subsec_millis() * 1_000_000 == d.subsec_nanos() {
            write!(f, "{}ms", d.as_millis())
        } else {
            write!(f, "{}s", d.as_secs_f64())
        }
    }
}

impl<'de> Deserialize<'de> for Seconds {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Seconds, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Seconds;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("seconds or a string like \"30s\" or \"500ms\"")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Seconds, E> {
                u64::try_from(v)
                    .map(Seconds::from_secs)
                    .map_err(|_| E::custom("a duration cannot be negative"))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Seconds, E> {
                Duration::try_from_secs_f64(v)
                    .map(Seconds)
                    .map_err(|_| E::custom("invalid duration"))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Seconds, E> {
                v.parse().map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// An IP address and a port: "127.0.0.1:8080", "[::]:443". Not a host
/// name: Hearth resolves nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Address(pub SocketAddr);

impl std::str::FromStr for Address {
    type Err = String;

    fn from_str(s: &str) -> Result<Address, String> {
        s.trim().parse().map(Address).map_err(|_| {
            format!("{s:?} is not an IP address and port like 127.0.0.1:8080 or [::]:8080")
        })
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Where `hearth serve` listens: an IP address and port like [`Address`],
/// or `unix:PATH`, a unix socket (nginx's `listen unix:PATH`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    Tcp(SocketAddr),
    Unix(std::path::PathBuf),
}

/// The longest path a unix socket address holds (`sun_path` is 108 bytes
/// on Linux, with its terminating NUL).
pub const MAX_UNIX_PATH: usize = 107;

impl Listen {
    /// The HTTP front's address; a relative socket path is made absolute
    /// (from the working directory).
    pub fn for_http(&self) -> hearth_http::ListenAddr {
        match self {
            Listen::Tcp(addr) => hearth_http::ListenAddr::Tcp(*addr),
            Listen::Unix(path) => hearth_http::ListenAddr::Unix(
                std::path::absolute(path).unwrap_or_else(|_| path.clone()),
            ),
        }
    }
}

impl std::str::FromStr for Listen {
    type Err = String;

    fn from_str(s: &str) -> Result<Listen, String> {
        let s = s.trim();
        let Some(path) = s.strip_prefix("unix:") else {
            return s.parse::<Address>().map(|a| Listen::Tcp(a.0)).map_err(|_| {
                format!(
                    "{s:?} is not an IP address and port like 127.0.0.1:8080 or [::]:8080, \
                     nor unix:PATH"
                )
            });
        };
        if path.is_empty() {
            return Err("unix: needs the socket's path, like unix:/run/hearth/hearth.sock".into());
        }
        if path.ends_with('/') {
            return Err(format!("{s:?}: the socket's path names a directory"));
        }
        if path.len() > MAX_UNIX_PATH {
            return Err(format!(
                "{s:?}: a unix socket's path has at most {MAX_UNIX_PATH} bytes"
            ));
        }
        Ok(Listen::Unix(path.into()))
    }
}

impl fmt::Display for Listen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Listen::Tcp(addr) => addr.fmt(f),
            Listen::Unix(path) => write!(f, "unix:{}", path.display()),
        }
    }
}

/// A unix socket file's permission bits, in octal like chmod's (`0660`,
/// `660`), as php-fpm's `listen.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SocketMode(pub u32);

impl std::str::FromStr for SocketMode {
    type Err = String;

    fn from_str(s: &str) -> Result<SocketMode, String> {
        let digits = s.trim();
        match u32::from_str_radix(digits, 8) {
            Ok(mode) if !digits.is_empty() && mode <= 0o777 => Ok(SocketMode(mode)),
            _ => Err(format!(
                "{s:?} is not a file mode in octal like 0660 (permission bits only, at most 0777)"
            )),
        }
    }
}

impl fmt::Display for SocketMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04o}", self.0)
    }
}

/// Whether workers load the Hearth PHP extension: `auto`, `off` or the
/// path of the extension's file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ExtensionChoice {
    #[default]
    Auto,
    Off,
    Path(std::path::PathBuf),
}

impl std::str::FromStr for ExtensionChoice {
    type Err = String;

    fn from_str(s: &str) -> Result<ExtensionChoice, String> {
        match s.trim() {
            "" => Err("an empty value is not auto, off or the path of the extension".to_owned()),
            "auto" => Ok(ExtensionChoice::Auto),
            "off" => Ok(ExtensionChoice::Off),
            path => Ok(ExtensionChoice::Path(path.into())),
        }
    }
}

impl fmt::Display for ExtensionChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExtensionChoice::Auto => f.write_str("auto"),
            ExtensionChoice::Off => f.write_str("off"),
            ExtensionChoice::Path(p) => p.display().fmt(f),
        }
    }
}

impl ExtensionChoice {
    /// The pool's setting.
    pub fn for_pool(&self) -> hearth_pool::Extension {
        match self {
            ExtensionChoice::Auto => hearth_pool::Extension::Auto,
            ExtensionChoice::Off => hearth_pool::Extension::Off,
            ExtensionChoice::Path(p) => {
                hearth_pool::Extension::Path(std::path::absolute(p).unwrap_or_else(|_| p.clone()))
            }
        }
    }
}

/// A proxy whose forwarding headers are believed: an IP address, a
/// network ("10.0.0.0/8"), or `unix:` (None) for every peer of a unix
/// socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Proxy(pub Option<ipnet::IpNet>);

impl std::str::FromStr for Proxy {
    type Err = String;

    fn from_str(s: &str) -> Result<Proxy, String> {
        hearth_http::parse_trusted_proxy(s).map(Proxy)
    }
}

impl fmt::Display for Proxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Some(net) => net.fmt(f),
            None => f.write_str("unix:"),
        }
    }
}

/// A directory the file offload serves from: `DIR` for `X-Sendfile`
/// paths under it, or `PREFIX=DIR` (the prefix starts and ends with `/`)
/// for `X-Accel-Redirect` URIs under PREFIX too, mapped onto DIR as an
/// nginx `location PREFIX { internal; alias DIR/; }` maps them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendfileRoot {
    pub prefix: Option<String>,
    pub dir: std::path::PathBuf,
}

impl SendfileRoot {
    /// Why this root cannot be used, if it cannot (its directory is
    /// checked when Hearth starts).
    pub fn fault(&self) -> Option<String> {
        if let Some(prefix) = &self.prefix {
            let normal = !prefix.contains("//")
                && !prefix.split('/').any(|seg| seg == "." || seg == "..")
                && !prefix.bytes().any(|b| b.is_ascii_control() || b == b'%');
            if !prefix.starts_with('/') || !prefix.ends_with('/') || !normal {
                return Some(format!(
                    "prefix {prefix:?} must be a URI path that starts and ends with /, without                      //, . or .. segments or percent-encoding"
                ));
            }
        }
        if self.dir.as_os_str().is_empty() {
            return Some(format!("{self} names no directory"));
        }
        None
    }
}

impl std::str::FromStr for SendfileRoot {
    type Err = String;

    fn from_str(s: &str) -> Result<SendfileRoot, String> {
        match s.split_once('=') {
            Some((prefix, dir)) if prefix.ends_with('/') => Ok(SendfileRoot {
                prefix: Some(prefix.to_owned()),
                dir: dir.into(),
            }),
            _ => Ok(SendfileRoot {
                prefix: None,
                dir: s.into(),
            }),
        }
    }
}

impl fmt::Display for SendfileRoot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(prefix) = &self.prefix {
            write!(f, "{prefix}=")?;
        }
        self.dir.display().fmt(f)
    }
}

/// The index files of classic mode (nginx's `index`): names tried in
/// order for a request ending in `/`. Written "index.php index.html" (or
/// with commas); in the file also a TOML array of names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexFiles(pub Vec<String>);

impl Default for IndexFiles {
    /// nginx's `index index.php index.html;` of Debian's PHP sites.
    fn default() -> IndexFiles {
        IndexFiles(vec!["index.php".into(), "index.html".into()])
    }
}

impl std::str::FromStr for IndexFiles {
    type Err = String;

    fn from_str(s: &str) -> Result<IndexFiles, String> {
        let names: Vec<String> = s
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|n| !n.is_empty())
            .map(str::to_owned)
            .collect();
        if names.is_empty() {
            return Err("no index file named (e.g. \"index.php index.html\")".to_owned());
        }
        Ok(IndexFiles(names))
    }
}

impl fmt::Display for IndexFiles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.join(" "))
    }
}

impl IndexFiles {
    /// Why a name cannot be an index file, if it cannot: a file name in
    /// the requested directory, so no slash, no dot name, nothing a
    /// request path could not hold.
    pub fn fault(&self) -> Option<String> {
        self.0.iter().find_map(|name| {
            let bad = name == "."
                || name == ".."
                || name.contains('/')
                || name.chars().any(|c| c.is_control() || c == '?' || c == '#');
            bad.then(|| format!("{name:?} is not a file name (no slash, ., .., ? or #)"))
        })
    }
}

impl<'de> Deserialize<'de> for IndexFiles {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<IndexFiles, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Given {
            Text(String),
            List(Vec<String>),
        }
        match Given::deserialize(d)? {
            Given::Text(text) => text.parse().map_err(de::Error::custom),
            Given::List(names) if names.is_empty() => Err(de::Error::custom("no index file named")),
            Given::List(names) => Ok(IndexFiles(names)),
        }
    }
}

/// Classic mode's front controller (the last argument of nginx's
/// `try_files $uri $uri/ /index.php?$query_string;`): the script a
/// request for nothing on disk runs, or `off` (`=404`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fallback {
    /// `=404`: a site without a front controller.
    Off,
    /// A `.php` path under the document root, such as `/index.php`.
    Script(String),
}

impl Default for Fallback {
    fn default() -> Fallback {
        Fallback::Script("/index.php".to_owned())
    }
}

impl std::str::FromStr for Fallback {
    type Err = String;

    fn from_str(s: &str) -> Result<Fallback, String> {
        match s.trim() {
            "" => Err("an empty value is not off or a path such as /index.php".to_owned()),
            "off" => Ok(Fallback::Off),
            path => Ok(Fallback::Script(path.to_owned())),
        }
    }
}

impl fmt::Display for Fallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fallback::Off => f.write_str("off"),
            Fallback::Script(path) => f.write_str(path),
        }
    }
}

impl Fallback {
    /// Why the path cannot be a front controller, if it cannot: it must
    /// be a `.php` path under the root, as a request would name it
    /// (starting with `/`, no `.` or `..` segment, no `//`).
    pub fn fault(&self) -> Option<String> {
        let Fallback::Script(path) = self else {
            return None;
        };
        let normal = path.starts_with('/')
            && !path.contains("//")
            && !path
                .split('/')
                .any(|segment| segment == "." || segment == "..")
            && !path.chars().any(|c| c.is_control() || c == '?' || c == '#');
        if !normal || !path.ends_with(".php") || path.len() <= ".php".len() + 1 {
            return Some(format!(
                "{path:?} is not a script path: it must start with / and end in .php \
                 (such as /index.php), or be off"
            ));
        }
        None
    }

    /// The router's setting: the path, or none for `off`.
    pub fn for_router(&self) -> Option<String> {
        match self {
            Fallback::Off => None,
            Fallback::Script(path) => Some(path.clone()),
        }
    }
}

/// Written as text, in the form `FromStr` reads (for the defaults shown
/// in `--help` and the docs).
macro_rules! serialize_as_text {
    ($($t:ty),*) => {$(
        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
    )*};
}
serialize_as_text!(
    Seconds,
    Address,
    Listen,
    SocketMode,
    Proxy,
    SendfileRoot,
    ExtensionChoice,
    IndexFiles,
    Fallback
);

/// A size with a unit is written as text ("8M"); one without, as a number
/// of bytes.
impl Serialize for Size {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let text = self.to_string();
        if text.bytes().all(|b| b.is_ascii_digit()) {
            s.serialize_u64(self.0)
        } else {
            s.serialize_str(&text)
        }
    }
}

/// Read in the file from a string, by `FromStr`, as from a flag.
macro_rules! deserialize_from_text {
    ($($t:ty),*) => {$(
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<$t, D::Error> {
                let text = String::deserialize(d)?;
                text.parse().map_err(de::Error::custom)
            }
        }
    )*};
}
deserialize_from_text!(
    Address,
    Listen,
    SocketMode,
    Proxy,
    SendfileRoot,
    ExtensionChoice,
    Fallback
);

/// `--access-log` and `access_log`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AccessLogChoice {
    #[default]
    Off,
    Common,
    Json,
}

/// `--classic` and `classic`: whether a site with a worker script and a
/// document root runs its other `.php` entries in a php-fpm pool (mixed
/// mode).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClassicChoice {
    /// Mixed mode when php-fpm is installed; else as `off`, with a warning.
    #[default]
    Auto,
    /// Mixed mode; Hearth does not start without php-fpm.
    On,
    /// Every request that is not a static file goes to the worker.
    Off,
}

/// Where a prefix route sends its requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RouteTo {
    /// Every request under the prefix that is not a static file goes to
    /// the worker.
    Worker,
    /// Requests under the prefix are routed as classic mode routes them,
    /// the front controller run in php-fpm too.
    Classic,
}

/// A prefix route of a mixed site: `--route /api/=worker`, or in the file
/// `[[serve.route]]` with `prefix = "/api/"` and `to = "worker"`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteRule {
    /// The start of the request paths (decoded and normalized, as nginx's
    /// `$uri`) this route takes; it starts with `/`.
    pub prefix: String,
    pub to: RouteTo,
}

impl RouteRule {
    /// Why this route cannot be used, if it cannot.
    pub fn fault(&self) -> Option<String> {
        if !self.prefix.starts_with('/') {
            return Some(format!("prefix {:?} must start with /", self.prefix));
        }
        if self.prefix.bytes().any(|b| b.is_ascii_control()) {
            return Some(format!(
                "prefix {:?} holds a control character",
                self.prefix
            ));
        }
        let normal = !self.prefix.contains("//")
            && !self.prefix.split('/').any(|seg| seg == "." || seg == "..");
        if !normal {
            return Some(format!(
                "prefix {:?} must be a normalized path (no //, . or .. segments): requests are \
                 matched after their path is normalized",
                self.prefix
            ));
        }
        None
    }
}

impl std::str::FromStr for RouteRule {
    type Err = String;

    fn from_str(s: &str) -> Result<RouteRule, String> {
        let Some((prefix, to)) = s.rsplit_once('=') else {
            return Err(format!("{s:?} is not PREFIX=worker or PREFIX=classic"));
        };
        let to = match to.trim() {
            "worker" => RouteTo::Worker,
            "classic" => RouteTo::Classic,
            other => return Err(format!("{other:?} in {s:?} is not worker or classic")),
        };
        Ok(RouteRule {
            prefix: prefix.to_owned(),
            to,
        })
    }
}

/// A php.ini setting from the command line, `NAME=VALUE` (`-d`, as PHP's
/// own flag takes it).
pub fn parse_ini(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((name, value)) if !name.trim().is_empty() => {
            Ok((name.trim().to_owned(), value.to_owned()))
        }
        _ => Err(format!("{s:?} is not NAME=VALUE")),
    }
}

/// Why `name` cannot be a php.ini setting's name, if it cannot.
pub fn bad_ini_name(name: &str) -> Option<String> {
    (name.is_empty() || name.contains('=') || name.contains(char::is_whitespace))
        .then(|| format!("{name:?} is not a php.ini setting name"))
}

/// php.ini settings in the file: a table of name = "value", read in name
/// order.
pub mod ini_table {
    use super::*;

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(String, String)>, D::Error> {
        Ok(BTreeMap::<String, String>::deserialize(d)?
            .into_iter()
            .collect())
    }

    pub fn serialize<S: Serializer>(ini: &[(String, String)], s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(ini.iter().map(|(k, v)| (k, v)))
    }
}

/// A variable for the workers' environment: `NAME=VALUE` sets it, `NAME`
/// alone passes Hearth's own value (`--env`). In the file, an entry of
/// `[serve.env]`: `NAME = "VALUE"`, or `NAME = true` to pass it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvVar {
    pub name: String,
    /// None: Hearth's own value, if it has one.
    pub value: Option<String>,
}

impl std::str::FromStr for EnvVar {
    type Err = String;

    fn from_str(s: &str) -> Result<EnvVar, String> {
        let (name, value) = match s.split_once('=') {
            Some((name, value)) => (name, Some(value.to_owned())),
            None => (s, None),
        };
        if name.is_empty() {
            return Err(format!("{s:?} is not NAME or NAME=VALUE"));
        }
        Ok(EnvVar {
            name: name.to_owned(),
            value,
        })
    }
}

impl EnvVar {
    /// Why this cannot be in an environment, if it cannot.
    pub fn fault(&self) -> Option<String> {
        if self.name.is_empty() || self.name.contains(['=', '\0']) {
            return Some(format!(
                "{:?} is not an environment variable name",
                self.name
            ));
        }
        if self.name.starts_with("HEARTH_") {
            return Some(format!(
                "{}: HEARTH_ variables are set by Hearth itself",
                self.name
            ));
        }
        if self.value.as_ref().is_some_and(|v| v.contains('\0')) {
            return Some(format!("{}: a value cannot hold a NUL byte", self.name));
        }
        None
    }
}

/// `[serve.env]`: a table of `NAME = "VALUE"` (set) and `NAME = true`
/// (passed from Hearth's environment), read in name order.
pub mod env_table {
    use super::*;

    #[derive(Deserialize, Serialize)]
    #[serde(untagged)]
    enum Entry {
        Set(String),
        Pass(bool),
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<EnvVar>, D::Error> {
        BTreeMap::<String, Entry>::deserialize(d)
            .map_err(|_| {
                de::Error::custom(
                    "expected a table of NAME = \"VALUE\" (set) or NAME = true (passed from \
                     Hearth's environment)",
                )
            })?
            .into_iter()
            .map(|(name, entry)| match entry {
                Entry::Set(value) => Ok(EnvVar {
                    name,
                    value: Some(value),
                }),
                Entry::Pass(true) => Ok(EnvVar { name, value: None }),
                Entry::Pass(false) => Err(de::Error::custom(format!(
                    "{name} = false: leave it out, or write {name} = true to pass Hearth's own value"
                ))),
            })
            .collect()
    }

    pub fn serialize<S: Serializer>(env: &[EnvVar], s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(env.iter().map(|v| {
            let entry = match &v.value {
                Some(value) => Entry::Set(value.clone()),
                None => Entry::Pass(true),
            };
            (&v.name, entry)
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn environment_variables() {
        let set: EnvVar = "APP_ENV=prod=1".parse().unwrap();
        assert_eq!(set.name, "APP_ENV");
        assert_eq!(set.value.as_deref(), Some("prod=1"));
        let pass: EnvVar = "PATH".parse().unwrap();
        assert_eq!((pass.name.as_str(), pass.value.as_deref()), ("PATH", None));
        let empty: EnvVar = "EMPTY=".parse().unwrap();
        assert_eq!(empty.value.as_deref(), Some(""));
        assert!("=x".parse::<EnvVar>().is_err());
        assert!("".parse::<EnvVar>().is_err());
        assert!(pass.fault().is_none());
        let own: EnvVar = "HEARTH_LOG=debug".parse().unwrap();
        assert!(own.fault().is_some_and(|f| f.contains("HEARTH_")));
        let nul: EnvVar = "A=b\0c".parse().unwrap();
        assert!(nul.fault().is_some());
    }

    #[test]
    fn listen_addresses_read_and_print_back() {
        let tcp: Listen = "[::]:8080".parse().unwrap();
        assert_eq!(tcp, Listen::Tcp("[::]:8080".parse().unwrap()));
        let unix: Listen = "unix:/run/hearth/hearth.sock".parse().unwrap();
        assert_eq!(unix, Listen::Unix("/run/hearth/hearth.sock".into()));
        assert_eq!(unix.to_string(), "unix:/run/hearth/hearth.sock");
        for bad in ["unix:", "unix:/run/hearth/", "localhost:80", "/run/x.sock"] {
            assert!(bad.parse::<Listen>().is_err(), "{bad}");
        }
        let long = format!("unix:/{}", "x".repeat(MAX_UNIX_PATH));
        assert!(long.parse::<Listen>().unwrap_err().contains("107 bytes"));
    }

    #[test]
    fn sizes_read_and_print_back() {
        assert_eq!("1G".parse::<Size>(), Ok(Size(1 << 30)));
        assert_eq!("512".parse::<Size>(), Ok(Size(512)));
        assert_eq!("64kib".parse::<Size>(), Ok(Size(64 << 10)));
        assert!("x".parse::<Size>().is_err());
        assert!("1.5M".parse::<Size>().is_err());
        assert!("99999999999G".parse::<Size>().is_err());
        for text in ["8M", "64K", "1G", "100", "0", "1025"] {
            assert_eq!(text.parse::<Size>().map(|s| s.to_string()), Ok(text.into()));
        }
    }

    #[test]
    fn durations_read_and_print_back() {
        assert_eq!("2m".parse::<Seconds>(), Ok(Seconds::from_secs(120)));
        assert_eq!(
            "1.5".parse::<Seconds>(),
            Ok(Seconds(Duration::from_millis(1500)))
        );
        assert!("-1s".parse::<Seconds>().is_err());
        assert!("soon".parse::<Seconds>().is_err());
        for text in ["30s", "0s", "500ms", "1.5s"] {
            let d: Seconds = text.parse().unwrap();
            assert_eq!(d.to_string().parse::<Seconds>(), Ok(d), "{text}");
        }
        assert_eq!(Seconds(Duration::from_millis(1500)).to_string(), "1500ms");
    }

    #[test]
    fn addresses_and_proxies() {
        assert!("127.0.0.1:80".parse::<Address>().is_ok());
        assert!("[::1]:80".parse::<Address>().is_ok());
        let err = "localhost:80".parse::<Address>().unwrap_err();
        assert!(err.contains("\"localhost:80\""), "{err}");
        assert!("10.0.0.0/8".parse::<Proxy>().is_ok());
        assert!("10.0.0.1".parse::<Proxy>().is_ok());
        assert!("proxy".parse::<Proxy>().is_err());
        assert_eq!("unix:".parse::<Proxy>(), Ok(Proxy(None)));
        assert_eq!(Proxy(None).to_string(), "unix:");
    }

    #[test]
    fn ini_settings() {
        assert_eq!(
            parse_ini(" memory_limit =256M"),
            Ok(("memory_limit".into(), "256M".into()))
        );
        assert_eq!(parse_ini("a=b=c"), Ok(("a".into(), "b=c".into())));
        assert!(parse_ini("novalue").is_err());
        assert!(parse_ini("=1").is_err());
        assert!(bad_ini_name("a b").is_some());
        assert!(bad_ini_name("session.save_path").is_none());
    }
}

/// `hearth run -j`, as GNU parallel takes it: a number of tasks (`8`), a
/// share of the CPUs (`50%`), CPUs plus or minus some (`+2`, `-1`), or 0
/// for as many as possible. In the file, an integer or such a string.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Jobs {
    Count(usize),
    Percent(f64),
    Plus(i64),
}

/// What `-j 0` means: as many as the descriptors allow (each task holds
/// a few), and no more than this.
const MAX_JOBS: usize = 1024;

impl Jobs {
    /// The number of tasks at once on a machine with `cpus` CPUs.
    pub fn resolve(self, cpus: usize) -> usize {
        match self {
            Jobs::Count(0) => {
                let open = rustix::process::getrlimit(rustix::process::Resource::Nofile)
                    .current
                    .unwrap_or(u64::MAX);
                usize::try_from(open / 8)
                    .unwrap_or(MAX_JOBS)
                    .clamp(1, MAX_JOBS)
            }
            Jobs::Count(n) => n,
            Jobs::Percent(p) => ((cpus as f64 * p / 100.0).floor() as usize).max(1),
            Jobs::Plus(n) => usize::try_from(cpus as i64 + n).unwrap_or(1).max(1),
        }
    }
}

impl std::str::FromStr for Jobs {
    type Err = String;

    fn from_str(s: &str) -> Result<Jobs, String> {
        let bad = || {
            format!("`{s}`: expected a number of tasks (8), a share of the CPUs (50%), +N or -N CPUs, or 0 for as many as possible")
        };
        if let Some(p) = s.strip_suffix('%') {
            let p: f64 = p.parse().map_err(|_| bad())?;
            return (p.is_finite() && p > 0.0)
                .then_some(Jobs::Percent(p))
                .ok_or_else(bad);
        }
        if s.starts_with(['+', '-']) {
            return s.parse::<i64>().map(Jobs::Plus).map_err(|_| bad());
        }
        s.parse::<usize>().map(Jobs::Count).map_err(|_| bad())
    }
}

impl fmt::Display for Jobs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Jobs::Count(n) => write!(f, "{n}"),
            Jobs::Percent(p) => write!(f, "{p}%"),
            Jobs::Plus(n) => write!(f, "{n:+}"),
        }
    }
}

impl Serialize for Jobs {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Jobs::Count(n) => s.serialize_u64(*n as u64),
            other => s.serialize_str(&other.to_string()),
        }
    }
}

impl<'de> Deserialize<'de> for Jobs {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Jobs, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Jobs;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number of tasks, or a string like \"50%\" or \"+2\"")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Jobs, E> {
                usize::try_from(v)
                    .map(Jobs::Count)
                    .map_err(|_| E::custom("must be 0 or more"))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Jobs, E> {
                usize::try_from(v)
                    .map(Jobs::Count)
                    .map_err(|_| E::custom("too large"))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Jobs, E> {
                v.parse().map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// `hearth run -d`: one byte, written as itself or as `\n`, `\t`, `\0`,
/// `\\`.
pub fn delimiter(s: &str) -> Result<u8, String> {
    match s {
        "\\n" => Ok(b'\n'),
        "\\t" => Ok(b'\t'),
        "\\0" => Ok(0),
        "\\\\" => Ok(b'\\'),
        _ if s.len() == 1 => Ok(s.as_bytes()[0]),
        _ => Err(format!(
            "`{s}`: expected one character (or \\n, \\t, \\0, \\\\)"
        )),
    }
}
