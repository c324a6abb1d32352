//! `hearth status`, `hearth reload`, `hearth stop`: clients of a running
//! server's control socket (see `control.rs` for the protocol).

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context as _};
use serde_json::Value;

/// Which server to talk to.
#[derive(Debug, clap::Args)]
pub struct Target {
    /// The address the server listens on (IP:PORT or unix:PATH); finds its
    /// default control socket [default: 127.0.0.1:8080]
    #[arg(long, short)]
    listen: Option<crate::options::values::Listen>,
    /// The server's control socket, as given to `hearth serve --control-socket`
    #[arg(long, value_name = "PATH", conflicts_with = "listen")]
    control_socket: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    #[command(flatten)]
    target: Target,
    /// Print the status as JSON, as the server sends it
    #[arg(long)]
    json: bool,
}

impl Target {
    fn path(&self) -> anyhow::Result<PathBuf> {
        match &self.control_socket {
            Some(path) => Ok(path.clone()),
            None => crate::control::default_path(
                &self.listen.as_ref().map_or(
                    hearth_http::ListenAddr::Tcp(([127, 0, 0, 1], 8080).into()),
                    |l| l.for_http(),
                ),
                false,
            ),
        }
    }

    /// Sends one command; returns the answer and the open connection.
    fn ask(
        &self,
        command: &str,
        timeout: Option<Duration>,
    ) -> anyhow::Result<(Value, BufReader<UnixStream>)> {
        let path = self.path()?;
        let stream = UnixStream::connect(&path).with_context(|| {
            format!(
                "cannot reach a hearth serve at {} (is it running, and listening on that address?)",
                path.display()
            )
        })?;
        stream.set_read_timeout(timeout)?;
        (&stream).write_all(format!("{{\"command\":\"{command}\"}}\n").as_bytes())?;
        let mut reader = BufReader::new(stream);
        let mut line = String::new();
        reader
            .read_line(&mut line)
            .with_context(|| format!("no answer on {}", path.display()))?;
        if line.is_empty() {
            bail!(
                "the server at {} closed the connection without an answer",
                path.display()
            );
        }
        let answer: Value = serde_json::from_str(&line)
            .with_context(|| format!("unreadable answer from {}: {line:?}", path.display()))?;
        if answer["ok"] != Value::Bool(true) {
            bail!(
                "{}",
                answer["error"].as_str().unwrap_or("the server refused")
            );
        }
        Ok((answer, reader))
    }
}

pub fn status(args: StatusArgs) -> anyhow::Result<()> {
    let (answer, _) = args.target.ask("status", Some(Duration::from_secs(10)))?;
    let status = &answer["status"];
    if args.json {
        println!("{status}");
    } else {
        print!("{}", table(status));
    }
    Ok(())
}

pub fn reload(target: Target) -> anyhow::Result<()> {
    let (answer, _) = target.ask("reload", None)?;
    println!("{}", answer["message"].as_str().unwrap_or("reloaded"));
    Ok(())
}

/// Asks for a graceful shutdown and waits until the server has exited.
pub fn stop(target: Target) -> anyhow::Result<()> {
    let (answer, mut rest) = target.ask("stop", None)?;
    println!("{}", answer["message"].as_str().unwrap_or("stopping"));
    let mut sink = Vec::new();
    let _ = rest.read_to_end(&mut sink);
    println!("stopped");
    Ok(())
}

/// `4m58s`, `1.2s`, `35ms`.
fn duration(seconds: f64) -> String {
    if seconds < 1.0 {
        return format!("{}ms", (seconds * 1000.0) as u64);
    }
    if seconds < 60.0 {
        return format!("{seconds:.1}s");
    }
    let s = seconds as u64;
    match (s / 3600, s / 60 % 60, s % 60) {
        (0, m, s) => format!("{m}m{s:02}s"),
        (h, m, _) => format!("{h}h{m:02}m"),
    }
}

