//! The log's own files, read back from disk: offset and time indexes, the
//! transaction index, the leader-epoch checkpoint, producer-state snapshots
//! (CRC fixed up) and the partition metadata file.
#![no_main]

use {
    krabka_log::{
        index::{OffsetEntry, SparseIndex, TimeEntry},
        leader_epoch::{LEADER_EPOCH_CHECKPOINT_FILE, LeaderEpochCache},
        producer_state::ProducerStateManager,
        txn_index::TxnIndex,
    },
    libfuzzer_sys::fuzz_target,
    std::path::PathBuf,
};

fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("krabka-fuzz-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    dir
}

fuzz_target!(|data: &[u8]| {
    let dir = scratch();
    let file = dir.join("00000000000000000000.index");
    let write = |bytes: &[u8]| std::fs::write(&file, bytes).is_ok();
    if write(data) {
        if let Ok(index) = SparseIndex::<OffsetEntry>::open(&file, 1 << 20) {
            let _ = index.sanity_check(u64::MAX);
        }
    }
    if write(data) {
        if let Ok(index) = SparseIndex::<TimeEntry>::open(&file, 1 << 20) {
            let _ = index.sanity_check();
        }
    }
    if write(data) {
        let _ = TxnIndex::open(&file);
    }
    if std::fs::write(dir.join(LEADER_EPOCH_CHECKPOINT_FILE), data).is_ok() {
        let _ = LeaderEpochCache::load(&dir);
    }
    let mut snapshot = data.to_vec();
    if snapshot.len() >= 6 {
        let crc = crc32c(&snapshot[6..]);
        snapshot[2..6].copy_from_slice(&crc.to_be_bytes());
    }
    let _ = ProducerStateManager::decode_snapshot(&file, &snapshot);
    let _ = krabka_log::checkpoint::parse_partition_metadata(&file, &String::from_utf8_lossy(data));
});

/// CRC-32C (Castagnoli), bitwise: the fuzz crate needs no extra dependency.
fn crc32c(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}
