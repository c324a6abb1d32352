//! Reading options: flags over the file over the defaults, and errors that
//! say where a refused value came from.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args as _, CommandFactory as _, FromArgMatches as _};

use super::values::{Seconds, Size};
use super::*;

/// `T`'s options from `args` and, if given, a hearth.toml holding `file`.
fn load<T: Section>(args: &[&str], file: Option<&str>) -> Result<T, Error> {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("hearth.toml");
    let mut argv = vec![T::NAME.to_owned()];
    if let Some(text) = file {
        std::fs::write(&path, text).expect("write hearth.toml");
        argv.extend(["--config".to_owned(), path.display().to_string()]);
    }
    argv.extend(args.iter().map(|a| a.to_string()));
    let matches = CommandLine::<T>::augment_args(clap::Command::new(T::NAME))
        .try_get_matches_from(argv)
        .map_err(|e| Error {
            message: e.to_string(),
        })?;
    CommandLine::<T>::from_arg_matches(&matches)
        .expect("matches")
        .load()
        .map_err(|e| Error {
            // The temporary directory, as the docs' examples name it.
            message: e
                .message
                .replace(&dir.path().display().to_string(), "/etc/app"),
        })
}

fn serve(args: &[&str], file: Option<&str>) -> Result<ServeOptions, Error> {
    load(args, file)
}

fn run(args: &[&str], file: Option<&str>) -> Result<RunOptions, Error> {
    load(args, file)
}

#[test]
fn flags_over_the_file_over_the_defaults() {
    let file = "[serve]\nmax_queue = 10\nqueue_timeout = \"500ms\"\nh2c = true\n\
                compression = false\nserver_name = \"app.example\"\n";
    let o = serve(&["--max-queue", "20"], Some(file)).unwrap();
    assert_eq!(o.max_queue, 20, "the flag wins");
    assert_eq!(
        o.queue_timeout,
        Seconds(Duration::from_millis(500)),
        "the file"
    );
    assert!(o.h2c, "a switch in the file, no flag");
    assert!(!o.compression, "a negative switch in the file, no flag");
    assert_eq!(o.server_name, "app.example");
    assert_eq!(o.boot_timeout, Seconds::from_secs(60), "the default");

    let o = serve(&["--no-compression", "--h2c"], None).unwrap();
    assert!(!o.compression && o.h2c);
    let o = serve(&[], None).unwrap();
    assert!(o.compression && !o.h2c && o.batch_scheduling && o.pipelining);
    assert_eq!(o.max_queue, 1024);
}

#[test]
fn lists_add_up_the_files_first() {
    let file = "[serve]\ntrusted_proxies = [\"10.0.0.0/8\"]\n\
                [serve.ini]\nprecision = \"5\"\nmemory_limit = \"1G\"\n";
    let o = serve(
        &["-d", "memory_limit=2G", "--trusted-proxy", "192.0.2.1"],
        Some(file),
    )
    .unwrap();
    let ini: Vec<(&str, &str)> = o.ini.iter().map(|(k, v)| (&**k, &**v)).collect();
    assert_eq!(
        ini,
        [
            ("memory_limit", "1G"),
            ("precision", "5"),
            ("memory_limit", "2G")
        ]
    );
    let proxies: Vec<String> = o.trusted_proxies.iter().map(|p| p.to_string()).collect();
    assert_eq!(proxies, ["10.0.0.0/8", "192.0.2.1/32"]);
    let o = serve(&[], Some(file)).unwrap();
    assert_eq!(o.ini.len(), 2, "no flags: the file's alone");
}

/// Issue 16 (8): `--env` and `[serve.env]` add up, the file's first, so
/// that a flag wins over the file for the same name; `clear_env` is a
/// switch and a key.
#[test]
fn environment_variables_add_up_and_clear_env_is_a_switch() {
    let file = "[serve]\nclear_env = true\n[serve.env]\nPATH = true\nAPP_ENV = \"prod\"\n";
    let o = serve(&["--env", "APP_ENV=dev", "--env", "TZ"], Some(file)).unwrap();
    let env: Vec<(&str, Option<&str>)> = o
        .env
        .iter()
        .map(|v| (v.name.as_str(), v.value.as_deref()))
        .collect();
    assert_eq!(
        env,
        [
            ("APP_ENV", Some("prod")),
            ("PATH", None),
            ("APP_ENV", Some("dev")),
            ("TZ", None)
        ]
    );
    assert!(o.clear_env);
    assert!(serve(&["--clear-env"], None).unwrap().clear_env);
    assert!(!serve(&[], None).unwrap().clear_env);
    // A passed variable is looked up in Hearth's environment; one it does
    // not have is left out (and named, for a warning).
    let o = serve(
        &["--env", "NOT_SET_IN_ANY_ENVIRONMENT_16", "--env", "A=1"],
        None,
    )
    .unwrap();
    let pool = o.pool_config(std::path::Path::new("/app/worker.php"), None);
    assert_eq!(pool.env, [("A".into(), "1".into())]);
    assert_eq!(o.env_not_found(), ["NOT_SET_IN_ANY_ENVIRONMENT_16"]);
    let err = refused(serve(&["--env", "HEARTH_X=1"], None));
    assert_eq!(
        err,
        "--env: HEARTH_X: HEARTH_ variables are set by Hearth itself"
    );
    let err = refused(serve(&[], Some("[serve.env]\nPATH = false\n")));
    assert!(err.contains("PATH = true"), "{err}");
}

