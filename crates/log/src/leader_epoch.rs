//! The leader-epoch cache and Kafka's `leader-epoch-checkpoint` file:
//! version line `0`, count line, then one `epoch start_offset` line per epoch.
//! It answers `OffsetsForLeaderEpoch` and is truncated with the log.

use {
    crate::{LogError, checkpoint},
    krabka_ids::LeaderEpoch,
    std::path::{Path, PathBuf},
};

/// Kafka's file name.
pub const LEADER_EPOCH_CHECKPOINT_FILE: &str = "leader-epoch-checkpoint";

/// One line of the checkpoint: the first offset written under an epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEntry {
    /// The leader epoch.
    pub epoch: LeaderEpoch,
    /// First offset appended in that epoch.
    pub start_offset: i64,
}

/// In-memory epoch → start offset list, persisted on every change.
#[derive(Debug)]
pub struct LeaderEpochCache {
    path: PathBuf,
    entries: Vec<EpochEntry>,
}

impl LeaderEpochCache {
    /// Loads the checkpoint in `dir` (empty if absent).
    ///
    /// # Errors
    ///
    /// [`LogError::CorruptFile`] if the file is malformed.
    pub fn load(dir: &Path) -> Result<Self, LogError> {
        let path = dir.join(LEADER_EPOCH_CHECKPOINT_FILE);
        let mut entries = Vec::new();
        if let Some(text) = checkpoint::read_optional(&path)? {
            entries = parse(&path, &text)?;
        }
        Ok(Self { path, entries })
    }

    /// All entries, oldest first.
    #[must_use]
    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    /// The latest epoch.
    #[must_use]
    pub fn latest_epoch(&self) -> Option<LeaderEpoch> {
        self.entries.last().map(|e| e.epoch)
    }

    /// Records that `epoch` starts at `start_offset` if it is newer than the
    /// latest epoch.
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] if the checkpoint cannot be written.
    pub fn assign(&mut self, epoch: LeaderEpoch, start_offset: i64) -> Result<(), LogError> {
        if self.has_epoch(epoch) {
            return Ok(());
        }
        // An entry whose start is not below the new start can no longer be right.
        self.entries.retain(|e| e.start_offset < start_offset);
        self.entries.push(EpochEntry {
            epoch,
            start_offset,
        });
        self.persist()
    }

    /// Whether [`LeaderEpochCache::assign`] of `epoch` would change nothing
    /// (no new entry to persist).
    #[must_use]
    pub fn has_epoch(&self, epoch: LeaderEpoch) -> bool {
        epoch.0 < 0 || self.latest_epoch().is_some_and(|latest| latest >= epoch)
    }

    /// The epoch of the batch holding `offset`.
    #[must_use]
    pub fn epoch_for_offset(&self, offset: i64) -> Option<LeaderEpoch> {
        self.entries
            .iter()
            .rev()
            .find(|e| e.start_offset <= offset)
            .map(|e| e.epoch)
    }

    /// Kafka's `endOffsetFor`: for `epoch`, the largest epoch `<= epoch` and
    /// the start offset of the next epoch (or `log_end_offset` if it is the latest).
    #[must_use]
    pub fn end_offset_for(
        &self,
        epoch: LeaderEpoch,
        log_end_offset: i64,
    ) -> Option<(LeaderEpoch, i64)> {
        let idx = self.entries.iter().rposition(|e| e.epoch <= epoch)?;
        let found = self.entries.get(idx)?;
        let end = self
            .entries
            .get(idx + 1)
            .map_or(log_end_offset, |next| next.start_offset);
        Some((found.epoch, end))
    }

    /// Drops epochs starting at or after `end_offset` (log truncated to it).
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] if the checkpoint cannot be written.
    pub fn truncate_from_end(&mut self, end_offset: i64) -> Result<(), LogError> {
        let before = self.entries.len();
        self.entries.retain(|e| e.start_offset < end_offset);
        if self.entries.len() != before {
            self.persist()?;
        }
        Ok(())
    }

    /// Log start moved to `start_offset`: earlier epochs go, the one covering
    /// it now starts there (Kafka's `truncateFromStart`).
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] if the checkpoint cannot be written.
    pub fn truncate_from_start(&mut self, start_offset: i64) -> Result<(), LogError> {
        let Some(idx) = self
            .entries
            .iter()
            .rposition(|e| e.start_offset <= start_offset)
        else {
            return Ok(());
        };
        if idx == 0
            && self
                .entries
                .first()
                .is_some_and(|e| e.start_offset == start_offset)
        {
            return Ok(());
        }
        self.entries.drain(..idx);
        if let Some(first) = self.entries.first_mut() {
            first.start_offset = start_offset;
        }
        self.persist()
    }

    fn persist(&self) -> Result<(), LogError> {
        checkpoint::write_atomic(&self.path, render(&self.entries).as_bytes())
    }
}

