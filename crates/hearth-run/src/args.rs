//! Where a COMMAND's arguments come from, as GNU parallel takes them:
//! `::: a b c` on the command line, `:::: FILE` (and `-a FILE`) or
//! standard input, one record per line (`-0`: per NUL, `-d`: per any
//! delimiter). Several sources give every combination of their arguments;
//! `:::+` (or `--link` for all of them) pairs a source with the one before
//! it instead. `--colsep` splits a record into columns, and `-N`, `-n`,
//! `-X` or `-m` put several records into one job.
//!
//! One source streams: standard input is read as tasks run, with bounded
//! memory. Several sources, and whatever needs the number of jobs before
//! the first starts (`{##}`, `--shuf`, `--halt ...=N%`, `-X` spreading its
//! arguments over the job slots), are read whole first.

use std::io::BufRead;
use std::path::PathBuf;

/// One source of arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `::: a b c`
    Values(Vec<String>),
    /// `:::: FILE` or `-a FILE`; `-` is standard input.
    File(PathBuf),
}

/// A source and whether it is paired with the source before it (`:::+`,
/// `::::+`) rather than combined with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceSpec {
    pub source: Source,
    pub linked: bool,
}

/// How records make jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grouping {
    /// One record a job.
    One,
    /// `-N n` and `-n n`: n records a job (fewer for the last); `-N 0`
    /// takes one record and passes none.
    Records(usize),
    /// `-X` and `-m`: as many as fit a command line, spread over the job
    /// slots when the input is shorter.
    Fill,
    /// `--xargs`: as many as fit a command line.
    FillLines,
}

/// Everything that decides a batch's arguments.
#[derive(Debug, Clone)]
pub struct ArgsConfig {
    /// The sources; none: standard input.
    pub sources: Vec<SourceSpec>,
    /// `--link`: every source paired with the others, the shorter ones
    /// starting over.
    pub link: bool,
    /// The record delimiter: `\n`, NUL with `-0`, or `-d`'s.
    pub delimiter: u8,
    /// `--colsep`
    pub colsep: Option<regex::Regex>,
    pub grouping: Grouping,
    /// Read every argument before the first job.
    pub read_all: bool,
    /// `--shuf`
    pub shuffle: bool,
    /// Job slots, for `-X`.
    pub jobs: usize,
    /// `-r`: records that are empty or only white space are skipped.
    pub skip_empty: bool,
    /// `-E`: a record equal to this ends a file source.
    pub eof: Option<String>,
    /// `--trim`
    pub trim: Trim,
    /// `--skip-first-line`: of each file source.
    pub skip_first_line: bool,
    /// `-X` and `-m`: the longest command line, in bytes of arguments
    /// ([`MAX_LINE`], or `-s` less the COMMAND's own length).
    pub max_line: usize,
}

/// `--trim`: white space removed around each argument.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Trim {
    #[default]
    None,
    Left,
    Right,
    Both,
}

impl Trim {
    fn apply(self, v: &str) -> String {
        match self {
            Trim::None => v.to_owned(),
            Trim::Left => v.trim_start().to_owned(),
            Trim::Right => v.trim_end().to_owned(),
            Trim::Both => v.trim().to_owned(),
        }
    }
}

/// What is done to each record as it is read from a file.
#[derive(Debug, Clone, Default)]
struct Filter {
    eof: Option<String>,
    skip_first: bool,
}

/// The longest command line `-X` and `-m` make, in bytes: a little less
/// than parallel's (130329 here), under Linux's 128 KiB for one argument.
pub const MAX_LINE: usize = 130_000;

/// Records as they are read.
enum Records {
    /// One source, read as jobs run.
    Stream {
        reader: Box<dyn BufRead + Send>,
        name: String,
        delimiter: u8,
        read: u64,
        filter: Filter,
        ended: bool,
    },
    /// Everything, read first.
    Listed(std::vec::IntoIter<Vec<String>>),
}

/// The jobs' arguments, one job at a time.
pub struct ArgReader {
    records: Records,
    colsep: Option<regex::Regex>,
    trim: Trim,
    skip_empty: bool,
    max_line: usize,
    grouping: Grouping,
    /// `-X`: records per job, when they were all read first.
    per_job: Option<usize>,
    /// The number of jobs, when everything was read first.
    total: Option<u64>,
    /// Said once: NUL bytes in newline-separated input.
    warned_nul: bool,
}

impl std::fmt::Debug for ArgReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArgReader")
            .field("grouping", &self.grouping)
            .field("total", &self.total)
            .finish_non_exhaustive()
    }
}

