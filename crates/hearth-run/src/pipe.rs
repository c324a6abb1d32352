//! `--pipe`: standard input cut into blocks, each the standard input of a
//! task, as GNU parallel cuts it.
//!
//! A block is cut at a record boundary: after a record end (`--recend`,
//! a newline by default), before a record start (`--recstart`) when one is
//! given, and with `-L N` only after every N-th record end. By size
//! (`--block`, 1 MiB by default), a block is the longest run of whole
//! records that fits the size; one record larger than the size is a
//! block of its own. With `-N N`, a block is N records whatever their
//! size. `--header` puts the input's first lines (or what a regular
//! expression matches at its start) before every block.
//!
//! Memory: the reader holds the block it is cutting and what it has read
//! past it; a block of 64 KiB or more then waits in a temporary file that
//! its task reads itself (see the runner's `read_blocks`).
//!
//! Written by hand: no crate cuts a stream at parallel's record boundaries.

use std::io::Read;

/// The largest block: as GNU parallel's (2 GiB less a byte).
pub const MAX_BLOCK: usize = (2 << 30) - 1;

/// How standard input is cut.
#[derive(Debug, Clone)]
pub struct PipeConfig {
    /// `--block`, in bytes.
    pub block: usize,
    /// `-N`: records per block, instead of a size.
    pub records: Option<usize>,
    /// `-L`: record ends per record.
    pub lines: usize,
    /// `--recstart`
    pub recstart: Option<Vec<u8>>,
    /// `--recend`; empty: any byte ends a record.
    pub recend: Vec<u8>,
    /// `--rrs`: the record start and end at the edges of a block are
    /// removed.
    pub remove_separators: bool,
    pub header: Option<Header>,
}

/// `--header`
#[derive(Debug, Clone)]
pub enum Header {
    /// The first N lines.
    Lines(usize),
    /// What a regular expression matches at the start of the input.
    Regex(regex::bytes::Regex),
}

impl Default for PipeConfig {
    fn default() -> PipeConfig {
        PipeConfig {
            block: 1 << 20,
            records: None,
            lines: 1,
            recstart: None,
            recend: b"\n".to_vec(),
            remove_separators: false,
            header: None,
        }
    }
}

/// The blocks of a stream.
pub struct Blocks {
    reader: Box<dyn Read + Send>,
    config: PipeConfig,
    /// Read and not yet in a block.
    buf: Vec<u8>,
    eof: bool,
    /// `--header`, once read.
    header: Option<Vec<u8>>,
    started: bool,
}

impl std::fmt::Debug for Blocks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Blocks")
            .field("config", &self.config)
            .field("buffered", &self.buf.len())
            .finish_non_exhaustive()
    }
}

/// Bytes read at a time.
const READ: usize = 1 << 16;

impl Blocks {
    pub fn new(reader: Box<dyn Read + Send>, config: PipeConfig) -> Blocks {
        Blocks {
            reader,
            config,
            buf: Vec::new(),
            eof: false,
            header: None,
            started: false,
        }
    }

