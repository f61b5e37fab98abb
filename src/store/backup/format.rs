//! The backup file's format: written by an [`Encoder`], read back by [`decode`], which checks
//! the version and the checksum.
//!
//! A text line `heurist-backup <version>\n`, then frames: `T` and a tree's name opens a tree,
//! `R`, a key and a value is one record of it (lengths are big-endian `u32`), and `E` with the
//! count of records (a big-endian `u64`) ends them, followed by the SHA-256 of every byte before
//! it. Every tree sled holds is written, by name, whatever it is (`Db::tree_names`), so a tree
//! an area adds later is in the next backup without a line changed here. A reader checks the
//! version and the checksum before it writes anything; [`FORMAT`] only grows: a file written
//! by an earlier version still restores (`tests/data/backup-v1.backup` is one).

use std::io::{self, Read, Write};

use sha2::{Digest, Sha256};

/// The format this version writes, and the newest it reads.
pub(crate) const FORMAT: u32 = 1;

/// The first line's words before the version.
const MAGIC: &str = "heurist-backup";

/// A key, a value or a tree's name longer than this is taken for corruption (sled's own
/// limit on a value is far lower in practice), so a damaged length never asks for the memory.
const MAX_LEN: u64 = 1 << 30;

/// What a restore brought back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Restored {
    pub(crate) trees: usize,
    pub records: u64,
}

/// Writes the frames of a backup to `out`, hashing every byte.
pub(super) struct Encoder<W: Write> {
    pub(super) out: W,
    hash: Sha256,
    records: u64,
}

impl<W: Write> Encoder<W> {
    pub(super) fn new(out: W) -> io::Result<Self> {
        let mut encoder = Self {
            out,
            hash: Sha256::new(),
            records: 0,
        };
        encoder.put(format!("{MAGIC} {FORMAT}\n").as_bytes())?;
        Ok(encoder)
    }

    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.hash.update(bytes);
        self.out.write_all(bytes)
    }

    fn bytes(&mut self, bytes: &[u8]) -> io::Result<()> {
        let len = u32::try_from(bytes.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a record over 4 GB"))?;
        self.put(&len.to_be_bytes())?;
        self.put(bytes)
    }

    pub(super) fn tree(&mut self, name: &[u8]) -> io::Result<()> {
        self.put(b"T")?;
        self.bytes(name)
    }

    pub(super) fn record(&mut self, key: &[u8], value: &[u8]) -> io::Result<()> {
        self.put(b"R")?;
        self.bytes(key)?;
        self.bytes(value)?;
        self.records += 1;
        Ok(())
    }

    /// Ends the records and writes the checksum; the writer and the count of records.
    pub(super) fn finish(mut self) -> io::Result<(W, u64)> {
        self.put(b"E")?;
        self.put(&self.records.to_be_bytes())?;
        let digest = self.hash.finalize();
        self.out.write_all(&digest)?;
        Ok((self.out, self.records))
    }
}

/// What reading a backup found wrong; each says it in one line with what to do.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Damage {
    #[error("it is not a Heurist backup (its first line is not \"{MAGIC} <version>\")")]
    NotABackup,
    #[error(
        "it was written by a newer Heurist (format {0}; this one reads up to {FORMAT}): restore \
         it with that version"
    )]
    Newer(u32),
    #[error("it is truncated (it ends before its checksum): use another backup")]
    Truncated,
    #[error("it is corrupted ({0}): use another backup")]
    Corrupted(&'static str),
    #[error("cannot read it: {0}")]
    Io(io::Error),
}

impl From<io::Error> for Damage {
    fn from(e: io::Error) -> Self {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            Damage::Truncated
        } else {
            Damage::Io(e)
        }
    }
}

/// Reads a backup's frames from `input`, hashing what it reads, and hands each tree and record
/// to `sink`; checks the count and the checksum at the end. `sink` sees the records before
/// the checksum is known: a restore reads the file through once with a sink that keeps
/// nothing before it writes anything.
pub(super) fn decode<R: Read>(
    input: R,
    mut sink: impl FnMut(Frame<'_>) -> anyhow::Result<()>,
) -> anyhow::Result<Restored> {
    let mut reader = Hashing {
        input,
        hash: Sha256::new(),
    };
    reader.header()?;
    let mut restored = Restored {
        trees: 0,
        records: 0,
    };
    let mut open = false;
    loop {
        match reader.array::<1>()? {
            [b'T'] => {
                let name = reader.bytes()?;
                sink(Frame::Tree(&name))?;
                restored.trees += 1;
                open = true;
            }
            [b'R'] if open => {
                let key = reader.bytes()?;
                let value = reader.bytes()?;
                sink(Frame::Record(&key, &value))?;
                restored.records += 1;
            }
            [b'E'] => break,
            _ => return Err(Damage::Corrupted("a frame of an unknown kind").into()),
        }
    }
    let count = u64::from_be_bytes(reader.array()?);
    let expected = reader.hash.clone().finalize();
    let mut digest = [0u8; 32];
    reader.input.read_exact(&mut digest).map_err(Damage::from)?;
    if digest[..] != expected[..] {
        return Err(Damage::Corrupted("its checksum does not match").into());
    }
    if count != restored.records {
        return Err(Damage::Corrupted("its count of records does not match").into());
    }
    if reader.input.read(&mut [0u8; 1]).map_err(Damage::from)? != 0 {
        return Err(Damage::Corrupted("bytes after its checksum").into());
    }
    Ok(restored)
}

/// One frame of a backup, as [`decode`] hands it on.
pub(super) enum Frame<'a> {
    Tree(&'a [u8]),
    Record(&'a [u8], &'a [u8]),
}

/// A reader that hashes what it reads.
struct Hashing<R> {
    input: R,
    hash: Sha256,
}

impl<R: Read> Hashing<R> {
    fn array<const N: usize>(&mut self) -> Result<[u8; N], Damage> {
        let mut bytes = [0u8; N];
        self.input.read_exact(&mut bytes)?;
        self.hash.update(bytes);
        Ok(bytes)
    }

    /// A length and that many bytes, read as they come (a damaged length that says more than
    /// the file holds ends in [`Damage::Truncated`], not in a huge allocation).
    fn bytes(&mut self) -> Result<Vec<u8>, Damage> {
        let len = u64::from(u32::from_be_bytes(self.array()?));
        if len > MAX_LEN {
            return Err(Damage::Corrupted("a record longer than any sled keeps"));
        }
        let mut bytes = Vec::new();
        (&mut self.input).take(len).read_to_end(&mut bytes)?;
        if bytes.len() as u64 != len {
            return Err(Damage::Truncated);
        }
        self.hash.update(&bytes);
        Ok(bytes)
    }

    /// The first line: the magic word and a version this reads.
    fn header(&mut self) -> Result<(), Damage> {
        let mut line = Vec::new();
        while line.last() != Some(&b'\n') {
            if line.len() > 32 {
                return Err(Damage::NotABackup);
            }
            match self.array::<1>() {
                Ok([byte]) => line.push(byte),
                Err(Damage::Truncated) => return Err(Damage::NotABackup),
                Err(e) => return Err(e),
            }
        }
        let text = std::str::from_utf8(&line).map_err(|_| Damage::NotABackup)?;
        let version = text
            .trim_end()
            .strip_prefix(MAGIC)
            .and_then(|rest| rest.strip_prefix(' '))
            .and_then(|v| v.parse::<u32>().ok())
            .ok_or(Damage::NotABackup)?;
        match version {
            0 => Err(Damage::NotABackup),
            v if v > FORMAT => Err(Damage::Newer(v)),
            _ => Ok(()),
        }
    }
}