/// Opens a source that is a file: `-` is standard input.
fn open_file(path: &PathBuf) -> Result<(Box<dyn BufRead + Send>, String), String> {
    if path.as_os_str() == "-" {
        return Ok((
            Box::new(std::io::BufReader::with_capacity(65536, std::io::stdin())),
            "standard input".to_owned(),
        ));
    }
    let file = std::fs::File::open(path)
        .map_err(|e| format!("cannot read arguments from {}: {e}", path.display()))?;
    Ok((
        Box::new(std::io::BufReader::with_capacity(65536, file)),
        path.display().to_string(),
    ))
}

/// Reads one record, without its delimiter. `None` at the end.
fn read_record(
    reader: &mut dyn BufRead,
    delimiter: u8,
    name: &str,
    number: u64,
    warned_nul: &mut bool,
) -> Result<Option<String>, String> {
    let mut buf = Vec::new();
    match reader.read_until(delimiter, &mut buf) {
        Ok(0) => return Ok(None),
        Ok(_) => {}
        Err(e) => return Err(format!("reading {name} failed after record {number}: {e}")),
    }
    if buf.last() == Some(&delimiter) {
        buf.pop();
    }
    if delimiter != 0 && buf.contains(&0) {
        // An argument cannot hold a NUL: as parallel, it becomes `\0`.
        if !*warned_nul {
            *warned_nul = true;
            crate::say_stderr(
                "hearth run: a NUL byte in the input was replaced by \\0 (arguments cannot hold one; with NUL-separated input, use -0)",
            );
        }
        let mut replaced = Vec::with_capacity(buf.len() + 1);
        for b in buf {
            if b == 0 {
                replaced.extend_from_slice(b"\\0");
            } else {
                replaced.push(b);
            }
        }
        buf = replaced;
    }
    String::from_utf8(buf)
        .map(Some)
        .map_err(|_| format!("{name}: record {}: not UTF-8 text", number + 1))
}

/// Every record of a source.
fn read_source(
    source: &Source,
    delimiter: u8,
    filter: &Filter,
    warned: &mut bool,
) -> Result<Vec<String>, String> {
    match source {
        Source::Values(values) => {
            // As parallel: -d splits them too, and -E ends them.
            let split: Vec<String> = if delimiter == b'\n' || delimiter == 0 {
                values.clone()
            } else {
                values
                    .iter()
                    .flat_map(|v| v.split(char::from(delimiter)).map(str::to_owned))
                    .collect()
            };
            Ok(match &filter.eof {
                Some(eof) => split.into_iter().take_while(|v| v != eof).collect(),
                None => split,
            })
        }
        Source::File(path) => {
            let (mut reader, name) = open_file(path)?;
            let mut out = Vec::new();
            let mut number = 0;
            while let Some(record) = read_record(&mut *reader, delimiter, &name, number, warned)? {
                number += 1;
                if filter.skip_first && number == 1 {
                    continue;
                }
                if filter.eof.as_deref() == Some(record.as_str()) {
                    break;
                }
                out.push(record);
            }
            Ok(out)
        }
    }
}

/// Every combination of the groups' records, the first group's varying
/// slowest, as parallel orders them.
fn combine(groups: Vec<Vec<Vec<String>>>) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = vec![Vec::new()];
    for group in groups {
        let mut next = Vec::with_capacity(out.len() * group.len());
        for prefix in &out {
            for record in &group {
                let mut combined = prefix.clone();
                combined.extend(record.iter().cloned());
                next.push(combined);
            }
        }
        out = next;
    }
    out
}

/// Pairs sources: the n-th records of each. `wrap`: up to the longest,
/// the shorter ones starting over (`--link`); else up to the shortest
/// (`:::+`).
fn pair(sources: Vec<Vec<String>>, wrap: bool) -> Vec<Vec<String>> {
    let lengths = sources.iter().map(Vec::len);
    let n = if wrap {
        lengths.max().unwrap_or(0)
    } else {
        lengths.min().unwrap_or(0)
    };
    if sources.iter().any(Vec::is_empty) {
        return Vec::new();
    }
    (0..n)
        .map(|i| sources.iter().map(|s| s[i % s.len()].clone()).collect())
        .collect()
}