#[test]
fn a_full_serve_section() {
    let o = serve(
        &[],
        Some(
            "[serve]\nscript = \"app/worker.php\"\nlisten = \"0.0.0.0:9000\"\nmax_workers = 3\n\
             max_body_size = \"16M\"\nbody_buffer_size = 16384\nboot_timeout = 10\n\
             keep_alive_timeout = 0\nadmin = \"127.0.0.1:9090\"\naccess_log = \"json\"\n\
             [serve.env]\nAPP_ENV = \"prod\"\n",
        ),
    )
    .unwrap();
    assert_eq!(o.listen.to_string(), "0.0.0.0:9000");
    assert_eq!(
        o.workers,
        Some(3),
        "max_workers is another name for workers"
    );
    assert_eq!(o.max_body_size, Size(16 << 20));
    assert_eq!(o.body_buffer_size, Size(16 << 10));
    assert_eq!(o.boot_timeout, Seconds::from_secs(10));
    assert_eq!(o.keep_alive_timeout, Seconds::from_secs(0));
    assert_eq!(
        o.admin.map(|a| a.to_string()).as_deref(),
        Some("127.0.0.1:9090")
    );
    assert_eq!(o.access_log, values::AccessLogChoice::Json);
    assert_eq!(
        o.env,
        [values::EnvVar {
            name: "APP_ENV".into(),
            value: Some("prod".into())
        }]
    );
}

#[test]
fn paths_in_the_file_are_relative_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("hearth.toml");
    std::fs::write(
        &config,
        "[serve]\nscript = \"app/worker.php\"\ntls_cert = \"certs/site.pem\"\ntls_key = \"/k/site.key\"\n\
         root = \"public\"\ncontrol_socket = \"run/hearth.sock\"\naccess_log_file = \"log/access.log\"\n\
         admin_token_file = \"secrets/admin\"\nadmin_token = \"in-the-file-0123456789\"\n\
         php = \"php-cgi8.2\"\nlisten = \"unix:run/http.sock\"\n[run]\nphp_bootstrap = \"app/bootstrap.php\"\n",
    )
    .unwrap();
    let config = config.display().to_string();
    let matches = CommandLine::<ServeOptions>::augment_args(clap::Command::new("serve"))
        .try_get_matches_from(["serve", "--config", &config, "--root", "web"])
        .unwrap();
    let o = CommandLine::<ServeOptions>::from_arg_matches(&matches)
        .unwrap()
        .load()
        .unwrap();
    let at = |p: &str| Some(dir.path().join(p));
    assert_eq!(o.script, at("app/worker.php"));
    assert_eq!(o.tls_cert, at("certs/site.pem"));
    assert_eq!(o.tls_key, Some(PathBuf::from("/k/site.key")));
    assert_eq!(
        o.root,
        Some(PathBuf::from("web")),
        "a flag's path is the shell's"
    );
    assert_eq!(o.control_socket, at("run/hearth.sock"));
    assert_eq!(o.access_log_file, at("log/access.log"));
    assert_eq!(o.admin_token_file, at("secrets/admin"));
    assert_eq!(o.admin_token.as_deref(), Some("in-the-file-0123456789"));
    assert_eq!(
        o.listen,
        crate::options::values::Listen::Unix(dir.path().join("run/http.sock"))
    );
    assert_eq!(
        o.php,
        PathBuf::from("php-cgi8.2"),
        "a command name, not a path"
    );

    let matches = CommandLine::<RunOptions>::augment_args(clap::Command::new("run"))
        .try_get_matches_from(["run", "--config", &config])
        .unwrap();
    let o = CommandLine::<RunOptions>::from_arg_matches(&matches)
        .unwrap()
        .load()
        .unwrap();
    assert_eq!(o.php_bootstrap, at("app/bootstrap.php"));
}

/// The message of a refused value.
fn refused<T: Section + std::fmt::Debug>(result: Result<T, Error>) -> String {
    result.expect_err("refused").to_string()
}