    /// Reads more; false at the end of the input.
    fn fill(&mut self) -> std::io::Result<bool> {
        if self.eof {
            return Ok(false);
        }
        let start = self.buf.len();
        self.buf.resize(start + READ, 0);
        let n = loop {
            match self.reader.read(&mut self.buf[start..]) {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.buf.truncate(start);
                    return Err(e);
                }
            }
        };
        self.buf.truncate(start + n);
        if n == 0 {
            self.eof = true;
        }
        Ok(n > 0)
    }

    /// Whether a block may end before byte `i` of the buffer (0 < i <=
    /// len): after a record end and, with `--recstart`, before a record
    /// start (or at the end of the input).
    fn boundary(&self, i: usize) -> bool {
        if !self.buf[..i].ends_with(&self.config.recend) {
            return false;
        }
        match &self.config.recstart {
            None => true,
            Some(_) if i == self.buf.len() => self.eof,
            Some(start) => self.buf[i..].starts_with(start),
        }
    }

    /// Whether [`Blocks::boundary`] can tell at `i` with what was read.
    fn knowable(&self, i: usize) -> bool {
        let ahead = self.config.recstart.as_ref().map_or(0, Vec::len);
        self.eof || i + ahead <= self.buf.len() && !(ahead > 0 && i == self.buf.len())
    }

    /// Scans forward from `*at` for the `*left`-th boundary, reading more
    /// as needed: where it is, or at the end of the input, all of it.
    fn scan_forward(&mut self, at: &mut usize, left: &mut usize) -> std::io::Result<usize> {
        loop {
            while *at <= self.buf.len() && self.knowable(*at) {
                if *at > 0 && self.boundary(*at) {
                    *left -= 1;
                    if *left == 0 {
                        return Ok(*at);
                    }
                }
                *at += 1;
            }
            if !self.fill()? {
                return Ok(self.buf.len());
            }
        }
    }

    fn read_header(&mut self) -> std::io::Result<()> {
        let Some(header) = self.config.header.clone() else {
            return Ok(());
        };
        loop {
            let cut = match &header {
                Header::Lines(n) => {
                    let mut seen = 0;
                    let mut cut = None;
                    for (i, b) in self.buf.iter().enumerate() {
                        if *b == b'\n' {
                            seen += 1;
                            if seen == *n {
                                cut = Some(i + 1);
                                break;
                            }
                        }
                    }
                    cut.or_else(|| self.eof.then_some(self.buf.len()))
                }
                Header::Regex(re) => match re.find(&self.buf) {
                    Some(m) if m.start() == 0 && (m.end() < self.buf.len() || self.eof) => {
                        Some(m.end())
                    }
                    _ if self.eof || self.buf.len() > MAX_BLOCK => Some(0),
                    _ => None,
                },
            };
            if let Some(cut) = cut {
                self.header = Some(self.buf.drain(..cut).collect());
                return Ok(());
            }
            self.fill()?;
        }
    }

    /// The next block, `None` at the end of the input.
    pub fn next_block(&mut self) -> std::io::Result<Option<Vec<u8>>> {
        if !self.started {
            self.started = true;
            self.read_header()?;
        }
        let cut = match self.config.records {
            Some(n) => self.cut_by_records(n.max(1))?,
            None => self.cut_by_size()?,
        };
        if cut == 0 {
            return Ok(None);
        }
        // The block leaves the buffer without a copy; what follows it (at
        // most a read's worth) is copied.
        let rest = self.buf.split_off(cut);
        let mut block = std::mem::replace(&mut self.buf, rest);
        if self.config.remove_separators {
            if let Some(start) = &self.config.recstart {
                if block.starts_with(start) {
                    block.drain(..start.len());
                }
            }
            if block.ends_with(&self.config.recend) {
                block.truncate(block.len() - self.config.recend.len());
            }
        }
        if let Some(header) = &self.header {
            let mut with = Vec::with_capacity(header.len() + block.len());
            with.extend_from_slice(header);
            with.extend_from_slice(&block);
            block = with;
        }
        Ok(Some(block))
    }

    /// Where a block of `n` records ends.
    fn cut_by_records(&mut self, n: usize) -> std::io::Result<usize> {
        let mut at = 1;
        let mut left = n * self.config.lines.max(1);
        self.scan_forward(&mut at, &mut left)
    }

    /// Where a block of at most `--block` bytes of whole records ends.
    fn cut_by_size(&mut self) -> std::io::Result<usize> {
        let size = self.config.block.max(1);
        // One allocation of the block's size, not a doubling past it.
        self.buf
            .reserve_exact((size + READ).saturating_sub(self.buf.len()));
        while self.buf.len() <= size && self.fill()? {}
        let top = size.min(self.buf.len());
        let lines = self.config.lines.max(1);
        let within = if lines == 1 {
            (1..=top)
                .rev()
                .find(|&i| self.knowable(i) && self.boundary(i))
        } else {
            let mut count = 0;
            let mut last = None;
            for i in 1..=top {
                if self.knowable(i) && self.boundary(i) {
                    count += 1;
                    if count % lines == 0 {
                        last = Some(i);
                    }
                }
            }
            last
        };
        if let Some(cut) = within {
            return Ok(cut);
        }
        // A record larger than the block: it is a block of its own.
        let mut at = 1;
        let mut left = lines;
        self.scan_forward(&mut at, &mut left)
    }
}

/// `--block`'s size: [`parse_size`], at most [`MAX_BLOCK`].
pub fn parse_block(s: &str) -> Result<usize, String> {
    let bytes = parse_size(s)?;
    Ok(usize::try_from(bytes).unwrap_or(MAX_BLOCK).min(MAX_BLOCK))
}