impl ArgReader {
    /// Opens the sources; reads them whole when the config says so.
    pub fn open(config: &ArgsConfig) -> Result<ArgReader, String> {
        let mut warned_nul = false;
        let filter = Filter {
            eof: config.eof.clone(),
            skip_first: config.skip_first_line,
        };
        let sources: Vec<SourceSpec> = if config.sources.is_empty() {
            vec![SourceSpec {
                source: Source::File(PathBuf::from("-")),
                linked: false,
            }]
        } else {
            config.sources.clone()
        };
        let read_all = config.read_all
            || config.shuffle
            || matches!(config.grouping, Grouping::Fill | Grouping::FillLines);
        let records = if sources.len() == 1 && !read_all {
            match &sources[0].source {
                Source::Values(_) => Records::Listed(
                    read_source(
                        &sources[0].source,
                        config.delimiter,
                        &filter,
                        &mut warned_nul,
                    )?
                    .into_iter()
                    .map(|v| vec![v])
                    .collect::<Vec<_>>()
                    .into_iter(),
                ),
                Source::File(path) => {
                    let (reader, name) = open_file(path)?;
                    Records::Stream {
                        reader,
                        name,
                        delimiter: config.delimiter,
                        read: 0,
                        filter: filter.clone(),
                        ended: false,
                    }
                }
            }
        } else {
            let mut read = Vec::with_capacity(sources.len());
            for spec in &sources {
                read.push((
                    read_source(&spec.source, config.delimiter, &filter, &mut warned_nul)?,
                    spec.linked,
                ));
            }
            let records = if config.link {
                pair(read.into_iter().map(|(s, _)| s).collect(), true)
            } else {
                // Each source starts a group unless it is linked to the one
                // before; each group is its sources paired.
                let mut groups: Vec<Vec<Vec<String>>> = Vec::new();
                for (source, linked) in read {
                    match groups.last_mut() {
                        Some(last) if linked => last.push(source),
                        _ => groups.push(vec![source]),
                    }
                }
                combine(groups.into_iter().map(|g| pair(g, false)).collect())
            };
            let mut records = records;
            if config.shuffle {
                fastrand::shuffle(&mut records);
            }
            Records::Listed(records.into_iter())
        };
        let records = match records {
            Records::Listed(list) if config.skip_empty => Records::Listed(
                list.filter(|r| r.iter().any(|v| !v.trim().is_empty()))
                    .collect::<Vec<_>>()
                    .into_iter(),
            ),
            other => other,
        };
        let mut reader = ArgReader {
            records,
            colsep: config.colsep.clone(),
            trim: config.trim,
            skip_empty: config.skip_empty,
            max_line: config.max_line,
            grouping: config.grouping,
            per_job: None,
            total: None,
            warned_nul,
        };
        if let Records::Listed(list) = &reader.records {
            let n = list.len();
            let jobs = match config.grouping {
                Grouping::One => n,
                Grouping::Records(0) => n,
                Grouping::Records(k) => n.div_ceil(k),
                Grouping::Fill => {
                    let per = n.div_ceil(config.jobs.max(1)).max(1);
                    reader.per_job = Some(per);
                    // An estimate: the line length may split them further.
                    n.div_ceil(per)
                }
                // An estimate too.
                Grouping::FillLines => 1,
            };
            if read_all || sources.len() > 1 || matches!(sources[0].source, Source::Values(_)) {
                reader.total = Some(jobs as u64);
            }
        }
        Ok(reader)
    }

    /// The number of jobs, when every argument was read first.
    pub fn total(&self) -> Option<u64> {
        self.total
    }

    fn next_record(&mut self) -> Result<Option<Vec<String>>, String> {
        let record = match &mut self.records {
            Records::Listed(list) => list.next(),
            Records::Stream {
                reader,
                name,
                delimiter,
                read,
                filter,
                ended,
            } => loop {
                if *ended {
                    break None;
                }
                let got =
                    read_record(&mut **reader, *delimiter, name, *read, &mut self.warned_nul)?;
                *read += 1;
                match got {
                    None => break None,
                    Some(_) if filter.skip_first && *read == 1 => {}
                    Some(r) if filter.eof.as_deref() == Some(r.as_str()) => {
                        *ended = true;
                        break None;
                    }
                    Some(r) if self.skip_empty && r.trim().is_empty() => {}
                    Some(r) => break Some(vec![r]),
                }
            },
        };
        let trim = self.trim;
        Ok(record.map(|values| {
            let columns: Vec<String> = match &self.colsep {
                None => values,
                Some(sep) => values
                    .iter()
                    .flat_map(|v| sep.split(v).map(str::to_owned).collect::<Vec<_>>())
                    .collect(),
            };
            if trim == Trim::None {
                columns
            } else {
                columns.iter().map(|v| trim.apply(v)).collect()
            }
        }))
    }

