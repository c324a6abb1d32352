//! The job log: one line per finished task, in GNU parallel's format, so
//! that `--resume` can pick a batch up where it stopped and the tools
//! people already have for parallel's logs keep working.
//!
//! ```text
//! Seq  Host  Starttime       JobRuntime  Send  Receive  Exitval  Signal  Command
//! 1    :     1763712000.123       0.004  0     0        0        0       echo 1
//! ```
//!
//! Each line reaches the file in one `write(2)` as its task finishes, so a
//! runner killed at any moment leaves whole lines for every task it saw
//! finish (and at most a torn last line, which `--resume` ignores).
//!
//! A log is only ever appended to. A new batch refuses a log that already
//! lists tasks ([`check_unused`]): that log is what `--resume` needs to
//! finish its own batch, and GNU parallel's habit of overwriting it would
//! lose it to a command line that forgot `--resume`.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};

const HEADER: &str = "Seq\tHost\tStarttime\tJobRuntime\tSend\tReceive\tExitval\tSignal\tCommand\n";

/// An open job log.
#[derive(Debug)]
pub struct JobLog {
    file: File,
    path: PathBuf,
    line: String,
}

/// What a job log says about one task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Logged {
    pub exit: i32,
    pub signal: i32,
}

impl Logged {
    pub fn succeeded(&self) -> bool {
        self.exit == 0 && self.signal == 0
    }
}

impl JobLog {
    /// Opens `path` for appending (a new or empty log gets the header
    /// line), dropping a torn last line first.
    pub fn open(path: &Path) -> std::io::Result<JobLog> {
        let mut file = OpenOptions::new().create(true).append(true).open(path)?;
        let len = file.metadata()?.len();
        if len > 0 {
            drop_torn_line(path, len)?;
        }
        if file.metadata()?.len() == 0 {
            file.write_all(HEADER.as_bytes())?;
        }
        Ok(JobLog {
            file,
            path: path.to_owned(),
            line: String::new(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one task's line.
    /// `received`: the bytes of the task's stdout (parallel's `Receive`).
    #[allow(clippy::too_many_arguments)]
    pub fn record(
        &mut self,
        seq: u64,
        started: f64,
        runtime: f64,
        received: u64,
        exit: i32,
        signal: i32,
        command: &str,
    ) -> std::io::Result<()> {
        use std::fmt::Write as _;
        self.line.clear();
        let _ = write!(
            self.line,
            "{seq}\t:\t{started:.3}\t{runtime:10.3}\t0\t{received}\t{exit}\t{signal}\t"
        );
        // One line per task whatever the command holds.
        for c in command.chars() {
            match c {
                '\n' => self.line.push_str("\\n"),
                '\r' => self.line.push_str("\\r"),
                '\t' => self.line.push_str("\\t"),
                c => self.line.push(c),
            }
        }
        self.line.push('\n');
        self.file.write_all(self.line.as_bytes())
    }
}

/// Checks that `path` can be the log of a new batch: it does not exist, is
/// empty, holds only the header line (a run that finished no task), or is
/// not a regular file (`/dev/stderr`). Anything else is an earlier run's log,
/// or some other file, and is refused with what to do instead.
pub fn check_unused(path: &Path) -> Result<(), String> {
    let unreadable = |e: std::io::Error| format!("cannot read the job log {}: {e}", path.display());
    let metadata = match std::fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(unreadable(e)),
    };
    if !metadata.is_file() || metadata.len() == 0 {
        return Ok(());
    }
    let mut head = Vec::with_capacity(HEADER.len() + 1);
    if metadata.len() <= HEADER.len() as u64 {
        File::open(path)
            .and_then(|f| f.take(HEADER.len() as u64 + 1).read_to_end(&mut head))
            .map_err(unreadable)?;
    }
    // A header, possibly torn by a runner killed while writing it.
    if !head.is_empty() && HEADER.as_bytes().starts_with(&head) {
        return Ok(());
    }
    Err(format!(
        "the job log {} is not empty: to go on with the batch it logs, add --resume \
         (or --resume-failed to run its failed tasks again); to start a new batch, \
         remove it or name another file",
        path.display()
    ))
}

/// Removes a last line without its newline, torn by a runner killed while
/// writing it: the task it was about did not get logged as finished, and
/// the next line must start on a line of its own.
fn drop_torn_line(path: &Path, len: u64) -> std::io::Result<()> {
    use std::io::{Read as _, Seek as _, SeekFrom};
    let mut file = OpenOptions::new().read(true).write(true).open(path)?;
    // Lines are short; look back far enough for the longest command.
    let tail_len = len.min(1 << 20);
    file.seek(SeekFrom::Start(len - tail_len))?;
    let mut tail = Vec::new();
    file.read_to_end(&mut tail)?;
    if tail.last() == Some(&b'\n') {
        return Ok(());
    }
    let keep = match tail.iter().rposition(|b| *b == b'\n') {
        Some(i) => len - tail_len + i as u64 + 1,
        None if tail_len == len => 0,
        None => return Ok(()),
    };
    file.set_len(keep)
}

/// Reads a job log: the tasks it lists, by sequence number (the last line
/// for a task wins). A missing file lists nothing.
pub fn read(path: &Path) -> Result<HashMap<u64, Logged>, String> {
    let text = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(HashMap::new()),
        Err(e) => return Err(format!("cannot read the job log {}: {e}", path.display())),
    };
    let text = String::from_utf8_lossy(&text);
    let mut done = HashMap::new();
    for (n, line) in text.split_inclusive('\n').enumerate() {
        if !line.ends_with('\n') {
            // Torn by a runner killed mid-write: that task did not finish.
            break;
        }
        let line = line.trim_end_matches('\n');
        if (n == 0 && line.starts_with("Seq\t")) || line.is_empty() {
            continue;
        }
        let cols: Vec<&str> = line.splitn(9, '\t').collect();
        let parsed = (cols.len() == 9)
            .then(|| {
                Some((
                    cols[0].trim().parse::<u64>().ok()?,
                    cols[6].trim().parse::<i32>().ok()?,
                    cols[7].trim().parse::<i32>().ok()?,
                ))
            })
            .flatten();
        let Some((seq, exit, signal)) = parsed else {
            return Err(format!(
                "{}:{}: not a job log line (expected Seq, Host, Starttime, JobRuntime, Send, Receive, Exitval, Signal, Command separated by tabs)",
                path.display(),
                n + 1
            ));
        };
        done.insert(seq, Logged { exit, signal });
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_lines_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let mut log = JobLog::open(&path).unwrap();
        log.record(1, 1.5, 0.25, 0, 0, 0, "echo 'a\tb'\nx").unwrap();
        log.record(2, 2.0, 0.5, 0, -1, 9, "sleep 9").unwrap();
        drop(log);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("Seq\tHost\t"));
        assert!(text.contains("1\t:\t1.500\t     0.250\t0\t0\t0\t0\techo 'a\\tb'\\nx\n"));
        // Appending keeps one header.
        JobLog::open(&path)
            .unwrap()
            .record(3, 3.0, 0.1, 0, 1, 0, "false")
            .unwrap();
        let done = read(&path).unwrap();
        assert_eq!(done.len(), 3);
        assert!(done[&1].succeeded());
        assert_eq!(
            done[&2],
            Logged {
                exit: -1,
                signal: 9
            }
        );
        assert!(!done[&3].succeeded());
        assert_eq!(
            std::fs::read_to_string(&path)
                .unwrap()
                .matches("Seq")
                .count(),
            1
        );
    }

    #[test]
    fn a_torn_last_line_is_not_a_finished_task() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        std::fs::write(
            &path,
            format!("{HEADER}1\t:\t1\t1\t0\t0\t0\t0\ta\n2\t:\t1\t1\t0\t0"),
        )
        .unwrap();
        let done = read(&path).unwrap();
        assert_eq!(done.keys().copied().collect::<Vec<_>>(), vec![1]);
    }