#[test]
fn a_bad_value_in_the_file_names_the_file_the_section_and_the_key() {
    let cases = [
        (
            "[serve]\nworkers = \"many\"\n",
            "[serve] workers: ",
            "line 2",
        ),
        (
            "[serve]\nmax_queue = \"x\"\n",
            "[serve] max_queue: ",
            "a whole number",
        ),
        ("[serve]\nworkers = 0\n", "[serve] workers: ", "at least 1"),
        (
            "[serve]\nmax_body_size = \"8 parsecs\"\n",
            "[serve] max_body_size: ",
            "8 parsecs",
        ),
        (
            "[serve]\nqueue_timeout = \"soon\"\n",
            "[serve] queue_timeout: ",
            "soon",
        ),
        (
            "[serve]\nlisten = \"localhost\"\n",
            "[serve] listen: ",
            "localhost",
        ),
        ("[serve]\nwokers = 2\n", "[serve] wokers: ", "unknown key"),
        (
            "[serve]\n[serve.ini]\n\"bad name\" = \"1\"\n",
            "[serve] ini: ",
            "bad name",
        ),
        (
            "[serve.ini]\nmemory_limit = 256\n",
            "[serve] ini.memory_limit: ",
            "a string",
        ),
        (
            "[serve.env]\nHEARTH_RESPONSES = \"/x\"\n",
            "[serve] env: ",
            "HEARTH_",
        ),
        (
            "[serve]\ntrusted_proxies = [\"proxy\"]\n",
            "[serve] trusted_proxies[0]: ",
            "proxy",
        ),
        (
            "[serve]\nheader_timeout = 0\n",
            "[serve] header_timeout: ",
            "more than 0",
        ),
        (
            "[serve]\nmax_connections = 0\n",
            "[serve] max_connections: ",
            "more than 0",
        ),
        (
            "[serve]\ntls_cert = \"a.pem\"\n",
            "[serve] tls_cert: ",
            "needs tls_key",
        ),
        (
            "[serve]\nworkers = 2\nmin_workers = 3\n",
            "[serve] min_workers: ",
            "and workers (2)",
        ),
        (
            "[serve]\nh2c = true\ntls_cert = \"a\"\ntls_key = \"b\"\n",
            "[serve] h2c: ",
            "plain HTTP",
        ),
        (
            "[sevre]\nworkers = 2\n",
            "[sevre]: unknown section",
            "expected one of `serve`, `run`, `work`",
        ),
        (
            "[run]\njobs = \"all\"\n",
            "[run] jobs: ",
            "expected a number of tasks",
        ),
        ("[run]\nbogus = 1\n", "[run] bogus: unknown key", "`jobs`"),
        (
            "[run]\nhalt = \"now\"\n",
            "[run] halt: unknown key",
            "`jobs`",
        ),
        ("serve = 3\n", "[serve]: ", "expected a table"),
    ];
    for (text, place, detail) in cases {
        let err = refused(serve(&[], Some(text)));
        assert!(
            err.starts_with(&format!("/etc/app/hearth.toml: {place}")),
            "{place} in: {err}"
        );
        assert!(err.contains(detail), "{detail} in: {err}");
    }
    // Each command checks its own section's values.
    let err = refused(run(&[], Some("[run]\nretries = -1\n")));
    assert!(
        err.starts_with("/etc/app/hearth.toml: [run] retries: "),
        "{err}"
    );
    assert!(
        serve(&[], Some("[run]\nretries = -1\n")).is_err(),
        "the file is read whole"
    );
    // -j 0 is GNU parallel's "as many as possible".
    let o = run(&[], Some("[run]\njobs = 0\n")).unwrap();
    assert!(o.jobs() >= 1);
    assert_eq!(
        run(&["-j", "50%"], None)
            .unwrap()
            .jobs
            .map(|j| j.resolve(4)),
        Some(2)
    );
    assert_eq!(
        run(&["-j", "+1"], None).unwrap().jobs.map(|j| j.resolve(4)),
        Some(5)
    );
    assert_eq!(
        run(&["-j", "-1"], None).unwrap().jobs.map(|j| j.resolve(4)),
        Some(3)
    );
    assert_eq!(
        run(&["-j", "-9"], None).unwrap().jobs.map(|j| j.resolve(4)),
        Some(1)
    );
}

#[test]
fn a_bad_flag_value_names_the_flag() {
    for (args, file, expected) in [
        (
            &["--workers", "0"][..],
            None,
            "--workers: must be at least 1",
        ),
        (
            &["--max-body-size", "0"],
            None,
            "--max-body-size: must be more than 0",
        ),
        (&["--tls-key", "k.pem"], None, "--tls-key: needs --tls-cert"),
        (
            &["-d", "a b=1"],
            None,
            "--ini: \"a b\" is not a php.ini setting name",
        ),
        (
            &["--min-workers", "3"],
            Some("[serve]\nworkers = 2\n"),
            "--min-workers: must be between 1 and workers (2), not 3",
        ),
        (
            &["--min-workers", "3", "--workers", "2"],
            None,
            "--min-workers: must be between 1 and --workers (2), not 3",
        ),
        (
            &["--h2c"],
            Some("[serve]\ntls_cert = \"a\"\ntls_key = \"b\"\n"),
            "--h2c: is for plain HTTP: over TLS, clients choose HTTP/2 by ALPN",
        ),
    ] {
        assert_eq!(refused(serve(args, file)), expected);
    }
    let err = refused(serve(&["--queue-timeout", "soon"], None));
    assert!(err.contains("--queue-timeout <DURATION>"), "{err}");
}

#[test]
fn run_reads_its_section() {
    let file = "[run]\njobs = 3\ntimeout = \"2m\"\nkill_after = 1\nretries = 2\n\
                max_output = \"1M\"\nphp = \"php8.2\"\nboot_timeout = \"5s\"\n\
                [run.ini]\nmemory_limit = \"1G\"\n[serve]\nworkers = 7\n";
    let o = run(&["--retries", "4"], Some(file)).unwrap();
    assert_eq!(o.jobs(), 3);
    assert_eq!(o.timeout, Some(Seconds::from_secs(120)));
    assert_eq!(o.kill_after, Seconds::from_secs(1));
    assert_eq!(o.retries, 4, "the flag wins");
    assert_eq!(o.max_output, Some(Size(1 << 20)));
    assert_eq!(
        o.php,
        PathBuf::from("php8.2"),
        "a PHP binary for runs with a bootstrap"
    );
    assert_eq!(o.boot_timeout, Seconds::from_secs(5));
    assert_eq!(o.ini, [("memory_limit".to_owned(), "1G".to_owned())]);
    let words = super::run::read_words(&o.words, false);
    let (config, _) = o.run_config(&words, None).unwrap();
    assert_eq!(config.jobs, 3);
    assert_eq!(config.timeout, Some(Duration::from_secs(120)));
    assert_eq!(config.max_output, 1 << 20);

    let o = run(&[], None).unwrap();
    assert_eq!(o.kill_after, Seconds::from_secs(2));
    assert_eq!(o.max_output, None, "all of it");
    assert_eq!(o.php, PathBuf::from("php"));
    let (config, _) = o
        .run_config(&super::run::read_words(&[], false), None)
        .unwrap();
    assert_eq!(config.timeout, None);
    assert_eq!(config.max_output, usize::MAX);
}