fn memory(bytes: &Value) -> String {
    match bytes.as_u64() {
        Some(b) => format!("{:.1} MiB", b as f64 / f64::from(1 << 20)),
        None => "-".into(),
    }
}

/// The status as a table for people.
fn table(status: &Value) -> String {
    use std::fmt::Write as _;
    if status["work"].is_object() || status["calls"].is_object() {
        return work_table(status);
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "hearth {} (pid {}) on {}, up {}{}",
        status["version"].as_str().unwrap_or("?"),
        status["pid"],
        status["listen"].as_str().unwrap_or("?"),
        duration(status["uptime"].as_f64().unwrap_or(0.0)),
        if status["stopping"] == Value::Bool(true) {
            ", stopping"
        } else {
            ""
        },
    );
    match status["pools"].as_array() {
        Some(pools) => {
            for pool in pools {
                let route: Vec<String> = pool["host"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(|h| format!("host {h}"))
                    .chain(
                        pool["path"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter_map(Value::as_str)
                            .map(|p| format!("{p}*")),
                    )
                    .collect();
                let _ = writeln!(
                    out,
                    "\npool {}: {} ({})",
                    pool["name"].as_str().unwrap_or("?"),
                    pool["script"].as_str().unwrap_or("?"),
                    if route.is_empty() {
                        "every other request".to_owned()
                    } else {
                        route.join(", ")
                    }
                );
                out.push_str(&pool_lines(pool));
                out.push_str(&classic_lines(pool));
            }
        }
        None => {
            if let Some(script) = status["script"].as_str() {
                let _ = writeln!(out, "script: {script}");
            }
            out.push_str(&pool_lines(status));
            out.push_str(&classic_lines(status));
        }
    }
    out
}

/// A mixed site's php-fpm children, which run its other scripts (none
/// for other pools).
fn classic_lines(pool: &Value) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let classic = &pool["classic"];
    if classic.is_object() {
        let fpm = &classic["pool"];
        let _ = writeln!(
            out,
            "\nclassic scripts (php-fpm): {} live ({} busy, {} idle), min {}, max {}",
            fpm["live"], fpm["busy"], fpm["idle"], fpm["min_workers"], fpm["max_workers"],
        );
        out.push_str(&workers_table(&classic["workers"]));
    }
    out
}

/// The status of a `hearth work`: its jobs, its queue's counts, its calls,
/// and its PHP job workers if it has any.
fn work_table(status: &Value) -> String {
    use std::fmt::Write as _;
    let work = &status["work"];
    let calls = &status["calls"];
    let mut out = String::new();
    if !work.is_object() {
        let _ = writeln!(
            out,
            "hearth {} (pid {}) taking calls on unix:{}, up {}{}",
            status["version"].as_str().unwrap_or("?"),
            status["pid"],
            calls["socket"].as_str().unwrap_or("?"),
            duration(status["uptime"].as_f64().unwrap_or(0.0)),
            if status["stopping"] == Value::Bool(true) {
                ", stopping"
            } else {
                ""
            },
        );
        out.push_str(&calls_line(calls));
        if status["pool"].is_object() {
            out.push_str(&pool_lines(status));
        }
        return out;
    }
    let _ = writeln!(
        out,
        "hearth {} (pid {}) taking {} from {} as {}, up {}{}",
        status["version"].as_str().unwrap_or("?"),
        status["pid"],
        if work["kind"] == "php" {
            "shell tasks and PHP jobs"
        } else {
            "shell tasks"
        },
        work["queue"].as_str().unwrap_or("?"),
        work["consumer"].as_str().unwrap_or("?"),
        duration(status["uptime"].as_f64().unwrap_or(0.0)),
        if status["stopping"] == Value::Bool(true) {
            ", stopping"
        } else {
            ""
        },
    );
    let _ = writeln!(
        out,
        "jobs: {} at once, {} running; done {}, failed {}, rejected {}, interrupted {}",
        work["slots"],
        work["running"],
        work["done"],
        work["failed"],
        work["rejected"],
        work["interrupted"],
    );
    let q = &work["queue_stats"];
    match q["error"].as_str() {
        Some(e) => {
            let _ = writeln!(out, "queue: cannot read its counts: {e}");
        }
        None => {
            let oldest = q["oldest_ready_age_ms"]
                .as_f64()
                .map(|ms| format!(" (the oldest waiting {})", duration(ms / 1000.0)))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "queue: {} ready{oldest}, {} delayed, {} reserved, {} dead; since it was created: {} pushed, {} done, {} failed, {} retried, {} died",
                q["ready"], q["delayed"], q["reserved"], q["dead"], q["pushed"], q["done"],
                q["failed"], q["retried"], q["died"],
            );
        }
    }
    if calls.is_object() {
        out.push_str(&calls_line(calls));
    }
    if status["pool"].is_object() {
        out.push_str(&pool_lines(status));
    }
    out
}