/// Renders the checkpoint text.
#[must_use]
pub fn render(entries: &[EpochEntry]) -> String {
    let mut out = format!("0\n{}\n", entries.len());
    for e in entries {
        out.push_str(&format!("{} {}\n", e.epoch.0, e.start_offset));
    }
    out
}

fn parse(path: &Path, text: &str) -> Result<Vec<EpochEntry>, LogError> {
    let corrupt = |reason: &str| LogError::CorruptFile {
        path: path.to_path_buf(),
        reason: reason.to_owned(),
    };
    let mut lines = text.lines();
    if lines.next().map(str::trim) != Some("0") {
        return Err(corrupt("expected version 0"));
    }
    let count: usize = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .ok_or_else(|| corrupt("expected an entry count"))?;
    // An entry line is at least "e o\n": a count the text cannot hold is
    // refused before anything is allocated for it.
    if count > text.len() / 4 {
        return Err(corrupt("entry count exceeds what the file can hold"));
    }
    let mut entries = Vec::with_capacity(count);
    for _ in 0..count {
        let line = lines
            .next()
            .ok_or_else(|| corrupt("fewer entries than the count"))?;
        let mut parts = line.split_whitespace();
        let epoch = parts
            .next()
            .and_then(|p| p.parse().ok())
            .ok_or_else(|| corrupt("bad epoch"))?;
        let start_offset = parts
            .next()
            .and_then(|p| p.parse().ok())
            .ok_or_else(|| corrupt("bad start offset"))?;
        entries.push(EpochEntry {
            epoch: LeaderEpoch(epoch),
            start_offset,
        });
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    #[test]
    fn checkpoint_format_and_lookups() {
        let dir = tempfile::tempdir().unwrap();
        let mut cache = LeaderEpochCache::load(dir.path()).unwrap();
        cache.assign(LeaderEpoch(0), 0).unwrap();
        cache.assign(LeaderEpoch(2), 10).unwrap();
        cache.assign(LeaderEpoch(1), 12).unwrap(); // older epoch: ignored
        let text = std::fs::read_to_string(dir.path().join(LEADER_EPOCH_CHECKPOINT_FILE)).unwrap();
        check!(text == "0\n2\n0 0\n2 10\n");
        check!(cache.end_offset_for(LeaderEpoch(0), 20) == Some((LeaderEpoch(0), 10)));
        check!(cache.end_offset_for(LeaderEpoch(1), 20) == Some((LeaderEpoch(0), 10)));
        check!(cache.end_offset_for(LeaderEpoch(5), 20) == Some((LeaderEpoch(2), 20)));
        check!(cache.epoch_for_offset(11) == Some(LeaderEpoch(2)));
        cache.truncate_from_start(12).unwrap();
        check!(
            cache.entries()
                == [EpochEntry {
                    epoch: LeaderEpoch(2),
                    start_offset: 12
                }]
        );
        let reloaded = LeaderEpochCache::load(dir.path()).unwrap();
        check!(parse(Path::new("x"), "0\n2\n0 0\n2 10\n").unwrap().len() == 2);
        for bad in [
            "0\n4294967295\n0 0\n",
            "0\n3\n0 0\n2 10\n",
            "1\n0\n",
            "0\nx\n",
        ] {
            check!(parse(Path::new("x"), bad).is_err(), "{bad:?}");
        }
        check!(reloaded.entries() == cache.entries());
        cache.truncate_from_end(12).unwrap();
        check!(cache.entries().is_empty());
    }
}