#[test]
fn run_refuses_php_options_without_a_bootstrap_on_the_command_line() {
    assert_eq!(
        refused(run(&["--php", "php8.2"], None)),
        "--php: needs --php-bootstrap"
    );
    assert_eq!(
        refused(run(&["--ini", "a=1"], None)),
        "--ini: needs --php-bootstrap"
    );
    // The bootstrap may come from the file.
    let o = run(
        &["--php", "php8.2"],
        Some("[run]\nphp_bootstrap = \"/app/bootstrap.php\"\n"),
    )
    .unwrap();
    assert_eq!(o.php_bootstrap, Some(PathBuf::from("/app/bootstrap.php")));
    let err = refused(run(
        &["--lines"],
        Some("[run]\nphp_bootstrap = \"/app/bootstrap.php\"\n"),
    ));
    assert_eq!(
        err,
        "/etc/app/hearth.toml: [run] php_bootstrap: reads JSON Lines of jobs; it does not combine with --lines, a COMMAND or arguments (::: or -a)"
    );
}

fn work(args: &[&str], file: Option<&str>) -> Result<WorkOptions, Error> {
    load(args, file)
}

#[test]
fn work_reads_its_section_and_its_queue_file_is_relative_to_it() {
    let file = "[work]\nqueue = \"file:var/jobs.db\"\njobs = 3\ntimeout = \"2m\"\n\
                grace_period = \"5s\"\nvisibility_timeout = \"90s\"\n\
                php_bootstrap = \"app/boot.php\"\nmax_jobs = 500\nmax_memory = \"128M\"\n\
                ttl = \"1h\"\n[work.ini]\nmemory_limit = \"1G\"\n";
    let o = work(&["--jobs", "4"], Some(file)).unwrap();
    assert_eq!(o.jobs(), 4, "the flag wins");
    // `load` names the file's directory /etc/app in errors only.
    let url = o.queue.clone().unwrap();
    assert!(
        url.starts_with("file:/") && url.ends_with("/var/jobs.db"),
        "{url}"
    );
    assert!(o.php_bootstrap.as_ref().unwrap().ends_with("app/boot.php"));
    assert_eq!(o.timeout, Some(Seconds::from_secs(120)));
    assert_eq!(o.grace_period, Seconds::from_secs(5));
    assert_eq!(o.queue_config().visibility_timeout, Duration::from_secs(90));
    let pool = o.job_pool_config(std::path::Path::new("/tmp/job-worker.php"));
    assert_eq!((pool.workers, pool.max_requests), (4, 500));
    assert_eq!(pool.max_memory, 128 << 20);
    assert_eq!(pool.ttl, Some(Duration::from_secs(3600)));
    assert_eq!(pool.ini, [("memory_limit".to_owned(), "1G".to_owned())]);
    let config = o.work_config(&o.queue_config());
    assert_eq!(config.extend_every, Duration::from_secs(30));
    // A queue URL given as a flag is taken as it is.
    let o = work(&["--queue", "file:jobs.db"], Some(file)).unwrap();
    assert_eq!(o.queue.as_deref(), Some("file:jobs.db"));
    // The call socket of a file: relative to it; its mode in octal.
    let calls = "[work]\nlisten = \"unix:run/jobs.sock\"\nlisten_mode = \"0600\"\nphp_bootstrap = \"boot.php\"\n";
    let o = work(&[], Some(calls)).unwrap();
    let socket = o.listen_path().unwrap();
    assert!(
        socket.is_absolute() && socket.ends_with("run/jobs.sock"),
        "{socket:?}"
    );
    assert_eq!(o.listen_mode.0, 0o600);
    assert_eq!(o.queue_url(), None);
    assert_eq!(o.call_config().max_connections, 256);
    let o = work(&["-q", "redis://127.0.0.1/jobs"], None).unwrap();
    assert_eq!(o.max_output, Size(256 << 10));
    assert_eq!(o.grace_period, Seconds::from_secs(30));
    assert_eq!(o.queue_config().visibility_timeout, Duration::from_secs(60));
}