/// A size as GNU parallel reads it: `k`, `m`, `g`, `t` are powers of
/// 1000, `K`, `M`, `G`, `T` of 1024; a fraction is allowed (`1.5M`).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let bad = || format!("`{s}`: expected a size like 1M, 100k or 65536");
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let n: f64 = number.parse().map_err(|_| bad())?;
    let factor: f64 = match unit {
        "" | "b" | "B" => 1.0,
        "k" => 1e3,
        "K" => 1024.0,
        "m" => 1e6,
        "M" => 1024.0 * 1024.0,
        "g" => 1e9,
        "G" => 1024.0 * 1024.0 * 1024.0,
        "t" => 1e12,
        "T" => 1024f64.powi(4),
        _ => return Err(bad()),
    };
    let bytes = (n * factor).floor();
    if !bytes.is_finite() || bytes < 1.0 || bytes >= u64::MAX as f64 {
        return Err(bad());
    }
    Ok(bytes as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocks(input: &[u8], config: PipeConfig) -> Vec<String> {
        let mut b = Blocks::new(Box::new(std::io::Cursor::new(input.to_vec())), config);
        let mut out = Vec::new();
        while let Some(block) = b.next_block().unwrap() {
            out.push(String::from_utf8(block).unwrap());
        }
        out
    }

    fn seq(n: usize) -> Vec<u8> {
        (1..=n)
            .map(|i| format!("{i}\n"))
            .collect::<String>()
            .into_bytes()
    }

    #[test]
    fn by_size_whole_records_that_fit() {
        let config = PipeConfig {
            block: 100_000,
            ..Default::default()
        };
        let got = blocks(&seq(100_000), config);
        // As GNU parallel: 18517 lines, then blocks of 16666.
        assert_eq!(got[0].lines().count(), 18517);
        assert_eq!(got[1].lines().count(), 16666);
        assert_eq!(got.concat().into_bytes(), seq(100_000));
        let small = PipeConfig {
            block: 2,
            ..Default::default()
        };
        assert_eq!(blocks(b"1\n2\n3\n", small.clone()), ["1\n", "2\n", "3\n"]);
        assert_eq!(
            blocks(b"long\nx\n", small),
            ["long\n", "x\n"],
            "a record past the size"
        );
    }

    #[test]
    fn by_records_and_lines() {
        let n = PipeConfig {
            records: Some(6),
            ..Default::default()
        };
        let got = blocks(&seq(20), n);
        assert_eq!(got.len(), 4);
        assert_eq!(got[3], "19\n20\n");
        let l = PipeConfig {
            lines: 3,
            ..Default::default()
        };
        let got = blocks(&seq(10), l);
        assert_eq!(got, ["1\n2\n3\n4\n5\n6\n7\n8\n9\n", "10\n"]);
    }

    #[test]
    fn record_starts_ends_and_their_removal() {
        let start = PipeConfig {
            records: Some(1),
            recstart: Some(b">".to_vec()),
            ..Default::default()
        };
        assert_eq!(blocks(b">a\n1\n>b\n2\n", start), [">a\n1\n", ">b\n2\n"]);
        let rrs = PipeConfig {
            records: Some(1),
            recend: b",".to_vec(),
            remove_separators: true,
            ..Default::default()
        };
        assert_eq!(blocks(b"a,b,c,", rrs), ["a", "b", "c"]);
        let any = PipeConfig {
            block: 2,
            recend: Vec::new(),
            ..Default::default()
        };
        assert_eq!(blocks(b"abcdef", any), ["ab", "cd", "ef"]);
    }

    #[test]
    fn headers() {
        let h = PipeConfig {
            records: Some(2),
            header: Some(Header::Lines(1)),
            ..Default::default()
        };
        assert_eq!(blocks(b"x\n1\n2\n3\n", h), ["x\n1\n2\n", "x\n3\n"]);
        let re = PipeConfig {
            block: 3,
            recend: Vec::new(),
            header: Some(Header::Regex(regex::bytes::Regex::new(".{4}").unwrap())),
            ..Default::default()
        };
        assert_eq!(
            blocks(b"HHHHAAABBBCCC", re),
            ["HHHHAAA", "HHHHBBB", "HHHHCCC"]
        );
    }

    #[test]
    fn block_sizes() {
        assert_eq!(parse_block("100k"), Ok(100_000));
        assert_eq!(parse_block("100K"), Ok(102_400));
        assert_eq!(parse_block("1M"), Ok(1 << 20));
        assert_eq!(parse_block("1.5k"), Ok(1500));
        assert_eq!(parse_block("10G"), Ok(MAX_BLOCK));
        assert_eq!(parse_size("10G"), Ok(10 << 30));
        assert!(parse_block("0").is_err());
        assert!(parse_block("lots").is_err());
    }
}