    #[test]
    fn appending_after_a_torn_line_starts_a_line_of_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        std::fs::write(
            &path,
            format!("{HEADER}1\t:\t1\t1\t0\t0\t0\t0\ta\n2\t:\t1\t0.0"),
        )
        .unwrap();
        JobLog::open(&path)
            .unwrap()
            .record(2, 5.0, 0.5, 0, 0, 0, "b")
            .unwrap();
        let done = read(&path).unwrap();
        assert_eq!(done.len(), 2);
        assert!(done[&2].succeeded());
        assert!(std::fs::read_to_string(&path)
            .unwrap()
            .ends_with("\t0\t0\tb\n"));
    }

    #[test]
    fn a_new_batch_takes_only_an_unused_log() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        assert_eq!(check_unused(&path), Ok(()), "a log that does not exist");
        for unused in ["", HEADER, &HEADER[..10]] {
            std::fs::write(&path, unused).unwrap();
            assert_eq!(check_unused(&path), Ok(()), "{unused:?}");
        }
        assert_eq!(check_unused(Path::new("/dev/null")), Ok(()));
        for used in [
            format!("{HEADER}1\t:\t1\t1\t0\t0\t0\t0\ta\n"),
            format!("{HEADER}1\t:\t1"),
            "notes\n".to_owned(),
            format!("{HEADER}x"),
        ] {
            std::fs::write(&path, &used).unwrap();
            let err = check_unused(&path).unwrap_err();
            assert!(err.contains(path.to_str().unwrap()), "{err}");
            assert!(err.contains("--resume"), "{err}");
            assert_eq!(std::fs::read_to_string(&path).unwrap(), used, "left alone");
        }
    }

    #[test]
    fn garbage_is_named_with_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        std::fs::write(&path, format!("{HEADER}1\t:\t1\t1\t0\t0\t0\t0\ta\nhello\n")).unwrap();
        let err = read(&path).unwrap_err();
        assert!(err.contains(":3: not a job log line"), "{err}");
        assert!(read(&dir.path().join("missing")).unwrap().is_empty());
    }
}