#[test]
fn work_refuses_what_cannot_work_naming_where_it_came_from() {
    for (args, file, expected) in [
        (&[][..], None, "--queue: is needed: the queue to take jobs from (redis://HOST:PORT/NAME or file:PATH), or --listen, the socket to take calls on (unix:PATH), or both"),
        (&["--listen", "unix:jobs.sock"][..], Some("[work]\nlisten_mode = \"0999\"\n"), "/etc/app/hearth.toml: [work] listen_mode: \"0999\" is not a file mode in octal like 0660 (permission bits only, at most 0777) (line 2)"),
        (&["-q", "rediss://h/q"][..], None, "--queue: queue URL: rediss://h/q: TLS and unix sockets are not supported; use redis://HOST:PORT/NAME"),
        (&[][..], Some("[work]\nqueue = \"redis://h/a b\"\n"), "/etc/app/hearth.toml: [work] queue: queue URL: redis://h/a b: queue name \"a%20b\": expected 1 to 128 of A-Z a-z 0-9 . _ -"),
        (&["-q", "file:x.db", "--visibility-timeout", "0.5"][..], None, "--visibility-timeout: must be at least 1s (a running job's hold is renewed every third of it)"),
        (&["-q", "file:x.db", "-j", "0"][..], None, "--jobs: must be at least 1"),
        (&["-q", "file:x.db", "--ttl", "1h"][..], None, "--ttl: needs --php-bootstrap"),
        (&["-q", "file:x.db", "--php", "php8.2"][..], None, "--php: needs --php-bootstrap"),
        (&["-q", "file:x.db"][..], Some("[work]\nretries = 3\n"), "/etc/app/hearth.toml: [work] retries: unknown key, expected one of `queue`, `listen`, `listen_mode`, `max_callers`, `jobs`, `timeout`, `kill_after`, `max_output`, `grace_period`, `visibility_timeout`, `php_bootstrap`, `php`, `ini`, `boot_timeout`, `max_jobs`, `max_memory`, `ttl`, `control_socket`, `admin`, `admin_token_file`, `admin_token` (line 2)"),
    ] {
        assert_eq!(refused(work(args, file)), expected, "{args:?} {file:?}");
    }
}

/// `hearth work` and `hearth run` share their job options: the same
/// flags, keys, help and (but for --max-output) defaults.
#[test]
fn work_shares_the_options_of_run() {
    let run = RunOptions::augment_args(clap::Command::new("run"));
    let work = WorkOptions::augment_args(clap::Command::new("work"));
    let run_defaults = serde_json::to_value(RunOptions::default()).unwrap();
    let work_defaults = serde_json::to_value(WorkOptions::default()).unwrap();
    let mut shared = Vec::new();
    for arg in work.get_arguments() {
        let id = arg.get_id().as_str();
        let Some(same) = run.get_arguments().find(|a| a.get_id() == id) else {
            continue;
        };
        shared.push(id.to_owned());
        // `hearth run` takes GNU parallel's command lines: -j has parallel's
        // forms, -d and -q are parallel's --delimiter and --quote (so --ini
        // and --queue have no short flag there), --retries counts attempts
        // in all and output is kept whole.
        if ["config", "jobs", "ini", "queue", "max_output", "retries"].contains(&id) {
            continue;
        }
        let text = |a: &clap::Arg| a.get_help().map(ToString::to_string);
        // The same flag, for what each does with a queue: take jobs from it
        // (work), submit a batch to it (run; a flag only, no key).
        if id != "queue" {
            assert_eq!(text(arg), text(same), "{id}");
        }
        assert_eq!(arg.get_long(), same.get_long(), "{id}");
        assert_eq!(arg.get_short(), same.get_short(), "{id}");
        assert_eq!(arg.get_value_names(), same.get_value_names(), "{id}");
        if id != "max_output" && id != "queue" {
            assert_eq!(work_defaults.get(id), run_defaults.get(id), "{id}");
        }
    }
    assert_eq!(
        shared,
        [
            "queue",
            "config",
            "jobs",
            "timeout",
            "kill_after",
            "max_output",
            "php_bootstrap",
            "php",
            "ini",
            "boot_timeout"
        ]
    );
}

#[test]
fn a_missing_config_file_is_named() {
    let matches = CommandLine::<ServeOptions>::augment_args(clap::Command::new("serve"))
        .try_get_matches_from(["serve", "--config", "/nonexistent/hearth.toml"])
        .unwrap();
    let err = CommandLine::<ServeOptions>::from_arg_matches(&matches)
        .unwrap()
        .load()
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("/nonexistent/hearth.toml: cannot read"),
        "{err}"
    );
}

/// `--help`: durations take a DURATION, sizes a SIZE, and every option
/// with a value says its default.
#[test]
fn help_shows_value_kinds_and_defaults() {
    use std::any::TypeId;
    let mut cli = crate::Cli::command();
    cli.build();
    for name in ["serve", "run"] {
        let command = cli.find_subcommand(name).expect("subcommand");
        for arg in command.get_arguments() {
            let id = arg.get_id().as_str();
            let parser = arg.get_value_parser().type_id();
            let value_name = arg
                .get_value_names()
                .and_then(|n| n.first())
                .map(ToString::to_string);
            if parser == TypeId::of::<Seconds>() {
                assert_eq!(value_name.as_deref(), Some("DURATION"), "{name} {id}");
            }
            if parser == TypeId::of::<Size>() {
                assert_eq!(value_name.as_deref(), Some("SIZE"), "{name} {id}");
            }
            assert!(!arg.is_required_set(), "{name} {id} has a default");
        }
        let help = command.clone().render_help().to_string();
        for shown in match name {
            "serve" => &[
                "--max-queue <N>  ",
                "[default: 1024]",
                "--queue-timeout <DURATION>",
                "[default: 30s]",
                "--max-body-size <SIZE>",
                "[default: 8M]",
                "--listen <ADDR>",
                "[default: 127.0.0.1:8080]",
                "[default: php-cgi]",
                "[default: off] [possible values: off, common, json]",
            ][..],
            _ => &[
                "[default: 2s]",
                "[default: all of it, past 1 MiB in a temporary file]",
                "[default: php]",
                "[default: 60s]",
            ],
        } {
            assert!(help.contains(shown), "{shown} in:\n{help}");
        }
    }
}