    /// The next job's values; `None` when the arguments are all used.
    pub fn next_job(&mut self) -> Result<Option<Vec<String>>, String> {
        match self.grouping {
            Grouping::One => self.next_record(),
            Grouping::Records(0) => Ok(self.next_record()?.map(|_| Vec::new())),
            Grouping::Records(n) => {
                let mut values = Vec::new();
                for i in 0..n {
                    match self.next_record()? {
                        Some(record) => values.extend(record),
                        None if i == 0 => return Ok(None),
                        None => break,
                    }
                }
                Ok(Some(values))
            }
            Grouping::Fill | Grouping::FillLines => {
                let per = self.per_job.unwrap_or(usize::MAX);
                let mut values: Vec<String> = Vec::new();
                let mut len = 0;
                let mut records = 0;
                while records < per {
                    // Peek without losing a record that does not fit.
                    let Records::Listed(list) = &mut self.records else {
                        break;
                    };
                    let Some(next) = list.as_slice().first() else {
                        break;
                    };
                    let size: usize = next
                        .iter()
                        .map(|v| crate::template::quote(v).len() + 1)
                        .sum();
                    if records > 0 && len + size >= self.max_line {
                        break;
                    }
                    if records == 0 && size >= self.max_line {
                        return Err(format!(
                            "an argument of {} bytes makes a command line longer than -s allows",
                            size - 1
                        ));
                    }
                    let record = self.next_record()?.expect("peeked");
                    len += size;
                    records += 1;
                    values.extend(record);
                }
                Ok((records > 0).then_some(values))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(v: &[&str]) -> SourceSpec {
        SourceSpec {
            source: Source::Values(v.iter().map(|s| s.to_string()).collect()),
            linked: false,
        }
    }

    fn config(sources: Vec<SourceSpec>) -> ArgsConfig {
        ArgsConfig {
            sources,
            link: false,
            delimiter: b'\n',
            colsep: None,
            grouping: Grouping::One,
            read_all: false,
            shuffle: false,
            jobs: 1,
            skip_empty: false,
            eof: None,
            trim: Trim::None,
            skip_first_line: false,
            max_line: MAX_LINE,
        }
    }

    fn jobs(config: &ArgsConfig) -> Vec<Vec<String>> {
        let mut reader = ArgReader::open(config).unwrap();
        let mut out = Vec::new();
        while let Some(job) = reader.next_job().unwrap() {
            out.push(job);
        }
        out
    }

    fn strs(jobs: &[Vec<String>]) -> Vec<String> {
        jobs.iter().map(|j| j.join(" ")).collect()
    }

    #[test]
    fn sources_combine_and_link() {
        let c = config(vec![values(&["a", "b"]), values(&["1", "2"])]);
        assert_eq!(strs(&jobs(&c)), ["a 1", "a 2", "b 1", "b 2"]);
        let mut linked = config(vec![values(&["a", "b", "c"]), values(&["1", "2"])]);
        linked.sources[1].linked = true;
        assert_eq!(strs(&jobs(&linked)), ["a 1", "b 2"]);
        linked.sources[1].linked = false;
        linked.link = true;
        assert_eq!(strs(&jobs(&linked)), ["a 1", "b 2", "c 1"]);
        assert_eq!(ArgReader::open(&linked).unwrap().total(), Some(3));
    }

    #[test]
    fn records_per_job() {
        let mut c = config(vec![values(&["1", "2", "3", "4", "5"])]);
        c.grouping = Grouping::Records(2);
        assert_eq!(strs(&jobs(&c)), ["1 2", "3 4", "5"]);
        c.grouping = Grouping::Records(0);
        assert_eq!(jobs(&c).len(), 5);
        assert!(jobs(&c).iter().all(Vec::is_empty));
        c.grouping = Grouping::Fill;
        c.jobs = 3;
        assert_eq!(strs(&jobs(&c)), ["1 2", "3 4", "5"]);
    }

    #[test]
    fn fill_spreads_over_the_slots() {
        let ten: Vec<String> = (1..=10).map(|i| i.to_string()).collect();
        let refs: Vec<&str> = ten.iter().map(String::as_str).collect();
        let mut c = config(vec![values(&refs)]);
        c.grouping = Grouping::Fill;
        c.jobs = 3;
        assert_eq!(strs(&jobs(&c)), ["1 2 3 4", "5 6 7 8", "9 10"]);
    }

    #[test]
    fn columns() {
        let mut c = config(vec![values(&["a\tb", "c\td"])]);
        c.colsep = Some(regex::Regex::new("\t").unwrap());
        assert_eq!(jobs(&c), [vec!["a", "b"], vec!["c", "d"]]);
    }

    #[test]
    fn files_and_delimiters() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("args");
        std::fs::write(&path, "x\n\ny\n").unwrap();
        let file = SourceSpec {
            source: Source::File(path.clone()),
            linked: false,
        };
        let c = config(vec![file.clone()]);
        assert_eq!(
            strs(&jobs(&c)),
            ["x", "", "y"],
            "a blank line is an argument"
        );
        std::fs::write(&path, "a b\0c").unwrap();
        let mut c = config(vec![file.clone()]);
        c.delimiter = 0;
        assert_eq!(strs(&jobs(&c)), ["a b", "c"]);
        let c = config(vec![file, values(&["1"])]);
        assert_eq!(strs(&jobs(&c)), ["a b\\0c 1"], "a NUL becomes \\0");
        let missing = config(vec![SourceSpec {
            source: Source::File(dir.path().join("none")),
            linked: false,
        }]);
        let err = ArgReader::open(&missing).unwrap_err();
        assert!(err.contains("cannot read arguments from"), "{err}");
    }
}
