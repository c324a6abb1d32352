//! Classic mode: serving an unmodified multi-script PHP site (WordPress,
//! DokuWiki, phpMyAdmin) the way nginx + php-fpm serve it with Debian's
//! `snippets/fastcgi-php.conf`.
//!
//! This crate decides, for one request path, what that nginx configuration
//! would do (a static file, a PHP script and its FastCGI parameters, a
//! redirect, 403 or 404), and nothing else: it runs no PHP and speaks no
//! FastCGI. It is synchronous and uses std only; the only I/O is looking at
//! the document root (`stat`, `realpath`).
//!
//! Modules, from the public face down: [`route`] (the decision) > [`uri`]
//! (nginx's `$uri` normalization) > `error`.

mod error;
pub mod route;
pub mod uri;

pub use error::Error;
pub use route::{is_php_name, Options, PhpTarget, Route, Router};
pub use uri::{normalize_uri, BadUri};