#[test]
fn defaults_are_valid() {
    let mut cli = crate::Cli::command();
    cli.build();
    let given = |name: &str| {
        let matches = cli
            .clone()
            .try_get_matches_from(["hearth", name])
            .expect("parse");
        matches.subcommand().expect("subcommand").1.clone()
    };
    let serve_matches = given("serve");
    let origins = Origins {
        matches: &serve_matches,
        command: ServeOptions::augment_args(clap::Command::new("serve")),
        file: None,
        file_keys: Vec::new(),
        section: "serve",
    };
    assert!(ServeOptions::default().validate(&origins).is_ok());
    let run_matches = given("run");
    let origins = Origins {
        matches: &run_matches,
        command: RunOptions::augment_args(clap::Command::new("run")),
        file: None,
        file_keys: Vec::new(),
        section: "run",
    };
    assert!(RunOptions::default().validate(&origins).is_ok());
}

/// Paths relative to the file are keys of the file.
#[test]
fn each_sections_relative_paths_are_keys() {
    fn check<T: Section>() {
        let keys = serde_json::to_value(T::default()).expect("serialize");
        for (key, _) in T::default().file_paths() {
            assert!(keys.get(key).is_some(), "[{}] {key}", T::NAME);
        }
    }
    check::<ServeOptions>();
    check::<RunOptions>();
}

#[test]
fn php_extension_is_auto_off_or_a_path_relative_to_the_file() {
    use super::values::ExtensionChoice;
    assert_eq!(
        serve(&[], None).unwrap().php_extension,
        ExtensionChoice::Auto
    );
    assert_eq!(
        serve(&["--php-extension", "off"], None)
            .unwrap()
            .php_extension,
        ExtensionChoice::Off
    );
    assert_eq!(
        serve(&["--php-extension", "/opt/hearth.so"], None)
            .unwrap()
            .php_extension,
        ExtensionChoice::Path("/opt/hearth.so".into())
    );
    // In the file, a relative path is the file's.
    let o = serve(&[], Some("[serve]\nphp_extension = \"lib/hearth.so\"\n")).unwrap();
    match o.php_extension {
        ExtensionChoice::Path(p) => {
            assert!(p.is_absolute() && p.ends_with("lib/hearth.so"), "{p:?}")
        }
        other => panic!("{other:?}"),
    }
    let err = refused(serve(&[], Some("[serve]\nphp_extension = \"\"\n")));
    assert!(err.contains("php_extension"), "{err}");
}

#[test]
fn mixed_site_options_from_the_file_and_flags() {
    use super::values::{ClassicChoice, RouteRule, RouteTo};
    let file = "[serve]\nscript = \"app/worker.php\"\nroot = \"public\"\nclassic = \"on\"\n\
                classic_workers = 3\n\
                [[serve.route]]\nprefix = \"/api/\"\nto = \"worker\"\n\
                [[serve.route]]\nprefix = \"/wp-admin/\"\nto = \"classic\"\n";
    let o = serve(&["--route", "/legacy/=classic"], Some(file)).unwrap();
    assert_eq!(o.classic, ClassicChoice::On);
    assert_eq!(o.classic_workers(), 3);
    let rule = |prefix: &str, to| RouteRule {
        prefix: prefix.into(),
        to,
    };
    assert_eq!(
        o.route,
        [
            rule("/api/", RouteTo::Worker),
            rule("/wp-admin/", RouteTo::Classic),
            rule("/legacy/", RouteTo::Classic),
        ],
        "the file's routes, then the flags'"
    );
    let o = serve(&["w.php", "--root", "."], None).unwrap();
    assert_eq!(o.classic, ClassicChoice::Auto);
    assert_eq!(o.classic_workers(), o.workers(), "as many as workers");
    let o = serve(&["w.php", "--root", ".", "--classic", "off"], None).unwrap();
    assert_eq!(o.classic, ClassicChoice::Off);
}

#[test]
fn mixed_site_options_are_refused_naming_the_field_and_the_file() {
    let site = "[serve]\nscript = \"w.php\"\nroot = \"public\"\n";
    for (text, expected) in [
        (
            format!("{site}[[serve.route]]\nprefix = \"api/\"\nto = \"worker\"\n"),
            "/etc/app/hearth.toml: [serve] route: prefix \"api/\" must start with /",
        ),
        (
            format!("{site}[[serve.route]]\nprefix = \"/a/../b/\"\nto = \"worker\"\n"),
            "/etc/app/hearth.toml: [serve] route: prefix \"/a/../b/\" must be a normalized path",
        ),
        (
            format!("{site}[[serve.route]]\nprefix = \"/api/\"\nto = \"fpm\"\n"),
            "/etc/app/hearth.toml: [serve] route[0].to: unknown variant `fpm`",
        ),
        (
            format!("{site}[[serve.route]]\nprefix = \"/api/\"\n"),
            "/etc/app/hearth.toml: [serve] route[0]: missing field `to`",
        ),
        (
            format!("{site}classic = \"off\"\n[[serve.route]]\nprefix = \"/\"\nto = \"worker\"\n"),
            "/etc/app/hearth.toml: [serve] route: needs mixed mode, which classic off turns off",
        ),
        (
            format!("{site}classic_workers = 0\n"),
            "/etc/app/hearth.toml: [serve] classic_workers: must be at least 1",
        ),
        (
            "[serve]\nroot = \"public\"\nclassic = \"on\"\n".to_owned(),
            "/etc/app/hearth.toml: [serve] classic: is for mixed sites: it needs a worker script and root",
        ),
        (
            "[serve]\nscript = \"w.php\"\n[[serve.route]]\nprefix = \"/\"\nto = \"classic\"\n"
                .to_owned(),
            "/etc/app/hearth.toml: [serve] route: is for mixed sites: it needs a worker script and root",
        ),
    ] {
        let err = refused(serve(&[], Some(&text)));
        assert!(err.starts_with(expected), "{expected}\n in: {err}");
    }
    for (args, expected) in [
        (
            &["w.php", "--root", ".", "--route", "api=worker"][..],
            "--route: prefix \"api\" must start with /",
        ),
        (
            &["w.php", "--classic", "on"],
            "--classic: is for mixed sites: it needs a worker script and --root",
        ),
        (
            &["w.php", "--root", ".", "--classic-workers", "0"],
            "--classic-workers: must be at least 1",
        ),
    ] {
        assert_eq!(refused(serve(args, None)), expected);
    }
    let err = refused(serve(
        &["w.php", "--root", ".", "--route", "/api/=fpm"],
        None,
    ));
    assert!(
        err.contains("\"fpm\" in \"/api/=fpm\" is not worker or classic"),
        "{err}"
    );
}