/// The call listener's line.
fn calls_line(calls: &Value) -> String {
    format!(
        "calls on unix:{}: {} connected, {} running; ok {}, failed {}, timed out {}, refused {}, interrupted {}; callers turned away {}, malformed {}\n",
        calls["socket"].as_str().unwrap_or("?"),
        calls["connections"],
        calls["running"],
        calls["ok"],
        calls["failed"],
        calls["timed_out"],
        calls["refused"],
        calls["interrupted"],
        calls["turned_away"],
        calls["malformed"],
    )
}

/// The pool's line, and its workers.
fn pool_lines(status: &Value) -> String {
    use std::fmt::Write as _;
    let pool = &status["pool"];
    let mut out = String::new();
    let reasons: Vec<String> = pool["restarts_by_reason"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter(|(_, n)| n.as_u64().is_some_and(|n| n > 0))
                .map(|(r, n)| format!("{r} {n}"))
                .collect()
        })
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "workers: {} live ({} busy, {} idle), min {}, max {}; queue {}; {}restarts {}{}",
        pool["live"],
        pool["busy"],
        pool["idle"],
        pool["min_workers"],
        pool["max_workers"],
        pool["queue"],
        // php-fpm's children (classic mode) have no count of starts.
        match pool["started"].as_u64() {
            Some(n) => format!("started {n}; "),
            None => String::new(),
        },
        pool["restarts"],
        if reasons.is_empty() {
            String::new()
        } else {
            format!(" ({})", reasons.join(", "))
        },
    );
    if pool["debug"].as_bool() == Some(true) {
        out.push_str(
            "debug mode: each request runs in a worker started for it (not for production)\n",
        );
    }
    if pool["failing"].as_u64().is_some_and(|n| n > 0) {
        let _ = writeln!(out, "failing to boot: {}", pool["failing"]);
    }
    let counted = |key: &str| -> String {
        pool[key]
            .as_object()
            .map(|m| {
                m.iter()
                    .filter(|(_, n)| n.as_u64().is_some_and(|n| n > 0))
                    .map(|(r, n)| format!("{r} {n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default()
    };
    let budget = match pool["max_pool_memory"].as_u64() {
        Some(max) => format!(" of {} MiB (max_pool_memory)", max >> 20),
        None => String::new(),
    };
    if pool["max_booting"].is_u64() {
        let _ = writeln!(
        out,
        "sizing: {} booting (at most {} at once); memory {} MiB{budget}; started by reason: {}; retired by reason: {}; refused for memory {}",
        pool["booting"],
        pool["max_booting"],
        pool["memory"].as_u64().unwrap_or(0) >> 20,
        or_none(counted("started_by_reason")),
        or_none(counted("retired_by_reason")),
        pool["refused"]["memory"],
    );
    }
    if let Some(f) = pool["failing_state"].as_object() {
        let _ = writeln!(
            out,
            "FAILING ({}): {} attempt(s) in a row, next in {:.1}s; last error: {}",
            f["cause"].as_str().unwrap_or("?"),
            f["attempts"],
            f["next_attempt"].as_f64().unwrap_or(0.0),
            f["last_error"].as_str().unwrap_or(""),
        );
    }
    out.push_str(&workers_table(&status["workers"]));
    out.push_str(&routes_table(&status["routes"]));
    out
}

/// `+12.0 KiB`, `-512 B`.
fn growth(bytes: &Value) -> String {
    hearth_pool::format_growth(bytes.as_i64().unwrap_or(0))
}

/// The routes whose requests grew workers most, after an empty line;
/// nothing when no request has been measured.
fn routes_table(routes: &Value) -> String {
    use std::fmt::Write as _;
    let rows: Vec<[String; 5]> = routes["top"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            [
                r["route"].as_str().unwrap_or("?").to_owned(),
                r["requests"].to_string(),
                format!("{:.0}%", r["grew_share"].as_f64().unwrap_or(0.0) * 100.0),
                growth(&r["growth"]),
                growth(&r["mean"]),
            ]
        })
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nmemory growth by route (the {} of {} routes that grew workers most):",
        rows.len(),
        routes["counted"],
    );
    let header = ["ROUTE", "REQUESTS", "GREW", "TOTAL", "MEAN"].map(String::from);
    let mut widths = header.clone().map(|h| h.len());
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in std::iter::once(&header).chain(&rows) {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            let _ = write!(line, "{cell:<width$}  ", width = widths[i]);
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
    out
}

fn or_none(s: String) -> String {
    if s.is_empty() {
        "none".to_owned()
    } else {
        s
    }
}

/// Workers (or php-fpm's children) as rows, after an empty line.
fn workers_table(workers: &Value) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let rows: Vec<[String; 7]> = workers
        .as_array()
        .into_iter()
        .flatten()
        .map(|w| {
            let request = match w["request"].as_object() {
                Some(r) => format!(
                    "{} {} ({})",
                    r["method"].as_str().unwrap_or(""),
                    r["uri"].as_str().unwrap_or(""),
                    duration(r["seconds"].as_f64().unwrap_or(0.0))
                ),
                None => "-".into(),
            };
            [
                w["slot"].to_string(),
                w["pid"].to_string(),
                w["state"].as_str().unwrap_or("?").to_owned(),
                w["requests"].to_string(),
                memory(&w["memory"]),
                duration(w["age"].as_f64().unwrap_or(0.0)),
                request,
            ]
        })
        .collect();
    let header = [
        "SLOT", "PID", "STATE", "REQUESTS", "MEMORY", "AGE", "REQUEST",
    ]
    .map(String::from);
    let mut widths = header.clone().map(|h| h.len());
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    out.push('\n');
    for row in std::iter::once(&header).chain(&rows) {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                let _ = write!(line, "{cell:<width$}  ", width = widths[i]);
            }
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_print_as_a_table_and_not_at_all_when_none_was_measured() {
        let routes = serde_json::json!({"counted": 2, "limit": 256, "top": [
            {"route": "GET /leak", "requests": 10, "grew": 10, "grew_share": 1.0, "growth": 40960, "mean": 4096},
            {"route": "GET /a", "requests": 5, "grew": 1, "grew_share": 0.2, "growth": -64, "mean": -12},
        ]});
        let table = routes_table(&routes);
        assert!(table.contains("the 2 of 2 routes"), "{table}");
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[2].starts_with("ROUTE"), "{table}");
        assert!(lines[3].starts_with("GET /leak"), "{table}");
        assert!(
            lines[3].contains("100%")
                && lines[3].contains("+40.0 KiB")
                && lines[3].contains("+4.0 KiB")
        );
        assert!(
            lines[4].contains("20%") && lines[4].contains("-64 B") && lines[4].contains("-12 B")
        );
        assert_eq!(routes_table(&serde_json::json!({"top": []})), "");
        assert_eq!(routes_table(&Value::Null), "");
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(duration(0.035), "35ms");
        assert_eq!(duration(1.24), "1.2s");
        assert_eq!(duration(298.0), "4m58s");
        assert_eq!(duration(7300.0), "2h01m");
    }
}