#[test]
fn classic_routing_options_from_flags_and_the_file() {
    let o = serve(&[], None).unwrap();
    let classic = o.classic_options();
    assert_eq!(classic.index, ["index.php", "index.html"]);
    assert_eq!(classic.fallback.as_deref(), Some("/index.php"));

    let o = serve(
        &[
            "--root",
            ".",
            "--index",
            "home.php,index.htm",
            "--fallback",
            "off",
        ],
        None,
    )
    .unwrap();
    let classic = o.classic_options();
    assert_eq!(classic.index, ["home.php", "index.htm"]);
    assert_eq!(classic.fallback, None);

    let file = "[serve]\nroot = \".\"\nindex = [\"start.php\"]\nfallback = \"/app/front.php\"\n";
    let classic = serve(&[], Some(file)).unwrap().classic_options();
    assert_eq!(classic.index, ["start.php"]);
    assert_eq!(classic.fallback.as_deref(), Some("/app/front.php"));
    let classic = serve(
        &[],
        Some("[serve]\nroot = \".\"\nindex = \"a.php b.html\"\n"),
    )
    .unwrap()
    .classic_options();
    assert_eq!(classic.index, ["a.php", "b.html"]);
}

#[test]
fn a_fallback_or_index_that_cannot_be_is_refused_naming_where_it_came_from() {
    for bad in [
        "index.php",
        "/index.html",
        "/a/../index.php",
        "/.php",
        "//x.php",
    ] {
        let e = refused(serve(&["--fallback", bad], None));
        assert!(e.starts_with("--fallback: "), "{bad}: {e}");
        assert!(e.contains("must start with / and end in .php"), "{e}");
    }
    let e = refused(serve(&[], Some("[serve]\nfallback = \"app.php\"\n")));
    assert!(
        e.starts_with("/etc/app/hearth.toml: [serve] fallback: \"app.php\""),
        "{e}"
    );
    let e = refused(serve(&["--index", "a/index.php"], None));
    assert!(
        e.starts_with("--index: \"a/index.php\" is not a file name"),
        "{e}"
    );
    let e = refused(serve(&[], Some("[serve]\nindex = [\"..\"]\n")));
    assert!(
        e.starts_with("/etc/app/hearth.toml: [serve] index: "),
        "{e}"
    );
    let e = refused(serve(&[], Some("[serve]\nindex = []\n")));
    assert!(e.contains("index"), "{e}"); // With a worker script the front controller is the script; index
                                         // files need a document root.
    let e = refused(serve(
        &["w.php", "--root", ".", "--fallback", "/app.php"],
        None,
    ));
    assert!(
        e.starts_with("--fallback: is for classic mode: with a worker script"),
        "{e}"
    );
    let e = refused(serve(
        &[],
        Some("[serve]\nscript = \"w.php\"\nfallback = \"off\"\n"),
    ));
    assert!(
        e.starts_with("/etc/app/hearth.toml: [serve] fallback: is for classic mode"),
        "{e}"
    );
    let e = refused(serve(&["w.php", "--index", "home.php"], None));
    assert_eq!(e, "--index: needs a document root (--root)");
}

/// Issue 11 (4): `--check-state` is a switch and a key, reaches the pool,
/// and is refused in classic mode, where php-fpm keeps nothing to check.
#[test]
fn check_state_is_a_switch_for_worker_mode() {
    let o = serve(&["w.php", "--check-state"], None).unwrap();
    assert!(o.check_state);
    let pool = o.pool_config(std::path::Path::new("/app/w.php"), None);
    assert!(pool.check_state);
    let o = serve(&["w.php"], Some("[serve]\ncheck_state = true\n")).unwrap();
    assert!(o.check_state);
    assert!(!serve(&["w.php"], None).unwrap().check_state);
    let pool = serve(&["w.php"], None)
        .unwrap()
        .pool_config(std::path::Path::new("/app/w.php"), None);
    assert!(!pool.check_state);
    let e = refused(serve(&["--root", "/srv/site", "--check-state"], None));
    assert!(
        e.starts_with("--check-state: is for worker mode: in classic mode php-fpm"),
        "{e}"
    );
    let e = refused(serve(
        &["--root", "/srv/site"],
        Some("[serve]\ncheck_state = true\n"),
    ));
    assert!(
        e.starts_with("/etc/app/hearth.toml: [serve] check_state: is for worker mode"),
        "{e}"
    );
    // A mixed site checks its worker script's requests.
    assert!(serve(&["w.php", "--root", "/srv/site", "--check-state"], None).is_ok());
}

/// `--debug` is a switch and a key, reaches the pool, and is refused in
/// classic mode, where php-fpm runs Xdebug as usual.
#[test]
fn debug_is_a_switch_for_worker_mode() {
    let o = serve(&["w.php", "--debug"], None).unwrap();
    assert!(
        o.pool_config(std::path::Path::new("/app/w.php"), None)
            .debug
    );
    let o = serve(&["w.php"], Some("[serve]\ndebug = true\n")).unwrap();
    assert!(o.debug);
    let pool = serve(&["w.php"], None)
        .unwrap()
        .pool_config(std::path::Path::new("/app/w.php"), None);
    assert!(!pool.debug);
    let e = refused(serve(&["--root", "/srv/site", "--debug"], None));
    assert!(e.starts_with("--debug: is for worker mode"), "{e}");
    let e = refused(serve(
        &["--root", "/srv/site"],
        Some("[serve]\ndebug = true\n"),
    ));
    assert!(
        e.starts_with("/etc/app/hearth.toml: [serve] debug: is for worker mode"),
        "{e}"
    );
}

/// Issue 20: the words after `hearth run`'s options are a FILE of JSON
/// Lines, or GNU parallel's COMMAND and sources.
#[test]
fn run_words_are_a_file_or_a_command_and_its_sources() {
    use super::run::{read_words, read_words_with};
    use hearth_run::args::Source;
    let w = |words: &[&str], dashdash: bool| {
        let words: Vec<String> = words.iter().map(|s| s.to_string()).collect();
        read_words(&words, dashdash)
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tasks.jsonl");
    std::fs::write(&file, "").unwrap();
    let file = file.to_str().unwrap();

    let one = w(&[file], false);
    assert_eq!(
        (one.file.as_deref(), one.arguments),
        (Some(std::path::Path::new(file)), false)
    );
    assert!(w(&["gzip"], false).arguments, "a program on PATH");
    assert!(w(&["echo {} | tr a b"], false).arguments, "a command line");
    assert!(
        !w(&["missing.jsonl"], false).arguments,
        "a file, to be refused"
    );
    assert!(w(&["missing.jsonl"], true).arguments, "after --, a COMMAND");

    let sources = w(
        &[
            "echo", "{1}", ":::", "a", "b", ":::+", "1", "2", "::::", "f", "g",
        ],
        false,
    );
    assert_eq!(sources.command, ["echo", "{1}"]);
    let kinds: Vec<(bool, bool)> = sources
        .sources
        .iter()
        .map(|s| (matches!(s.source, Source::File(_)), s.linked))
        .collect();
    assert_eq!(
        kinds,
        [(false, false), (false, true), (true, false), (true, false)]
    );

    let legacy = w(&[file, "--", "wc", "-c"], false);
    assert_eq!((legacy.file.is_some(), legacy.command.len()), (true, 2));
    let not_a_file = w(&["gzip", "--"], false);
    assert_eq!(
        (not_a_file.file, not_a_file.command),
        (None, vec!["gzip".to_owned(), "--".to_owned()])
    );

    let words: Vec<String> = ["echo", ",,", "a", ",,,,", "f"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let renamed = read_words_with(&words, false, ",,", ",,,,");
    assert_eq!(renamed.command, ["echo"]);
    assert_eq!(renamed.sources.len(), 2);
}

#[test]
fn sendfile_roots_from_the_file_and_flags() {
    let file = "[serve]\nscript = \"w.php\"\nsendfile_roots = [\".\", \"/dl/=/usr\"]\n";
    let o = serve(&["--sendfile-root", "/tmp"], Some(file)).unwrap();
    let roots: Vec<String> = o.sendfile_roots.iter().map(|r| r.to_string()).collect();
    assert_eq!(
        roots.len(),
        3,
        "the file's roots, then the flag's: {roots:?}"
    );
    assert!(
        o.sendfile_roots[0].dir.is_absolute(),
        "relative to the file: {roots:?}"
    );
    assert_eq!(roots[1..], ["/dl/=/usr", "/tmp"]);
    let http = o.serve_config(None);
    assert_eq!(http.sendfile_roots[1].prefix.as_deref(), Some("/dl/"));
    assert_eq!(http.sendfile_roots[2].dir, Path::new("/tmp"));

    for (text, expected) in [
        (
            "[serve]\nscript = \"w.php\"\nsendfile_roots = [\"/dl=/usr\"]\n",
            "/etc/app/hearth.toml: [serve] sendfile_roots: /dl=/usr: No such file or directory \
             (os error 2) (in PREFIX=DIR, the prefix ends with /)",
        ),
        (
            "[serve]\nscript = \"w.php\"\nsendfile_roots = [\"dl/=/usr\"]\n",
            "/etc/app/hearth.toml: [serve] sendfile_roots: prefix \"dl/\" must be a URI path",
        ),
        (
            "[serve]\nscript = \"w.php\"\nsendfile_roots = [\"/etc/passwd\"]\n",
            "/etc/app/hearth.toml: [serve] sendfile_roots: /etc/passwd is not a directory",
        ),
        (
            "[serve]\nroot = \".\"\nsendfile_roots = [\"/tmp\"]\n",
            "/etc/app/hearth.toml: [serve] sendfile_roots: is for worker mode",
        ),
    ] {
        let message = serve(&[], Some(text)).unwrap_err().message;
        assert!(message.starts_with(expected), "{message}");
    }
}
